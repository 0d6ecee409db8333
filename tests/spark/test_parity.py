"""Drop-in parity: the same DataFrame written by Spark's ``format("kafka")`` and by ``pykafka-sink`` lands the same.

Each case writes one DataFrame with both formats to fresh topics, only the format name differing, and reads both
back with Spark's own Kafka source; the (key, value, headers, partition) multisets must be equal. Where the two
must differ (the save mode pyspark imposes on Python data sources) a test pins the difference; the README lists it
under "Differences from format("kafka")".
"""

from __future__ import annotations

import datetime as dt
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from tests.conftest import spark_read_topic
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

Record = tuple[Any, ...]
OLD = dt.datetime(2001, 2, 3, 4, 5, 6, tzinfo=dt.timezone.utc)


def records(spark: Any, bootstrap: str, topic: str, *, sticky: bool = False) -> Counter[Record]:
    """What a topic holds, as Spark's Kafka source reads it: a multiset of (key, value, headers, partition).

    ``sticky``: records without a key and without an explicit partition went wherever each sink's sticky
    partitioner happened to be; their partition is left out (None) of the comparison."""
    rows = spark_read_topic(spark, bootstrap, topic).select("key", "value", "headers", "partition").collect()
    return Counter(
        (None if r.key is None else bytes(r.key), None if r.value is None else bytes(r.value),
         tuple((h.key, None if h.value is None else bytes(h.value)) for h in r.headers or ()),
         None if sticky and r.key is None else r.partition)
        for r in rows)


def record_times_ms(spark: Any, bootstrap: str, topic: str) -> list[int]:
    return [r.ms for r in spark_read_topic(spark, bootstrap, topic).select(
        F.unix_millis("timestamp").alias("ms")).collect()]


def write_both(df: Any, bootstrap: str, ours: str | None, theirs: str | None, **options: Any) -> None:
    """``df`` through pykafka-sink (topic option ``ours``) and through format("kafka") (topic option ``theirs``)."""
    write_df(df, bootstrap, topic=ours, **options)
    write_df(df, bootstrap, topic=theirs, fmt="kafka", **options)


def assert_same(spark: Any, bootstrap: str, ours: str, theirs: str, expected_rows: int, *,
                sticky: bool = False) -> Counter[Record]:
    mine, spark_sink = records(spark, bootstrap, ours, sticky=sticky), records(spark, bootstrap, theirs, sticky=sticky)
    assert sum(spark_sink.values()) == expected_rows
    assert mine == spark_sink, (f"only pykafka-sink wrote {list((mine - spark_sink).items())[:5]}; "
                                f"only format('kafka') wrote {list((spark_sink - mine).items())[:5]}")
    return mine


@pytest.fixture(scope="module")
def source_topic(bootstrap: str) -> Iterator[str]:
    """A source topic written by librdkafka: keys, null keys and values, headers (one with a null value), four
    partitions, and record timestamps from 2001 (a copy that kept them would be deleted by retention at once)."""
    from confluent_kafka import Producer

    from tests.conftest import create_topic

    # Kept forever: with the default 7-day retention the broker deletes 2001's records at its next retention check.
    topic = create_topic(bootstrap, "parity-source", partitions=4, config={"retention.ms": "-1"})
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    old_ms = int(OLD.timestamp() * 1000)
    for i in range(400):
        headers: list[tuple[str, str | bytes | None]] | None = [("n", str(i).encode()), ("empty", None)] \
            if i % 3 else None
        producer.produce(topic, key=None if i % 7 == 0 else f"k{i % 50}".encode(),
                         value=None if i % 11 == 0 else f"value-{i}".encode(), headers=headers,
                         partition=i % 4, timestamp=old_ms + i)
    assert producer.flush(30) == 0
    yield topic


