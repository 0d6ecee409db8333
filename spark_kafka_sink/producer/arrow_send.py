"""``KafkaProducer.send_batch``: whole Arrow batches into record batches, vectorized (no per-row Python).

Columns, as Spark's Kafka sink (other columns are ignored)::

    value      string | binary (required; null = tombstone)
    key        string | binary
    topic      string (used when send_batch's topic argument is None; rows may name different topics)
    partition  integer (null -> the partitioner)
    headers    list<struct<key: string, value: binary>>
    timestamp  timestamp (any unit) | int64 epoch ms (null or absent -> the send time)

Per topic: metadata (waits up to max.block.ms) -> ``Partitioner.partition_arrow`` (explicit, murmur2 keys,
sticky runs) -> one stable ``argsort`` orders rows by partition, keeping their order -> one
``encode_arrow_batch_groups`` call for all partitions, reading the columns through that order (``order``; no
sorted copy) with ``segment_starts`` where each partition begins (batch.size each) ->
``accumulator.append_encoded`` per partition, once the input is encoded (so the sender's first requests carry a
batch of every partition). An input larger than ``_WHOLE_BYTES`` goes in slices of ``_SLICE_BYTES`` taken in that
order, cut where batches start (``_ordered_slices``), each queued as soon as it is encoded. The result
future completes with :class:`BatchSendResult` once every batch was acknowledged (or with the first failure).
``prepare`` stops before the queueing (a :class:`PreparedBatch`), ``send_prepared`` does it later (once).

Bad input raises SerializationError (or RecordTooLargeError) naming the column / row before anything is queued.
Threads: called on the caller's thread; the result callbacks run on the sender thread.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.errors import RecordTooLargeError, SerializationError
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.batch import gather_batch_futures
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.config_options import MAX_INT64
from spark_kafka_sink.producer.interceptors import InterceptorChain
from spark_kafka_sink.producer.partitioner import Partitioner, PartitionInfo
from spark_kafka_sink.producer.rate_limit import BatchRateLimits
from spark_kafka_sink.producer.record_metadata import NO_OFFSET, BatchMetadata, TopicPartition
from spark_kafka_sink.producer.transactions import TransactionManager
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch, batch_starts, encode_arrow_batch_groups
from spark_kafka_sink.protocol.murmur2 import binary_buffers
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, record_size, record_size_bound

__all__ = ["BatchSendResult", "PartitionWrite", "PreparedBatch", "ArrowSender", "row_slices", "fill_bytes",
           "as_table_input", "oversized_rows"]

I64 = npt.NDArray[np.int64]
_SLICE_BYTES = 2 << 20  # rows encoded per step (by size bound); large enough that the encoder's per-call cost is small
# An input up to this many bytes (size bound) is encoded in one step, a group of batches at a time (see
# encode_arrow_batch_groups), so that its batches fill: one of Spark's 10,000-row batches of 1 KB values is such an
# input. Its batches are queued once all are encoded, which holds them a little longer. Larger ones go in slices of
# _SLICE_BYTES, in partition order: slicing every input instead raised the worker's peak memory, while one pass
# built in small groups keeps it low (the encoder's ``_TAKE_GROUP_BYTES``).
_WHOLE_BYTES = 12 << 20
# The most input fill_bytes asks a caller to join: the caller holds it, and the encoder a copy, while it is encoded.
_FILL_CAP = 3 << 20


def fill_bytes(batch_size: int, partitions: int) -> int:
    """Arrow bytes of input that give each of a topic's ``partitions`` about one batch: what a caller holding many
    small inputs (Spark's 10,000-row batches) should hand ``send_batch`` at once. Each send_batch call closes its
    batches, so small calls into many partitions made small batches however large batch.size was. 90% of
    batch.size a partition (an unevenly spread partition must not spill a tiny second batch), and at most
    ``_FILL_CAP``: fuller batches mean fewer encoder calls, batch headers and compressor starts per row."""
    return max(1, min(int(0.9 * batch_size * partitions), _FILL_CAP))


@dataclass(frozen=True, order=True)
class PartitionWrite:
    """What one send_batch (or several, merged: a Spark task's writes, a whole job's) wrote to one topic-partition:
    records, bytes of the record batches as sent, and the offsets of the first and last record, inclusive, as the
    broker assigned them (-1 when unknown, e.g. acks=0). Plain values: the Spark sink pickles it to the driver."""

    topic: str
    partition: int
    records: int
    bytes: int
    first_offset: int
    last_offset: int

    def merge(self, other: PartitionWrite) -> PartitionWrite:
        """Both writes of this topic-partition: counts summed, the earliest first and latest last known offset."""
        return PartitionWrite.total(self.topic, self.partition, [
            (self.records, self.bytes, self.first_offset, self.last_offset),
            (other.records, other.bytes, other.first_offset, other.last_offset)])

    @classmethod
    def total(cls, topic: str, partition: int, parts: Sequence[tuple[int, int, int, int]]) -> PartitionWrite:
        """One partition's writes, given each as (records, bytes, first_offset, last_offset), as one: counts summed,
        the earliest first and the latest last offset among those known."""
        records, sizes, firsts, lasts = zip(*parts, strict=True)
        return cls(topic, partition, sum(records), sum(sizes),
                   min((o for o in firsts if o != NO_OFFSET), default=NO_OFFSET),
                   max((o for o in lasts if o != NO_OFFSET), default=NO_OFFSET))


@dataclass(frozen=True)
class BatchSendResult:
    """Per (topic, partition): its :class:`PartitionWrite`. ``merge`` combines results (e.g. of many batches)."""

    partitions: dict[tuple[str, int], PartitionWrite] = field(default_factory=dict)

    @property
    def records(self) -> int:
        return sum(s.records for s in self.partitions.values())

    @property
    def bytes(self) -> int:
        return sum(s.bytes for s in self.partitions.values())

    def merge(self, other: BatchSendResult) -> BatchSendResult:
        merged = dict(self.partitions)
        for tp, stats in other.partitions.items():
            merged[tp] = merged[tp].merge(stats) if tp in merged else stats
        return BatchSendResult(merged)


def _column(data: pa.RecordBatch | pa.Table, name: str, *, chunks: bool = False) -> pa.Array | pa.ChunkedArray | None:
    """``name``'s column as one array; ``chunks``: a column of several chunks stays chunked (the values: the
    encoder concatenates them with its other pieces anyway, so combining them first was a second copy)."""
    if name not in data.schema.names:
        return None
    col = data.column(name)
    if isinstance(col, pa.ChunkedArray):
        # One chunk (a Spark batch; ``_input_pieces`` cuts any table into such): zero-copy; combine_chunks copies even a
        # single chunk. No chunk (a table of no rows): an empty array.
        if col.num_chunks == 1:
            return col.chunk(0)
        return col if chunks and col.num_chunks else col.combine_chunks()
    return col


def _bytes_like(t: pa.DataType) -> bool:
    return bool(pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_string(t)
                or pa.types.is_large_string(t) or pa.types.is_null(t))


def _is_view(t: pa.DataType, kind: str) -> bool:
    check = getattr(pa.types, f"is_{kind}_view", None)  # string_view and binary_view: pyarrow 16 and later
    return bool(check is not None and check(t))


def _plain_type(t: pa.DataType, *, text_only: bool = False) -> pa.DataType | None:
    """The string/binary type (large or not) the encoder reads through its offsets for the Arrow type ``t``, or None
    when ``t`` holds no strings (``text_only``) or bytes. Other layouts of the same bytes map to the plain one:
    string_view and binary_view (newer Polars), dictionary-encoded strings (a pandas ``category``),
    fixed_size_binary, and extension types over those (``arrow.json``, ``arrow.uuid``: their bytes as stored)."""
    if isinstance(t, pa.BaseExtensionType):
        return _plain_type(t.storage_type, text_only=text_only)
    inner = t.value_type if pa.types.is_dictionary(t) else t
    if _is_view(inner, "string"):
        return pa.string()
    if text_only:
        return inner if pa.types.is_string(inner) or pa.types.is_large_string(inner) else None
    if _is_view(inner, "binary") or pa.types.is_fixed_size_binary(inner):
        return pa.binary()
    return inner if _bytes_like(inner) else None


def _plain_bytes(col: pa.Array | pa.ChunkedArray, name: str, *, text_only: bool = False
                 ) -> pa.Array | pa.ChunkedArray:
    """``col`` in its plain layout (see ``_plain_type``: a cast, once, when it is another); ``text_only``: the
    topic column, which must hold strings."""
    target = _plain_type(col.type, text_only=text_only)
    if target is None:
        kinds = "string" if text_only else "string or binary"
        raise SerializationError(f"column {name!r} must be {kinds}, got {col.type}")
    return col if target == col.type else col.cast(target)


def _plain_headers(col: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The headers column as list<struct<key, value>> of plain string/binary fields (cast once if they are other
    layouts, or in the other order)."""
    t = col.type
    fields: dict[str, pa.DataType | None] = {}
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and pa.types.is_struct(t.value_type):
        fields = {t.value_type.field(i).name: _plain_type(t.value_type.field(i).type)
                  for i in range(t.value_type.num_fields)}
    key, value = fields.get("key"), fields.get("value")
    if set(fields) != {"key", "value"} or key is None or value is None:
        raise SerializationError(f"column 'headers' must be list<struct<key: string, value: binary>>, got {t}")
    entry = pa.struct([("key", key), ("value", value)])
    target = pa.large_list(entry) if pa.types.is_large_list(t) else pa.list_(entry)
    return col if target == t else col.cast(target)


