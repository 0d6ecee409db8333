"""The DataFrame's columns: checked on the driver, then turned into the producer's input in each task.

Accepted columns, as Spark's built-in Kafka sink (names are matched exactly, as Spark does; every other column is
ignored, one named ``timestamp`` included, as Spark does):

    value      string | binary                               required; null = tombstone
    key        string | binary                               optional; null = no key
    topic      string                                        required unless the topic option is set (it wins)
    partition  int                                           optional; null = the partitioner decides
    headers    array<struct<key: string, value: binary>>     optional

Two columns of one name (or a struct with two fields of one name) anywhere in the DataFrame are refused, naming
them: pyspark's Arrow hand-off to a Python data source would fail on them (Spark's own sink ignores them).

Beyond Spark, opt-in: the ``timestampColumn`` option names a timestamp or long (epoch milliseconds) column that
gives the records' timestamps (null = send time); without it every record gets the send time, as with Spark's sink.

``plan_columns`` runs on the driver; ``to_producer_batch`` runs per Arrow batch in a task, with the checks only
the data can fail (a null or empty topic, a partition out of range, a timestamp before 1970), before any of that
batch is handed to the producer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
    TimestampType,
)

from spark_kafka_sink.errors import ConfigError

if TYPE_CHECKING:
    from spark_kafka_sink.spark.record_schemas import ColumnSerializer

__all__ = ["ColumnPlan", "InvalidColumnError", "plan_columns", "to_producer_batch", "ACCEPTED_TYPES", "TIMESTAMP_TYPES"]

#: Column -> the accepted Spark types, as error messages show them.
ACCEPTED_TYPES: dict[str, str] = {
    "value": "string or binary",
    "key": "string or binary",
    "topic": "string",
    "partition": "int",
    "headers": "array<struct<key: string, value: binary>>",
}
#: What the column named by the timestampColumn option may be.
TIMESTAMP_TYPES = "timestamp or long (epoch milliseconds)"


class InvalidColumnError(ConfigError):
    """A DataFrame column has the wrong type, is missing, or holds a value Kafka cannot take. ``key`` names it."""


def _is_headers_type(dt: DataType) -> bool:
    if not isinstance(dt, ArrayType) or not isinstance(dt.elementType, StructType):
        return False
    fields = {f.name: f.dataType for f in dt.elementType.fields}
    return (len(fields) == 2 and isinstance(fields.get("key"), StringType)
            and isinstance(fields.get("value"), BinaryType))


_TYPE_CHECKS: dict[str, Callable[[DataType], bool]] = {
    "value": lambda dt: isinstance(dt, (StringType, BinaryType)),
    "key": lambda dt: isinstance(dt, (StringType, BinaryType)),
    "topic": lambda dt: isinstance(dt, StringType),
    "partition": lambda dt: isinstance(dt, IntegerType),
    "headers": _is_headers_type,
}


@dataclass(frozen=True)
class ColumnPlan:
    """Which sink columns the DataFrame has; picklable, built once on the driver."""

    has_key: bool
    topic_column: bool  # the topic column is used (present and no topic option)
    has_partition: bool
    has_headers: bool
    timestamp_column: str | None  # the timestampColumn option's column (a timestamp or long), or None: send time
    topic_option: str | None
    # keyFormat / valueFormat other than bytes: what turns the column into framed record bytes (record_schemas)
    key_serializer: ColumnSerializer | None = None
    value_serializer: ColumnSerializer | None = None

    @property
    def input_columns(self) -> tuple[str, ...]:
        """The DataFrame columns the sink reads (what ``to_producer_batch`` takes from each batch)."""
        used = [("value", True), ("key", self.has_key), ("topic", self.topic_column),
                ("partition", self.has_partition), ("headers", self.has_headers)]
        names = tuple(name for name, present in used if present)
        if self.timestamp_column is not None and self.timestamp_column not in names:
            names += (self.timestamp_column,)
        return names


def _duplicate_names(dt: DataType, path: str = "") -> tuple[str, str] | None:
    """The first struct in ``dt`` (the DataFrame's schema, or a type inside it at ``path``) with two fields of one
    name: that struct's path ("" for the DataFrame itself; ``col.field``, ``col[]`` for an array's elements,
    ``col{key}``/``col{value}`` for a map's) and the name."""
    if isinstance(dt, StructType):
        names = [f.name for f in dt.fields]
        repeated = next((n for i, n in enumerate(names) if n in names[:i]), None)
        if repeated is not None:
            return path, repeated
        for f in dt.fields:
            found = _duplicate_names(f.dataType, f"{path}.{f.name}" if path else f.name)
            if found is not None:
                return found
    elif isinstance(dt, ArrayType):
        return _duplicate_names(dt.elementType, f"{path}[]")
    elif isinstance(dt, MapType):
        return _duplicate_names(dt.keyType, f"{path}{{key}}") or _duplicate_names(dt.valueType, f"{path}{{value}}")
    return None


def _refuse_duplicate_names(schema: StructType) -> None:
    # pyspark hands a Python data source its rows as Arrow, which refuses two fields of one name anywhere, even in
    # columns the sink ignores (Spark's own sink takes such a DataFrame): said here, before Spark's Arrow error.
    found = _duplicate_names(schema)
    if found is None:
        return
    path, name = found
    # (a dotted path cannot say which column it starts in: names may hold dots)
    column = next(f.name for f in schema.fields if _duplicate_names(f.dataType, f.name) == found) if path else name
    if not path:
        where = f"more than one column named {name!r}"
    elif path == column:
        where = f"a struct column {column!r} with more than one field named {name!r}"
    else:
        where = f"a column {column!r} whose nested struct {path!r} has more than one field named {name!r}"
    raise InvalidColumnError(
        f"the DataFrame has {where}: pyspark hands a Python data source its rows as Arrow, which refuses duplicate "
        "names, even in columns the sink ignores (Spark's own Kafka sink takes them). Drop or rename them before "
        "writing; after a join: select the columns to write, or df.drop(other_df[...]) the other side's copy",
        key=column)


def plan_columns(schema: StructType, topic_option: str | None, timestamp_column: str | None = None,
                 typed: frozenset[str] = frozenset()) -> ColumnPlan:
    """Check the DataFrame's schema; raises InvalidColumnError naming the column (or option) and the accepted types.

    ``timestamp_column`` is the timestampColumn option: the column that gives the records' timestamps. ``typed``:
    the key/value columns written in a schema'd format (keyFormat / valueFormat), whose type that format checks.
    """
    _refuse_duplicate_names(schema)
    by_name = {f.name: f.dataType for f in schema.fields}
    if "value" not in by_name:
        near = [n for n in by_name if n.lower() == "value"]
        hint = f" (found {near[0]!r}: names are case-sensitive, as in Spark's Kafka sink)" if near else ""
        raise InvalidColumnError(
            f"the DataFrame has no 'value' column{hint}: it is required, of type {ACCEPTED_TYPES['value']}; "
            f"columns are {sorted(by_name)}", key="value")
    for name, check in _TYPE_CHECKS.items():
        if name in typed or (name == "topic" and topic_option is not None):
            continue  # the option wins and the column is ignored, whatever its type (as in Spark's sink)
        dt = by_name.get(name)
        if dt is not None and not check(dt):
            raise InvalidColumnError(
                f"column '{name}' has type {dt.simpleString()}; accepted: {ACCEPTED_TYPES[name]}", key=name)
    if topic_option is None and "topic" not in by_name:
        raise InvalidColumnError(
            "no topic: set the 'topic' option, or add a 'topic' column of type string", key="topic")
    if timestamp_column is not None:
        ts = by_name.get(timestamp_column)
        if ts is None:
            raise InvalidColumnError(
                f"option timestampColumn names column {timestamp_column!r}, which the DataFrame does not have "
                f"(names are case-sensitive); columns are {sorted(by_name)}", key="timestampColumn")
        if not isinstance(ts, (TimestampType, LongType)):
            raise InvalidColumnError(
                f"column '{timestamp_column}' (option timestampColumn) has type {ts.simpleString()}; accepted: "
                f"{TIMESTAMP_TYPES}. Cast it, or drop the option to give records the send time",
                key=timestamp_column)
    return ColumnPlan(
        has_key="key" in by_name,
        topic_column=topic_option is None,
        has_partition="partition" in by_name,
        has_headers="headers" in by_name,
        timestamp_column=timestamp_column,
        topic_option=topic_option,
    )


def _as_binary(arr: pa.Array) -> pa.Array:
    """Strings are sent as their UTF-8 bytes, as Spark's sink does: a view of the same buffers (a cast costs a
    compute-kernel dispatch, 10-30 us a column, for the same result)."""
    if pa.types.is_string(arr.type):
        return arr.view(pa.binary())
    if pa.types.is_large_string(arr.type):
        return arr.view(pa.large_binary())
    return arr


def _epoch_ms(arr: pa.Array, column: str) -> pa.Array:
    if pa.types.is_timestamp(arr.type):
        # Spark timestamps are microseconds; Kafka wants milliseconds: truncate, as Java's Timestamp.getTime() does
        # for the non-negative times Kafka accepts.
        ms = arr.cast(pa.timestamp("ms", arr.type.tz), safe=False).cast(pa.int64())
    else:
        ms = arr.cast(pa.int64())
    low = pc.min(ms).as_py()
    if low is not None and low < 0:
        shown = arr[pc.index(ms, low).as_py()].as_py()
        raise InvalidColumnError(
            f"column '{column}' (option timestampColumn) holds {shown} ({low} ms since the epoch): Kafka record "
            "timestamps are 1970-01-01 or later (the Java client refuses earlier ones too). Fix or filter those rows, "
            "or make them null for the send time", key=column)
    return ms


def to_producer_batch(batch: pa.RecordBatch, plan: ColumnPlan,
                      partition_count: Callable[[str, int], int]) -> pa.RecordBatch:
    """The producer's input for one Arrow batch: only the sink's columns, strings as bytes, timestamps as epoch ms.

    Raises InvalidColumnError for a null or empty topic (without a topic option), a partition outside the topic or a
    timestamp before 1970, so a bad batch is refused whole, before any of its rows is sent.
    ``partition_count(topic, needed)`` gives a topic's partitions, refreshed first if fewer than ``needed``.
    """
    columns: dict[str, pa.Array] = {}
    topics: pa.Array | None = None
    if plan.topic_column:
        topics = batch.column("topic")
        if topics.null_count:
            raise InvalidColumnError(
                f"column 'topic' is null in {topics.null_count} row(s) and no topic option is set: fill the column "
                "or set the topic option", key="topic")
        empty = pc.sum(pc.equal(pc.binary_length(topics), 0)).as_py()
        if empty:
            raise InvalidColumnError(
                f"column 'topic' holds an empty string in {empty} row(s), and a Kafka topic name has 1 to 249 "
                "characters: fill the column or set the topic option", key="topic")
    # value (and key) first in the batch, as they were; a framed column's id may depend on the row's topic
    value = batch.column("value")
    columns["value"] = (_as_binary(value) if plan.value_serializer is None
                        else plan.value_serializer.encode(value, topics))
    if plan.has_key:
        key = batch.column("key")
        columns["key"] = _as_binary(key) if plan.key_serializer is None else plan.key_serializer.encode(key, topics)
    if topics is not None:
        columns["topic"] = topics
    if plan.has_partition:
        partitions = batch.column("partition")
        _check_partitions(partitions, topics, plan.topic_option, partition_count)
        columns["partition"] = partitions
    if plan.has_headers:
        columns["headers"] = batch.column("headers")
    if plan.timestamp_column is not None:
        columns["timestamp"] = _epoch_ms(batch.column(plan.timestamp_column), plan.timestamp_column)
    return pa.RecordBatch.from_pydict(columns)


def _check_partitions(partitions: pa.Array, topics: pa.Array | None, topic_option: str | None,
                      partition_count: Callable[[str, int], int]) -> None:
    if partitions.null_count == len(partitions):
        return
    if topics is None:  # plan_columns guarantees the topic option then
        ranges = {str(topic_option): (pc.min(partitions).as_py(), pc.max(partitions).as_py())}
    else:
        grouped = pa.table({"t": topics, "p": partitions}).group_by("t").aggregate([("p", "min"), ("p", "max")])
        ranges = dict(zip(grouped.column("t").to_pylist(),
                          zip(grouped.column("p_min").to_pylist(), grouped.column("p_max").to_pylist(), strict=True),
                          strict=True))
    for topic, (low, high) in ranges.items():
        if low is None:
            continue  # every partition of this topic's rows is null: the partitioner decides
        if low < 0:
            raise InvalidColumnError(f"column 'partition' holds {low}: partitions are >= 0 (null lets the "
                                     "partitioner choose)", key="partition")
        count = partition_count(topic, high + 1)
        if high >= count:
            raise InvalidColumnError(
                f"column 'partition' holds {high}, but topic {topic!r} has {count} partition(s) (0..{count - 1})",
                key="partition")
