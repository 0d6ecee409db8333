"""keyFormat / valueFormat on the driver: the options, the settled serializers against a real schema registry, and
writers that carry them through cloudpickle (no Spark session needed)."""

from __future__ import annotations

import pickle
import uuid
from typing import Any

import cloudpickle
import pyarrow as pa
import pytest
from pyspark.sql.types import ArrayType, LongType, StringType, StructField, StructType

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import SubjectNameStrategy
from spark_kafka_sink.spark.options import RecordFormat, SinkOptions
from spark_kafka_sink.spark.record_schemas import resolve_serializers, with_serializers
from spark_kafka_sink.spark.schema import plan_columns, to_producer_batch
from spark_kafka_sink.spark.writer import KafkaBatchWriter
from spark_kafka_sink.testing.registry import TestRegistry

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092"}
SCHEMA = StructType([  # key string, value struct<id: bigint not null, tags: array<string>>
    StructField("key", StringType()),
    StructField("value", StructType([StructField("id", LongType(), False),
                                     StructField("tags", ArrayType(StringType()))]))])


def _options(**extra: str) -> SinkOptions:
    return SinkOptions.parse({**BASE, **extra}, streaming=False)


def test_format_options_are_parsed_once_with_the_registry_settings() -> None:
    opts = _options(topic="t", valueFormat="AVRO", keySchemaId="latest", keyFormat="avro",
                    subjectNameStrategy="io.confluent.kafka.serializers.subject.RecordNameStrategy",
                    **{"schema.registry.url": "https://r:8081", "schema.registry.basic.auth.user.info": "u:pw-9"})
    assert opts.value_format.format is RecordFormat.AVRO and opts.key_format.use_latest
    assert opts.subject_name_strategy is SubjectNameStrategy.RECORD
    assert opts.registry is not None and opts.registry.urls == ("https://r:8081",)
    assert "pw-9" not in repr(opts) + repr(opts.registry)


@pytest.mark.parametrize(("extra", "message"), [
    ({"valueFormat": "avro"}, r"valueFormat=avro writes the schema registry's wire format: set schema.registry.url"),
    ({"valueFormat": "xml"}, r"valueFormat='xml' is not valid: use bytes, avro, protobuf, json"),
    ({"valueSchema": "{}"}, r"valueSchema needs valueFormat=avro, protobuf or json"),
    ({"valueFormat": "protobuf", "schema.registry.url": "http://r"}, r"give the schema they were written with"),
    ({"valueFormat": "avro", "valueSchemaId": "x", "schema.registry.url": "http://r"}, r"valueSchemaId='x'"),
    ({"valueFormat": "avro", "schema.registry.url": "http://r", "schema.registry.timeout.s": "1"},
     r"unknown schema registry option schema.registry.timeout.s; did you mean schema.registry.timeout\?"),
    ({"subjectNameStrategy": "by-topic"}, r"subjectNameStrategy must be topic, record or topic_record"),
])
def test_bad_format_options_are_named(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _options(**extra)


def test_latest_with_a_topic_column_needs_the_record_strategy(schema_registry: TestRegistry) -> None:
    opts = _options(valueFormat="avro", valueSchemaId="latest", **{"schema.registry.url": schema_registry.url})
    with pytest.raises(ConfigError, match=r"needs the topic option .* subjectNameStrategy=record"):
        resolve_serializers(opts, SCHEMA)


def test_a_writer_carries_its_ids_through_cloudpickle(schema_registry: TestRegistry) -> None:
    topic = f"t-{uuid.uuid4().hex[:8]}"
    opts = _options(topic=topic, valueFormat="avro", **{"schema.registry.url": schema_registry.url,
                                                       "schema.registry.basic.auth.user.info": "u:pw-7"})
    plan = with_serializers(plan_columns(SCHEMA, topic, None, frozenset({"value"})), resolve_serializers(opts, SCHEMA))
    assert plan.value_serializer is not None and plan.value_serializer.subject == f"{topic}-value"
    writer = KafkaBatchWriter(opts, plan)
    back: Any = cloudpickle.loads(cloudpickle.dumps(writer))
    assert back.plan.value_serializer.schema_id == plan.value_serializer.schema_id
    assert "pw-7" not in repr(back)
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array(["k", None]),
        "value": pa.array([{"id": 1, "tags": ["a"]}, None],
                          pa.struct([pa.field("id", pa.int64(), False), ("tags", pa.list_(pa.string()))]))})
    records = to_producer_batch(batch, back.plan, lambda topic, needed: 1)
    frame = b"\x00" + plan.value_serializer.schema_id.to_bytes(4, "big")
    # id 1 (zigzag 2), tags: union branch 1, one item ("a": branch 1, length 1, "a"), then the end of the block
    assert records.column("value").to_pylist() == [frame + b"\x02\x02\x02\x02\x02a\x00", None]
    assert records.column("key").to_pylist() == [b"k", None]  # keyFormat bytes: as before
    assert pickle.loads(pickle.dumps(plan)) == plan
