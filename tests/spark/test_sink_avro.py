"""Avro keys and values through ``format("pykafka-sink")`` and a real schema registry, read back with
confluent-kafka's AvroDeserializer against the same registry and with Spark's own from_avro, and compared with
the source DataFrame (chispa);
schema evolution under BACKWARD; an incompatible schema refused on the driver with nothing written."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.schema_registry import RegistrySettings, SchemaRegistryClient
from spark_kafka_sink.testing.broker import free_port
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord, spark_read_topic
from tests.spark.conftest import end_offsets, write_df
from tests.spark.test_sink_guarantees import small_batches  # noqa: F401 (a fixture)

pytestmark = [pytest.mark.spark, pytest.mark.broker]

WIDE = """
    key struct<id: bigint not null, region: string>,
    value struct<
        flag: boolean, tiny: tinyint, small: smallint, n: int not null, big: bigint, f: float, d: double,
        s: string, b: binary, day: date, at: timestamp, local: timestamp_ntz, price: decimal(12, 2),
        wide: decimal(38, 10) not null,
        tags: array<string>, grid: array<array<int>>, attrs: map<string, bigint>,
        address: struct<street: string, zip: int not null, geo: struct<lat: double, lon: double>>,
        lines: array<struct<sku: string, qty: int, notes: map<string, string>>>>
