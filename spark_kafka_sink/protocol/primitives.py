"""Kafka wire primitives: big-endian integers, varints, strings, bytes, arrays, UUIDs, tagged fields.

Pure and sans-IO. Everything the message codecs and the record layer build on.

Reading — ``Reader(data)`` over ``bytes`` / ``bytearray`` / ``memoryview``; every method consumes bytes at
``position`` and raises :class:`~spark_kafka_sink.errors.ProtocolError` on truncated or malformed input (it never
returns garbage and never reads past the end)::

    r = Reader(payload)
    r.int8() r.int16() r.int32() r.int64() r.uint16() r.uint32() r.boolean()
    r.uvarint()      # unsigned LEB128, at most 5 bytes (uint32)
    r.varint()       # zigzag int32, at most 5 bytes
    r.varlong()      # zigzag int64, at most 10 bytes
    r.string() r.nullable_string()                    # int16 length, UTF-8 (-1 = null)
    r.compact_string() r.compact_nullable_string()    # uvarint length + 1 (0 = null)
    r.bytes_() r.nullable_bytes()                     # int32 length (-1 = null)
    r.compact_bytes() r.compact_nullable_bytes()      # uvarint length + 1 (0 = null)
    r.uuid()                                          # 16 bytes -> uuid.UUID
    r.array(fn) r.compact_array(fn)                   # fn() reads one element; a null array -> None
    r.tagged_fields()                                 # -> {tag: raw bytes}; callers ignore unknown tags
    r.raw(n) r.skip(n) r.remaining() r.position r.expect_end()

Writing — module functions named like the reader methods with a ``write_`` prefix, each returning ``bytes``
(append them to a ``bytearray`` or ``b"".join`` them)::

    write_int8(v) write_int16(v) write_int32(v) write_int64(v) write_uint16(v) write_uint32(v) write_boolean(v)
    write_uvarint(v) write_varint(v) write_varlong(v)
    write_string(s) write_nullable_string(s) write_compact_string(s) write_compact_nullable_string(s)
    write_bytes(b) write_nullable_bytes(b) write_compact_bytes(b) write_compact_nullable_bytes(b)
    write_uuid(u)                                     # uuid.UUID or 16 bytes
    write_array(items, fn) write_compact_array(items, fn)   # fn(item) -> bytes; items None -> null array
    write_tagged_fields(fields=None)                  # {tag: raw bytes}; None/empty -> b"\\x00"

Sizes (for preallocation): ``uvarint_size(v)``, ``varint_size(v)``, ``varlong_size(v)``.
Writers raise ``ValueError`` for out-of-range values or a null where the format has none: that is local misuse.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from spark_kafka_sink.errors import ProtocolError

__all__ = [
    "Reader",
    "uvarint_size",
    "varint_size",
    "varlong_size",
    "zigzag32",
    "zigzag64",
    "write_int8",
    "write_int16",
    "write_int32",
    "write_int64",
    "write_uint16",
    "write_uint32",
    "write_boolean",
    "write_uvarint",
    "write_varint",
    "write_varlong",
    "write_string",
    "write_nullable_string",
    "write_compact_string",
    "write_compact_nullable_string",
    "write_bytes",
    "write_nullable_bytes",
    "write_compact_bytes",
    "write_compact_nullable_bytes",
    "write_uuid",
    "write_array",
    "write_compact_array",
    "write_tagged_fields",
]

T = TypeVar("T")

# Fixed-width formats, declared once. Kafka is big-endian throughout.
_I8 = struct.Struct(">b")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")

_MAX_UVARINT_BYTES = 5  # a uint32 needs at most ceil(32 / 7) groups
_MAX_UVARLONG_BYTES = 10  # a uint64 needs at most ceil(64 / 7) groups


# --------------------------------------------------------------------------------------------- varint helpers


def zigzag32(v: int) -> int:
    """Map a signed int32 to the unsigned value Kafka's varint encodes (0,-1,1,-2 -> 0,1,2,3)."""
    if not -(1 << 31) <= v < (1 << 31):
        raise ValueError(f"{v} does not fit a varint (int32)")
    return ((v << 1) ^ (v >> 31)) & 0xFFFFFFFF


def zigzag64(v: int) -> int:
    """Map a signed int64 to the unsigned value Kafka's varlong encodes."""
    if not -(1 << 63) <= v < (1 << 63):
        raise ValueError(f"{v} does not fit a varlong (int64)")
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


