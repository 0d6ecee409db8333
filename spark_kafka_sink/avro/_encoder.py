"""Vectorized Arrow -> Avro binary encoder: numpy for the varints, the fixed-width values and the byte copies into
one output buffer, no per-row Python loop.

    writer = AvroWriter(arrow_type, schema, column="value")   # checks that the type fits the schema (driver side)
    writer.encode(array, prefix=b"") -> pa.Array              # binary: prefix + the Avro body of each row

How: every type's encoding is a list of *pieces* (``_layout``), each covering the rows of one level: a glue field
(varints or raw fixed-width bytes, ``protocol.varint_arrays``), a binary array whose rows are written as they are
(strings, bytes), or an array's (map's) items with their own pieces. A row's encoding is its pieces' bytes in
order; ``_layout.join`` sizes every piece per row, sums them to each row's place in one buffer and writes each
piece there. Each element carries a *present* mask: false where an enclosing union took another branch or an
enclosing value is null or absent, and then its pieces write nothing (a size of 0). Records add no piece of their
own, so a record of records is one flat list of pieces; an array or map is a count, its items (a row's items are
consecutive items) and a 0 count.

Encodings (Avro 1.11 binary): int and long zigzag varints; boolean one byte; float and double little-endian;
bytes and string a long length then the bytes; fixed its bytes; enum the symbol's index as an int; union the
branch index as a long then the value; record its fields in order; array and map one block (count as a long,
the items, each map item its key string then its value) then a 0 count, or just the 0 for no items: what
fastavro's ``schemaless_writer`` writes, byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.avro._layout import Bytes, Nested, Piece, is_long, join
from spark_kafka_sink.avro._schema import (
    Array,
    AvroSchema,
    AvroType,
    AvroUnion,
    Enum,
    Fixed,
    Map,
    Primitive,
    Record,
    decimal_fixed_size,
)
from spark_kafka_sink.errors import ConfigError, SerializationError
from spark_kafka_sink.protocol.murmur2 import binary_buffers
from spark_kafka_sink.protocol.varint_arrays import I64, GlueField, varint_sizes, zigzag, zigzag_positive

__all__ = ["AvroWriter"]

Mask = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]
# Maps an element index of a level to the input row it belongs to (for error messages only).
RowOf = Callable[[int], int]

_INT32_MIN, _INT32_MAX = -(1 << 31), (1 << 31) - 1


def _validity(arr: pa.Array) -> Mask:
    if arr.null_count == 0:
        return np.ones(len(arr), np.bool_)
    valid: Mask = arr.is_valid().to_numpy(zero_copy_only=False)
    return valid


def _raw_values(arr: pa.Array, dtype: type[np.generic]) -> npt.NDArray[np.generic]:
    """A fixed-width array's values buffer as numpy (zero-copy; a null slot holds whatever the buffer holds)."""
    size = np.dtype(dtype).itemsize
    if len(arr) == 0:
        return np.zeros(0, dtype)
    return np.frombuffer(arr.buffers()[1], dtype=dtype, count=len(arr), offset=arr.offset * size)


def _sized(present: Mask, width: int) -> I64:
    """``width`` bytes on the present rows, 0 on the others. (A broadcast view when every row is present: pieces'
    sizes and values are only read, never written.)"""
    if present.all():
        return np.broadcast_to(np.int64(width), present.shape)
    return np.where(present, np.int64(width), np.int64(0))


def _constant(value: int, present: Mask) -> GlueField:
    """The same long on every present row (a union's branch index)."""
    u = zigzag(np.array([value], np.int64))
    return np.broadcast_to(u, present.shape), _sized(present, int(varint_sizes(u)[0]))


def _varints(values: I64, present: Mask, *, nonnegative: bool = False) -> GlueField:
    u = zigzag_positive(values) if nonnegative else zigzag(values)
    sizes = varint_sizes(u)
    return u, sizes if present.all() else np.where(present, sizes, 0)


def _path_error(path: str, message: str) -> ConfigError:
    return ConfigError(f"column {path!r}: {message}", key=path)