def _payload_bytes(arr: pa.Array | pa.ChunkedArray | None, n: int) -> I64:
    """Bytes per row (0 where null), read from the offsets (no compute kernel, no cast)."""
    if arr is None or pa.types.is_null(arr.type):
        return np.zeros(n, np.int64)
    if isinstance(arr, pa.ChunkedArray):
        return np.concatenate([_payload_bytes(c, len(c)) for c in arr.chunks])
    offsets, _ = binary_buffers(arr)
    lengths: I64 = np.diff(offsets).astype(np.int64, copy=False)
    if arr.null_count:
        lengths[np.asarray(arr.is_null())] = 0
    return lengths


@dataclass
class _Columns:
    value: pa.Array | pa.ChunkedArray  # chunked when the input piece was (see ``_column``)
    key: pa.Array | None
    topic: pa.Array | None
    partition: pa.Array | None
    headers: pa.Array | None
    timestamp: I64  # epoch ms per row
    size: I64  # upper bound of each row's encoded record

    def slice(self, lo: int, hi: int) -> _Columns:
        def cut(arr: pa.Array | None) -> pa.Array | None:
            return None if arr is None else arr.slice(lo, hi - lo)

        return _Columns(self.value.slice(lo, hi - lo), cut(self.key), cut(self.topic), cut(self.partition),
                        cut(self.headers), self.timestamp[lo:hi], self.size[lo:hi])

    def take(self, rows: pa.Array) -> _Columns:
        """These rows (indices), copied: the columns the encoder reads (topic and partition were used already)."""
        idx = np.asarray(rows)
        return _Columns(self.value.take(rows), _take(self.key, rows), None, None, _take(self.headers, rows),
                        self.timestamp[idx], self.size[idx])


