"""Vectorized Arrow -> RecordBatch v2 encoder: numpy for sizes and varints, Arrow's C++ string kernels for the
byte copies, no per-row Python loop. Pure.

    encode_arrow_batch_groups(value, *, key=None, timestamp_ms, headers=None, max_batch_bytes,
                              compression=Codec.NONE, transactional=False, segment_starts=None,
                              compression_level=None, checksum=True, order=None) -> Iterator[list[EncodedBatch]]
    encode_arrow_batches(...same...) -> list[EncodedBatch]       # every group's batches in one list

One call has a fixed cost (numpy set-up per array) on top of the per-row work: to encode many partitions, sort the
rows by partition and pass where each partition starts as ``segment_starts`` rather than calling once per
partition.

Each ``EncodedBatch.data`` is byte-identical to ``record_batch.encode_batch`` over the same rows (the tests check
it), with producer id / epoch / sequence -1: ``record_batch.with_producer_state`` sets them at drain time.
Batches hold consecutive rows, at most ``max_batch_bytes`` each counting the uncompressed records (a single
larger record gets a batch of its own), like ``BatchBuilder``. Batches are cut before the exact sizes are known,
using upper bounds of the two batch-relative fields (offsetDelta, timestampDelta), so a batch may stay short of
the limit by about a byte per record for those fields.

How: per row, the small varint fields are written by numpy into three "glue" binary arrays —
A = length | attributes | timestampDelta | offsetDelta | keyLength, B = valueLength, C = headerCount. The pieces
A, key, B, value, C[, headers] are concatenated (``concat_arrays``, one memcpy per piece array) and one ``take``
with interleaved indices reads them back row by row in C++: its data buffer is the records sections of all
batches back to back (a null key or value adds no bytes, as its -1 length says). ``take`` is cheaper than
``binary_join_element_wise`` over the same pieces, which pays per piece per row. (A numpy index scatter of the
key/value bytes would need an 8-byte index per payload byte.) Without headers C is one
zero byte, read as the first byte of the next row's A (four pieces a row, the group's last C after them all).
Headers are joined one level down with ``binary_join_element_wise``, then per row with ``binary_join``. The batch
headers are one numpy array per group (``record_batch.assemble_batches``).
"""

from __future__ import annotations

import bisect
import functools
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, ParamSpec

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.protocol.compression import Codec, codec_id
from spark_kafka_sink.protocol.murmur2 import binary_buffers
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, RECORD_OVERHEAD_BOUND, assemble_batches
from spark_kafka_sink.protocol.varint_arrays import I64, U64, glue, varint_sizes, zigzag, zigzag_positive

__all__ = ["EncodedBatch", "batch_starts", "encode_arrow_batch_groups", "encode_arrow_batches"]

_P = ParamSpec("_P")

# One join covers at most this many output bytes: bounds the temporary buffer and keeps int32 offsets valid.
_GROUP_BYTES = 4 << 20
# With ``order``, inputs up to this many bytes are concatenated once for all groups; a larger input has each
# group's rows taken from its columns, in groups of _TAKE_GROUP_BYTES (see encode_arrow_batch_groups).
_CONCAT_BYTES = 4 << 20
_TAKE_GROUP_BYTES = 1 << 20
_MIN_RECORD_BYTES = 7  # length, attributes, timestampDelta, offsetDelta, keyLength, valueLength, headerCount
_INT32_MAX = (1 << 31) - 1


class EncodedBatch(NamedTuple):
    """One complete record batch and the input rows it holds: ``first_row .. first_row + record_count - 1``.
    (A NamedTuple: one is made per batch, and a frozen dataclass's __init__ costs several times a tuple's.)"""

    data: bytes
    record_count: int
    first_row: int
    base_timestamp: int
    max_timestamp: int
    uncompressed_size: int  # header + uncompressed records: what counted against max_batch_bytes
    has_crc: bool = True  # False: encoded with checksum=False, the CRC is 0 until with_producer_state sets it