class _Plan:
    """How one Arrow type is written as one Avro type; built once (the checks run there), then used per batch."""

    path: str

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        raise NotImplementedError

    def _row_error(self, present: Mask, bad: Mask, row_of: RowOf, what: str) -> SerializationError:
        i = int(np.flatnonzero(present & bad)[0])
        return SerializationError(f"column {self.path!r}, row {row_of(i)}: {what}")

    def _required(self, arr: pa.Array, present: Mask, row_of: RowOf) -> None:
        if arr.null_count and (present & ~_validity(arr)).any():
            raise self._row_error(present, ~_validity(arr), row_of,
                                  "null, but the Avro type has no null branch: fill the nulls or make the type a "
                                  "union with \"null\"")


@dataclass
class _Null(_Plan):
    path: str

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        return []


@dataclass
class _Boolean(_Plan):
    path: str

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        values = pc.fill_null(arr, False).to_numpy(zero_copy_only=False).astype(np.uint64)
        return [(values, _sized(present, 1))]


@dataclass
class _Integer(_Plan):
    """int or long from any integer, date or timestamp column; ``divide``/``multiply`` convert timestamp units."""

    path: str
    int32: bool
    divide: int = 1
    multiply: int = 1

    def values(self, arr: pa.Array) -> I64:
        if pa.types.is_timestamp(arr.type) or pa.types.is_date64(arr.type):
            values = _raw_values(arr, np.int64).astype(np.int64)
        elif pa.types.is_date32(arr.type):
            values = _raw_values(arr, np.int32).astype(np.int64)
        else:
            # The integer's own width and sign (not to_pandas_dtype, which needs pandas, absent on many executors)
            kind = "int" if pa.types.is_signed_integer(arr.type) else "uint"
            values = _raw_values(arr, np.dtype(f"{kind}{arr.type.bit_width}").type).astype(np.int64)
        if self.divide != 1:
            values = values // self.divide  # floor, as Spark's microsToMillis
        if self.multiply != 1:
            values = values * self.multiply
        return values

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        values = self.values(arr)
        if self.int32:
            out = (values < _INT32_MIN) | (values > _INT32_MAX)
            if (out & present).any():
                raise self._row_error(present, out, row_of, "out of the Avro int range: write it as a long")
        return [_varints(values, present)]


@dataclass
class _Floating(_Plan):
    path: str
    dtype: str  # "<f4" or "<f8"

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        values = _raw_values(arr, np.float32 if pa.types.is_float32(arr.type) else np.float64)
        width = np.dtype(self.dtype).itemsize
        raw = np.ascontiguousarray(values.astype(self.dtype)).view(np.uint8).reshape(len(arr), width)
        return [(raw, _sized(present, raw.shape[1]))]


def _lengths(arr: pa.Array) -> I64:
    offsets, _ = binary_buffers(arr)
    lengths: I64 = np.diff(offsets)
    return lengths


@dataclass
class _Binary(_Plan):
    """string or bytes: a length, then the bytes."""

    path: str

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        if pa.types.is_fixed_size_binary(arr.type):
            arr = arr.cast(pa.binary())
        data = Bytes(arr, present)
        return [_varints(data.sizes, present, nonnegative=True), data]  # sizes: the lengths (0 where absent)


@dataclass
class _FixedBytes(_Plan):
    path: str
    size: int

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        if pa.types.is_fixed_size_binary(arr.type):
            arr = arr.cast(pa.binary())
        wrong = _lengths(arr) != self.size
        if (wrong & present).any():
            raise self._row_error(present, wrong, row_of, f"not {self.size} bytes long, the size of its Avro fixed")
        return [Bytes(arr, present)]


