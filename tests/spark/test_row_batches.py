"""pyspark 4.0's streaming Rows gathered back into Arrow: the batch Spark's Arrow handoff would have given.

The Rows are built as pyspark 4.0's worker builds them (``ArrowTableToRowsConversion``): binary as bytearray,
structs as Rows, timestamps as naive datetimes in the worker's local time zone (a non-UTC zone here, in summer and
in winter time). That conversion drops the DST fold, so the repeated hour of a fall-back night cannot be told apart
(README "Versions").
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import Row
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

from spark_kafka_sink.spark.row_batches import row_batches
from spark_kafka_sink.spark.schema import plan_columns, to_producer_batch


def struct(**fields: DataType) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in fields.items()])


SCHEMA = struct(value=BinaryType(), key=StringType(), topic=StringType(), partition=IntegerType(),
                headers=ArrayType(struct(key=StringType(), value=BinaryType())), ts=TimestampType(),
                ignored=MapType(StringType(), IntegerType()))
HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
SparkRow = Row(*SCHEMA.fieldNames())


@pytest.fixture
def new_york() -> Iterator[None]:
    """The process's local time zone is America/New_York (UTC-4 in summer, UTC-5 in winter)."""
    before = os.environ.get("TZ")
    os.environ["TZ"] = "America/New_York"
    time.tzset()
    try:
        yield
    finally:
        if before is None:
            del os.environ["TZ"]
        else:
            os.environ["TZ"] = before
        time.tzset()


def as_pyspark_40_hands_it(instant: datetime | None) -> datetime | None:
    """A TimestampType value as pyspark 4.0's row conversion gives it: naive local time."""
    return None if instant is None else instant.astimezone().replace(tzinfo=None)


def utc(year: int, month: int, day: int, hour: int, minute: int) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=timezone.utc)


def test_rows_become_the_arrow_batch_of_the_sinks_columns(new_york: None) -> None:
    instants = [utc(2024, 7, 1, 12, 30), utc(2024, 1, 15, 12, 30), None]  # 08:30 and 07:30 in New York
    rows = [
        SparkRow(bytearray(b"v0"), "k0", "t", 0, [Row(key="h", value=bytearray(b"x"))],
                 as_pyspark_40_hands_it(instants[0]), {"a": 1}),
        SparkRow(None, None, "t", None, [], as_pyspark_40_hands_it(instants[1]), None),
        SparkRow(bytearray(), "k2", "u", 2, None, as_pyspark_40_hands_it(instants[2]), {}),
    ]
    plan = plan_columns(SCHEMA, topic_option=None, timestamp_column="ts")

    [batch] = list(row_batches(rows, SCHEMA, plan))

    expected = pa.RecordBatch.from_arrays([
        pa.array([b"v0", None, b""], pa.binary()),
        pa.array(["k0", None, "k2"], pa.string()),
        pa.array(["t", "t", "u"], pa.string()),
        pa.array([0, None, 2], pa.int32()),
        pa.array([[{"key": "h", "value": b"x"}], [], None], HEADERS_TYPE),
        pa.array([1719837000000000, 1705321800000000, None], pa.timestamp("us", tz="UTC")),
    ], names=["value", "key", "topic", "partition", "headers", "ts"])
    assert batch.schema == expected.schema
    assert batch.equals(expected)
    # The producer's input: timestamps in epoch milliseconds.
    records = to_producer_batch(batch, plan, lambda topic, needed: 3)
    assert records.column("timestamp").to_pylist() == [1719837000000, 1705321800000, None]


def test_only_the_sinks_columns_are_kept_with_sparks_arrow_types() -> None:
    schema = struct(id=LongType(), value=StringType(), extra=ArrayType(IntegerType()))
    plan = plan_columns(schema, topic_option="t")
    [batch] = list(row_batches([Row("id", "value", "extra")(1, "a", [1])], schema, plan))
    assert batch.schema == pa.schema([("value", pa.string())])
    assert batch.column(0).to_pylist() == ["a"]


def test_all_null_columns_keep_their_types() -> None:
    # Inferring types from values would give Arrow's null type here; the schema gives binary and string.
    schema = struct(value=BinaryType(), key=StringType())
    plan = plan_columns(schema, topic_option="t")
    [batch] = list(row_batches([Row("value", "key")(None, None)] * 2, schema, plan))
    assert batch.schema == pa.schema([("value", pa.binary()), ("key", pa.string())])
    assert batch.num_rows == 2 and batch.column(0).null_count == 2


def test_rows_are_batched_up_to_max_rows() -> None:
    schema = struct(value=StringType())
    plan = plan_columns(schema, topic_option="t")
    rows: list[Any] = [Row("value")(str(i)) for i in range(25)]
    batches = list(row_batches(iter(rows), schema, plan, max_rows=10))
    assert [b.num_rows for b in batches] == [10, 10, 5]
    assert [v for b in batches for v in b.column(0).to_pylist()] == [str(i) for i in range(25)]
    assert list(row_batches(iter([]), schema, plan)) == []


