"""Writing Kafka wire primitives: one ``write_*`` function per type, each returning ``bytes``. Pure.

Named like the ``Reader`` methods. They raise ``ValueError`` for out-of-range values or a null where the format
has none: that is local misuse.
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

from spark_kafka_sink.protocol.primitives._formats import (
    INT8,
    INT16,
    INT32,
    INT64,
    UINT16,
    UINT32,
    leb128,
    zigzag32,
    zigzag64,
)

__all__ = [
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


def _pack(fmt: struct.Struct, v: int, what: str) -> bytes:
    try:
        return fmt.pack(v)
    except struct.error:
        raise ValueError(f"{v!r} does not fit {what}") from None


def write_int8(v: int) -> bytes:
    return _pack(INT8, v, "int8")


def write_int16(v: int) -> bytes:
    return _pack(INT16, v, "int16")


def write_int32(v: int) -> bytes:
    return _pack(INT32, v, "int32")


def write_int64(v: int) -> bytes:
    return _pack(INT64, v, "int64")


def write_uint16(v: int) -> bytes:
    return _pack(UINT16, v, "uint16")


def write_uint32(v: int) -> bytes:
    return _pack(UINT32, v, "uint32")


def write_boolean(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def write_uvarint(v: int) -> bytes:
    if not 0 <= v <= 0xFFFFFFFF:
        raise ValueError(f"{v} does not fit an unsigned varint (uint32)")
    return leb128(v)


def write_varint(v: int) -> bytes:
    return leb128(zigzag32(v))


def write_varlong(v: int) -> bytes:
    return leb128(zigzag64(v))


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