@dataclass
class _EnumSymbols(_Plan):
    path: str
    symbols: tuple[str, ...]

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        index = pc.index_in(arr, value_set=pa.array(self.symbols, arr.type))
        unknown = ~_validity(index) & _validity(arr)
        if (unknown & present).any():
            i = int(np.flatnonzero(unknown & present)[0])
            raise SerializationError(f"column {self.path!r}, row {row_of(i)}: {arr[i].as_py()!r} is not one of the "
                                     f"enum's symbols {list(self.symbols)}")
        values = pc.fill_null(index, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        return [_varints(values, present)]


def _decimal_matrix(arr: pa.Array) -> U8:
    """Each decimal128's unscaled value as 16 big-endian two's-complement bytes, one row per value."""
    if len(arr) == 0:
        return np.zeros((0, 16), np.uint8)
    raw = np.frombuffer(arr.buffers()[1], np.uint8, count=16 * len(arr), offset=16 * arr.offset)
    big: U8 = raw.reshape(len(arr), 16)[:, ::-1]
    return big


@dataclass
class _Decimal(_Plan):
    """decimal128 to an Avro decimal: fixed (``size`` bytes) or bytes (``size`` 0: fastavro's length, the
    magnitude's bit length // 8 + 1 bytes)."""

    path: str
    precision: int
    scale: int
    size: int

    def _rescaled(self, arr: pa.Array, present: Mask, row_of: RowOf) -> pa.Array:
        target = pa.decimal128(self.precision, self.scale)
        if arr.type == target:
            return arr
        try:
            return arr.cast(target)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            for i, value in enumerate(arr.to_pylist()):  # the error path only: find the row to name
                if value is not None and present[i]:
                    try:
                        pa.array([value], arr.type).cast(target)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                        raise SerializationError(
                            f"column {self.path!r}, row {row_of(i)}: {value} does not fit decimal({self.precision}, "
                            f"{self.scale}) of the Avro schema") from None
            raise

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        big = _decimal_matrix(self._rescaled(arr, present, row_of))
        if self.size:
            if self.size > 16:  # sign-extended
                sign = np.where(big[:, :1] >= 0x80, 0xFF, 0).astype(np.uint8)
                big = np.concatenate([sign.repeat(self.size - 16, 1), big], axis=1)
            return [(np.ascontiguousarray(big[:, big.shape[1] - self.size:]), _sized(present, self.size))]
        negative = big[:, 0] >= 0x80
        magnitude = np.where(negative[:, None], ~big, big)  # |v| - 1 for negatives: fixed below where it matters
        # fastavro writes (bit_length(|v|) + 8) // 8 bytes. For negative v, |v| = ~v + 1: its bit length is that
        # of ~v except when ~v + 1 is a power of two (~v = 2^k - 1), whose bit length is one more.
        nonzero = magnitude != 0
        first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 16)  # index of the first nonzero byte
        top = magnitude[np.arange(len(arr)), np.minimum(first, 15)].astype(np.int64)
        bits = np.where(first < 16, (15 - first) * 8 + np.floor(np.log2(np.maximum(top, 1))).astype(np.int64) + 1, 0)
        low_ones = _all_ones_below(magnitude, first, top)
        bits = bits + (negative & low_ones)
        size = (bits + 8) // 8
        keep = np.arange(16)[None, :] >= (16 - size)[:, None]
        data = np.ascontiguousarray(big)[keep & present[:, None]]
        kept = np.where(present, size, 0)
        offsets = np.zeros(len(arr) + 1, np.int64)
        np.cumsum(kept, out=offsets[1:])
        body = pa.Array.from_buffers(pa.large_binary(), len(arr), [None, pa.py_buffer(offsets), pa.py_buffer(data)])
        return [_varints(size, present, nonnegative=True), Bytes(body, None)]


def _all_ones_below(magnitude: U8, first: I64, top: I64) -> Mask:
    """Rows whose value is 2^k - 1 (all ones from its top bit down, or 0): ~v for v = -2^k."""
    n = len(magnitude)
    if n == 0:
        return np.zeros(0, np.bool_)
    top_ones = (top & (top + 1)) == 0  # the first byte is 2^j - 1
    after = np.arange(16)[None, :] > first[:, None]
    rest_ones = ((magnitude == 0xFF) | ~after).all(axis=1)
    ones: Mask = top_ones & rest_ones
    return ones