def test_an_avro_value_of_any_type_gets_its_serializer_s_arrow_type() -> None:
    """valueFormat=avro: the value column may be any Spark type; pyspark 4.0 hands it as nested Rows, dicts and
    Decimals, gathered with the Arrow type the serializer was planned for."""
    import dataclasses
    import decimal

    from spark_kafka_sink.avro import AvroWriter, derive_schema, parse_schema
    from spark_kafka_sink.spark.options import RecordFormat
    from spark_kafka_sink.spark.record_schemas import ColumnSerializer

    value_type = pa.struct([("id", pa.int64()), ("price", pa.decimal128(9, 2)),
                            ("attrs", pa.map_(pa.string(), pa.int32())),
                            ("address", pa.struct([("zip", pa.int32())]))])
    writer = AvroWriter(value_type, parse_schema(derive_schema(value_type, column="value")), column="value")
    serializer = ColumnSerializer("value", RecordFormat.AVRO, "t-value", 7, b"\0\0\0\0\7", writer)
    from pyspark.sql.types import DecimalType

    schema = struct(value=struct(id=LongType(), price=DecimalType(9, 2), attrs=MapType(StringType(), IntegerType()),
                                 address=struct(zip=IntegerType())))
    plan = dataclasses.replace(plan_columns(schema, "t", None, frozenset({"value"})), value_serializer=serializer)
    rows = [Row(value=Row(id=1, price=decimal.Decimal("2.50"), attrs={"k": 3}, address=Row(zip=1234))),
            Row(value=None)]
    (batch,) = row_batches(rows, schema, plan)
    assert batch.column("value").type == value_type
    records = to_producer_batch(batch, plan, lambda topic, needed: 1)
    expected = writer.encode(pa.array([{"id": 1, "price": decimal.Decimal("2.50"), "attrs": [("k", 3)],
                                        "address": {"zip": 1234}}, None], value_type), prefix=b"\0\0\0\0\7")
    assert records.column("value").to_pylist() == expected.to_pylist()


def test_timestamps_nested_in_an_avro_value_are_made_utc_at_any_depth(new_york: None) -> None:
    """A struct's field, an array's items, a map's values and a nested struct's field: each TimestampType value
    arrives as naive New York time and is written as its UTC instant; a TimestampNTZType value stays as it is."""
    import dataclasses

    from pyspark.sql.types import TimestampNTZType

    from spark_kafka_sink.avro import AvroWriter, derive_schema, parse_schema
    from spark_kafka_sink.spark.options import RecordFormat
    from spark_kafka_sink.spark.record_schemas import ColumnSerializer

    utc_us = pa.timestamp("us", tz="UTC")
    value_type = pa.struct([("at", utc_us), ("local", pa.timestamp("us")), ("times", pa.list_(utc_us)),
                            ("by", pa.map_(pa.string(), utc_us)), ("inner", pa.struct([("when", utc_us)]))])
    writer = AvroWriter(value_type, parse_schema(derive_schema(value_type, column="value")), column="value")
    serializer = ColumnSerializer("value", RecordFormat.AVRO, "t-value", 7, b"\0\0\0\0\7", writer)
    schema = struct(value=struct(at=TimestampType(), local=TimestampNTZType(), times=ArrayType(TimestampType()),
                                 by=MapType(StringType(), TimestampType()), inner=struct(when=TimestampType())))
    plan = dataclasses.replace(plan_columns(schema, "t", None, frozenset({"value"})), value_serializer=serializer)
    summer, winter = utc(2024, 7, 1, 12, 30), utc(2024, 1, 15, 12, 30)
    wall = datetime(2024, 7, 1, 12, 30)  # timestamp_ntz: wall-clock time, no zone
    local = as_pyspark_40_hands_it
    rows = [Row(value=Row(at=local(summer), local=wall, times=[local(winter), None], by={"s": local(summer)},
                          inner=Row(when=local(winter)))),
            Row(value=Row(at=None, local=None, times=None, by=None, inner=None)), Row(value=None)]

    (batch,) = row_batches(rows, schema, plan)

    expected = pa.array([{"at": summer, "local": wall, "times": [winter, None], "by": [("s", summer)],
                          "inner": {"when": winter}},
                         {"at": None, "local": None, "times": None, "by": None, "inner": None}, None], value_type)
    assert batch.column("value").equals(expected), batch.column("value").to_pylist()
    records = to_producer_batch(batch, plan, lambda topic, needed: 1)
    assert records.column("value").to_pylist() == writer.encode(expected, prefix=b"\0\0\0\0\7").to_pylist()
