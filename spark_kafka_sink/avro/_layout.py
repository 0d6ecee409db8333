"""Rows of Avro laid out in one buffer: every piece of every row written straight to its place, no per-piece join.

    join(pieces, n) -> pa.Array     # large_binary: row i is every piece's row-i bytes, in order

A piece covers the rows of one level and knows how many bytes it writes in each (``piece_sizes``):
- a glue field ``(values, sizes)`` (``protocol.varint_arrays``): varints, or raw bytes as an (n, w) matrix;
- ``Bytes``: a binary array's rows as they are (strings, bytes, a decimal's bytes), nothing where not ``present``;
- ``Nested``: an array's (or map's) items, each item its own pieces; a row's items are consecutive items.

How: the pieces' sizes are summed per row and cumulatively summed to each row's start in the output; each piece is
then written at ``pos`` (where it starts in every row), and ``pos`` moves on by its sizes. Varints and fixed-width
values are numpy scatters of whole columns (one per byte of width). A binary piece is copied by index arithmetic:
its rows' bytes are consecutive in its data buffer, so their targets are steps of 1 with a jump at each row's first
byte (to pos[r]), one cumulative sum (``_byte_targets``). A nested piece writes its items where its rows put them:
item k of row r at pos[r] + the sizes of the row's items before k. The output and the byte targets come from
Arrow's memory pool, which keeps its pages from batch to batch.

That index costs 8 bytes per copied byte, fine for short strings and a waste for long values, which a memcpy
copies far cheaper: a binary piece whose present rows are ``_LONG`` bytes or more on average is therefore not
copied here. It cuts every row in two: the pieces before it and after it form *segments*, each laid out as above
in one shared buffer (segment after segment, all rows of one segment together), and one Arrow
``binary_join_element_wise`` joins segment, long piece, segment, ... row by row in C++ (one memcpy each).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.protocol.murmur2 import binary_buffers
from spark_kafka_sink.protocol.varint_arrays import I64, GlueField, put_varints

__all__ = ["Bytes", "Nested", "Piece", "is_long", "join", "piece_sizes"]

Mask = npt.NDArray[np.bool_]
U8 = npt.NDArray[np.uint8]

# A binary piece at least this long per present row (on average) is joined by Arrow instead of copied by index.
_LONG = 48


@dataclass
class Bytes:
    """A piece read as it is: row i's bytes, or nothing where ``present`` is false."""

    array: pa.Array  # binary, one element per row of the level
    present: Mask | None  # None: every row
    offsets: I64 = field(init=False)  # int64, len(array) + 1, into ``data``
    data: U8 = field(init=False)
    sizes: I64 = field(init=False)  # bytes written per row: the row's length, 0 where not present
    everywhere: bool = field(init=False)  # every row present

    def __post_init__(self) -> None:
        self.offsets, self.data = binary_buffers(self.array)
        lengths: I64 = np.diff(self.offsets)
        self.everywhere = self.present is None or bool(self.present.all())
        self.sizes = lengths if self.present is None or self.everywhere else np.where(self.present, lengths, 0)


@dataclass
class Nested:
    """An array's or map's items, written inside the rows of the level above: row r holds items
    ``offsets[r] .. offsets[r + 1] - 1`` (each item's pieces in order)."""

    pieces: list[Piece]  # over the items
    offsets: I64  # int64, rows + 1, from 0 to ``items``: every item is in a row
    items: int
    item_starts: I64 = field(init=False)  # items + 1: where each item starts, counting from the first item
    sizes: I64 = field(init=False)

    def __post_init__(self) -> None:
        self.item_starts = np.zeros(self.items + 1, np.int64)
        if self.items:
            np.cumsum(_row_sizes(self.pieces, self.items), out=self.item_starts[1:])
        self.sizes = self.item_starts[self.offsets[1:]] - self.item_starts[self.offsets[:-1]]


Piece = Union[GlueField, Bytes, Nested]


def piece_sizes(piece: Piece) -> I64:
    return piece[1] if isinstance(piece, tuple) else piece.sizes


def _row_sizes(pieces: list[Piece], n: int) -> I64:
    total = np.zeros(n, np.int64)
    for piece in pieces:
        total += piece_sizes(piece)
    return total


def is_long(piece: Piece) -> bool:
    """A binary piece long enough to be joined by Arrow rather than copied here (see the module docstring)."""
    if not isinstance(piece, Bytes):
        return False
    present = len(piece.sizes) if piece.present is None else int(np.count_nonzero(piece.present))
    return present > 0 and int(piece.sizes.sum()) >= _LONG * present


# ------------------------------------------------------------------------------------------------ writing


def _put_glue(buf: U8, pos: I64, piece: GlueField) -> None:
    values, sizes = piece
    if values is None or len(sizes) == 0:
        return
    lo, hi = int(sizes.min()), int(sizes.max())
    if hi == 0:
        return
    if values.ndim == 1:
        if hi == 1:  # one byte, the value itself (below 0x80): no shifting or masking
            if lo < 1:
                pos, values = pos[sizes > 0], values[sizes > 0]
            buf[pos] = _uint8(values)
            return
        put_varints(buf, pos, values.view(np.uint64), sizes, lo, hi)
        return
    raw = values.view(np.uint8)  # every row's first ``sizes[i]`` bytes: all of them or none
    if lo < hi:
        pos, raw = pos[sizes > 0], raw[sizes > 0]
    for j in range(raw.shape[1]):  # a column at a time: an index per row, not per byte
        buf[pos + j] = _uint8(raw[:, j])