def test_kafka_to_kafka_copy_with_every_source_column(spark: Any, bootstrap: str, source_topic: str,
                                                      topic_factory: Callable[..., str]) -> None:
    # key, value, topic, partition, offset, timestamp, timestampType and headers, as Spark's source gives them.
    df = spark_read_topic(spark, bootstrap, source_topic)
    assert df.columns == ["key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers"]
    ours, theirs = topic_factory(partitions=4), topic_factory(partitions=4)
    before_ms = int(time.time() * 1000)
    write_both(df, bootstrap, ours, theirs)
    copied = assert_same(spark, bootstrap, ours, theirs, 400)
    assert copied == records(spark, bootstrap, source_topic)  # the source's partitions are kept, by both
    # The source's `timestamp` column is ignored by both: the records get the send time, not 2001.
    for topic in (ours, theirs):
        assert min(record_times_ms(spark, bootstrap, topic)) >= before_ms - 1000, topic


def test_wide_dataframe_extra_columns_of_many_types(spark: Any, bootstrap: str,
                                                    topic_factory: Callable[..., str]) -> None:
    df = spark.range(0, 300, 1, 3).select(
        F.concat(F.lit("k"), (F.col("id") % 17).cast("string")).alias("key"),
        F.to_json(F.struct(F.col("id"), F.lit("x").alias("x"))).alias("value"),
        F.col("id").cast("string").alias("timestamp"),  # a string column named timestamp: common in event data
        F.col("id").cast("int").alias("n_int"),
        (F.col("id") / 3).alias("n_double"),
        F.col("id").cast("decimal(20,4)").alias("n_decimal"),
        (F.col("id") % 2 == 0).alias("flag"),
        F.date_add(F.lit("2020-01-01").cast("date"), F.col("id").cast("int")).alias("day"),
        F.timestamp_seconds(F.col("id")).alias("event_time"),
        F.array(F.col("id"), F.col("id") + 1).alias("ids"),
        F.create_map(F.lit("a"), F.col("id")).alias("attrs"),
        F.struct(F.col("id").alias("inner"), F.lit(None).cast("string").alias("missing")).alias("nested"),
        F.col("id").cast("string").cast("binary").alias("blob"),
        F.lit(None).cast("string").alias("always_null"),
    )
    ours, theirs = topic_factory(partitions=3), topic_factory(partitions=3)
    write_both(df, bootstrap, ours, theirs)
    assert_same(spark, bootstrap, ours, theirs, 300)


def test_null_keys_null_values_binary_and_string_columns(spark: Any, bootstrap: str,
                                                         topic_factory: Callable[..., str]) -> None:
    rows = [(None if i % 4 == 0 else f"k{i}", None if i % 5 == 0 else f"v{i}") for i in range(200)]
    strings = spark.createDataFrame(rows, "key string, value string").repartition(3)
    binaries = strings.select(F.col("key").cast("binary").alias("key"), F.col("value").cast("binary").alias("value"))
    mixed = strings.select(F.col("key").cast("binary").alias("key"), "value")
    for df in (strings, binaries, mixed):
        ours, theirs = topic_factory(partitions=5), topic_factory(partitions=5)
        write_both(df, bootstrap, ours, theirs)
        written = assert_same(spark, bootstrap, ours, theirs, 200, sticky=True)
        assert sum(n for (key, value, _, _), n in written.items() if value is None) == 40  # tombstones kept


