"""Every sink column through ``writeStream``: on pyspark 4.0 the stream writer gets Rows (gathered back into Arrow),
on 4.1+ Arrow batches; either way each record must arrive as the batch sink would write it.

``make test`` runs this on the newest pyspark, ``make test-pyspark`` on the older ones (README "Versions").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyspark.sql import functions as F

from spark_kafka_sink.protocol.murmur2 import murmur2
from spark_kafka_sink.spark.writer import ARROW_STREAM_WRITER
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord
from tests.spark.conftest import pyspark_minor

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS = 600
BASE_MS = 1_700_000_000_000


def test_every_column_through_the_stream_writer(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                                readback: Callable[..., list[ConsumedRecord]],
                                                tmp_path: Path) -> None:
    # Which writer base this pyspark gives: the row path exactly where pyspark lacks the Arrow stream writer.
    assert ARROW_STREAM_WRITER == (pyspark_minor() >= (4, 1))
    topic = topic_factory(partitions=3)
    v = F.col("value")
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS).option("numPartitions", 2)
            .load().select(
                F.when(v % 7 == 3, None).otherwise(F.concat(F.lit("v-"), v.cast("string")).cast("binary"))
                .alias("value"),
                F.when(v % 5 == 0, None).otherwise(F.concat(F.lit("k-"), v.cast("string"))).alias("key"),
                F.lit(topic).alias("topic"),
                F.when(v % 4 == 1, None).otherwise((v % 3).cast("int")).alias("partition"),
                F.array(F.struct(F.lit("n").alias("key"), v.cast("string").cast("binary").alias("value")))
                .alias("headers"),
                F.timestamp_millis(F.lit(BASE_MS) + v).alias("event_time"),
                F.create_map(F.lit("ignored"), v).alias("extra")))
    query = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
             .option("deliveryGuarantee", "exactly_once").option("timestampColumn", "event_time")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()

    records = readback(topic, "read_committed")
    by_id = {int(r.headers[0][1] or b""): r for r in records}
    assert len(records) == len(by_id) == ROWS
    for i, record in sorted(by_id.items()):
        assert record.headers == (("n", str(i).encode()),)
        assert record.value == (None if i % 7 == 3 else f"v-{i}".encode()), i
        assert record.key == (None if i % 5 == 0 else f"k-{i}".encode()), i
        assert record.timestamp_ms == BASE_MS + i, i
        if i % 4 != 1:
            assert record.partition == i % 3, i
    # Null partitions went to the partitioner: keyed rows to Java's murmur2 of the key modulo the partition count
    # (murmur2 is pinned to Java's own vectors in tests/producer/test_partitioner.py).
    keyed = {i: r.partition for i, r in by_id.items() if i % 4 == 1 and i % 5 != 0}
    assert keyed and keyed == {i: (murmur2(f"k-{i}".encode()) & 0x7FFFFFFF) % 3 for i in keyed}


def test_timestamps_nested_in_an_avro_value_through_the_stream_writer(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    """valueFormat=avro with timestamps in a struct's field, an array, a map and a nested struct: on pyspark 4.0
    they reach the stream writer as naive local datetimes inside Rows (tests/spark/test_row_batches.py), on 4.1+ in
    Arrow; confluent-kafka's AvroDeserializer must read each as the instant Spark had."""
    topic = topic_factory(partitions=2)
    v = F.col("value")
    at = F.timestamp_millis(F.lit(BASE_MS) + v)
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 100).option("numPartitions", 2)
            .load().select(F.struct(
                v.alias("id"), at.alias("at"), F.array(at, F.lit(None).cast("timestamp")).alias("times"),
                F.create_map(F.lit("k"), at).alias("by"), F.struct(at.alias("when")).alias("inner")).alias("value")))
    query = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("valueFormat", "avro")
             .option("schema.registry.url", schema_registry.url)
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()

    with ConfluentClient({"url": schema_registry.url}) as confluent:
        deserializer = AvroDeserializer(confluent)
        values = [deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in readback(topic)]
    assert sorted(value["id"] for value in values) == list(range(100))
    for value in values:
        instant = dt.datetime.fromtimestamp((BASE_MS + value["id"]) / 1000, dt.timezone.utc)
        assert value == {"id": value["id"], "at": instant, "times": [instant, None], "by": {"k": instant},
                         "inner": {"when": instant}}, value
