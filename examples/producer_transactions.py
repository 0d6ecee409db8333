"""Transactions with the Python producer: commit, abort, a consumer group's offsets committed with the output,
and one producer serving several transactional ids in turn.

    python examples/producer_transactions.py --bootstrap-servers 127.0.0.1:9092 --topic out
"""

from __future__ import annotations

import argparse


def main(bootstrap_servers: str, topic: str, input_topic: str = "in", group: str = "my-group") -> None:
    import pyarrow as pa

    from spark_kafka_sink import KafkaProducer

    table = pa.table({"key": ["a", "b"], "value": ["1", "2"]})
    # --8<-- [start:commit]
    p = KafkaProducer({"bootstrap.servers": bootstrap_servers, "transactional.id": f"{topic}-1"})
    p.init_transactions()                    # fences an earlier producer with the same transactional.id
    p.begin_transaction()
    p.send(topic, value=b"committed")
    p.commit_transaction()

    p.begin_transaction()
    p.send(topic, value=b"aborted")
    p.abort_transaction()                    # read_committed consumers never see it
    # --8<-- [end:commit]

    # --8<-- [start:offsets]
    p.begin_transaction()                    # consume-transform-produce: the input's offsets commit with the output
    p.send(topic, value=b"transformed")
    p.send_offsets_to_transaction({(input_topic, 0): 43}, group)   # or ConsumerGroupMetadata from your consumer
    p.commit_transaction()
    # --8<-- [end:offsets]

    # --8<-- [start:switch]
    p.switch_transactional_id(f"{topic}-2")  # the same connections and sender thread, another transactional id
    p.start_init_transactions()              # FindCoordinator + InitProducerId go out now...
    prepared = p.prepare_batch(topic, table) # ...while this thread checks, partitions and encodes the rows
    p.init_transactions()                    # waits for that start; nothing was queued before it
    p.begin_transaction()
    p.send_prepared(prepared)
    p.commit_transaction()
    p.close()
    # --8<-- [end:switch]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="out")
    args = parser.parse_args()
    main(args.bootstrap_servers, args.topic)