def test_topic_column_without_the_option(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    ours = [topic_factory(partitions=2), topic_factory(partitions=3)]
    theirs = [topic_factory(partitions=2), topic_factory(partitions=3)]
    base = spark.range(0, 240, 1, 4).select(
        (F.col("id") % 3 == 0).alias("second"),
        F.concat(F.lit("k"), (F.col("id") % 13).cast("string")).alias("key"),
        F.col("id").cast("string").alias("value"))

    def routed(first: str, second: str) -> Any:
        return base.select(F.when(F.col("second"), second).otherwise(first).alias("topic"), "key", "value")

    write_df(routed(*ours), bootstrap)
    write_df(routed(*theirs), bootstrap, fmt="kafka")
    for mine, spark_sink, rows in ((ours[0], theirs[0], 160), (ours[1], theirs[1], 80)):
        assert_same(spark, bootstrap, mine, spark_sink, rows)


def test_topic_option_overrides_the_topic_column(spark: Any, bootstrap: str,
                                                 topic_factory: Callable[..., str]) -> None:
    df = spark.range(0, 90, 1, 2).select(F.lit("no-such-topic").alias("topic"), F.col("id").cast("string").alias("key"),
                                         F.col("id").cast("string").alias("value"))
    ours, theirs = topic_factory(partitions=3), topic_factory(partitions=3)
    write_both(df, bootstrap, ours, theirs)
    assert_same(spark, bootstrap, ours, theirs, 90)


def test_explicit_partitions_some_null(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    df = spark.range(0, 300, 1, 3).select(
        F.when(F.col("id") % 5 == 0, F.lit(None)).otherwise(F.col("id") % 6).cast("int").alias("partition"),
        F.concat(F.lit("k"), (F.col("id") % 29).cast("string")).alias("key"),  # keyed: null partitions hash alike
        F.col("id").cast("string").alias("value"))
    ours, theirs = topic_factory(partitions=6), topic_factory(partitions=6)
    write_both(df, bootstrap, ours, theirs)
    written = assert_same(spark, bootstrap, ours, theirs, 300)
    assert {partition for (_, _, _, partition) in written} == set(range(6))


def test_streaming_kafka_to_kafka(spark: Any, bootstrap: str, source_topic: str, tmp_path: Path,
                                  topic_factory: Callable[..., str]) -> None:
    ours, theirs = topic_factory(partitions=4), topic_factory(partitions=4)
    for fmt, topic in (("pykafka-sink", ours), ("kafka", theirs)):
        stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
                  .option("subscribe", source_topic).option("startingOffsets", "earliest")
                  .option("includeHeaders", "true").option("maxOffsetsPerTrigger", 150).load())
        query = (stream.writeStream.format(fmt).option("kafka.bootstrap.servers", bootstrap)
                 .option("topic", topic).option("checkpointLocation", str(tmp_path / fmt))
                 .trigger(availableNow=True).start())
        query.awaitTermination(180)
        assert query.exception() is None and not query.isActive
    copied = assert_same(spark, bootstrap, ours, theirs, 400)
    assert copied == records(spark, bootstrap, source_topic)


@pytest.fixture
def one_shuffle_partition(spark: Any) -> Iterator[None]:
    """Streaming aggregations keep a state store per shuffle partition; one is enough here and runs each
    micro-batch's aggregation as one task."""
    before = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "1")
    yield
    spark.conf.set("spark.sql.shuffle.partitions", before)


def running_counts(spark: Any, bootstrap: str, source_topic: str) -> Any:
    """A streaming count per group of 50 offsets of each partition, as string key and value. The source is read in 3
    micro-batches of ~37 offsets a partition, so group "0" (200 rows) is complete after the second batch and does
    not change in the third, and group "1" (200 rows) completes in the third."""
    stream = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap)
              .option("subscribe", source_topic).option("startingOffsets", "earliest")
              .option("maxOffsetsPerTrigger", 150).load())
    return (stream.groupBy(F.floor(F.col("offset") / 50).cast("string").alias("key")).count()
            .select("key", F.col("count").cast("string").alias("value")))


def run_available_now(writer: Any, checkpoint: Path) -> None:
    query = writer.option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start()
    query.awaitTermination(180)
    assert query.exception() is None and not query.isActive


def finished_groups(written: Counter[Record]) -> Counter[bytes]:
    """How many times each group's final count (200) was written."""
    return Counter(key for (key, value, _, _), n in written.items() for _ in range(n) if value == b"200")


@pytest.mark.usefixtures("one_shuffle_partition")
def test_streaming_aggregation_in_complete_mode(spark: Any, bootstrap: str, source_topic: str, tmp_path: Path,
                                                topic_factory: Callable[..., str]) -> None:
    """Complete mode: every micro-batch appends the whole result table to the topic, as Spark's sink does."""
    ours, theirs = topic_factory(partitions=4), topic_factory(partitions=4)
    for fmt, topic in (("pykafka-sink", ours), ("kafka", theirs)):
        run_available_now(running_counts(spark, bootstrap, source_topic).writeStream.format(fmt)
                          .outputMode("complete").option("kafka.bootstrap.servers", bootstrap)
                          .option("topic", topic), tmp_path / fmt)
    # batches: {0}, {0, 1}, {0, 1}: group "0"'s final count is written again in the last batch
    written = assert_same(spark, bootstrap, ours, theirs, 5)
    assert finished_groups(written) == {b"0": 2, b"1": 1}