# ---------------------------------------------------------------------------------------------- inputs


def _binary(arr: pa.Array | pa.ChunkedArray, what: str, *, chunks: bool = False) -> pa.Array | pa.ChunkedArray:
    """string/binary (any offset width) as a binary array, zero-copy where possible. ``chunks``: a ChunkedArray
    of several chunks stays one (each chunk viewed as binary), for a caller that concatenates it anyway."""
    if isinstance(arr, pa.ChunkedArray):
        if not chunks or arr.num_chunks < 2:
            return _binary(arr.combine_chunks() if arr.num_chunks != 1 else arr.chunk(0), what)
        pieces = [_binary(c, what) for c in arr.chunks]  # one input type, so one output type
        return pa.chunked_array(pieces, pieces[0].type)
    t = arr.type
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return arr
    if pa.types.is_string(t):
        return arr.view(pa.binary())
    if pa.types.is_large_string(t):
        return arr.view(pa.large_binary())
    if pa.types.is_null(t):
        return pa.nulls(len(arr), pa.binary())
    try:
        return arr.cast(pa.large_binary())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        raise TypeError(f"{what} must be binary or string, got {t}") from None


def _length_fields(arr: pa.Array | pa.ChunkedArray, what: str) -> I64:
    """Each row's length field as the wire writes it: its byte length, -1 where null."""
    if isinstance(arr, pa.ChunkedArray):
        if not arr.num_chunks:
            return np.zeros(0, np.int64)
        return np.concatenate([_length_fields(c, what) for c in arr.chunks])
    offsets, _ = binary_buffers(arr)
    lengths = np.diff(offsets)
    if arr.null_count:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = -1
    if len(lengths) and int(lengths.max()) > _INT32_MAX:
        raise ValueError(f"a {what} longer than 2 GiB cannot be a Kafka record field")
    return lengths


def _chunks_of(arr: pa.Array | pa.ChunkedArray) -> list[pa.Array]:
    return arr.chunks if isinstance(arr, pa.ChunkedArray) else [arr]


def _as(arr: pa.Array | pa.ChunkedArray, binary_type: pa.DataType) -> pa.Array | pa.ChunkedArray:
    return arr if arr.type == binary_type else arr.cast(binary_type)


def _field(lengths: I64, nulls: bool) -> tuple[U64, I64, I64]:
    """(zigzag varint of each length, its size, payload bytes) for a length-prefixed field, -1 = null."""
    if not nulls:
        u = zigzag_positive(lengths)
        return u, varint_sizes(u), lengths
    u = zigzag(lengths)
    return u, varint_sizes(u), np.maximum(lengths, 0)


@dataclass(frozen=True, slots=True)
class _Headers:
    count_u: U64  # zigzag header count per row
    count_s: I64  # its varint size
    payload: I64  # encoded header bytes per row, count varint excluded
    joined: pa.Array | None  # per row: the row's encoded headers back to back (None when no row has any)


