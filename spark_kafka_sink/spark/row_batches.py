"""pyspark 4.0's streaming input: Rows, gathered back into Arrow batches for the sink's one write path.

pyspark 4.0 has no Arrow stream writer (``DataSourceStreamArrowWriter`` came with 4.1): its worker turns each Arrow
batch from the JVM into Rows before a stream writer sees them. :func:`row_batches` collects those Rows into Arrow
record batches of at most ``max_rows`` rows, holding only the columns the sink reads, typed as the JVM's Arrow
handoff types them for the Arrow writers. ``write_partition`` then sends them with ``send_batch`` exactly as it
sends what 4.1+ hands over: never one producer call per row.

Values arrive as pyspark 4.0's ``ArrowTableToRowsConversion`` makes them: binary as ``bytearray``, structs as Rows
(tuples), timestamps as naive datetimes in the worker's local time zone, which are made UTC instants again here,
at any depth of an Avro column (a struct's field, an array's items, a map's values).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
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

from spark_kafka_sink.spark.schema import ColumnPlan

__all__ = ["row_batches", "MAX_ROWS_PER_BATCH"]

#: Spark's default spark.sql.execution.arrow.maxRecordsPerBatch: the batch size the Arrow writers get.
MAX_ROWS_PER_BATCH = 10_000


def _arrow_type(data_type: DataType) -> pa.DataType:
    """The Arrow type Spark hands the Arrow writers for one of the sink's column types (``plan_columns`` accepts
    no others). pyspark's own ``to_arrow_type`` changed its signature in 4.3, so the few types are stated here."""
    if isinstance(data_type, StringType):
        return pa.string()
    if isinstance(data_type, BinaryType):
        return pa.binary()
    if isinstance(data_type, IntegerType):
        return pa.int32()
    if isinstance(data_type, LongType):
        return pa.int64()
    if isinstance(data_type, TimestampType):
        return pa.timestamp("us", tz="UTC")  # Spark's timestamps: microseconds since the epoch, UTC
    if isinstance(data_type, ArrayType):
        return pa.list_(pa.field("element", _arrow_type(data_type.elementType)))  # the JVM names the item "element"
    if isinstance(data_type, StructType):
        return pa.struct([pa.field(f.name, _arrow_type(f.dataType)) for f in data_type.fields])
    raise TypeError(f"no Arrow type for {data_type.simpleString()}: not a type of the sink's columns")


def _utc(value: datetime | None) -> datetime | None:
    # astimezone() takes a naive datetime as local time: the inverse of pyspark 4.0's
    # value.astimezone().replace(tzinfo=None), except in the repeated hour of a DST change, which that drops.
    return None if value is None else value.astimezone(timezone.utc)


def _localized(data_type: DataType) -> Callable[[Any], Any] | None:
    """For a column of ``data_type`` (an Avro column may be any type): a function that makes every TimestampType
    value inside a pyspark 4.0 value UTC (:func:`_utc`), at any depth; None when the type holds none."""
    if isinstance(data_type, TimestampType):  # (TimestampNTZType is not one: it stays naive wall-clock time)
        return _utc
    if isinstance(data_type, ArrayType):
        item = _localized(data_type.elementType)
        return None if item is None else lambda v: None if v is None else [item(x) for x in v]
    if isinstance(data_type, MapType):
        key, value = _localized(data_type.keyType) or _same, _localized(data_type.valueType) or _same
        if key is _same and value is _same:
            return None
        return lambda v: None if v is None else {key(k): value(x) for k, x in v.items()}
    if isinstance(data_type, StructType):
        fields = [_localized(f.dataType) or _same for f in data_type.fields]
        if all(f is _same for f in fields):
            return None
        # A Row (a tuple) in field order: pyarrow takes a tuple for a struct
        return lambda v: None if v is None else tuple(f(x) for f, x in zip(fields, v, strict=True))
    return None


def _same(value: Any) -> Any:
    return value


def row_batches(rows: Iterable[Sequence[Any]], schema: StructType, plan: ColumnPlan,
                max_rows: int = MAX_ROWS_PER_BATCH) -> Iterator[pa.RecordBatch]:
    """Arrow batches of at most ``max_rows`` of ``rows`` (Rows of ``schema``, in its column order), with the
    columns ``plan`` reads; every other column is dropped, as the sink ignores it."""
    names = schema.fieldNames()
    wanted = [(names.index(name), schema[name].dataType) for name in plan.input_columns]
    # An Avro key or value column may be of any type: its serializer knows the Arrow type Spark hands over.
    typed = {serializer.column: serializer.avro.arrow_type for serializer in (plan.key_serializer,
             plan.value_serializer) if serializer is not None and serializer.avro is not None}
    arrow_schema = pa.schema([pa.field(name, typed.get(name) or _arrow_type(data_type)) for name, (_, data_type)
                              in zip(plan.input_columns, wanted, strict=True)])
    converters = [_localized(data_type) for _, data_type in wanted]
    rows = iter(rows)
    while chunk := list(itertools.islice(rows, max_rows)):
        arrays = []
        for (index, _), field, convert in zip(wanted, arrow_schema, converters, strict=True):
            values = [row[index] for row in chunk]
            if convert is not None:
                values = [convert(v) for v in values]
            arrays.append(pa.array(values, type=field.type))
        yield pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)
