"""Column checks and the Arrow -> producer input conversion: no Spark session, no broker."""

from __future__ import annotations

import datetime as dt
import re

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from spark_kafka_sink.spark.schema import InvalidColumnError, plan_columns, to_producer_batch

HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(**cols: object) -> StructType:
    return StructType([StructField(name, t) for name, t in cols.items()])  # type: ignore[arg-type]


def test_full_plan() -> None:
    plan = plan_columns(schema(key=BinaryType(), value=StringType(), topic=StringType(), partition=IntegerType(),
                               headers=HEADERS, timestamp=TimestampType(), other=LongType()), None, "timestamp")
    assert plan.has_key and plan.topic_column and plan.has_partition and plan.has_headers
    assert plan.timestamp_column == "timestamp"


def test_other_columns_are_ignored_whatever_their_type_timestamp_included() -> None:
    # As Spark's sink: only key, value, topic, partition and headers are read; a string `timestamp` is just data.
    plan = plan_columns(schema(value=StringType(), timestamp=StringType(), ts=ArrayType(LongType())), "t")
    assert plan.timestamp_column is None
    batch = pa.RecordBatch.from_pydict({"value": ["v"], "timestamp": ["2024-01-01"], "ts": [[1]]})
    assert to_producer_batch(batch, plan, lambda t, needed: 1).schema.names == ["value"]


def test_topic_option_wins_over_column_of_any_type() -> None:
    plan = plan_columns(schema(value=BinaryType(), topic=IntegerType()), "t")
    assert not plan.topic_column and plan.topic_option == "t"


@pytest.mark.parametrize(("cols", "topic", "named", "accepted"), [
    ({"key": StringType()}, "t", "'value'", "string or binary"),
    ({"Value": StringType()}, "t", "case-sensitive", "string or binary"),
    ({"value": IntegerType()}, "t", "'value'", "string or binary"),
    ({"value": StringType(), "key": ArrayType(StringType())}, "t", "'key'", "string or binary"),
    ({"value": StringType(), "topic": BinaryType()}, None, "'topic'", "string"),
    ({"value": StringType(), "partition": LongType()}, "t", "'partition'", "int"),
    ({"value": StringType(), "headers": ArrayType(StructType([StructField("k", StringType()),
                                                               StructField("value", BinaryType())]))},
     "t", "'headers'", "array<struct<key: string, value: binary>>"),
    ({"value": StringType(), "headers": ArrayType(StructType([StructField("key", StringType()),
                                                               StructField("value", StringType())]))},
     "t", "'headers'", "array<struct<key: string, value: binary>>"),
    ({"value": StringType()}, None, "topic", "string"),
])
def test_bad_columns(cols: dict[str, object], topic: str | None, named: str, accepted: str) -> None:
    with pytest.raises(InvalidColumnError) as info:
        plan_columns(schema(**cols), topic)
    assert named in str(info.value) and accepted in str(info.value)


@pytest.mark.parametrize(("cols", "column", "key", "words"), [
    ({"value": StringType(), "timestamp": StringType()}, "timestamp", "timestamp",
     ("'timestamp' (option timestampColumn) has type string", "timestamp or long")),
    ({"value": StringType(), "event_time": IntegerType()}, "event_time", "event_time",
     ("'event_time' (option timestampColumn) has type int", "timestamp or long")),
    ({"value": StringType(), "Event_Time": TimestampType()}, "event_time", "timestampColumn",
     ("timestampColumn names column 'event_time'", "case-sensitive", "'Event_Time'")),
])
def test_bad_timestamp_column(cols: dict[str, object], column: str, key: str, words: tuple[str, ...]) -> None:
    with pytest.raises(InvalidColumnError) as info:
        plan_columns(schema(**cols), "t", column)
    assert info.value.key == key
    for word in words:
        assert word in str(info.value)


def _batch() -> pa.RecordBatch:
    ts = pa.array([dt.datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=dt.timezone.utc), None],
                  pa.timestamp("us", tz="Etc/UTC"))
    headers = pa.array([[{"key": "h", "value": b"x"}], None],
                       pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))
    return pa.RecordBatch.from_pydict({
        "other": pa.array([1, 2]), "value": pa.array(["v", None]), "key": pa.array([b"k", None]),
        "topic": pa.array(["a", "b"]), "partition": pa.array([1, None], pa.int32()), "headers": headers,
        "timestamp": ts,
    })


def test_conversion_keeps_sink_columns_and_casts() -> None:
    plan = plan_columns(schema(value=StringType(), key=BinaryType(), topic=StringType(), partition=IntegerType(),
                               headers=HEADERS, timestamp=TimestampType(), other=LongType()), None, "timestamp")
    out = to_producer_batch(_batch(), plan, lambda topic, needed: 2)
    assert out.schema.names == ["value", "key", "topic", "partition", "headers", "timestamp"]
    assert out.column("value").to_pylist() == [b"v", None]
    assert out.column("timestamp").to_pylist() == [1704164645678, None]
    assert out.column("headers").to_pylist() == [[{"key": "h", "value": b"x"}], None]