def _encode_headers(headers: pa.Array | pa.ChunkedArray | None, n: int, binary_type: pa.DataType) -> _Headers:
    zero = np.zeros(n, np.int64)
    if headers is None:
        return _Headers(zero.view(np.uint64), zero + 1, zero, None)
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if len(headers) != n:
        raise ValueError(f"headers has {len(headers)} rows, value has {n}")
    if not (pa.types.is_list(headers.type) or pa.types.is_large_list(headers.type)):
        raise TypeError(f"headers must be list<struct<key: string, value: binary>>, got {headers.type}")
    counts = pc.fill_null(pc.list_value_length(headers), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    entries = headers.flatten()  # the entries of non-null rows, in order
    if not pa.types.is_struct(entries.type) or entries.null_count:
        raise TypeError(f"headers entries must be non-null struct<key, value>, got {entries.type}")
    h_key = _binary(pc.struct_field(entries, "key"), "header key")
    h_value = _binary(pc.struct_field(entries, "value"), "header value")
    if h_key.null_count:
        raise ValueError("a header key is null; Kafka header keys are required strings")
    k_u, k_s, k_n = _field(_length_fields(h_key, "header key"), False)
    v_u, v_s, v_n = _field(_length_fields(h_value, "header value"), h_value.null_count > 0)
    m = len(entries)
    entry_size = k_s + k_n + v_s + v_n
    cum = np.zeros(m + 1, np.int64)
    np.cumsum(entry_size, out=cum[1:])
    row_off = np.zeros(n + 1, np.int64)
    np.cumsum(counts, out=row_off[1:])
    payload = cum[row_off[1:]] - cum[row_off[:-1]]
    joined = None
    if m:
        g_key = glue([(k_u, k_s)], m, binary_type)
        g_value = glue([(v_u, v_s)], m, binary_type)
        sep = pa.scalar(b"", binary_type)
        encoded = pc.binary_join_element_wise(
            g_key, _as(h_key, binary_type), g_value, _as(h_value, binary_type), sep, null_handling="skip"
        )
        if binary_type == pa.large_binary():
            rows = pa.LargeListArray.from_arrays(pa.array(row_off, pa.int64()), encoded)
        else:
            rows = pa.ListArray.from_arrays(pa.array(row_off, pa.int32()), encoded)
        joined = pc.binary_join(rows, sep)
    count_u = zigzag(counts)
    return _Headers(count_u, varint_sizes(count_u), payload, joined)


def _timestamps(ts: pa.Array | pa.ChunkedArray | npt.NDArray[Any], n: int) -> I64:
    if isinstance(ts, (pa.Array, pa.ChunkedArray)):
        if isinstance(ts, pa.ChunkedArray):
            ts = ts.combine_chunks()
        if pa.types.is_timestamp(ts.type):  # any unit or zone -> epoch milliseconds (sub-ms truncated)
            ts = ts.cast(pa.timestamp("ms", ts.type.tz), safe=False).view(pa.int64())
        if ts.null_count:
            raise ValueError("timestamp_ms has nulls; fill them (e.g. with the send time) before encoding")
        ts = ts.to_numpy(zero_copy_only=False)
    out = np.asarray(ts).astype(np.int64, copy=False)
    if out.shape != (n,):
        raise ValueError(f"timestamp_ms has shape {out.shape}, expected ({n},)")
    return out


# ------------------------------------------------------------------------------------------------ encoder


@functools.lru_cache(maxsize=4)
def _interleave(rows: int, pieces: int, tail: bool) -> pa.Array:
    """Take indices that read ``pieces`` concatenated arrays of ``rows`` rows row by row: element k*rows + i (row
    i's k-th piece) goes to position i*pieces + k; ``tail``: then the element after them all (the group's last
    header count). Cached: every full 10,000-row call needs the same one."""
    grid: I64 = (np.arange(rows, dtype=np.int64)[:, None] + np.arange(pieces, dtype=np.int64)[None, :] * rows).ravel()
    if tail:
        grid = np.append(grid, rows * pieces)
    return pa.array(grid.astype(np.int32) if rows * pieces < _INT32_MAX else grid)  # int32: half the bytes


def _interleave_through(rows: I64, first: int, piece_rows: list[int], tail: bool) -> pa.Array:
    """Take indices into the concatenated pieces (glue, key, glue, value[, glue, headers]) for the encode
    positions ``first .. first+len(rows)-1``: a glue piece (in encode order) is read at the position, a column
    piece (in input order) at the input row ``rows[i]``; ``tail``: then the element after all pieces."""
    bases = np.cumsum([0, *piece_rows[:-1]]).tolist()
    positions = np.arange(first, first + len(rows), dtype=np.int64)
    grid = np.empty((len(rows), len(piece_rows)), np.int64)
    for k, base in enumerate(bases):
        grid[:, k] = (positions if k % 2 == 0 else rows) + base
    flat: I64 = grid.ravel()
    if tail:
        flat = np.append(flat, sum(piece_rows))
    return pa.array(flat.astype(np.int32) if sum(piece_rows) < _INT32_MAX else flat)


def batch_starts(upper: I64, budget: int, segment_starts: I64) -> I64:
    """Greedy batch starts: each batch's upper-bound size (the sum of ``upper`` over its rows) <= budget (a lone
    oversized record still gets one), and a batch starts at every segment start (sorted, unique, each in 0..n-1)."""
    n = len(upper)
    if int(upper.min()) == int(upper.max()):  # equal rows: batches of a fixed count within each segment
        per = max(1, budget // int(upper[0]))
        seg_first = np.unique(np.append(segment_starts, 0))
        seg_rows = np.diff(np.append(seg_first, n))
        per_segment = -(-seg_rows // per)  # batches in each segment
        nth = np.arange(int(per_segment.sum()), dtype=np.int64) - np.repeat(np.cumsum(per_segment) - per_segment,
                                                                            per_segment)
        out: I64 = np.repeat(seg_first, per_segment) + nth * per
        return out
    cum = np.zeros(n + 1, np.int64)
    np.cumsum(upper, out=cum[1:])
    limits = np.append(segment_starts[segment_starts > 0], n).tolist()
    # One bisect per batch. A bisect step is cheaper on a list of Python ints than on the numpy array, but building
    # the list costs per row: worth it only with many batches for the rows (not with thousands of rows a batch).
    few = n > 64 * (int(cum[-1]) // budget + len(limits))
    ends = cum if few else cum.tolist()
    starts = []
    s, li = 0, 0
    while s < n:
        starts.append(s)
        while limits[li] <= s:
            li += 1
        e = bisect.bisect_right(ends, ends[s] + budget) - 1
        s = min(max(e, s + 1), limits[li])
    return np.array(starts, np.int64)


def encode_arrow_batch_groups(
    value: pa.Array | pa.ChunkedArray,
    *,
    key: pa.Array | pa.ChunkedArray | None = None,
    timestamp_ms: pa.Array | pa.ChunkedArray | npt.NDArray[Any],
    headers: pa.Array | pa.ChunkedArray | None = None,
    max_batch_bytes: int,
    compression: int | str = Codec.NONE,
    transactional: bool = False,
    segment_starts: npt.ArrayLike | None = None,
    compression_level: int | None = None,
    checksum: bool = True,
    order: npt.ArrayLike | None = None,
) -> Iterator[list[EncodedBatch]]:
    """Encode rows into record batches (see the module docstring). ``segment_starts``: row indices where a new
    batch must begin, e.g. where each partition's rows begin in a table sorted by partition, so one call encodes
    many partitions (no batch spans two segments; map batches back with ``first_row``). ``checksum=False``: the
    batches' CRC is left 0 (``has_crc`` False) for a producer that stamps its id and sequence into every header
    before sending, which recomputes the CRC anyway.

    ``order``: the input rows to encode, in this order (indices into the columns, e.g. each partition's rows in
    turn): the columns are read through it, so a caller grouping rows need not copy them first. Positions
    (``segment_starts``, ``first_row``) then count in ``order``.

    Yields the batches a group at a time (consecutive batches of at most ``_GROUP_BYTES`` of records, or one
    batch; ``_TAKE_GROUP_BYTES`` for an input read through ``order`` above ``_CONCAT_BYTES``), each built when
    asked for: a caller that queues one group before asking for the next holds one group's output, not the
    whole input's."""
    codec = codec_id(compression)
    # With ``order`` every piece is concatenated once below: a column of several chunks (e.g. consecutive input
    # batches held together) goes into that concatenation chunk by chunk instead of being combined first.
    chunks = order is not None
    value_b = _binary(value, "value", chunks=chunks)
    rows = len(value_b)  # input rows; n: rows encoded
    idx = None if order is None else np.asarray(order, np.int64)
    if idx is not None and len(idx) and (int(idx.min()) < 0 or int(idx.max()) >= rows):
        raise ValueError(f"order must hold row indices in 0..{rows - 1}")
    n = rows if idx is None else len(idx)
    if n == 0:
        return
    key_b = _binary(key, "key", chunks=chunks) if key is not None else pa.nulls(rows, pa.binary())
    if len(key_b) != rows:
        raise ValueError(f"key has {len(key_b)} rows, value has {rows}")
    ts = _timestamps(timestamp_ms, rows)
    large = pa.types.is_large_binary(key_b.type) or pa.types.is_large_binary(value_b.type)
    if idx is not None and not large:  # all pieces are concatenated at once: keep their offsets in range
        columns = value_b.nbytes + key_b.nbytes + (0 if headers is None else headers.nbytes)
        large = columns + RECORD_OVERHEAD_BOUND * n > _INT32_MAX  # the glue pieces: the record's varints
    binary_type = pa.large_binary() if large else pa.binary()
    hdr = _encode_headers(headers, rows, binary_type)
    k_len, v_len = _length_fields(key_b, "key"), _length_fields(value_b, "value")
    if idx is not None:
        ts, k_len, v_len = ts[idx], k_len[idx], v_len[idx]
        hdr = _Headers(hdr.count_u[idx], hdr.count_s[idx], hdr.payload[idx], hdr.joined)

    k_u, k_s, k_n = _field(k_len, key_b.null_count > 0)
    v_u, v_s, v_n = _field(v_len, value_b.null_count > 0)
    # Everything in a record body except timestampDelta and offsetDelta, which depend on the batch it lands in.
    fixed = 1 + k_s + k_n + v_s + v_n + hdr.count_s + hdr.payload

    # Split on upper bounds of those two deltas, so that the exact sizes below can only be smaller.
    span = int(ts.max()) - int(ts.min())
    if span >= 1 << 63:
        raise ValueError("timestamps span more than an int64 range within one partition")
    # At least one byte: a batch.size below the header (Java's 0 turns batching off) gives one record a batch.
    budget = max(1, max_batch_bytes - HEADER_SIZE)
    max_delta = min(n - 1, budget // _MIN_RECORD_BYTES)
    ts_bound = int(varint_sizes(np.array([2 * span], np.uint64))[0])
    od_bound = int(varint_sizes(np.array([2 * max_delta], np.uint64))[0])
    body_ub = fixed + ts_bound + od_bound
    segments = np.unique(np.asarray([] if segment_starts is None else segment_starts, dtype=np.int64))
    if len(segments) and (segments[0] < 0 or segments[-1] >= n):
        raise ValueError(f"segment_starts must lie in 0..{n - 1}")
    starts = batch_starts(varint_sizes(zigzag(body_ub)) + body_ub, budget, segments)

    # Exact deltas now that each row's batch is known.
    counts = np.diff(np.append(starts, n))
    first = np.repeat(starts, counts)
    od_u = zigzag_positive(np.arange(n, dtype=np.int64) - first)
    ts_u = zigzag(ts - ts[first])
    od_s, ts_s = varint_sizes(od_u), varint_sizes(ts_u)
    body = fixed + ts_s + od_s
    body_u = zigzag_positive(body)
    body_s = varint_sizes(body_u)
    zero_byte = (None, np.ones(n, np.int64))  # attributes, or a header count of 0
    glue_a_fields = [(body_u, body_s), zero_byte, (ts_u, ts_s), (od_u, od_s), (k_u, k_s)]
    glue_b = glue([(v_u, v_s)], n, binary_type)
    key_b, value_b = _as(key_b, binary_type), _as(value_b, binary_type)
    if hdr.joined is None:
        # No headers: every record ends in the same zero byte (headerCount 0), which is read as the first byte of
        # the next row's glue A instead of as a fifth piece per row -- a fifth fewer elements for ``take`` to copy.
        # Each group then starts one byte early (skipped below) and ends with ``tail``, its last record's count.
        glue_a = glue([zero_byte, *glue_a_fields], n, binary_type)
        parts = [glue_a, key_b, glue_b, value_b]
    else:
        glue_a = glue(glue_a_fields, n, binary_type)
        glue_c = glue([(hdr.count_u, hdr.count_s)], n, binary_type)
        parts = [glue_a, key_b, glue_b, value_b, glue_c, hdr.joined]
    tail = hdr.joined is None
    lead = 1 if tail else 0  # bytes before the group's first record
    tail_piece = [pa.array([b"\x00"], binary_type)] if tail else []

    rec_end = np.cumsum(body_s + body)
    batch_end = rec_end[starts + counts - 1]
    batch_max = np.maximum.reduceat(ts, starts)
    batch_base = ts[starts]
    batch_bytes = np.diff(batch_end, prepend=0) + HEADER_SIZE
    # With ``order``, an input of at most _CONCAT_BYTES has every piece concatenated once (key, value and headers
    # in input order, the glue in encode order) and each group's take reads it through ``order``. A larger one
    # has each group's rows taken from its columns first: one more copy, but a group's bytes at a time instead of
    # the input's (one of Spark's 10,000-row batches of 1 KB values is 10 MB). Without ``order``, each group
    # concatenates its slices. Those groups are _TAKE_GROUP_BYTES, smaller than _GROUP_BYTES: the process's peak
    # memory grows with the group size there.
    whole = None
    group_bytes = _GROUP_BYTES
    if idx is not None:
        if sum(p.nbytes for p in parts) <= _CONCAT_BYTES:
            whole = pa.concat_arrays([c for p in parts + tail_piece for c in _chunks_of(p)])
        else:  # the columns (odd pieces) as one array each: a take from chunks would concatenate them every time
            parts = [p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p for p in parts]
            group_bytes = _TAKE_GROUP_BYTES
    b = 0
    while b < len(starts):
        # A group of whole batches, at most group_bytes (or one batch) of records, joined in one call.
        group_start = int(batch_end[b - 1]) if b else 0
        b_end = int(np.searchsorted(batch_end, group_start + group_bytes, side="right"))
        b_end = max(b_end, b + 1)
        r0, r1 = int(starts[b]), int(starts[b_end - 1] + counts[b_end - 1])
        m = r1 - r0
        if whole is not None:
            assert idx is not None
            joined = whole.take(_interleave_through(idx[r0:r1], r0, [len(p) for p in parts], tail))
        else:
            rows_g = None if idx is None else pa.array(idx[r0:r1])
            group_parts = [p.take(rows_g) if k % 2 and rows_g is not None else p.slice(r0, m)
                           for k, p in enumerate(parts)]
            joined = pa.concat_arrays(group_parts + tail_piece).take(_interleave(m, len(parts), tail))
        offsets, data = binary_buffers(joined)
        section = data[int(offsets[0]) + lead : int(offsets[-1])].data  # a memoryview, no copy
        if len(section) != int(batch_end[b_end - 1]) - group_start:
            raise RuntimeError("arrow encoder size mismatch (a bug): please report it")
        group = slice(b, b_end)
        datas = assemble_batches(section, batch_end[group] - group_start, counts[group], batch_base[group],
                                 batch_max[group], compression=codec, transactional=transactional,
                                 compression_level=compression_level, checksum=checksum)
        b = b_end
        yield list(map(EncodedBatch, datas, counts[group].tolist(), starts[group].tolist(),
                       batch_base[group].tolist(), batch_max[group].tolist(), batch_bytes[group].tolist(),
                       itertools.repeat(checksum)))


def _listed(groups: Callable[_P, Iterator[list[EncodedBatch]]]) -> Callable[_P, list[EncodedBatch]]:
    def listed(*args: _P.args, **kwargs: _P.kwargs) -> list[EncodedBatch]:
        return [batch for group in groups(*args, **kwargs) for batch in group]

    return listed


#: Every batch of :func:`encode_arrow_batch_groups` (same arguments) in one list.
encode_arrow_batches = _listed(encode_arrow_batch_groups)
