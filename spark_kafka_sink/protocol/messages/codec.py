"""The one generic encoder/decoder for every schema in this package.

Layout rules (Kafka's, for a given version):

* a field outside its ``versions`` is not on the wire; readers fill in its default;
* classic versions: int16-length strings, int32-length bytes/records/arrays, -1 length = null;
* flexible versions: "compact" lengths as uvarint (length + 1, 0 = null) and, after the last field of every
  struct (the body included), a tagged-field section: uvarint count, then per field uvarint tag, uvarint size,
  value -- in ascending tag order. A tagged field is only sent when it differs from its default; readers skip
  tags they do not know, which is how brokers add fields without breaking old clients.

Encoding is strict, because a silently dropped field is a wrong request: unknown keys, a missing field without a
default, a null where the version has none, or a non-default value for a field the version cannot carry
(unless the schema marks it ignorable) all raise. Local misuse raises ``ValueError``; a field the chosen version
cannot carry raises :class:`~spark_kafka_sink.errors.UnsupportedVersionError`. Decoding raises
:class:`~spark_kafka_sink.errors.ProtocolError` on truncated or malformed bytes.
"""

from __future__ import annotations

import struct
import uuid
from collections.abc import Mapping
from typing import Any

from spark_kafka_sink.errors import ProtocolError, UnsupportedVersionError
from spark_kafka_sink.protocol.messages.schema import MISSING, Field, Schema
from spark_kafka_sink.protocol.primitives import (
    Reader,
    write_int16,
    write_int32,
    write_uuid,
    write_uvarint,
)

__all__ = ["encode_struct", "write_struct", "decode_struct", "read_struct"]

# Fixed-width types: (struct format, size). Strings, bytes and arrays are handled separately.
_FIXED: dict[str, struct.Struct] = {
    "bool": struct.Struct(">?"),
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "uint16": struct.Struct(">H"),
    "int32": struct.Struct(">i"),
    "uint32": struct.Struct(">I"),
    "int64": struct.Struct(">q"),
    "float64": struct.Struct(">d"),
}
_INT_TYPES = frozenset(("int8", "int16", "uint16", "int32", "uint32", "int64"))


# ------------------------------------------------------------------------------------------------ encoding


def encode_struct(schema: Schema, version: int, flexible: bool, value: Mapping[str, Any], path: str = "") -> bytes:
    """Encode ``value`` (a dict keyed by field name) as ``schema`` at ``version``."""
    buf = bytearray()
    write_struct(buf, schema, version, flexible, value, path)
    return bytes(buf)


def write_struct(
    buf: bytearray, schema: Schema, version: int, flexible: bool, value: Mapping[str, Any], path: str = ""
) -> None:
    """Append ``value`` encoded as ``schema`` to ``buf`` (one growing buffer avoids copying large records)."""
    if not isinstance(value, Mapping):
        raise ValueError(f"{path or 'body'}: expected a dict, got {type(value).__name__}")
    known = {f.name for f in schema}
    unknown = [k for k in value if k not in known]
    if unknown:
        raise ValueError(f"{path or 'body'}: unknown field(s) {sorted(unknown)}; expected some of {sorted(known)}")
    tagged: list[tuple[int, bytes]] = []
    for f in schema:
        where = f"{path}.{f.name}" if path else f.name
        v = value.get(f.name, MISSING)
        if flexible and f.tag is not None and version in f.tagged:
            # Tagged: optional by nature, and only sent when it differs from its default.
            if v is not MISSING and v != f.implicit_default():
                sub = bytearray()
                _write_value(sub, f, v, version, flexible, where)
                tagged.append((f.tag, bytes(sub)))
            continue
        if version not in f.versions:
            if v is not MISSING and not f.ignorable and v != f.implicit_default():
                raise UnsupportedVersionError(
                    f"{where}={v!r} cannot be sent at version {version} (the field exists in versions {f.versions})"
                )
            continue
        if v is MISSING:
            if f.default is MISSING:
                raise ValueError(f"{where}: required at version {version} and has no default")
            v = f.default
        _write_value(buf, f, v, version, flexible, where)
    if flexible:
        buf += write_uvarint(len(tagged))
        for tag, data in sorted(tagged):
            buf += write_uvarint(tag)
            buf += write_uvarint(len(data))
            buf += data


def _write_length(buf: bytearray, n: int, flexible: bool, wide: bool) -> None:
    # Classic: int16 for strings, int32 for bytes/arrays. Compact: uvarint of n + 1 (so 0 can mean null).
    if flexible:
        buf += write_uvarint(n + 1)
    elif wide:
        buf += write_int32(n)
    else:
        buf += write_int16(n)


def _write_null(buf: bytearray, f: Field, version: int, flexible: bool, where: str) -> None:
    if version not in f.nullable:
        raise ValueError(f"{where}: null is not allowed at version {version}")
    if flexible:
        buf += b"\x00"
    elif f.is_array or f.type in ("bytes", "records"):
        buf += b"\xff\xff\xff\xff"
    else:
        buf += b"\xff\xff"


def _write_value(buf: bytearray, f: Field, v: Any, version: int, flexible: bool, where: str) -> None:
    if v is None:
        _write_null(buf, f, version, flexible, where)
        return
    if f.is_array:
        if isinstance(v, (str, bytes, bytearray, Mapping)):
            raise ValueError(f"{where}: expected a list, got {type(v).__name__}")
        items = list(v)
        _write_length(buf, len(items), flexible, wide=True)
        elem_type = f.element_type
        for i, item in enumerate(items):
            if elem_type == "struct":
                write_struct(buf, f.fields, version, flexible, item, f"{where}[{i}]")
            else:
                _write_scalar(buf, elem_type, item, flexible, f"{where}[{i}]")
        return
    if f.type == "struct":
        write_struct(buf, f.fields, version, flexible, v, where)
        return
    _write_scalar(buf, f.type, v, flexible, where)


