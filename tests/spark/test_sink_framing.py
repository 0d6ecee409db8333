"""valueFormat protobuf and json: bytes already serialized get the registry's frame (Protobuf's message-index path
included) and their schema registered, so confluent-kafka's ProtobufDeserializer and JSONDeserializer read them
against the same registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from pyspark.sql import functions as F

from spark_kafka_sink.schema_registry import RegistrySettings, SchemaRegistryClient
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ORDER_PROTO = """syntax = "proto3";
package shop;

message Order {
  int64 id = 1;
  string customer = 2;
}
"""
ORDER_JSON_SCHEMA = json.dumps({
    "$schema": "http://json-schema.org/draft-07/schema#", "title": "Order", "type": "object",
    "properties": {"id": {"type": "integer"}, "customer": {"type": "string"}}, "required": ["id"]})


def _order_class() -> Any:
    """shop.Order (ORDER_PROTO) as a Python message class, built from its descriptor: no generated code."""
    file = descriptor_pb2.FileDescriptorProto(name="order.proto", package="shop", syntax="proto3")
    message = file.message_type.add(name="Order")
    field = descriptor_pb2.FieldDescriptorProto
    message.field.add(name="id", number=1, type=field.TYPE_INT64, label=field.LABEL_OPTIONAL)
    message.field.add(name="customer", number=2, type=field.TYPE_STRING, label=field.LABEL_OPTIONAL)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("shop.Order"))


def test_protobuf_bytes_are_framed_with_the_message_index_path(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=1)
    order = _order_class()
    rows = [(order(id=i, customer=f"c{i}").SerializeToString(),) for i in range(5)]
    df = spark.createDataFrame(rows, "value binary")  # what to_protobuf hands over: the message's bytes
    write_df(df.coalesce(1), bootstrap, topic=topic, valueFormat="protobuf", valueSchema=ORDER_PROTO,
             **{"schema.registry.url": schema_registry.url})
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    registered = client.latest(f"{topic}-value")
    records = readback(topic)
    assert all(r.value is not None and r.value[:6] == b"\x00" + registered.schema_id.to_bytes(4, "big") + b"\x00"
               for r in records)
    deserializer = ProtobufDeserializer(order, {"use.deprecated.format": False})
    read = [deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in records]
    assert [(m.id, m.customer) for m in read] == [(i, f"c{i}") for i in range(5)]


def test_json_documents_are_framed_and_read_against_the_registered_schema(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=1)
    df = spark.createDataFrame([(i, f"c{i}") for i in range(5)], "id bigint, customer string")
    write_df(df.select(F.to_json(F.struct("id", "customer")).alias("value")).coalesce(1), bootstrap, topic=topic,
             valueFormat="json", valueSchema=ORDER_JSON_SCHEMA, **{"schema.registry.url": schema_registry.url})
    with ConfluentClient({"url": schema_registry.url}) as confluent:
        # No schema of its own: the deserializer takes the writer's schema from the registry by the frame's id.
        deserializer = JSONDeserializer(None, schema_registry_client=confluent)
        read = [deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in readback(topic)]
    assert read == [{"id": i, "customer": f"c{i}"} for i in range(5)]