def test_topic_option_drops_topic_column() -> None:
    plan = plan_columns(schema(value=StringType(), topic=StringType()), "t")
    out = to_producer_batch(_batch().select(["value", "topic"]), plan, lambda topic, needed: 1)
    assert out.schema.names == ["value"]


@pytest.mark.parametrize(("topics", "words"), [(["t", None], "'topic' is null in 1 row"),
                                               (["", "t", ""], "'topic' holds an empty string in 2 row")])
def test_null_or_empty_topic_row_refused(topics: list[str | None], words: str) -> None:
    plan = plan_columns(schema(value=StringType(), topic=StringType()), None)
    batch = pa.RecordBatch.from_pydict({"value": ["a"] * len(topics), "topic": topics})
    with pytest.raises(InvalidColumnError, match=words) as refused:
        to_producer_batch(batch, plan, lambda topic, needed: 1)
    assert refused.value.key == "topic"


@pytest.mark.parametrize(("fields", "column", "words"), [
    ([("id", IntegerType()), ("value", StringType()), ("id", LongType())], "id", "more than one column named 'id'"),
    ([("value", StringType()), ("s", StructType([StructField("a", IntegerType()), StructField("a", LongType())]))],
     "s", "struct column 's' with more than one field named 'a'"),
    ([("value", StringType()),
      ("m", MapType(StringType(), ArrayType(StructType([StructField("a", IntegerType()),
                                                        StructField("a", IntegerType())]))))],
     "m", "column 'm' whose nested struct 'm{value}[]' has more than one field named 'a'"),
])
def test_duplicate_names_refused_naming_them(fields: list[tuple[str, DataType]], column: str, words: str) -> None:
    # Spark's Arrow hand-off to a Python data source would fail on them, even in ignored columns, with no hint.
    with pytest.raises(InvalidColumnError, match=re.escape(words)) as refused:
        plan_columns(StructType([StructField(n, t) for n, t in fields]), "t")
    assert refused.value.key == column
    assert "Drop or rename them" in str(refused.value)


def test_names_differing_in_case_are_not_duplicates() -> None:
    plan = plan_columns(StructType([StructField("value", StringType()), StructField("ID", IntegerType()),
                                    StructField("id", IntegerType())]), "t")
    assert plan.input_columns == ("value",)


@pytest.mark.parametrize(("partitions", "message"), [([0, 3], "holds 3, but topic 'a' has 3"), ([-1, 0], "holds -1")])
def test_partition_out_of_range_refused(partitions: list[int], message: str) -> None:
    plan = plan_columns(schema(value=StringType(), topic=StringType(), partition=IntegerType()), None)
    batch = pa.RecordBatch.from_pydict({"value": ["a", "b"], "topic": ["a", "a"],
                                        "partition": pa.array(partitions, pa.int32())})
    with pytest.raises(InvalidColumnError, match=message):
        to_producer_batch(batch, plan, lambda topic, needed: 3)


def test_partition_range_is_per_topic() -> None:
    plan = plan_columns(schema(value=StringType(), topic=StringType(), partition=IntegerType()), None)
    batch = pa.RecordBatch.from_pydict({"value": ["a", "b", "c"], "topic": ["big", "small", "small"],
                                        "partition": pa.array([5, 0, None], pa.int32())})
    counts = {"big": 6, "small": 1}
    asked: list[tuple[str, int]] = []

    def count(topic: str, needed: int) -> int:
        asked.append((topic, needed))  # needed: the highest partition named + 1 (the producer refreshes if fewer)
        return counts[topic]

    to_producer_batch(batch, plan, count)
    assert sorted(asked) == [("big", 6), ("small", 1)]
    counts["big"] = 5
    with pytest.raises(InvalidColumnError, match="topic 'big' has 5"):
        to_producer_batch(batch, plan, count)


def test_long_timestamps_pass_through_from_the_named_column() -> None:
    plan = plan_columns(schema(value=BinaryType(), event_ms=LongType(), timestamp=LongType()), "t", "event_ms")
    batch = pa.RecordBatch.from_pydict({"value": [b"a"], "event_ms": pa.array([1700000000123], pa.int64()),
                                        "timestamp": pa.array([5], pa.int64())})
    assert to_producer_batch(batch, plan, lambda t, needed: 1).column("timestamp").to_pylist() == [1700000000123]


@pytest.mark.parametrize(("column", "words"), [
    (pa.array([0, None, -1], pa.int64()), "holds -1 (-1 ms since the epoch)"),
    (pa.array([dt.datetime(1969, 12, 31, 23, 59, 59)], pa.timestamp("us")), "holds 1969-12-31 23:59:59 ("),
])
def test_timestamps_before_1970_are_refused_naming_the_column(column: pa.Array, words: str) -> None:
    spark_type = LongType() if pa.types.is_integer(column.type) else TimestampType()
    plan = plan_columns(schema(value=BinaryType(), event=spark_type), "t", "event")
    batch = pa.RecordBatch.from_pydict({"value": [b"a"] * len(column), "event": column})
    with pytest.raises(InvalidColumnError, match=re.escape(f"column 'event' (option timestampColumn) {words}")) as info:
        to_producer_batch(batch, plan, lambda t, needed: 1)
    assert info.value.key == "event"