def _exact_record_size(cols: _Columns, row: int) -> int:
    """The encoded size of row ``row`` as the only record of its batch (deltas 0)."""
    def raw(scalar: pa.Scalar) -> bytes | None:
        v = scalar.as_py()
        return v.encode("utf-8") if isinstance(v, str) else v

    key = None if cols.key is None else raw(cols.key[row])
    entries = [] if cols.headers is None else (cols.headers[row].as_py() or [])  # key str, value bytes (plain)
    return record_size(0, 0, key, raw(cols.value[row]), [(e["key"], e["value"]) for e in entries])


def oversized_rows(data: pa.RecordBatch | pa.Table, topic: str | None, limit: int | I64) -> npt.NDArray[np.intp]:
    """The rows that, each alone in a record batch (its header included), make one larger than ``limit`` bytes (one
    limit, or one per row): records no batch can carry. The size bound picks the candidates; only those are
    measured exactly (as send_batch does before it refuses one), so the rest costs no per-row work."""
    cols = _validate(data, topic)
    limits = np.broadcast_to(np.asarray(limit, dtype=np.int64), cols.size.shape)
    candidates = np.flatnonzero(cols.size + HEADER_SIZE > limits).tolist()
    return np.array([row for row in candidates if HEADER_SIZE + _exact_record_size(cols, row) > limits[row]],
                    dtype=np.intp)


def row_slices(size: I64, limit: int, whole: int = 0) -> list[tuple[int, int]]:
    """Consecutive row ranges of at most ``limit`` bytes each (a larger row alone), covering every row; one range
    when all rows add up to at most ``whole`` (or ``limit``)."""
    n = len(size)
    cum = np.cumsum(size)
    if not n or int(cum[-1]) <= max(limit, whole):
        return [(0, n)]
    out = []
    lo = 0
    while lo < n:
        base = int(cum[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(cum, base + limit, side="right")))
        out.append((lo, hi))
        lo = hi
    return out


def as_table_input(data: object) -> pa.RecordBatch | pa.Table:
    """Another tabular object as a pyarrow Table, read whole through the Arrow PyCapsule stream protocol
    (``__arrow_c_stream__``: a RecordBatchReader, or another library's data frame that offers it, as recent Polars
    does); a RecordBatch or Table as it is; anything else is refused."""
    if isinstance(data, (pa.RecordBatch, pa.Table)):
        return data
    if hasattr(data, "__arrow_c_stream__"):
        try:
            return pa.table(data)
        except (pa.ArrowInvalid, TypeError) as exc:
            raise SerializationError(f"send_batch could not read the {type(data).__name__} as a table (it needs "
                                     f"named columns): {exc}") from None
    raise SerializationError(f"send_batch takes a pyarrow RecordBatch or Table, or a table with the Arrow stream "
                             f"interface (__arrow_c_stream__, e.g. a RecordBatchReader), got {type(data).__name__}")