def _unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def _leb128(u: int) -> bytes:
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def _leb128_size(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def uvarint_size(v: int) -> int:
    """Bytes ``write_uvarint(v)`` produces."""
    return _leb128_size(v)


def varint_size(v: int) -> int:
    """Bytes ``write_varint(v)`` produces."""
    return _leb128_size(zigzag32(v))


def varlong_size(v: int) -> int:
    """Bytes ``write_varlong(v)`` produces."""
    return _leb128_size(zigzag64(v))


# ----------------------------------------------------------------------------------------- module writers


def _pack(fmt: struct.Struct, v: int, what: str) -> bytes:
    try:
        return fmt.pack(v)
    except struct.error:
        raise ValueError(f"{v!r} does not fit {what}") from None


def write_int8(v: int) -> bytes:
    return _pack(_I8, v, "int8")


def write_int16(v: int) -> bytes:
    return _pack(_I16, v, "int16")


def write_int32(v: int) -> bytes:
    return _pack(_I32, v, "int32")


def write_int64(v: int) -> bytes:
    return _pack(_I64, v, "int64")


def write_uint16(v: int) -> bytes:
    return _pack(_U16, v, "uint16")


def write_uint32(v: int) -> bytes:
    return _pack(_U32, v, "uint32")


def write_boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def write_uvarint(v: int) -> bytes:
    if not 0 <= v <= 0xFFFFFFFF:
        raise ValueError(f"{v} does not fit an unsigned varint (uint32)")
    return _leb128(v)


def write_varint(v: int) -> bytes:
    return _leb128(zigzag32(v))


def write_varlong(v: int) -> bytes:
    return _leb128(zigzag64(v))


def _utf8(v: str) -> bytes:
    return v.encode("utf-8")


def write_string(v: str) -> bytes:
    data = _utf8(v)
    return write_int16(len(data)) + data


def write_nullable_string(v: str | None) -> bytes:
    return b"\xff\xff" if v is None else write_string(v)


def write_compact_string(v: str) -> bytes:
    data = _utf8(v)
    return write_uvarint(len(data) + 1) + data


def write_compact_nullable_string(v: str | None) -> bytes:
    return b"\x00" if v is None else write_compact_string(v)


def write_bytes(v: bytes | bytearray | memoryview) -> bytes:
    return write_int32(len(v)) + bytes(v)


def write_nullable_bytes(v: bytes | bytearray | memoryview | None) -> bytes:
    return b"\xff\xff\xff\xff" if v is None else write_bytes(v)


def write_compact_bytes(v: bytes | bytearray | memoryview) -> bytes:
    return write_uvarint(len(v) + 1) + bytes(v)


def write_compact_nullable_bytes(v: bytes | bytearray | memoryview | None) -> bytes:
    return b"\x00" if v is None else write_compact_bytes(v)


def write_uuid(v: _uuid.UUID | bytes) -> bytes:
    raw = v.bytes if isinstance(v, _uuid.UUID) else bytes(v)
    if len(raw) != 16:
        raise ValueError(f"a UUID is 16 bytes, got {len(raw)}")
    return raw


def write_array(items: Sequence[T] | None, fn: Callable[[T], bytes]) -> bytes:
    """int32 count (-1 = null), then ``fn(item)`` for each item."""
    if items is None:
        return b"\xff\xff\xff\xff"
    return write_int32(len(items)) + b"".join(fn(item) for item in items)


def write_compact_array(items: Sequence[T] | None, fn: Callable[[T], bytes]) -> bytes:
    """uvarint count + 1 (0 = null), then ``fn(item)`` for each item."""
    if items is None:
        return b"\x00"
    return write_uvarint(len(items) + 1) + b"".join(fn(item) for item in items)


def write_tagged_fields(fields: Mapping[int, bytes] | None = None) -> bytes:
    """A tagged-field section: uvarint count, then (uvarint tag, uvarint size, data) in ascending tag order."""
    if not fields:
        return b"\x00"
    out = bytearray(write_uvarint(len(fields)))
    for tag in sorted(fields):
        data = fields[tag]
        out += write_uvarint(tag) + write_uvarint(len(data)) + data
    return bytes(out)


# ----------------------------------------------------------------------------------------------- Reader


class Reader:
    """Consumes primitives from ``data`` starting at ``offset``; raises ProtocolError instead of over-reading."""

    __slots__ = ("_data", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        self._data = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
        self._end = len(self._data)
        if not 0 <= offset <= self._end:
            raise ValueError(f"offset {offset} outside 0..{self._end}")
        self._pos = offset

    @property
    def position(self) -> int:
        return self._pos

    def remaining(self) -> int:
        return self._end - self._pos

    def expect_end(self) -> None:
        """Raise ProtocolError if unread bytes remain (a message must be consumed exactly)."""
        if self._pos != self._end:
            raise ProtocolError(f"{self._end - self._pos} unexpected trailing bytes at offset {self._pos}")

    def _take(self, n: int) -> memoryview:
        start = self._pos
        if n < 0:
            raise ProtocolError(f"negative length {n} at offset {start}")
        if n > self._end - start:
            raise ProtocolError(f"truncated: need {n} bytes at offset {start}, only {self._end - start} left")
        self._pos = start + n
        return self._data[start : start + n]

    def raw(self, n: int) -> bytes:
        return bytes(self._take(n))

    def raw_view(self, n: int) -> memoryview:
        """Like ``raw`` but without copying (the view keeps ``data`` alive)."""
        return self._take(n)

    def skip(self, n: int) -> None:
        self._take(n)

    def _fixed(self, fmt: struct.Struct) -> int:
        start = self._pos
        if fmt.size > self._end - start:
            raise ProtocolError(
                f"truncated: need {fmt.size} bytes at offset {start}, only {self._end - start} left"
            )
        self._pos = start + fmt.size
        value: int = fmt.unpack_from(self._data, start)[0]
        return value

    def int8(self) -> int:
        return self._fixed(_I8)

    def int16(self) -> int:
        return self._fixed(_I16)

    def int32(self) -> int:
        return self._fixed(_I32)

    def int64(self) -> int:
        return self._fixed(_I64)

    def uint16(self) -> int:
        return self._fixed(_U16)

    def uint32(self) -> int:
        return self._fixed(_U32)

    def boolean(self) -> bool:
        b = self.int8()
        if b not in (0, 1):
            raise ProtocolError(f"boolean byte {b} at offset {self._pos - 1} is neither 0 nor 1")
        return b == 1

    def _leb128(self, max_bytes: int, limit: int, what: str) -> int:
        start = self._pos
        data, end = self._data, self._end
        pos, shift, value = start, 0, 0
        while True:
            if pos >= end:
                raise ProtocolError(f"truncated {what} at offset {start}")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if pos - start >= max_bytes:
                raise ProtocolError(f"{what} at offset {start} is longer than {max_bytes} bytes")
        if value > limit:
            raise ProtocolError(f"{what} at offset {start} overflows")
        self._pos = pos
        return value

    def uvarint(self) -> int:
        return self._leb128(_MAX_UVARINT_BYTES, 0xFFFFFFFF, "unsigned varint")

    def varint(self) -> int:
        return _unzigzag(self._leb128(_MAX_UVARINT_BYTES, 0xFFFFFFFF, "varint"))

    def varlong(self) -> int:
        return _unzigzag(self._leb128(_MAX_UVARLONG_BYTES, 0xFFFFFFFFFFFFFFFF, "varlong"))

    def _text(self, n: int) -> str:
        start = self._pos
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string at offset {start} is not valid UTF-8: {exc.reason}") from None

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._text(n)

    def string(self) -> str:
        start = self._pos
        s = self.nullable_string()
        if s is None:
            raise ProtocolError(f"null where a string is required at offset {start}")
        return s

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    def compact_string(self) -> str:
        start = self._pos
        s = self.compact_nullable_string()
        if s is None:
            raise ProtocolError(f"null where a compact string is required at offset {start}")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else self.raw(n)

    def bytes_(self) -> bytes:
        start = self._pos
        b = self.nullable_bytes()
        if b is None:
            raise ProtocolError(f"null where bytes are required at offset {start}")
        return b

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1)

    def compact_bytes(self) -> bytes:
        start = self._pos
        b = self.compact_nullable_bytes()
        if b is None:
            raise ProtocolError(f"null where compact bytes are required at offset {start}")
        return b

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=self.raw(16))

    def _elements(self, count: int, fn: Callable[[], T]) -> list[T]:
        # Every element takes at least one byte, so a count beyond the remaining bytes is malformed: refusing it
        # here stops a corrupt count from looping (or allocating) for a long time.
        if count > self.remaining():
            raise ProtocolError(f"array of {count} elements cannot fit in {self.remaining()} bytes")
        return [fn() for _ in range(count)]

    def array(self, fn: Callable[[], T]) -> list[T] | None:
        """int32 count (-1 = null) then ``count`` calls of ``fn``, which reads one element from this reader."""
        start = self._pos
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative array length {n} at offset {start}")
        return self._elements(n, fn)

    def compact_array(self, fn: Callable[[], T]) -> list[T] | None:
        """uvarint count + 1 (0 = null) then the elements."""
        n = self.uvarint()
        return None if n == 0 else self._elements(n - 1, fn)

    def tagged_fields(self) -> dict[int, bytes]:
        """Read a tagged-field section; returns {tag: raw bytes}. Unknown tags are simply left unused."""
        count = self.uvarint()
        if count > self.remaining():
            raise ProtocolError(f"{count} tagged fields cannot fit in {self.remaining()} bytes")
        fields: dict[int, bytes] = {}
        for _ in range(count):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields
