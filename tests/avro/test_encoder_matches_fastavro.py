"""The vectorized Avro encoder against fastavro's ``schemaless_writer``, byte for byte: random Arrow types (the
Spark types, nested and nullable at every depth) with random rows, each encoded with the schema derived from its
type; then the conversions a given schema asks for."""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafka_sink.avro import AvroWriter, derive_schema, parse_schema
from spark_kafka_sink.errors import ConfigError, SerializationError

EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
NAMES = st.text("abcdefghij_", min_size=1, max_size=6)

LEAF_TYPES = st.one_of(
    st.sampled_from([pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.float32(), pa.float64(),
                     pa.string(), pa.large_string(), pa.binary(), pa.date32(), pa.timestamp("us", "UTC"),
                     pa.timestamp("us")]),
    st.integers(1, 38).flatmap(lambda p: st.integers(0, p).map(lambda s: pa.decimal128(p, s))),
)


def _struct(fields: list[tuple[str, pa.DataType, bool]]) -> pa.DataType:
    return pa.struct([pa.field(name, t, nullable) for name, t, nullable in fields])


def _fields(children: st.SearchStrategy[pa.DataType]) -> st.SearchStrategy[list[tuple[str, pa.DataType, bool]]]:
    return st.lists(st.tuples(NAMES, children, st.booleans()), min_size=1, max_size=4,
                    unique_by=lambda f: f[0])


TYPES = st.recursive(LEAF_TYPES, lambda children: st.one_of(
    st.tuples(children, st.booleans()).map(lambda c: pa.list_(pa.field("element", c[0], c[1]))),
    st.tuples(children, st.booleans()).map(lambda c: pa.map_(pa.string(), pa.field("value", c[0], c[1]))),
    _fields(children).map(_struct),
), max_leaves=10)
ROW_TYPES = _fields(TYPES).map(_struct)


def values_of(t: pa.DataType) -> st.SearchStrategy[Any]:
    """Python values of Arrow type ``t`` (not null: the caller adds nulls where the type is nullable)."""
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_integer(t):
        return st.integers(-(1 << (t.bit_width - 1)), (1 << (t.bit_width - 1)) - 1)
    if pa.types.is_float32(t):
        return st.floats(width=32, allow_nan=False)
    if pa.types.is_float64(t):
        return st.floats(allow_nan=False)
    # Short and long values: the encoder copies a long string (tens of bytes a row) another way than short ones.
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return st.text(max_size=20) | st.text(min_size=40, max_size=90)
    if pa.types.is_binary(t):
        return st.binary(max_size=20) | st.binary(min_size=40, max_size=90)
    if pa.types.is_date32(t):
        return st.integers(-100_000, 2_000_000).map(lambda d: datetime.date(1970, 1, 1) + datetime.timedelta(d))
    if pa.types.is_timestamp(t):
        return st.integers(-(1 << 55), 1 << 55)
    if pa.types.is_decimal(t):
        bound = 10**t.precision - 1
        return st.integers(-bound, bound).map(lambda u: decimal.Decimal(f"{u}E-{t.scale}"))  # exact
    if pa.types.is_list(t):
        return st.lists(nullable(values_of(t.value_type), t.value_field.nullable), max_size=4)
    if pa.types.is_map(t):
        return st.dictionaries(st.text(max_size=5), nullable(values_of(t.item_type), t.item_field.nullable),
                               max_size=3).map(lambda d: list(d.items()))
    if pa.types.is_struct(t):
        return st.fixed_dictionaries({f.name: nullable(values_of(f.type), f.nullable) for f in t})
    raise AssertionError(t)


def nullable(values: st.SearchStrategy[Any], is_nullable: bool) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values) if is_nullable else values


def datum(value: Any, t: pa.DataType) -> Any:
    """What fastavro is given for an Arrow value: maps as dicts, timestamps as epoch microseconds, dates as days."""
    if value is None:
        return None
    if pa.types.is_timestamp(t):
        aware = value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)
        return (aware - EPOCH) // datetime.timedelta(microseconds=1)
    if pa.types.is_date32(t):
        return (value - datetime.date(1970, 1, 1)).days
    if pa.types.is_list(t):
        return [datum(v, t.value_type) for v in value]
    if pa.types.is_map(t):
        return {k: datum(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {f.name: datum(value[f.name], f.type) for f in t}
    return value


def fastavro_bytes(schema: Any, value: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


@st.composite
def typed_rows(draw: st.DrawFn) -> tuple[pa.DataType, list[Any], int]:
    t = draw(ROW_TYPES)
    rows = draw(st.lists(values_of(t), min_size=1, max_size=6))
    return t, rows, draw(st.integers(0, len(rows) - 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed_rows())
def test_random_rows_of_random_types_encode_as_fastavro_does(case: tuple[pa.DataType, list[Any], int]) -> None:
    t, rows, skip = case
    array = pa.array(rows, t).slice(skip)  # a slice: the encoder must honour the array's offset
    schema = derive_schema(t, column="value")
    encoded = AvroWriter(t, parse_schema(schema), column="value").encode(array)
    expected = [fastavro_bytes(schema, datum(v, t)) for v in array.to_pylist()]
    assert encoded.to_pylist() == expected


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_a_column_of_any_type_encodes_as_fastavro_does(data: st.DataObject) -> None:
    t = data.draw(TYPES)
    rows = data.draw(st.lists(nullable(values_of(t), True), min_size=1, max_size=5))
    array = pa.array(rows, t)
    schema = derive_schema(t, column="key")
    encoded = AvroWriter(t, parse_schema(schema), column="key").encode(array, prefix=b"\x00\x00\x00\x00\x07")
    expected = [None if v is None else b"\x00\x00\x00\x00\x07" + fastavro_bytes(schema, datum(v, t))
                for v in array.to_pylist()]
    assert encoded.to_pylist() == expected  # a null row stays null: a tombstone, not an Avro value


LONG_TYPE = pa.struct([
    ("id", pa.int64()), ("payload", pa.binary()), ("note", pa.large_string()),
    ("blobs", pa.list_(pa.binary())), ("attrs", pa.map_(pa.string(), pa.string())), ("tail", pa.int32())])


@pytest.mark.parametrize("skip", [0, 3])
def test_long_values_everywhere_encode_as_fastavro_does(skip: int) -> None:
    """Long strings and bytes (joined by Arrow, not copied by index) at the top level, nullable, as list items and
    map values, in a slice, with a null row."""
    rows: list[Any] = [None if i == 5 else {
        "id": i, "payload": bytes([i]) * (60 + i), "note": None if i % 3 == 0 else "n" * (50 + i),
        "blobs": None if i == 4 else [b"b" * (70 + i), b"", b"c" * 100][: i % 4],
        "attrs": [("k", "v" * (80 + i)), ("long key " * 8, "")], "tail": -i} for i in range(12)]
    array = pa.array(rows, LONG_TYPE).slice(skip)
    schema = derive_schema(LONG_TYPE, column="value")
    encoded = AvroWriter(LONG_TYPE, parse_schema(schema), column="value").encode(array, prefix=b"\x00\x00\x00\x00\x01")
    assert encoded.to_pylist() == [None if v is None else b"\x00\x00\x00\x00\x01" + fastavro_bytes(
        schema, datum(v, LONG_TYPE)) for v in array.to_pylist()]


def test_the_derived_schema_is_spark_s_mapping_with_evolvable_nullable_fields() -> None:
    t = pa.struct([pa.field("id", pa.int64(), False), ("price", pa.decimal128(9, 2)),
                   ("tags", pa.list_(pa.field("element", pa.string(), False))),
                   pa.field("address", pa.struct([("zip", pa.string())]), False)])
    assert derive_schema(t, column="value") == {
        "type": "record", "name": "topLevelRecord", "fields": [
            {"name": "id", "type": "long"},
            {"name": "price", "type": ["null", {"type": "fixed", "name": "fixed", "namespace": "topLevelRecord.price",
                                                "size": 4, "logicalType": "decimal", "precision": 9, "scale": 2}],
             "default": None},
            {"name": "tags", "type": ["null", {"type": "array", "items": "string"}], "default": None},
            {"name": "address", "type": {"type": "record", "name": "address", "namespace": "topLevelRecord",
                                         "fields": [{"name": "zip", "type": ["null", "string"], "default": None}]}},
        ]}


GIVEN = {
    "type": "record", "name": "Order", "namespace": "shop", "fields": [
        {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID", "SENT"]}},
        {"name": "digest", "type": ["null", {"type": "fixed", "name": "Digest", "size": 4}], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3}},
        {"name": "big", "type": {"type": "fixed", "name": "Big", "size": 20, "logicalType": "decimal",
                                 "precision": 12, "scale": 3}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "count", "type": ["int", "long"]},
        {"name": "ratio", "type": "double"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ]}
GIVEN_TYPE = pa.struct([  # another order than the schema's, a float for the double, no column for "note"
    pa.field("at", pa.timestamp("us", "UTC"), False), pa.field("count", pa.int64(), False),
    ("status", pa.string()), ("digest", pa.binary()), ("amount", pa.decimal128(10, 2)),
    ("big", pa.decimal128(10, 2)), ("ratio", pa.float32())])


def test_a_given_schema_takes_spark_s_conversions_with_fields_matched_by_name() -> None:
    amounts = [decimal.Decimal("-1.28"), decimal.Decimal("12345678.99"), decimal.Decimal("0.00")]
    at = datetime.datetime(2026, 1, 2, 3, 4, 5, 678999, tzinfo=datetime.timezone.utc)
    rows: list[dict[str, Any]] = [{"at": at, "count": c, "status": s, "digest": d, "amount": a, "big": -a, "ratio": 0.5}
            for c, s, d, a in zip([7, 1 << 40, -(1 << 31)], ["NEW", "SENT", "PAID"], [b"abcd", None, b"\0\0\0\1"],
                                  amounts, strict=True)]
    array = pa.array(rows, GIVEN_TYPE)
    encoded = AvroWriter(GIVEN_TYPE, parse_schema(json.dumps(GIVEN)), column="value").encode(array)
    for row, body in zip(rows, encoded.to_pylist(), strict=True):
        expected = dict(row, at=(row["at"] - EPOCH) // datetime.timedelta(milliseconds=1),
                        amount=row["amount"].quantize(decimal.Decimal("0.001")),
                        big=row["big"].quantize(decimal.Decimal("0.001")), note=None)
        assert body == fastavro_bytes(GIVEN, expected)


def _writer(t: pa.DataType, schema: Any) -> AvroWriter:
    return AvroWriter(t, parse_schema(json.dumps(schema)), column="value")


@pytest.mark.parametrize(("field_type", "values", "message"), [
    ("string", ["a", None], r"column 'value.f', row 1: null, but the Avro type has no null branch"),
    ({"type": "enum", "name": "E", "symbols": ["A", "B"]}, ["A", "C"],
     r"column 'value.f', row 1: 'C' is not one of the enum's symbols \['A', 'B'\]"),
    ({"type": "fixed", "name": "F", "size": 2}, [b"ab", b"abc"],
     r"column 'value.f', row 1: not 2 bytes long, the size of its Avro fixed"),
    ({"type": "bytes", "logicalType": "decimal", "precision": 3, "scale": 1}, [decimal.Decimal("1.5"),
                                                                             decimal.Decimal("123.4")],
     r"column 'value.f', row 1: 123.4 does not fit decimal\(3, 1\)"),
])
def test_a_row_that_does_not_fit_the_given_schema_is_named(field_type: Any, values: list[Any], message: str) -> None:
    column = pa.array(values)
    t = pa.struct([("f", column.type)])
    writer = _writer(t, {"type": "record", "name": "R", "fields": [{"name": "f", "type": field_type}]})
    with pytest.raises(SerializationError, match=message):
        writer.encode(pa.StructArray.from_arrays([column], ["f"]))


def test_a_null_deep_in_a_list_names_the_input_row() -> None:
    t = pa.struct([("xs", pa.list_(pa.string()))])
    writer = _writer(t, {"type": "record", "name": "R", "fields": [{"name": "xs", "type": {"type": "array",
                                                                                           "items": "string"}}]})
    with pytest.raises(SerializationError, match=r"column 'value.xs.element', row 2: null"):
        writer.encode(pa.array([{"xs": ["a"]}, {"xs": []}, {"xs": ["b", None]}], t))


@pytest.mark.parametrize(("t", "message"), [
    (pa.struct([("m", pa.map_(pa.int32(), pa.string()))]),
     r"column 'value.m' is a map with int32 keys; Avro maps have string keys: cast the keys"),
    (pa.struct([("d", pa.duration("s"))]), r"column 'value.d' has type duration\[s\], which Avro cannot hold"),
    (pa.struct([("bad-name", pa.int32())]), r"column 'value.bad-name': 'bad-name' is not a valid Avro name"),
])
def test_a_type_avro_cannot_hold_is_refused_naming_the_column(t: pa.DataType, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        derive_schema(t, column="value")


@pytest.mark.parametrize(("t", "schema", "message"), [
    (pa.struct([("a", pa.int32()), ("b", pa.int32())]),
     {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]},
     r"column 'value': field 'b' is not in the Avro record 'R'"),
    (pa.struct([("a", pa.int32())]),
     {"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}, {"name": "c", "type": "string"}]},
     r"the Avro record 'R' needs a field 'c' that has no column"),
    (pa.struct([("a", pa.string())]),
     {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]},
     r"column 'value.a': string cannot be written as Avro long"),
])
def test_a_type_that_does_not_fit_the_given_schema_is_refused_up_front(t: pa.DataType, schema: Any,
                                                                      message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        _writer(t, schema)
