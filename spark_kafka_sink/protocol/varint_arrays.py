"""Vectorized LEB128 varints over numpy arrays, and "glue" binary arrays built from them. Pure.

Kafka's record fields and Avro's int, long, lengths and counts are the same zigzag LEB128 varints, so the Arrow
record encoder and the Avro encoder write them here, a column at a time:

    zigzag(v) / zigzag_positive(v) -> uint64        # the zigzag mapping (one shift when every v >= 0)
    varint_sizes(u) -> int64                         # bytes of each value's LEB128 encoding
    put_varints(buf, pos, u, sizes, least, width)    # each value's bytes at buf[pos]
    glue(fields, n, binary_type) -> pa.Array         # row i: fields[0][i] | fields[1][i] | ... as bytes

A glue field is ``(values, sizes)``: LEB128 varints (``values`` uint64) or raw bytes (``values`` an (n, w) uint8
matrix, each row's first ``sizes[i]`` bytes written, ``sizes[i]`` 0 or w). A size of 0 writes nothing for that
row, so a field that is absent on some rows costs them no bytes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["I64", "U64", "GlueField", "zigzag", "zigzag_positive", "varint_sizes", "put_varints", "glue"]

I64 = npt.NDArray[np.int64]
U64 = npt.NDArray[np.uint64]
U8 = npt.NDArray[np.uint8]
#: (values: uint64 varints, an (n, w) uint8 matrix of raw bytes, or None for zero bytes; each row's size)
GlueField = tuple["U64 | U8 | None", I64]

# uvarint size = 1 + number of these thresholds <= value
_VARINT_LIMITS = np.array([1 << (7 * i) for i in range(1, 10)], dtype=np.uint64)


def zigzag(v: I64) -> U64:
    zz = v << 1
    zz ^= v >> 63
    out: U64 = zz.view(np.uint64)
    return out


def zigzag_positive(v: I64) -> U64:
    """``zigzag`` of values known to be >= 0 (lengths, offset deltas): one shift."""
    zz: U64 = (v << 1).view(np.uint64)
    return zz


def varint_sizes(u: U64) -> I64:
    """Bytes of the unsigned LEB128 encoding of each value."""
    if len(u) == 0:
        return np.ones(0, np.int64)
    lo, hi = int(u.min()), int(u.max())
    if hi < 0x80 or lo == hi:  # one size for all (the common case): no per-value search
        return np.full(len(u), int(np.searchsorted(_VARINT_LIMITS, np.uint64(hi), side="right")) + 1, np.int64)
    # 1 + the thresholds each value reaches, one comparison pass per threshold up to the largest value's: cheaper
    # than a per-value searchsorted for the usual one or two passes (offset deltas are never uniform).
    sizes = np.ones(len(u), np.int64)
    for limit in _VARINT_LIMITS[: int(np.searchsorted(_VARINT_LIMITS, np.uint64(hi), side="right"))]:
        sizes += u >= limit
    return sizes


def put_varints(buf: U8, pos: I64, u: U64, sizes: I64, least: int, width: int) -> None:
    """Write each value's LEB128 bytes at buf[pos]: byte j carries bits 7j.. and a continuation bit if more follow.
    Every value takes at least ``least`` and at most ``width`` bytes (a size of 0 writes nothing)."""
    for j in range(width):
        byte = ((u >> np.uint64(7 * j)) & np.uint64(0x7F)).astype(np.uint8)
        if j + 1 < least:
            byte |= 0x80
        elif j + 1 < width:
            byte[sizes > j + 1] |= 0x80
        if j < least:  # every value has this byte: no selection
            buf[pos + j] = byte
        else:
            sel = sizes > j
            buf[pos[sel] + j] = byte[sel]


def _put_column(mat: U8, col: int, u: U64, width: int) -> None:
    """Write equally sized LEB128 values into columns col..col+width-1 of a row-per-record matrix."""
    for j in range(width):
        byte = (u >> np.uint64(7 * j)) & np.uint64(0x7F)
        mat[:, col + j] = byte | np.uint64(0x80) if j + 1 < width else byte


def _put_raw(buf: U8, pos: I64, raw: U8, sizes: I64) -> None:
    """Write each row's raw bytes (all w of them, or none where its size is 0) at buf[pos]."""
    width = raw.shape[1]
    sel = sizes > 0
    if width and sel.any():
        buf[(pos[sel, None] + np.arange(width, dtype=np.int64)).ravel()] = raw[sel].ravel()


def glue(fields: Sequence[GlueField], n: int, binary_type: pa.DataType) -> pa.Array:
    """A binary array whose row i is the concatenated fields[0][i], fields[1][i], ... (see the module docstring)."""
    off_type = np.int64 if binary_type == pa.large_binary() else np.int32
    if n == 0:
        return pa.array([], binary_type)
    ranges = [(int(s.min()), int(s.max())) if n else (1, 1) for _, s in fields]
    if all(lo == hi for lo, hi in ranges):
        # Every row has the same layout: write whole columns of an (n, width) matrix, no scatter.
        width = sum(hi for _, hi in ranges)
        buf = np.zeros(n * width, np.uint8)
        mat = buf.reshape(n, width)
        col = 0
        for (u, _), (_, w) in zip(fields, ranges, strict=True):
            if u is not None and w:
                if u.ndim == 2:
                    mat[:, col:col + w] = u
                else:
                    _put_column(mat, col, u.view(np.uint64), w)
            col += w
        offsets = np.arange(0, (n + 1) * width, width, dtype=off_type) if width else np.zeros(n + 1, off_type)
    else:
        row_size = np.zeros(n, np.int64)
        for _, s in fields:
            row_size += s
        offsets64 = np.zeros(n + 1, np.int64)
        np.cumsum(row_size, out=offsets64[1:])
        buf = np.zeros(int(offsets64[-1]), np.uint8)
        pos = offsets64[:-1].copy()
        for (u, s), (lo, hi) in zip(fields, ranges, strict=True):
            if u is not None and u.ndim == 2:
                _put_raw(buf, pos, u.view(np.uint8), s)
            elif u is not None:
                put_varints(buf, pos, u.view(np.uint64), s, lo, hi)
            pos += s
        offsets = offsets64.astype(off_type)
    return pa.Array.from_buffers(binary_type, n, [None, pa.py_buffer(offsets), pa.py_buffer(buf)])