@dataclass
class _UnionPlan(_Plan):
    """A union: nulls to its null branch, other rows to ``branches`` (the first whose range holds the row: an
    int branch before a long one takes the values that fit an int, as fastavro picks)."""

    path: str
    null_index: int | None
    branches: list[tuple[int, _Plan]]

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        if arr.null_count == 0 and len(self.branches) == 1:  # every row takes the one branch
            index, plan = self.branches[0]
            return [_constant(index, present), *plan.pieces(arr, present, row_of)]
        valid = _validity(arr)
        if self.null_index is None:
            self._required(arr, present, row_of)
        branch = np.full(len(arr), -1 if self.null_index is None else self.null_index, np.int64)
        chosen: list[tuple[_Plan, Mask]] = []
        left = valid.copy()
        for i, (index, plan) in enumerate(self.branches):
            take = left.copy()
            if isinstance(plan, _Integer) and plan.int32 and i + 1 < len(self.branches):
                values = plan.values(arr)
                take &= (values >= _INT32_MIN) & (values <= _INT32_MAX)
            branch[take] = index
            left &= ~take
            chosen.append((plan, present & take))
        pieces: list[Piece] = [_varints(branch, present)]
        for plan, mask in chosen:
            pieces += plan.pieces(arr, mask, row_of)
        return pieces


@dataclass
class _RecordPlan(_Plan):
    path: str
    fields: list[tuple[int | None, _Plan]]  # (the struct child's index, or None: the null branch written) ...

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        inner = present & _validity(arr) if arr.null_count else present
        pieces: list[Piece] = []
        for child, plan in self.fields:
            if child is None:
                pieces += plan.pieces(pa.nulls(len(arr)), inner, row_of)
            else:
                pieces += plan.pieces(arr.field(child), inner, row_of)
        return pieces


def _item_rows(offsets: I64, row_of: RowOf) -> RowOf:
    return lambda i: row_of(int(np.searchsorted(offsets, i, side="right")) - 1)


@dataclass
class _Repeated(_Plan):
    """An array (``key`` None) or a map (``key`` its string keys' plan): one block of items, then a 0 count."""

    path: str
    key: _Plan | None
    item: _Plan

    def pieces(self, arr: pa.Array, present: Mask, row_of: RowOf) -> list[Piece]:
        self._required(arr, present, row_of)
        inner = present & _validity(arr) if arr.null_count else present
        if pa.types.is_fixed_size_list(arr.type):
            width = arr.type.list_size
            offsets = (np.arange(len(arr) + 1, dtype=np.int64) + arr.offset) * width
        else:
            offsets = arr.offsets.to_numpy().astype(np.int64)
        # A slice's child arrays hold every row's items: only this slice's are encoded, offsets counted from them.
        first, count = int(offsets[0]), int(offsets[-1] - offsets[0])
        offsets = offsets - first
        values = (arr.items if self.key is not None else arr.values).slice(first, count)
        item_present = np.repeat(inner, np.diff(offsets))
        item_row = _item_rows(offsets, row_of)
        item_pieces = [] if self.key is None else self.key.pieces(arr.keys.slice(first, count), item_present, item_row)
        item_pieces += self.item.pieces(values, item_present, item_row)
        counts = np.where(inner, np.diff(offsets), 0)
        items: Piece
        if any(is_long(p) for p in item_pieces):
            # Long items are joined by Arrow (see _layout), then read as one binary piece per row.
            item_offsets, data = binary_buffers(join(item_pieces, count))
            row_offsets = item_offsets[offsets]
            items = Bytes(pa.Array.from_buffers(pa.large_binary(), len(arr), [None, pa.py_buffer(row_offsets),
                                                                              pa.py_buffer(data)]), None)
        else:
            items = Nested(item_pieces, offsets, count)
        return [_varints(counts, inner & (counts > 0), nonnegative=True), items, _constant(0, present)]


# ------------------------------------------------------------------------------------------------- planning


def _type_name(avro: AvroType) -> str:
    if isinstance(avro, Primitive):
        return avro.kind + (f" ({avro.logical})" if avro.logical else "")
    return type(avro).__name__.lower()