def _input_pieces(data: pa.RecordBatch | pa.Table) -> list[pa.RecordBatch | pa.Table]:
    """The input as contiguous pieces: a table of several chunks as its record batches (zero-copy; combining all
    its chunks copies the whole table, a large share of a send_batch's work), consecutive small ones
    joined up to ``_SLICE_BYTES`` (so many tiny chunks still fill batches) but never past what is encoded in one
    step (a large chunk after small ones starts a piece of its own); anything else whole."""
    data = as_table_input(data)
    if not isinstance(data, pa.Table) or not data.num_rows or all(c.num_chunks <= 1 for c in data.columns):
        return [data]
    out: list[pa.RecordBatch | pa.Table] = []
    group: list[pa.RecordBatch] = []
    group_bytes = 0
    for batch in data.to_batches():
        if group and group_bytes + batch.nbytes > _WHOLE_BYTES:
            out.append(_joined(group))
            group, group_bytes = [], 0
        group.append(batch)
        group_bytes += batch.nbytes
        if group_bytes >= _SLICE_BYTES:
            out.append(_joined(group))
            group, group_bytes = [], 0
    if group:
        out.append(_joined(group))
    return out


def _joined(batches: list[pa.RecordBatch]) -> pa.RecordBatch | pa.Table:
    # Not combined: the values stay in their chunks until the encoder's one concatenation (see ``_column``).
    return batches[0] if len(batches) == 1 else pa.Table.from_batches(batches)


def _ordered_slices(size: I64, seg_starts: I64, limit: int) -> list[tuple[int, int]]:
    """Row ranges (in partition order) of at most ``_SLICE_BYTES`` each to encode one at a time, cut where a
    batch would start by the rows' size bound (at a partition's first row, or where the batch before reached
    ``limit``, the records_limit); one range when all rows fit in ``_WHOLE_BYTES``. The bound overstates a record
    (most for small ones), so a slice's last batch may come out part-filled: about one such batch a slice, where
    slicing in input order left a part-filled batch in every partition each slice."""
    n = len(size)
    if not n or int(size.sum()) <= _WHOLE_BYTES:
        return [(0, n)]
    starts = batch_starts(size, max(1, limit - HEADER_SIZE), seg_starts)
    bounds = np.append(starts, n)
    cum = np.zeros(n + 1, np.int64)
    np.cumsum(size, out=cum[1:])
    return [(int(bounds[a]), int(bounds[b])) for a, b in row_slices(np.diff(cum[bounds]), _SLICE_BYTES)]


def _validate(data: pa.RecordBatch | pa.Table, topic: str | None, first_row: int = 0) -> _Columns:
    """The columns of one contiguous piece (see ``_input_pieces``), checked; ``first_row``: the piece's first row in the
    input, for row numbers in errors."""
    n = data.num_rows
    value = _column(data, "value", chunks=True)
    if value is None:
        raise SerializationError(f"column 'value' is required (string or binary); the input has "
                                 f"{data.schema.names}")
    cols = {"value": value, "key": _column(data, "key"), "topic": _column(data, "topic"),
            "partition": _column(data, "partition"), "headers": _column(data, "headers")}
    for name in ("value", "key"):
        col = cols[name]
        if col is not None:
            cols[name] = _plain_bytes(col, name)
    value = cols["value"]
    topic_col = cols["topic"]
    if topic is None:
        if topic_col is None:
            raise SerializationError("no topic: pass the topic argument or give a 'topic' column")
        topic_col = cols["topic"] = _plain_bytes(topic_col, "topic", text_only=True)
        if topic_col.null_count:
            row = int(np.argmax(np.asarray(topic_col.is_null())))
            raise SerializationError(f"column 'topic' is null at row {first_row + row}; every row needs a topic (or "
                                     "pass the topic argument)")
    partition = cols["partition"]
    if partition is not None and not (pa.types.is_integer(partition.type) or pa.types.is_null(partition.type)):
        raise SerializationError(f"column 'partition' must be an integer type, got {partition.type}")
    if partition is not None and pa.types.is_uint64(partition.type):
        partition = _within_int64(partition, "partition", first_row)
    headers = cols["headers"]
    if headers is not None:
        headers = _plain_headers(headers)
    timestamps = _timestamps(_column(data, "timestamp"), n, first_row)
    header_bytes: I64 | int = 0
    header_count: I64 | int = 0
    if headers is not None and len(headers.flatten()):
        entries = headers.flatten()
        _check_header_entries(headers, entries, first_row)
        entry_bytes = (_payload_bytes(pc.struct_field(entries, "key"), len(entries))
                       + _payload_bytes(pc.struct_field(entries, "value"), len(entries)))
        header_count = np.asarray(pc.fill_null(pc.list_value_length(headers), 0).cast(pa.int64()))
        ends = np.cumsum(header_count)
        cum = np.concatenate([[0], np.cumsum(entry_bytes)])
        header_bytes = cum[ends] - cum[ends - header_count]
    size = record_size_bound(_payload_bytes(cols["key"], n), _payload_bytes(value, n), header_bytes, header_count)
    return _Columns(value, cols["key"], topic_col, partition, headers, timestamps, size)


