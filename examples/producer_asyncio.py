"""The producer in an asyncio service: awaited sends that never block the event loop.

    python examples/producer_asyncio.py --bootstrap-servers 127.0.0.1:9092 --topic t
"""

from __future__ import annotations

import argparse
import asyncio


async def main(bootstrap_servers: str, topic: str) -> None:
    # --8<-- [start:produce]
    import pyarrow as pa

    from spark_kafka_sink import AsyncKafkaProducer

    async with AsyncKafkaProducer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5}) as p:
        delivery = await p.send(topic, b"v", key=b"k")      # returns once queued (waits for buffer space)
        md = await delivery                                   # RecordMetadata, once the broker acknowledged it
        print(md.partition, md.offset)

        md = await p.send_and_wait(topic, b"w", key=b"k")    # both steps at once

        table = pa.table({"key": ["a", "b"], "value": ["1", "2"]})
        result = await (await p.send_batch(topic, table))    # encoded off the loop; BatchSendResult
        print(result.records, "records")
        await p.flush()
    # --8<-- [end:produce]


async def transactional(bootstrap_servers: str, topic: str) -> None:
    # --8<-- [start:transaction]
    from spark_kafka_sink import AsyncKafkaProducer

    async with AsyncKafkaProducer({"bootstrap.servers": bootstrap_servers,
                                   "transactional.id": f"{topic}-asyncio-example"}) as p:
        await p.init_transactions()
        p.begin_transaction()                                 # local: nothing to await
        await p.send(topic, b"committed")
        await p.commit_transaction()                          # flushes, then commits
    # --8<-- [end:transaction]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="t")
    args = parser.parse_args()
    asyncio.run(main(args.bootstrap_servers, args.topic))
    asyncio.run(transactional(args.bootstrap_servers, args.topic))
