"""Batch writes through ``format("pykafka-sink")``, read back with Spark's own Kafka source, compared with chispa.

Every test writes to its own topic; the session's broker and Spark session are shared.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from tests.conftest import spark_read_topic
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

HEADERS = "array<struct<key: string, value: binary>>"


def read_back(spark: Any, bootstrap: str, topic: str, *columns: Any) -> Any:
    return spark_read_topic(spark, bootstrap, topic).select(*columns)


def as_binary(df: Any, *names: str) -> Any:
    return df.select(*[F.col(c).cast("binary").alias(c) if c in names else F.col(c) for c in df.columns])


def test_string_keys_and_values_with_null_keys_and_tombstones(spark: Any, bootstrap: str,
                                                             topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=3)
    rows = [(None if i % 5 == 0 else f"key-{i}", None if i % 7 == 0 else f"välue-{i}", i) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value string, ignored int").repartition(3)
    write_df(df, bootstrap, topic=topic)
    expected = as_binary(df.select("key", "value"), "key", "value")
    assert_df_equality(expected, read_back(spark, bootstrap, topic, "key", "value"),
                       ignore_row_order=True, ignore_nullable=True)


def test_binary_keys_and_values(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=2)
    rows = [(bytes([i % 256, 0, 255]), bytes(range(i % 50)) + b"\x00\xff") for i in range(200)]
    df = spark.createDataFrame(rows, "key binary, value binary")
    write_df(df, bootstrap, topic=topic)
    assert_df_equality(df, read_back(spark, bootstrap, topic, "key", "value"),
                       ignore_row_order=True, ignore_nullable=True)


def test_headers(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=2)
    rows = [(f"v{i}", None if i % 4 == 0 else [("trace", f"t{i}".encode()), ("dup", b""), ("dup", None)])
            for i in range(100)]
    df = spark.createDataFrame(rows, f"value string, headers {HEADERS}")
    write_df(df, bootstrap, topic=topic)
    assert_df_equality(as_binary(df, "value"), read_back(spark, bootstrap, topic, "value", "headers"),
                       ignore_row_order=True, ignore_nullable=True)


def test_topic_column_routes_rows(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    first, second = topic_factory(partitions=2), topic_factory(partitions=1)
    df = spark.createDataFrame([(first if i % 3 else second, f"v{i}") for i in range(90)], "topic string, value string")
    write_df(df, bootstrap)
    back = spark_read_topic(spark, bootstrap, f"{first},{second}").select("topic", "value")
    assert_df_equality(as_binary(df, "value"), back, ignore_row_order=True, ignore_nullable=True)


def test_topic_option_overrides_topic_column(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=2)
    df = spark.createDataFrame([("not-this-topic", f"v{i}") for i in range(50)], "topic string, value string")
    write_df(df, bootstrap, topic=topic)
    back = read_back(spark, bootstrap, topic, "topic", "value")
    expected = as_binary(df, "value").withColumn("topic", F.lit(topic))
    assert_df_equality(expected, back, ignore_row_order=True, ignore_nullable=True)


def test_explicit_partitions_and_null_partition(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=4)
    df = spark.createDataFrame([(i % 4, f"v{i}") for i in range(120)], "partition int, value string")
    write_df(df, bootstrap, topic=topic)
    assert_df_equality(as_binary(df, "value"), read_back(spark, bootstrap, topic, "partition", "value"),
                       ignore_row_order=True, ignore_nullable=True)
    nulls = spark.createDataFrame([(None, "x")], "partition int, value string")
    write_df(nulls, bootstrap, topic=topic)  # null: the partitioner chooses
    assert spark_read_topic(spark, bootstrap, topic).count() == 121


def test_timestamp_column_option_timestamp_and_long(spark: Any, bootstrap: str,
                                                    topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    base = dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=dt.timezone.utc)
    rows = [(f"v{i}", base + dt.timedelta(milliseconds=37 * i, microseconds=999)) for i in range(50)]
    df = spark.createDataFrame(rows, "value string, event_time timestamp")
    write_df(df, bootstrap, topic=topic, timestampColumn="event_time")
    # Kafka keeps milliseconds: the microseconds are truncated.
    expected = as_binary(df, "value").select(
        "value", F.timestamp_millis(F.unix_millis("event_time")).alias("timestamp"))
    assert_df_equality(expected, read_back(spark, bootstrap, topic, "value", "timestamp"),
                       ignore_row_order=True, ignore_nullable=True)

    long_topic = topic_factory(partitions=1)
    longs = spark.createDataFrame([(f"w{i}", 1_600_000_000_000 + i) for i in range(20)], "value string, timestamp long")
    write_df(longs, bootstrap, topic=long_topic, timestampColumn="timestamp")
    back = read_back(spark, bootstrap, long_topic, "value", F.unix_millis("timestamp").alias("timestamp"))
    assert_df_equality(as_binary(longs, "value"), back, ignore_row_order=True, ignore_nullable=True)


def test_timestamp_column_is_ignored_without_the_option(spark: Any, bootstrap: str,
                                                        topic_factory: Callable[..., str]) -> None:
    """As with Spark's sink, a column named timestamp is data, not the record time: records get the send time."""
    old = dt.datetime(2001, 1, 1, tzinfo=dt.timezone.utc)
    ts_topic, string_topic, null_topic = (topic_factory(partitions=1) for _ in range(3))
    before_ms = int(time.time() * 1000)
    write_df(spark.createDataFrame([("a", old)], "value string, timestamp timestamp"), bootstrap, topic=ts_topic)
    write_df(spark.createDataFrame([("b", "2001-01-01")], "value string, timestamp string"), bootstrap,
             topic=string_topic)
    write_df(spark.createDataFrame([("c", None)], "value string, timestamp long"), bootstrap, topic=null_topic,
             timestampColumn="timestamp")  # with the option, null means the send time
    after_ms = int(time.time() * 1000)
    for topic in (ts_topic, string_topic, null_topic):
        [row] = read_back(spark, bootstrap, topic, F.unix_millis("timestamp").alias("ms")).collect()
        assert before_ms - 1000 <= row.ms <= after_ms + 1000, topic