def _check_header_entries(headers: pa.Array, entries: pa.Array, first_row: int) -> None:
    """A null header entry or key is refused naming its row (the encoder's bare TypeError/ValueError named none),
    as Java refuses a null header key."""
    keys = pc.struct_field(entries, "key")
    if not (entries.null_count or keys.null_count):
        return
    bad = np.asarray(pc.or_(pc.is_null(entries), pc.is_null(keys)))
    entry = int(np.argmax(bad))
    row = first_row + int(np.asarray(pc.list_parent_indices(headers))[entry])
    what = "an entry that is null" if not entries[entry].is_valid else "a header with a null key"
    raise SerializationError(f"column 'headers' holds {what} at row {row}: each header is a struct with a non-null "
                             "string key (Kafka header keys are required; the value may be null)")


def _within_int64(col: pa.Array, name: str, first_row: int) -> pa.Array:
    """An unsigned 64-bit column as int64, or SerializationError naming the first row beyond int64 (the wire's
    partition and timestamp fields are signed; a bare cast raised ArrowInvalid naming neither column nor row)."""
    beyond = np.asarray(pc.fill_null(pc.greater(col, pa.scalar(MAX_INT64, pa.uint64())), False))
    if beyond.any():
        row = int(np.argmax(beyond))
        raise SerializationError(f"column {name!r} holds {col[row].as_py()} at row {first_row + row}: more than a "
                                 "signed 64-bit integer holds")
    return col.cast(pa.int64())


def _timestamps(col: pa.Array | None, n: int, first_row: int = 0) -> I64:
    now = time.time_ns() // 1_000_000
    if col is None:
        return np.full(n, now, np.int64)
    if pa.types.is_timestamp(col.type):
        ticks = np.asarray(pc.fill_null(col.cast(pa.int64()), 0))
        if n and int(ticks.min()) < 0:  # checked before truncating: -0.5 ms is before 1970 too
            row = int(np.argmax(ticks < 0))
            raise SerializationError(f"column 'timestamp' holds a time before 1970 at row {first_row + row} "
                                     f"({int(ticks[row])} {col.type.unit} since the epoch): record timestamps are "
                                     "1970 or later (the Java client refuses earlier ones too). Fix the row, or make "
                                     "it null for the send time")
        # Truncated to milliseconds, as Java's Timestamp.getTime() for the times Kafka accepts (a safe cast refused
        # any sub-millisecond part: pandas' nanosecond and Spark's microsecond times have them).
        col = col.cast(pa.timestamp("ms", col.type.tz), safe=False).cast(pa.int64())
    elif pa.types.is_integer(col.type):
        col = _within_int64(col, "timestamp", first_row) if pa.types.is_uint64(col.type) else col.cast(pa.int64())
    elif not pa.types.is_null(col.type):
        raise SerializationError(f"column 'timestamp' must be a timestamp or int64 epoch milliseconds, got "
                                 f"{col.type}")
    else:
        return np.full(n, now, np.int64)
    out: I64 = np.asarray(pc.fill_null(col, now))
    if n and int(out.min()) < 0:
        row = int(np.argmax(out < 0))
        raise SerializationError(f"column 'timestamp' holds {int(out[row])} at row {first_row + row}: record "
                                 "timestamps are epoch milliseconds >= 0 (1970 or later; the Java client refuses "
                                 "earlier ones too). Fix the row, or make it null for the send time")
    return out


def _take(arr: pa.Array | None, idx: pa.Array | None) -> pa.Array | None:
    return arr if arr is None or idx is None else arr.take(idx)


_Encoded = tuple[TopicPartition, list[EncodedBatch]]  # one partition's encoded batches, in row order


