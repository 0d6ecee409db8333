"""The Python producer without Spark: one record, then an Arrow table in one call.

    python examples/producer_quickstart.py --bootstrap-servers 127.0.0.1:9092 --topic t
"""

from __future__ import annotations

import argparse


def main(bootstrap_servers: str, topic: str) -> None:
    # --8<-- [start:produce]
    import pyarrow as pa

    from spark_kafka_sink import KafkaProducer

    with KafkaProducer({"bootstrap.servers": bootstrap_servers, "acks": "all", "linger.ms": 5}) as p:
        md = p.send(topic, value=b"v", key=b"k", headers=[("h", b"x")]).result(timeout=10)   # RecordMetadata
        print(md.topic, md.partition, md.offset, md.timestamp_ms)

        table = pa.table({"key": ["a", "b"], "value": ["1", "2"]})   # columns as the Spark sink's
        result = p.send_batch(topic, table).result(timeout=10)       # vectorized: no Python per row
        print(result.records, "records;", result.partitions)         # per (topic, partition): counts, offsets
        p.flush()
    # --8<-- [end:produce]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="t")
    args = parser.parse_args()
    main(args.bootstrap_servers, args.topic)
