"""The standalone producer's AvroSerializer: ``send_batch`` of an encoded Arrow table and ``send`` of a dict, against
the real broker and registry, read back with confluent-kafka's AvroDeserializer."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Callable

import pyarrow as pa
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.producer import KafkaProducer
from spark_kafka_sink.schema_registry import AvroSerializer
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": [
    {"name": "id", "type": "long"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
    {"name": "lines", "type": {"type": "array", "items": {"type": "record", "name": "Line", "fields": [
        {"name": "sku", "type": "string"}, {"name": "qty", "type": ["null", "int"], "default": None}]}}},
    {"name": "note", "type": ["null", "string"], "default": None},
]})
AT = dt.datetime(2026, 5, 1, 10, 0, 0, 123000, tzinfo=dt.timezone.utc)


def _orders(ids: range) -> list[dict[str, object]]:
    return [{"id": i, "status": "PAID" if i % 2 else "NEW", "amount": decimal.Decimal(f"{i}.50"), "at": AT,
             "lines": [{"sku": f"s{i}", "qty": None if i % 3 else i}], "note": None if i % 2 else f"n{i}"}
            for i in ids]


def test_send_batch_and_send_write_what_confluent_s_deserializer_reads(
        bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=1)
    values = AvroSerializer({"url": schema_registry.url}, schema=ORDER)
    derived = AvroSerializer({"url": schema_registry.url}, is_key=True)  # the key's schema from its Arrow type
    table = pa.table({"key": pa.array([{"region": "eu", "n": i} for i in range(4)]),
                      "value": pa.array(_orders(range(4)), pa.struct([
                          ("id", pa.int64()), ("status", pa.string()), ("amount", pa.decimal128(9, 2)),
                          ("at", pa.timestamp("us", "UTC")),
                          ("lines", pa.list_(pa.struct([("sku", pa.string()), ("qty", pa.int32())]))),
                          ("note", pa.string())]))})
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        producer.send_batch(topic, derived.encode_table(topic, values.encode_table(topic, table))).result(30)
        producer.send(topic, value=values(topic, _orders(range(4, 5))[0])).result(30)
        producer.send(topic, value=values(topic, None), key=b"gone").result(30)  # None stays a tombstone
    records = readback(topic)
    with ConfluentClient({"url": schema_registry.url}) as client:
        deserializer = AvroDeserializer(client)
        read = [deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in records[:5]]
        keys = [deserializer(r.key, SerializationContext(topic, MessageField.KEY)) for r in records[:4]]
    assert read == _orders(range(5))
    assert keys == [{"region": "eu", "n": i} for i in range(4)]
    assert records[5].value is None and records[5].key == b"gone"