class PreparedBatch:
    """An input to ``send_batch`` checked, partitioned and encoded by one producer, not yet queued
    (``KafkaProducer.prepare_batch``; ``send_prepared`` queues it, once)."""

    def __init__(self, sender: ArrowSender, parts: list[_Encoded]) -> None:
        self.sender = sender
        self.parts = parts
        self.sent = False

    @property
    def records(self) -> int:
        return sum(e.record_count for _, batches in self.parts for e in batches)


class ArrowSender:
    """The send_batch engine of one KafkaProducer (see the module docstring)."""

    def __init__(self, config: ProducerConfig, accumulator: RecordAccumulator, partitioner: Partitioner,
                 tm: TransactionManager | None,
                 partition_info: Callable[[str, int, int], PartitionInfo],
                 wakeup: Callable[[], None], rate_limits: BatchRateLimits | None = None) -> None:
        self._config = config
        # max.records.per.second / max.bytes.per.second: shared with the producer's send() (None: no limit)
        self._rate_limits = rate_limits if rate_limits is not None and rate_limits.active else None
        self._acc = accumulator
        self._partitioner = partitioner
        self._transactional = tm is not None and tm.is_transactional
        # An idempotent or transactional producer stamps its id and sequence into every batch header when it
        # drains the batch, which computes the CRC: the encoder leaves it out (one pass over the bytes less).
        self._stamped = tm is not None
        self._tm = tm
        # (topic, max_block_ms, highest partition named + 1) -> the topic's PartitionInfo
        self._partition_info = partition_info
        self._wakeup = wakeup
        # The largest record that can ever be sent (checked before anything is queued).
        self._max_record = min(config.max_request_size, config.buffer_memory) - HEADER_SIZE

    def send(self, topic: str | None, data: pa.RecordBatch | pa.Table, interceptors: InterceptorChain | None = None
             ) -> Future[BatchSendResult]:
        started = monotonic_ms()
        return self._send_encoded(self._encode_slices(topic, data, started), started, interceptors)

    def prepare(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> PreparedBatch:
        """What ``send`` does before queueing (checks, partitioning, encoding), for :meth:`send_prepared` later."""
        started = monotonic_ms()
        return PreparedBatch(self, [part for encoded in self._encode_slices(topic, data, started) for part in encoded])

    def send_prepared(self, prepared: PreparedBatch, interceptors: InterceptorChain | None = None
                      ) -> Future[BatchSendResult]:
        if prepared.sender is not self:
            raise ValueError("this PreparedBatch was prepared by another producer (its batches are encoded for that "
                             "producer's settings): prepare it with this one")
        if prepared.sent:
            raise ValueError("this PreparedBatch was sent already: a second send would duplicate its records")
        prepared.sent = True
        return self._send_encoded([prepared.parts], monotonic_ms(), interceptors)

    def _send_encoded(self, slices: Iterable[list[_Encoded]], started: int, interceptors: InterceptorChain | None
                      ) -> Future[BatchSendResult]:
        futures: list[Future[BatchMetadata]] = []
        sizes: list[int] = []
        # A large input's encoded batches come a slice at a time: the joined records and the batches waiting for
        # buffer memory are then a slice's size, not the input's, on top of buffer.memory.
        unseen = 0  # bytes queued since the sender was last woken
        for encoded in slices:
            before = len(sizes)
            # Time waiting for the rate limits is not part of max.block.ms: the deadline moves by it.
            started += self._queue(encoded, started, futures, sizes, interceptors)
            unseen += sum(sizes[before:])
            # What is queued goes out while the next slice is encoded. (Woken only at the end, the sender slept
            # through the whole call, up to its 1 s poll timeout, and a table larger than buffer.memory stalled.)
            if unseen >= self._config.max_request_size:
                self._wakeup()
                unseen = 0
        if unseen:
            self._wakeup()
        return _result(futures, sizes)

    def _encode_slices(self, topic: str | None, data: pa.RecordBatch | pa.Table, started: int
                       ) -> Iterator[list[_Encoded]]:
        """The input's batches, encoded one slice at a time (each as (topic-partition, batches) pairs)."""
        # Every piece is checked before anything is encoded; row numbers in errors count from the input's start.
        checked: list[_Columns] = []
        first_row = 0
        for piece in _input_pieces(data):
            cols = _validate(piece, topic, first_row)
            self._check_sizes(cols, first_row)
            checked.append(cols)
            first_row += piece.num_rows
        for cols in checked:
            for name, rows in self._groups(topic, cols):
                yield from self._encode_topic(name, rows, cols, started)

    def _check_sizes(self, cols: _Columns, first_row: int) -> None:
        """Refuse the first row that can never be sent. The size bound (``record_size_bound``) overstates a record, so
        a row over the limit by its bound is measured exactly before it is refused, as send() does: the same
        record is taken or refused by both. Only rows within that margin of max.request.size are measured."""
        cfg = self._config
        option, limit = (("max.request.size", cfg.max_request_size) if cfg.max_request_size <= cfg.buffer_memory
                         else ("buffer.memory", cfg.buffer_memory))
        for row in np.flatnonzero(cols.size > self._max_record).tolist():
            size = HEADER_SIZE + _exact_record_size(cols, row)
            if size > limit:
                raise RecordTooLargeError(f"row {first_row + row} is {size} bytes when serialized, larger than "
                                          f"{option} ({limit}); send smaller records or raise {option}")

    def _groups(self, topic: str | None, cols: _Columns) -> list[tuple[str, pa.Array | None]]:
        """(topic, row indices or None for all rows) per topic, rows in input order."""
        if topic is not None:
            return [(topic, None)]
        assert cols.topic is not None
        encoded = pc.dictionary_encode(cols.topic)
        names = encoded.dictionary.to_pylist()
        if len(names) == 1:
            return [(names[0], None)]
        codes = np.asarray(encoded.indices)
        order = np.argsort(codes, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(codes, minlength=len(names)))])
        return [(names[i], pa.array(order[bounds[i]:bounds[i + 1]])) for i in range(len(names))
                if bounds[i + 1] > bounds[i]]

    def _encode_topic(self, topic: str, rows: pa.Array | None, cols: _Columns, started: int
                      ) -> Iterator[list[_Encoded]]:
        """One topic's rows of a piece, partitioned, then encoded in slices taken in partition order."""
        max_block = self._config.max_block_ms
        key, explicit = _take(cols.key, rows), _take(cols.partition, rows)
        highest = None if explicit is None else pc.max(explicit).as_py()
        num_partitions, available = self._partition_info(topic, max(0, max_block - (monotonic_ms() - started)),
                                                         0 if highest is None else highest + 1)
        row_idx = None if rows is None else np.asarray(rows)
        size = cols.size if row_idx is None else cols.size[row_idx]
        parts = self._partitioner.partition_arrow(topic, key, explicit, size, num_partitions, available)
        # numpy's stable sort is a radix sort for 8/16-bit keys, much cheaper than its merge sort on int32.
        narrow = np.uint8 if num_partitions <= 1 << 8 else np.uint16 if num_partitions <= 1 << 16 else parts.dtype
        order = np.argsort(parts.astype(narrow, copy=False), kind="stable")
        counts = np.bincount(parts, minlength=num_partitions)
        single = int(np.count_nonzero(counts)) == 1
        # The encoder reads the columns through the rows' order (partition by partition, input order within
        # each): no sorted copy of the columns (a take per column would copy every byte once more).
        encode_order = row_idx if single else (order if row_idx is None else row_idx[order])
        present = np.flatnonzero(counts)
        seg_starts = np.concatenate([[0], np.cumsum(counts[present])[:-1]]).astype(np.int64)
        limit = self._acc.compression_ratio.records_limit(topic)
        ordered_size = size if single else size[order]
        slices = _ordered_slices(ordered_size, seg_starts, limit)
        if len(slices) > 1 and isinstance(cols.value, pa.ChunkedArray):
            cols = dataclasses.replace(cols, value=cols.value.combine_chunks())  # once, not in every slice's take
        for lo, hi in slices:
            if (lo, hi) == (0, len(ordered_size)):
                # One encoder call for the whole topic: its fixed per-call cost (numpy set-up per array) is paid
                # once, not once per partition. Its batches are queued together, once all are encoded: they come
                # out in partition order, and a Produce request carries one batch per partition, so queued group
                # by group they would go out as requests of a few batches while the next group was encoded,
                # more requests per byte than one batch of every partition a request.
                yield [part for group in self._encode_rows(topic, cols, encode_order, seg_starts, present, limit)
                       for part in group]
            else:
                # Only this slice's rows, in partition order: a view of the input when they are consecutive in
                # it, else a copy -- the encoder's concatenation of the columns then covers the slice, not the
                # whole piece, each time.
                part = (cols.slice(lo, hi) if encode_order is None
                        else cols.take(pa.array(encode_order[lo:hi])))
                within = int(np.searchsorted(seg_starts, lo, side="right")) - 1
                starts = np.append(lo, seg_starts[(seg_starts > lo) & (seg_starts < hi)]) - lo
                yield from self._encode_rows(topic, part, None, starts, present[within:within + len(starts)], limit,
                                             first=lo - int(seg_starts[within]))

    def _encode_rows(self, topic: str, cols: _Columns, order: npt.NDArray[np.int64] | None, seg_starts: I64,
                     partitions: npt.NDArray[np.intp], limit: int, first: int = 0) -> Iterator[list[_Encoded]]:
        """Encode ``cols`` (read through ``order``) whose rows for ``partitions[i]`` start at ``seg_starts[i]``,
        a group of batches at a time; ``first``: rows of the first partition encoded before these (its batches'
        first_row counts them)."""
        for encoded in encode_arrow_batch_groups(
                cols.value, key=cols.key, timestamp_ms=cols.timestamp, headers=cols.headers, max_batch_bytes=limit,
                compression=self._config.compression_type, transactional=self._transactional,
                segment_starts=seg_starts, compression_level=self._config.effective_compression_level,
                checksum=not self._stamped, order=order):
            # Batches come out in row order and never span two segments: batch -> partition by where it starts.
            owner = np.searchsorted(seg_starts, [e.first_row for e in encoded], side="right") - 1
            cuts = np.flatnonzero(np.diff(owner, prepend=-1, append=len(seg_starts))).tolist()
            out: list[_Encoded] = []
            for lo, hi in itertools.pairwise(cuts):
                i = int(owner[lo])
                shift = int(seg_starts[i]) - (first if i == 0 else 0)
                mine = encoded[lo:hi]
                # first_row stays relative to the partition's rows, as when each partition was encoded on its own.
                if shift:  # (the constructor directly: dataclasses.replace re-inspects the fields every call)
                    mine = [EncodedBatch(e.data, e.record_count, e.first_row - shift, e.base_timestamp,
                                         e.max_timestamp, e.uncompressed_size, e.has_crc) for e in mine]
                out.append((TopicPartition(topic, int(partitions[i])), mine))
            yield out

    def _queue(self, encoded: list[_Encoded], started: int, futures: list[Future[BatchMetadata]],
               sizes: list[int], interceptors: InterceptorChain | None) -> int:
        """Queue encoded batches, partition by partition (each waits up to what is left of max.block.ms, after the
        rate limits let it go); returns the milliseconds spent waiting for the rate limits."""
        limited = 0
        for tp, all_mine in encoded:
            if self._transactional and self._tm is not None:
                self._tm.maybe_add_partition(tp)
            # Rate limited: each batch waits for the limits before it is queued (a batch at a time, so the
            # partition's batches go out spread over time, not all at once after one long wait).
            for mine in [all_mine] if self._rate_limits is None else [[e] for e in all_mine]:
                if self._rate_limits is not None:
                    wait = self._rate_limits.reserve(mine[0].record_count, len(mine[0].data))
                    if wait > 0:
                        self._wakeup()  # what is queued goes out while this thread waits
                        time.sleep(wait)
                        limited += int(wait * 1000)
                        started += int(wait * 1000)
                self._append(tp, mine, started, futures, sizes, interceptors)
        return limited

    def _append(self, tp: TopicPartition, mine: list[EncodedBatch], started: int,
                futures: list[Future[BatchMetadata]], sizes: list[int], interceptors: InterceptorChain | None
                ) -> None:
        """Queue one partition's encoded batches, waiting up to what is left of max.block.ms for memory."""
        max_block = self._config.max_block_ms
        remaining = max(0, max_block - (monotonic_ms() - started))
        batch_futures = self._acc.append_encoded(tp, mine, monotonic_ms(), remaining, self._wakeup)
        futures.extend(batch_futures)
        sizes.extend(len(e.data) for e in mine)
        if interceptors:
            for f in batch_futures:
                f.add_done_callback(functools.partial(_acknowledge, tp=tp, interceptors=interceptors))


def _acknowledge(future: Future[BatchMetadata], tp: TopicPartition, interceptors: InterceptorChain) -> None:
    error = future.exception()
    metadata = future.result() if error is None else BatchMetadata(tp.topic, tp.partition, NO_OFFSET, 0, 0, -1)
    interceptors.on_batch_acknowledgement(metadata, error)


def _result(futures: list[Future[BatchMetadata]], sizes: list[int]) -> Future[BatchSendResult]:
    out: Future[BatchSendResult] = Future()
    gathered = gather_batch_futures(futures)

    def done(f: Future[list[BatchMetadata]]) -> None:
        error = f.exception()
        if error is not None:
            out.set_exception(error)
            return
        # Grouped per partition and totalled once each, not a dataclass and a merge per batch: this runs on the
        # sender thread, once per batch.
        parts: dict[tuple[str, int], list[tuple[int, int, int, int]]] = {}
        for md, size in zip(f.result(), sizes, strict=False):
            parts.setdefault((md.topic, md.partition), []).append(
                (md.record_count, size, md.base_offset, md.last_offset))
        out.set_result(BatchSendResult({key: PartitionWrite.total(*key, p) for key, p in parts.items()}))

    gathered.add_done_callback(done)
    return out