def _uint8(values: npt.NDArray[np.generic]) -> npt.NDArray[np.uint8] | np.uint8:
    """``values`` (all below 256) as bytes to store: one scalar for a broadcast constant (a union's branch, the
    frame prefix), else a uint8 array (a scatter that casts as it stores is twice as slow)."""
    if values.ndim == 1 and values.strides[0] == 0 and len(values):
        return np.uint8(values[0])
    return values.astype(np.uint8, copy=False)


def _scratch(count: int) -> I64:
    """An int64 array for byte indices from Arrow's pool (see _laid_out: no page faults afresh every batch)."""
    return np.frombuffer(pa.allocate_buffer(8 * count), np.int64)


def _byte_targets(target: I64, pos: I64, starts: I64, sizes: I64) -> None:
    """Where each byte of consecutive rows goes: row r's ``sizes[r]`` bytes, which start at ``starts[r]`` of
    ``target``, to pos[r], pos[r] + 1, ... Written as steps of 1 with a jump at each row's first byte, summed in
    place (no index array per byte besides ``target``)."""
    rows = np.flatnonzero(sizes) if int(sizes.min()) == 0 else None
    p, s, z = (pos, starts, sizes) if rows is None else (pos[rows], starts[rows], sizes[rows])
    jumps = p.copy()
    jumps[1:] -= p[:-1] + z[:-1] - 1  # from the previous row's last byte to this row's first
    target.fill(1)
    target[s] = jumps
    np.cumsum(target, out=target)


def _put_bytes(buf: U8, pos: I64, piece: Bytes) -> None:
    sizes, offsets = piece.sizes, piece.offsets
    if len(sizes) == 0:
        return
    lo, hi = int(sizes.min()), int(sizes.max())
    if hi == 0:
        return
    if piece.everywhere:
        first, last = int(offsets[0]), int(offsets[-1])
        target = _scratch(last - first)
        if lo == hi:  # one length: a row of indices per row
            np.add(pos[:, None], np.arange(hi, dtype=np.int64), out=target.reshape(len(pos), hi))
        else:
            _byte_targets(target, pos, offsets[:-1] - first, sizes)
        buf[target] = piece.data[first:last]
        return
    before = np.cumsum(sizes) - sizes  # the present bytes before each row's
    within = np.arange(int(before[-1] + sizes[-1]), dtype=np.int64)
    source = np.repeat(offsets[:-1] - before, sizes) + within
    buf[np.repeat(pos - before, sizes) + within] = piece.data[source]


def _put_nested(buf: U8, pos: I64, piece: Nested) -> None:
    offsets, starts = piece.offsets, piece.item_starts
    if len(offsets) < 2 or not piece.items:
        return
    # Item k of row r goes to pos[r] + the sizes of the row's items before it.
    item_pos = np.repeat(pos - starts[offsets[:-1]], np.diff(offsets)) + starts[:-1]
    _write(buf, item_pos, piece.pieces)


def _write(buf: U8, pos: I64, pieces: list[Piece]) -> None:
    """Write ``pieces`` one after the other from ``pos`` (each row's start; moved past them)."""
    for piece in pieces:
        if isinstance(piece, tuple):
            _put_glue(buf, pos, piece)
        elif isinstance(piece, Bytes):
            _put_bytes(buf, pos, piece)
        else:
            _put_nested(buf, pos, piece)
        pos += piece_sizes(piece)


def _laid_out(segments: list[list[Piece]], n: int) -> list[pa.Array]:
    """Each segment as a large_binary array of ``n`` rows, all in one buffer, one segment after the other."""
    sizes = [_row_sizes(s, n) for s in segments]
    offsets = np.zeros(len(segments) * n + 1, np.int64)
    np.cumsum(np.concatenate(sizes), out=offsets[1:])
    # From Arrow's memory pool, which keeps freed pages for the next batch (numpy's large arrays come and go
    # through the C allocator, which hands them back to the system and faults them in afresh every time).
    data = pa.allocate_buffer(int(offsets[-1]))
    buf = np.frombuffer(data, np.uint8)
    for k, segment in enumerate(segments):
        _write(buf, offsets[k * n:(k + 1) * n].copy(), segment)
    return [pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets[k * n:(k + 1) * n + 1]), data])
            for k in range(len(segments))]


def _long_array(piece: Bytes) -> pa.Array:
    """The long piece as large_binary, null where not present (the join writes nothing there)."""
    arr = piece.array
    if not pa.types.is_large_binary(arr.type):
        arr = arr.view(pa.binary()) if pa.types.is_string(arr.type) else arr
        arr = arr.view(pa.large_binary()) if pa.types.is_large_string(arr.type) else arr.cast(pa.large_binary())
    if piece.everywhere and arr.null_count == 0:
        return arr
    # The validity bitmap counts from the buffers' start, as the offsets do: ``arr.offset`` leading bits.
    valid = np.concatenate([np.zeros(arr.offset, np.bool_), piece.sizes > 0])
    return pa.Array.from_buffers(pa.large_binary(), len(arr), [pa.py_buffer(np.packbits(valid, bitorder="little")),
                                                               *arr.buffers()[1:]], offset=arr.offset)


def join(pieces: list[Piece], n: int) -> pa.Array:
    """A large_binary array of ``n`` rows, row i the concatenation of every piece's row i."""
    segments: list[list[Piece]] = [[]]
    longs: list[Bytes] = []
    for piece in pieces:
        if isinstance(piece, Bytes) and is_long(piece):
            longs.append(piece)
            segments.append([])
        else:
            segments[-1].append(piece)
    laid = _laid_out(segments, n)
    if not longs:
        return laid[0]
    parts: list[pa.Array] = [laid[0]]
    for long, segment in zip(longs, laid[1:], strict=True):
        parts += [_long_array(long), segment]
    joined = pc.binary_join_element_wise(*parts, pa.scalar(b"", pa.large_binary()), null_handling="replace",
                                         null_replacement="")
    return joined
