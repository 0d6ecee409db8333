"""The Python producer writing Avro through a schema registry: an Arrow table in one call, then one dict.

    python examples/producer_avro.py --bootstrap-servers 127.0.0.1:9092 --topic orders \
        --registry-url http://127.0.0.1:8081
"""

from __future__ import annotations

import argparse


def main(bootstrap_servers: str, topic: str, registry_url: str) -> None:
    # --8<-- [start:avro]
    import pyarrow as pa

    from spark_kafka_sink import KafkaProducer
    from spark_kafka_sink.schema_registry import AvroSerializer

    order = """{"type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "id", "type": "long"}, {"name": "customer", "type": ["null", "string"], "default": null}]}"""
    values = AvroSerializer({"url": registry_url}, schema=order)      # registered as "<topic>-value" on first use

    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as p:
        table = pa.table({"key": ["a", "b"], "value": [{"id": 1, "customer": "alice"}, {"id": 2, "customer": None}]})
        p.send_batch(topic, values.encode_table(topic, table)).result(timeout=10)    # vectorized, as send_batch
        p.send(topic, key=b"c", value=values(topic, {"id": 3, "customer": "carol"})).result(timeout=10)
    # --8<-- [end:avro]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--registry-url", default="http://127.0.0.1:8081")
    args = parser.parse_args()
    main(args.bootstrap_servers, args.topic, args.registry_url)