def test_many_partitions_match_sparks_own_sink(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Same DataFrame, same options, only the format name differs: same rows on the same Kafka partitions."""
    ours, theirs = topic_factory(partitions=16), topic_factory(partitions=16)
    df = (spark.range(0, 6_000, 1, 24)
          .select(F.concat(F.lit("k"), (F.col("id") % 997).cast("string")).alias("key"),
                  F.concat(F.lit("value-"), F.col("id").cast("string")).alias("value")))
    write_df(df, bootstrap, topic=ours)
    write_df(df, bootstrap, topic=theirs, fmt="kafka")
    written = read_back(spark, bootstrap, ours, "key", "value", "partition").cache()
    assert_df_equality(read_back(spark, bootstrap, theirs, "key", "value", "partition"), written,
                       ignore_row_order=True, ignore_nullable=True)
    assert written.select("partition").distinct().count() == 16
    written.unpersist()


def test_one_million_rows(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=6)
    n = 1_000_000
    df = spark.range(0, n, 1, 4).select(
        (F.col("id") % 10_000).cast("string").alias("key"),
        F.concat(F.lit("value-"), F.col("id").cast("string"), F.lit("-" + "x" * 80)).alias("value"),
    ).cache()
    df.count()  # materialize, so the timing below measures the write, not the generation
    write_df(df.limit(1), bootstrap, topic=topic_factory(partitions=1))  # warm Python workers: first-use imports
    started = time.perf_counter()
    write_df(df, bootstrap, topic=topic)
    seconds = time.perf_counter() - started
    print(f"\n1M-row write: {seconds:.1f} s, {n / seconds:,.0f} rows/s")
    back = read_back(spark, bootstrap, topic, "key", "value").cache()
    expected = as_binary(df, "key", "value")
    # Exact multiset equality computed by Spark (chispa would collect 2 x 1M rows into Python: ~40 s more) ...
    assert back.count() == n
    assert expected.exceptAll(back).isEmpty() and back.exceptAll(expected).isEmpty()
    # ... and chispa on a sample, for its readable diff should the above ever fail.
    sample = F.col("key").isin([b"0", b"4242", b"9999"])
    assert_df_equality(expected.where(sample), back.where(sample), ignore_row_order=True, ignore_nullable=True)
    back.unpersist()
    df.unpersist()
