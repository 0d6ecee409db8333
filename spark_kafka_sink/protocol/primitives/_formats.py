"""The number formats that reading and writing share: fixed-width structs, zigzag, LEB128, encoded sizes. Pure."""

from __future__ import annotations

import struct

__all__ = [
    "INT8",
    "INT16",
    "UINT16",
    "INT32",
    "UINT32",
    "INT64",
    "MAX_UVARINT_BYTES",
    "MAX_UVARLONG_BYTES",
    "zigzag32",
    "zigzag64",
    "unzigzag",
    "leb128",
    "leb128_size",
    "uvarint_size",
    "varint_size",
    "varlong_size",
]

# Fixed-width formats, declared once. Kafka is big-endian throughout.
INT8 = struct.Struct(">b")
INT16 = struct.Struct(">h")
UINT16 = struct.Struct(">H")
INT32 = struct.Struct(">i")
UINT32 = struct.Struct(">I")
INT64 = struct.Struct(">q")

MAX_UVARINT_BYTES = 5  # a uint32 needs at most ceil(32 / 7) groups
MAX_UVARLONG_BYTES = 10  # a uint64 needs at most ceil(64 / 7) groups


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


def unzigzag(u: int) -> int:
    return (u >> 1) ^ -(u & 1)


def leb128(u: int) -> bytes:
    out = bytearray()
    while u > 0x7F:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def leb128_size(u: int) -> int:
    return max(1, (u.bit_length() + 6) // 7)


def uvarint_size(v: int) -> int:
    """Bytes ``write_uvarint(v)`` produces."""
    return leb128_size(v)


def varint_size(v: int) -> int:
    """Bytes ``write_varint(v)`` produces."""
    return leb128_size(zigzag32(v))


def varlong_size(v: int) -> int:
    """Bytes ``write_varlong(v)`` produces."""
    return leb128_size(zigzag64(v))