def _timestamp_plan(t: pa.DataType, avro: Primitive, path: str) -> _Plan:
    micros = {"s": (1, 1_000_000), "ms": (1, 1000), "us": (1, 1), "ns": (1000, 1)}[t.unit]
    if avro.logical in ("timestamp-millis", "local-timestamp-millis"):
        per_ms = {"s": (1, 1000), "ms": (1, 1), "us": (1000, 1), "ns": (1_000_000, 1)}[t.unit]
        return _Integer(path, False, *per_ms)
    return _Integer(path, False, *micros)


def _plan(t: pa.DataType, avro: AvroType, path: str) -> _Plan:
    if pa.types.is_dictionary(t):
        raise _path_error(path, "dictionary-encoded columns are not supported: decode them (cast to the value type)")
    if isinstance(avro, AvroUnion):
        null_index = avro.null_index
        branches: list[tuple[int, _Plan]] = []
        for index, branch in enumerate(avro.branches):
            if index == null_index:
                continue
            if branch == Primitive("int") and pa.types.is_integer(t) and not pa.types.is_uint64(t):
                branches.append((index, _Integer(path, True)))  # the rows that fit (see _UnionPlan)
                continue
            try:
                branches.append((index, _plan(t, branch, path)))
            except ConfigError:
                continue
        if not branches and not pa.types.is_null(t):
            raise _path_error(path, f"{t} fits no branch of the union "
                              f"[{', '.join(_type_name(b) for b in avro.branches)}]")
        return _UnionPlan(path, null_index, branches[:2] if _int_then_long(branches) else branches[:1])
    if pa.types.is_null(t):
        if avro == Primitive("null"):
            return _Null(path)
        raise _path_error(path, f"a column of nulls cannot be written as Avro {_type_name(avro)}")
    if isinstance(avro, Primitive):
        kind = avro.kind
        if kind == "boolean" and pa.types.is_boolean(t):
            return _Boolean(path)
        if kind in ("int", "long") and pa.types.is_integer(t) and not pa.types.is_uint64(t):
            narrow = t.bit_width <= 16 or (t.bit_width == 32 and pa.types.is_signed_integer(t))
            if kind == "long" or narrow:
                return _Integer(path, kind == "int")
        if kind == "int" and pa.types.is_date32(t):
            return _Integer(path, True)
        if kind == "int" and pa.types.is_date64(t):
            return _Integer(path, True, divide=86_400_000)
        if kind == "long" and pa.types.is_timestamp(t):
            return _timestamp_plan(t, avro, path)
        if kind == "float" and (pa.types.is_float32(t)):
            return _Floating(path, "<f4")
        if kind == "double" and (pa.types.is_float32(t) or pa.types.is_float64(t)):
            return _Floating(path, "<f8")
        if kind == "string" and (pa.types.is_string(t) or pa.types.is_large_string(t)):
            return _Binary(path)
        if kind == "bytes" and avro.logical == "decimal" and pa.types.is_decimal128(t):
            return _Decimal(path, avro.precision, avro.scale, 0)
        if kind == "bytes" and (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                                or pa.types.is_fixed_size_binary(t)):
            return _Binary(path)
    if isinstance(avro, Fixed):
        if avro.logical == "decimal" and pa.types.is_decimal128(t):
            if avro.size < decimal_fixed_size(avro.precision):
                raise _path_error(path, f"the Avro fixed {avro.name!r} of {avro.size} bytes cannot hold "
                                  f"decimal({avro.precision}, {avro.scale}): fix the schema")
            return _Decimal(path, avro.precision, avro.scale, avro.size)
        if avro.logical is None and (pa.types.is_binary(t) or pa.types.is_large_binary(t)
                                     or pa.types.is_fixed_size_binary(t)):
            return _FixedBytes(path, avro.size)
    if isinstance(avro, Enum) and (pa.types.is_string(t) or pa.types.is_large_string(t)):
        return _EnumSymbols(path, avro.symbols)
    if isinstance(avro, Array) and (pa.types.is_list(t) or pa.types.is_large_list(t)
                                    or pa.types.is_fixed_size_list(t)):
        return _Repeated(path, None, _plan(t.value_type, avro.items, f"{path}.element"))
    if isinstance(avro, Map) and pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise _path_error(path, f"a map with {t.key_type} keys: Avro maps have string keys; cast the keys")
        return _Repeated(path, _Binary(f"{path}.key"), _plan(t.item_type, avro.values, f"{path}.value"))
    if isinstance(avro, Record) and pa.types.is_struct(t):
        return _record_plan(t, avro, path)
    if pa.types.is_decimal256(t) or pa.types.is_uint64(t) or pa.types.is_float16(t):
        raise _path_error(path, f"{t} cannot be written as Avro: cast it to a narrower type")
    raise _path_error(path, f"{t} cannot be written as Avro {_type_name(avro)}: cast the column or change the schema")