@pytest.mark.usefixtures("one_shuffle_partition")
def test_update_mode_difference_is_pinned_and_foreach_batch_writes_it(
        spark: Any, bootstrap: str, source_topic: str, tmp_path: Path, topic_factory: Callable[..., str]) -> None:
    """pyspark refuses the update output mode for every Python data source (its write builder does not declare
    that it can take updates as appends), before the sink is asked. The README's way: foreachBatch, whose
    micro-batches the sink writes with ``.mode("append")``, lands what Spark's sink writes in update mode."""
    ours, theirs = topic_factory(partitions=4), topic_factory(partitions=4)
    with pytest.raises(Exception, match="pykafka-sink does not support Update mode"):
        run_available_now(running_counts(spark, bootstrap, source_topic).writeStream.format("pykafka-sink")
                          .outputMode("update").option("kafka.bootstrap.servers", bootstrap)
                          .option("topic", ours), tmp_path / "refused")
    assert sum(records(spark, bootstrap, ours).values()) == 0

    def write_batch(batch: Any, batch_id: int) -> None:
        write_df(batch, bootstrap, topic=ours)

    run_available_now(running_counts(spark, bootstrap, source_topic).writeStream.outputMode("update")
                      .foreachBatch(write_batch), tmp_path / "foreach")
    run_available_now(running_counts(spark, bootstrap, source_topic).writeStream.format("kafka")
                      .outputMode("update").option("kafka.bootstrap.servers", bootstrap)
                      .option("topic", theirs), tmp_path / "kafka")
    # batches: {0}, {0, 1}, {1}: only the groups a batch changed
    written = assert_same(spark, bootstrap, ours, theirs, 4)
    assert finished_groups(written) == {b"0": 1, b"1": 1}


def test_save_mode_difference_is_pinned(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """The one difference left: Spark's sink writes in the default mode (ErrorIfExists); pyspark refuses that mode
    for every Python data source before the sink is asked, so pykafka-sink needs ``.mode("append")``, which Spark's
    sink accepts too. Overwrite is refused by both (topics are append-only)."""
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    theirs, ours = topic_factory(partitions=1), topic_factory(partitions=1)
    df.write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", theirs).save()
    assert sum(records(spark, bootstrap, theirs).values()) == 1
    with pytest.raises(Exception, match="ErrorIfExists"):
        df.write.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap).option("topic", ours).save()
    for fmt in ("kafka", "pykafka-sink"):
        with pytest.raises(Exception, match="(?i)overwrite"):
            write_df(df, bootstrap, fmt=fmt, mode="overwrite", topic=ours)
    assert sum(records(spark, bootstrap, ours).values()) == 0


def test_duplicate_column_names_difference_is_pinned(spark: Any, bootstrap: str,
                                                     topic_factory: Callable[..., str]) -> None:
    """A join's two ``id`` columns: Spark's sink ignores them; pyspark's Arrow hand-off to a Python data source
    refuses duplicate names in any column, so pykafka-sink says so on the driver, naming the column and the fix,
    instead of Spark's bare DUPLICATED_FIELD_NAME_IN_ARROW_STRUCT from the tasks. The fix writes the same records."""
    left = spark.createDataFrame([(1, "k1", "v1"), (2, "k2", "v2")], "id int, key string, value string")
    right = spark.createDataFrame([(1, "a"), (2, "b")], "id int, other string")
    joined = left.join(right, left.id == right.id)
    theirs, ours = topic_factory(partitions=2), topic_factory(partitions=2)
    write_df(joined, bootstrap, fmt="kafka", topic=theirs)
    with pytest.raises(Exception, match="more than one column named 'id'.*Drop or rename") as refused:
        write_df(joined, bootstrap, topic=ours)
    assert "DUPLICATED_FIELD_NAME_IN_ARROW_STRUCT" not in str(refused.value)
    assert sum(records(spark, bootstrap, ours).values()) == 0
    write_df(joined.drop(right.id), bootstrap, topic=ours)
    assert records(spark, bootstrap, ours) == records(spark, bootstrap, theirs)