"""


def _row(i: int) -> tuple[Any, ...]:
    nulls = i % 4 == 3  # every nullable field null at every depth in these rows
    when = dt.datetime(2026, 1, 2, 3, 4, 5, i * 1000, tzinfo=dt.timezone.utc)
    value = {
        "flag": None if nulls else i % 2 == 0, "tiny": None if nulls else -i % 128,
        "small": None if nulls else -300 * i,
        "n": i, "big": None if nulls else (1 << 40) * i, "f": None if nulls else i / 4, "d": None if nulls else -i / 3,
        "s": None if nulls else f"välue-{i}", "b": None if nulls else bytes([i % 256, 0, 255]),
        "day": None if nulls else dt.date(2026, 1, 1) + dt.timedelta(days=i),
        "at": None if nulls else when, "local": None if nulls else when.replace(tzinfo=None),
        "price": None if nulls else decimal.Decimal(f"{-i}.25"),
        "wide": decimal.Decimal(f"{i}12345678901234567890.0123456789"),
        "tags": None if nulls else ["a", None, f"t{i}"][: i % 4],
        "grid": None if nulls else [[i, None], [], None],
        "attrs": None if nulls else {"k": i, "none": None},
        "address": None if nulls else {"street": None if i % 3 else "Main", "zip": 1000 + i,
                                       "geo": None if i % 5 == 0 else {"lat": 52.1, "lon": None}},
        "lines": None if nulls else [{"sku": f"s{i}", "qty": None, "notes": {"gift": "yes"}}, None],
    }
    return ({"id": i, "region": None if nulls else "eu"}, value)


def deserialize(url: str, records: list[ConsumedRecord]) -> list[tuple[Any, Any]]:
    """Each record's key and value as confluent-kafka's AvroDeserializer reads them from the registry."""
    with ConfluentClient({"url": url}) as client:
        deserializer = AvroDeserializer(client)
        out = []
        for r in records:
            key = None if r.key is None else deserializer(r.key, SerializationContext(r.topic, MessageField.KEY))
            value = deserializer(r.value, SerializationContext(r.topic, MessageField.VALUE))
            out.append((key, value))
        return out


def test_a_wide_dataframe_as_avro_reads_back_with_confluent_s_deserializer(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=2)
    df = spark.createDataFrame([_row(i) for i in range(40)], WIDE).repartition(2)
    write_df(df, bootstrap, topic=topic, keyFormat="avro", valueFormat="avro",
             **{"schema.registry.url": schema_registry.url})
    records = readback(topic)
    assert len(records) == 40 and all(r.value is not None and r.value[0] == 0 for r in records)
    back = spark.createDataFrame(deserialize(schema_registry.url, records), WIDE)
    # (ordered by the key: chispa's ignore_row_order hashes rows, and Spark cannot hash maps)
    assert_df_equality(df.orderBy("key.id"), back.orderBy("key.id"), ignore_nullable=True)
    # Spark's own from_avro reads the bodies (the frame stripped) with the registered schemas.
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    with ConfluentClient({"url": schema_registry.url}) as confluent:
        key_schema = confluent.get_latest_version(f"{topic}-key").schema.schema_str
        value_schema = confluent.get_latest_version(f"{topic}-value").schema.schema_str
    spark_read = spark_read_topic(spark, bootstrap, topic).select(
        from_avro(F.expr("substring(key, 6)"), key_schema).alias("key"),
        from_avro(F.expr("substring(value, 6)"), value_schema).alias("value"))
    # (Avro has no 8- or 16-bit ints: from_avro gives tinyint and smallint back as int, as with Spark's to_avro)
    widened = df.withColumn("value", F.col("value").withField("tiny", F.col("value.tiny").cast("int"))
                            .withField("small", F.col("value.small").cast("int")))
    assert_df_equality(widened.orderBy("key.id"), spark_read.orderBy("key.id"), ignore_nullable=True)
    # The registered value schema: Spark's names, nullable fields as ["null", T] with a null default.
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    schema = json.loads(client.latest(f"{topic}-value").schema)
    assert schema["name"] == "topLevelRecord"
    assert schema["fields"][0] == {"name": "flag", "type": ["null", "boolean"], "default": None}
    assert schema["fields"][3] == {"name": "n", "type": "int"}


@pytest.fixture
def backward_topic(topic_factory: Callable[..., str], schema_registry: TestRegistry) -> Iterator[str]:
    topic = topic_factory(partitions=1)
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    client.set_compatibility("BACKWARD", f"{topic}-value")
    yield topic


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_new_optional_column_evolves_the_schema_and_an_incompatible_one_is_refused(
        spark: Any, bootstrap: str, backward_topic: str, schema_registry: TestRegistry, guarantee: str,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = backward_topic
    options = {"topic": topic, "valueFormat": "avro", "deliveryGuarantee": guarantee,
               "schema.registry.url": schema_registry.url}
    v1 = spark.createDataFrame([(i, f"n{i}") for i in range(5)], "id bigint not null, name string")
    v2 = spark.createDataFrame([(i, f"n{i}", i * 2) for i in range(5, 8)],
                               "id bigint not null, name string, score int")
    from pyspark.sql import functions as F

    write_df(v1.select(F.struct("id", "name").alias("value")), bootstrap, **options)
    write_df(v2.select(F.struct("id", "name", "score").alias("value")), bootstrap, **options)
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    assert client.latest(f"{topic}-value").version == 2
    values = sorted((v for _, v in deserialize(schema_registry.url, readback(topic))), key=lambda v: v["id"])
    assert values == [{"id": i, "name": f"n{i}"} for i in range(5)] + [
        {"id": i, "name": f"n{i}", "score": i * 2} for i in range(5, 8)]

    # A required column without a default: old records cannot be read with it, which BACKWARD refuses.
    v3 = spark.createDataFrame([(9, "n9", 1, "x")], "id bigint not null, name string, score int, code string not null")
    before = end_offsets(bootstrap, topic)
    with pytest.raises(Exception) as refused:
        write_df(v3.select(F.struct("id", "name", "score", "code").alias("value")), bootstrap, **options)
    text = str(refused.value)
    assert f"subject '{topic}-value' under its BACKWARD compatibility" in text and "code" in text, text[:3000]
    assert end_offsets(bootstrap, topic) == before  # nothing written, not even an aborted transaction
    assert client.latest(f"{topic}-value").version == 2


def test_a_topic_column_writing_two_topics_registers_two_subjects(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topics = [topic_factory(partitions=1), topic_factory(partitions=1)]
    rows = [(topics[i % 2], {"id": i, "name": f"n{i}"}) for i in range(10)]
    df = spark.createDataFrame(rows, "topic string, value struct<id: bigint not null, name: string>").repartition(2)
    write_df(df, bootstrap, valueFormat="avro", **{"schema.registry.url": schema_registry.url})
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    ids = [client.latest(f"{topic}-value").schema_id for topic in topics]
    for n, topic in enumerate(topics):
        records = readback(topic)
        assert {r.value[1:5] for r in records if r.value} == {ids[n].to_bytes(4, "big")}
        read = sorted((v for _, v in deserialize(schema_registry.url, records)), key=lambda v: v["id"])
        assert read == [{"id": i, "name": f"n{i}"} for i in range(n, 10, 2)]


def test_a_registry_that_is_down_fails_the_write_on_the_driver(spark: Any, bootstrap: str,
                                                               topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    df = spark.createDataFrame([(1,)], "id int").selectExpr("struct(id) AS value")
    with pytest.raises(Exception, match=r"did not answer after 2 attempts"):
        write_df(df, bootstrap, topic=topic, valueFormat="avro",
                 **{"schema.registry.url": f"http://127.0.0.1:{free_port()}", "schema.registry.max.retries": "1",
                    "schema.registry.retries.wait.ms": "10"})
    assert end_offsets(bootstrap, topic) == {0: 0}


def test_tasks_hold_the_ids_and_need_no_registry(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                                readback: Callable[..., list[ConsumedRecord]]) -> None:
    """The driver settles the ids before any task starts: a registry stopped once the write's plan is made does not
    fail the tasks."""
    from spark_kafka_sink.spark.datasource import KafkaSinkDataSource
    from spark_kafka_sink.spark.writer import KafkaBatchWriter, write_partition

    topic = topic_factory(partitions=1)
    registry = TestRegistry().start()
    try:
        source = KafkaSinkDataSource({"kafka.bootstrap.servers": bootstrap, "topic": topic, "valueFormat": "avro",
                                      "schema.registry.url": registry.url})
        df = spark.createDataFrame([(i,) for i in range(3)], "id int").selectExpr("struct(id) AS value")
        writer = source.writer(df.schema, overwrite=False)
        assert isinstance(writer, KafkaBatchWriter)
        subject_id = SchemaRegistryClient(RegistrySettings.from_config({"url": registry.url})).latest(
            f"{topic}-value").schema_id
    finally:
        registry.stop(keep_files=False)
    import pyarrow as pa

    batch = pa.RecordBatch.from_pydict({"value": pa.array([{"id": i} for i in range(3)],
                                                          pa.struct([("id", pa.int32())]))})
    write_partition(writer.options, writer.plan, iter([batch]))
    values = [r.value for r in readback(topic)]
    # the frame, then the record: id's union branch 1 (["null", "int"]), then the int
    assert values == [b"\x00" + subject_id.to_bytes(4, "big") + bytes([2, 2 * i]) for i in range(3)]


@pytest.mark.usefixtures("small_batches")
def test_exactly_once_with_avro_survives_a_retried_task(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    from pyspark.sql import functions as F

    from tests.spark.test_sink_guarantees import EXPECTED, ROWS, failing_values

    topic = topic_factory(partitions=3)
    rows = failing_values(spark, bootstrap, topic, always=False).select(F.struct("value").alias("value"))
    write_df(rows, bootstrap, topic=topic, deliveryGuarantee="exactly_once", valueFormat="avro",
             **{"schema.registry.url": schema_registry.url})
    read = deserialize(schema_registry.url, readback(topic, "read_committed"))
    assert Counter(v["value"].encode() for _, v in read) == EXPECTED  # every row exactly once
    assert len(readback(topic, "read_uncommitted")) > ROWS  # the failed attempt had sent rows, since aborted


def test_a_streaming_query_writes_avro_under_one_registered_schema(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    """Every micro-batch asks for its serializers on the driver; the schema is registered once (one version, one
    id in every record) and each committed batch's rows are there once."""
    import time

    from pyspark.sql import functions as F

    topic = topic_factory(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 100).option("numPartitions", 2)
            .load().select(F.struct("value", "timestamp").alias("value")))
    query = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("deliveryGuarantee", "exactly_once").option("valueFormat", "avro")
             .option("schema.registry.url", schema_registry.url).option("checkpointLocation", str(checkpoint))
             .start())
    deadline = time.monotonic() + 120
    try:
        while len([p for p in (checkpoint / "commits").glob("[0-9]*")]) < 3:
            assert time.monotonic() < deadline, "three micro-batches were not committed within 120 s"
            assert not query.awaitTermination(0.2), query.exception()
    finally:
        query.stop()
    records = readback(topic)
    client = SchemaRegistryClient(RegistrySettings.from_config({"url": schema_registry.url}))
    latest = client.latest(f"{topic}-value")
    assert latest.version == 1
    assert {r.value[:5] for r in records if r.value} == {b"\x00" + latest.schema_id.to_bytes(4, "big")}
    values = Counter(v["value"] for _, v in deserialize(schema_registry.url, records))
    # The three committed micro-batches' rows all there, and no row twice (the stop may cut a later batch short)
    assert set(range(300)) <= set(values) and set(values.values()) == {1}