def _int_then_long(branches: list[tuple[int, _Plan]]) -> bool:
    return (len(branches) >= 2 and isinstance(branches[0][1], _Integer) and branches[0][1].int32
            and isinstance(branches[1][1], _Integer) and not branches[1][1].int32)


def _record_plan(t: pa.StructType, avro: Record, path: str) -> _Plan:
    by_name = {t.field(i).name: i for i in range(t.num_fields)}
    wanted = {f.name for f in avro.fields}
    extra = [name for name in by_name if name not in wanted]
    if extra:
        raise _path_error(path, f"field {extra[0]!r} is not in the Avro record {avro.name!r} (its fields: "
                          f"{[f.name for f in avro.fields]}): drop the column or add the field to the schema")
    fields: list[tuple[int | None, _Plan]] = []
    for f in avro.fields:
        child = by_name.get(f.name)
        if child is None:
            if isinstance(f.type, AvroUnion) and f.type.null_index is not None and f.has_default \
                    and f.default is None:
                fields.append((None, _UnionPlan(f"{path}.{f.name}", f.type.null_index, [])))
                continue
            raise _path_error(path, f"the Avro record {avro.name!r} needs a field {f.name!r} that has no column "
                              "(and no null default): add the column")
        fields.append((child, _plan(t.field(child).type, f.type, f"{path}.{f.name}")))
    return _RecordPlan(path, fields)


class AvroWriter:
    """Writes the rows of one Arrow column as Avro binary with one schema. Checks on construction that every
    field of the type can be written with the schema (a ``ConfigError`` naming the field otherwise); a row that
    does not fit (a null in a required field, an unknown enum symbol, a decimal past its precision, a fixed of
    another size) raises ``SerializationError`` naming the column and row while encoding."""

    def __init__(self, arrow_type: pa.DataType, schema: AvroSchema, *, column: str) -> None:
        self.arrow_type = arrow_type
        self.schema = schema
        self.column = column
        # One plan per Arrow type met: Spark may hand the column with other string or list widths than expected.
        self._plans = {arrow_type: _plan(arrow_type, schema.root, column)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroWriter) and (self.schema.json, self.column, self.arrow_type) == (
            other.schema.json, other.column, other.arrow_type)

    def __hash__(self) -> int:
        return hash((self.schema.json, self.column))

    def __repr__(self) -> str:
        return f"AvroWriter(column={self.column!r}, schema={self.schema.json})"

    def encode(self, array: pa.Array | pa.ChunkedArray, *, prefix: bytes = b"") -> pa.Array:
        """A large_binary array: ``prefix`` then the Avro body, for each row; null where the row is null (at the
        top level a null is no Avro value: a Kafka tombstone)."""
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)
        plan = self._plans.get(array.type)
        if plan is None:
            plan = self._plans[array.type] = _plan(array.type, self.schema.root, self.column)
        n = len(array)
        present = _validity(array)
        pieces = plan.pieces(array, present, lambda i: i)
        if prefix:
            framing = np.broadcast_to(np.frombuffer(prefix, np.uint8), (n, len(prefix)))
            pieces.insert(0, (framing, _sized(present, len(prefix))))
        body = join(pieces, n)
        if array.null_count:
            return pa.Array.from_buffers(body.type, n, [array.is_valid().buffers()[1], *body.buffers()[1:]])
        return body