def _write_scalar(buf: bytearray, type_: str, v: Any, flexible: bool, where: str) -> None:
    fmt = _FIXED.get(type_)
    if fmt is not None:
        # bool is an int subclass: refuse it for integer fields (and ints for bool) so mix-ups surface.
        if type_ == "bool" and not isinstance(v, bool):
            raise ValueError(f"{where}: expected a bool, got {v!r}")
        if type_ in _INT_TYPES and (not isinstance(v, int) or isinstance(v, bool)):
            raise ValueError(f"{where}: expected an int, got {v!r}")
        try:
            buf += fmt.pack(v)
        except struct.error:
            raise ValueError(f"{where}: {v!r} does not fit {type_}") from None
        return
    if type_ == "uuid":
        try:
            buf += write_uuid(v)
        except (ValueError, TypeError, AttributeError) as exc:
            raise ValueError(f"{where}: {exc}") from None
        return
    if type_ == "string":
        if not isinstance(v, str):
            raise ValueError(f"{where}: expected a str, got {type(v).__name__}")
        data = v.encode("utf-8")
        if not flexible and len(data) > 0x7FFF:
            raise ValueError(f"{where}: {len(data)} bytes do not fit an int16-length string")
        _write_length(buf, len(data), flexible, wide=False)
        buf += data
        return
    # bytes and records: raw bytes, copied once into the buffer. Records may come in pieces (a tuple of buffers).
    if type_ == "records" and type(v) is tuple:
        v = b"".join(v)
    if not isinstance(v, (bytes, bytearray, memoryview)):
        raise ValueError(f"{where}: expected bytes, got {type(v).__name__}")
    _write_length(buf, len(v) if not isinstance(v, memoryview) else v.nbytes, flexible, wide=True)
    buf += v


# ------------------------------------------------------------------------------------------------ decoding


def decode_struct(
    schema: Schema, version: int, flexible: bool, data: bytes | bytearray | memoryview
) -> dict[str, Any]:
    """Decode exactly ``data`` as ``schema``; trailing bytes are an error."""
    reader = Reader(data)
    result = read_struct(reader, schema, version, flexible)
    reader.expect_end()
    return result


def read_struct(reader: Reader, schema: Schema, version: int, flexible: bool) -> dict[str, Any]:
    """Read one struct; every declared field appears in the result (absent ones with their default)."""
    result: dict[str, Any] = {}
    tagged_fields: dict[int, Field] = {}
    for f in schema:
        if flexible and f.tag is not None and version in f.tagged:
            tagged_fields[f.tag] = f
            result[f.name] = f.implicit_default()
        elif version in f.versions:
            result[f.name] = _read_value(reader, f, version, flexible)
        else:
            result[f.name] = f.implicit_default()
    if flexible:
        for tag, raw in reader.tagged_fields().items():
            tf = tagged_fields.get(tag)
            if tf is None:
                continue  # a tag from a newer broker: skipping it is the point of tagged fields
            sub = Reader(raw)
            result[tf.name] = _read_value(sub, tf, version, flexible)
            sub.expect_end()
    return result


def _read_length(reader: Reader, flexible: bool, wide: bool) -> int:
    """Length, or -1 for null."""
    if flexible:
        return reader.uvarint() - 1
    return reader.int32() if wide else reader.int16()


def _read_value(reader: Reader, f: Field, version: int, flexible: bool) -> Any:
    if f.type == "struct":
        return read_struct(reader, f.fields, version, flexible)
    if f.is_array:
        start = reader.position
        n = _read_length(reader, flexible, wide=True)
        if n < 0:
            return _null_or_fail(f, version, start, n)
        if n > reader.remaining():
            # Every element takes at least one byte: a larger count is corrupt, refuse before looping on it.
            raise ProtocolError(f"{f.name}: array of {n} elements cannot fit in {reader.remaining()} bytes")
        elem_type = f.element_type
        if elem_type == "struct":
            return [read_struct(reader, f.fields, version, flexible) for _ in range(n)]
        return [_read_scalar(reader, elem_type, f, version, flexible, element=True) for _ in range(n)]
    return _read_scalar(reader, f.type, f, version, flexible)


def _null_or_fail(f: Field, version: int, start: int, n: int, element: bool = False) -> None:
    # Nullability belongs to the field itself; elements of an array of strings are never null.
    if n == -1 and not element and version in f.nullable:
        return None
    raise ProtocolError(f"{f.name}: invalid length {n} at offset {start} (null not allowed at version {version})")


def _read_scalar(
    reader: Reader, type_: str, f: Field, version: int, flexible: bool, element: bool = False
) -> Any:
    fmt = _FIXED.get(type_)
    if fmt is not None:
        if type_ == "bool":
            return reader.boolean()
        raw = reader.raw(fmt.size)
        return fmt.unpack(raw)[0]
    if type_ == "uuid":
        return uuid.UUID(bytes=reader.raw(16))
    start = reader.position
    n = _read_length(reader, flexible, wide=type_ != "string")
    if n < 0:
        return _null_or_fail(f, version, start, n, element)
    if type_ == "string":
        raw = reader.raw(n)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"{f.name}: string at offset {start} is not UTF-8 ({exc.reason})") from None
    return reader.raw(n)