STATUS_SCHEMA = json.dumps({"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}}]})


@pytest.mark.parametrize(("schema", "ddl", "rows", "words"), [
    (STATUS_SCHEMA, "id bigint not null, status string", [(1, "NEW"), (2, "LOST")],
     ("column 'value.status', row 1: 'LOST' is not one of the enum's symbols",)),
    (None, "id bigint, codes map<int, string>", [(1, {1: "a"})],
     ("column 'value.codes' is a map with int32 keys; Avro maps have string keys",)),
])
def test_a_row_or_type_avro_cannot_write_fails_with_nothing_visible(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]], schema: str | None, ddl: str, rows: list[tuple[Any, ...]],
        words: tuple[str, ...]) -> None:
    from pyspark.sql import functions as F

    topic = topic_factory(partitions=1)
    df = spark.createDataFrame(rows, ddl).coalesce(1)
    with pytest.raises(Exception) as failed:
        write_df(df.select(F.struct(*df.columns).alias("value")), bootstrap, topic=topic, valueFormat="avro",
                 valueSchema=schema, deliveryGuarantee="exactly_once", **{"schema.registry.url": schema_registry.url})
    for word in words:
        assert word in str(failed.value), str(failed.value)[:3000]
    assert readback(topic) == []  # read_committed: nothing of the failed write
