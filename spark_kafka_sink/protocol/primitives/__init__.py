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

from spark_kafka_sink.protocol.primitives._formats import uvarint_size, varint_size, varlong_size, zigzag32, zigzag64
from spark_kafka_sink.protocol.primitives._reader import Reader
from spark_kafka_sink.protocol.primitives._writers import (
    write_array,
    write_boolean,
    write_bytes,
    write_compact_array,
    write_compact_bytes,
    write_compact_nullable_bytes,
    write_compact_nullable_string,
    write_compact_string,
    write_int8,
    write_int16,
    write_int32,
    write_int64,
    write_nullable_bytes,
    write_nullable_string,
    write_string,
    write_tagged_fields,
    write_uint16,
    write_uint32,
    write_uuid,
    write_uvarint,
    write_varint,
    write_varlong,
)

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
