"""``KafkaProducer``: the public producer, shaped like the Java client's KafkaProducer.

    with KafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}) as p:
        md = p.send("t", value=b"v", key=b"k", headers=[("h", b"x")]).result(timeout=10)   # RecordMetadata
        p.send_batch("t", arrow_table).result()     # BatchSendResult: records/bytes/offsets per partition
        p.flush()

    p = KafkaProducer({..., "transactional.id": "job-3"})
    p.init_transactions(); p.begin_transaction(); p.send(...); p.commit_transaction()   # or abort_transaction()
    p.begin_transaction(); p.send(...)           # consume-transform-produce: the consumer's offsets commit with it
    p.send_offsets_to_transaction({("in", 0): 43}, ConsumerGroupMetadata("group", generation_id, member_id))
    p.commit_transaction()

    p.start_init_transactions()                 # the coordinator round trips run while...
    prepared = p.prepare_batch("t", table)      # ...this thread encodes (no transaction needed yet)
    p.init_transactions(); p.begin_transaction(); p.send_prepared(prepared)

Pieces (one per module, as in the Java client): ``ProducerConfig`` (validated once), ``NetworkClient`` + metadata
cache, ``BufferPool`` (buffer.memory), ``RecordAccumulator``, ``Partitioner``, ``TransactionManager`` (idempotence,
transactions), ``Sender`` on a daemon ``SenderThread``, ``InterceptorChain``, ``ProducerMetrics``.

Blocking: ``send`` / ``send_batch`` block up to max.block.ms in total for metadata of a new topic and for buffer
memory, then raise (KafkaTimeoutError / BufferExhaustedError). A record that can never be sent (larger than
max.request.size or buffer.memory) raises RecordTooLargeError at once, naming its size and the option.

Fatal errors: a connection failure that reconnecting cannot fix (wrong SASL password, untrusted CA, host name
mismatch, plaintext client on a TLS port) stops the producer at once, as in the Java client: pending futures fail
with it; ``send`` / ``send_batch`` / ``flush`` / ``partitions_for`` and the transaction calls raise it (same class
and message); the producer can only be closed. Bad TLS files or key password: ConfigError from the constructor.

Closing: ``close(timeout_s)`` stops new sends, sends what is queued and waits for the answers up to ``timeout_s``
(None: no limit); ``close(0)`` -- or a timeout that runs out -- fails every pending future with
ProducerClosedError. A graceful close aborts a transaction still open once everything queued was answered, as
Java's does (a ``with`` block that raised leaves nothing open to hold back read_committed consumers);
``close(0)``, a timeout that runs out, or ``close(abort_open_transaction=False)`` leave it open. The Spark sink
closes with the latter: the driver ends each task's transaction (EndTxn by transactional id, producer id and
epoch, see ``transaction_identity`` and ``end_transaction``); an open transaction nobody ends is aborted by the
broker after transaction.timeout.ms, or by the next producer with the same transactional.id.

Threads: every public method may be called from any thread. Callbacks and interceptors' ``on_acknowledgement`` run
on the sender thread: keep them short; there ``flush`` and the transaction calls raise IllegalStateError (they would
wait for that thread) and ``close`` is ``close(0)``. ``_closed`` is guarded by ``_close_lock``; ``config`` is
replaced whole (one reference write) by ``switch_transactional_id``; everything else is either immutable after
``__init__`` or thread-safe on its own.
"""

from __future__ import annotations

import concurrent.futures
import copy
import dataclasses
import itertools
import logging
import operator
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from time import monotonic_ns as _monotonic_ns
from typing import Any, SupportsIndex

import numpy as np
import pyarrow as pa

from spark_kafka_sink.errors import (
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    SerializationError,
)
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.net.security import check_security, handshakes_for
from spark_kafka_sink.producer.accumulator import AppendResult, RecordAccumulator, RunAppend
from spark_kafka_sink.producer.arrow_send import (
    ArrowSender,
    BatchSendResult,
    PartitionWrite,
    PreparedBatch,
    as_table_input,
)
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.config_options import MAX_INT64
from spark_kafka_sink.producer.interceptors import InterceptorChain, ProducerRecord
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.node_availability import sticky_candidates
from spark_kafka_sink.producer.partitioner import Partitioner, PartitionInfo
from spark_kafka_sink.producer.rate_limit import BatchRateLimits
from spark_kafka_sink.producer.record_metadata import RecordMetadata, TopicPartition
from spark_kafka_sink.producer.record_outcomes import RowPlaces
from spark_kafka_sink.producer.sender import Sender, SenderThread
from spark_kafka_sink.producer.transactions import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    TransactionIdentity,
    TransactionManager,
    offsets_to_commit,
)
from spark_kafka_sink.protocol.murmur2 import murmur2, murmur2_array
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, RECORD_OVERHEAD_BOUND, record_size, record_size_bound

__all__ = ["KafkaProducer", "RecordMetadata", "BatchSendResult", "PartitionWrite"]

_log = logging.getLogger(__name__)

Callback = Callable[[RecordMetadata | None, BaseException | None], None]
_Bytes = bytes | bytearray | memoryview | str | None


@dataclasses.dataclass(frozen=True, slots=True)
class _CachedPartitionInfo:
    """A topic's PartitionInfo and what it was computed from (recomputed when either changed)."""

    metadata_version: int
    unavailable: frozenset[int]  # the node-availability set, compared by identity (replaced whole on change)
    info: PartitionInfo
    partitions: tuple[TopicPartition, ...]  # TopicPartition(topic, p) for p in 0..count-1, made once


def _to_bytes(value: _Bytes, what: str) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise SerializationError(f"{what} must be bytes or str (UTF-8), got {type(value).__name__}")


def _as_int(value: object, what: str) -> int:
    """An integer argument given as another integer type (numpy's); bool, float and the rest: SerializationError."""
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise SerializationError(f"{what} must be an int or None, got {type(value).__name__} {value!r}")
    return operator.index(value)  # (it has __index__)


def _header_key(key: object) -> str:
    """A header key is a string on the wire (Java's is a non-null String): str as it is, bytes as UTF-8."""
    if isinstance(key, str):
        return key
    if isinstance(key, (bytes, bytearray, memoryview)):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            raise SerializationError(f"header key {bytes(key)!r} is not UTF-8: header keys are strings") from None
    raise SerializationError(f"a header key must be a str (or UTF-8 bytes), got {type(key).__name__}: header keys "
                             "are required strings")


class KafkaProducer:
    """A Kafka producer shaped like the Java client: ``send`` one record or ``send_batch`` an Arrow table, each
    returning a future; idempotent by default; transactions with a ``transactional.id``. ``config`` takes the Java
    client's option names (unknown names fail, naming the nearest). Use it as a context manager, or ``close()``."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.config = cfg = ProducerConfig.from_dict(config)
        # Everything that can reject the config is built before the first socket exists, so a bad value never
        # leaks a connection (or a ResourceWarning).
        net_config = cfg.net_config()
        check_security(net_config)  # TLS files and key password: a ConfigError naming the option, now
        self._interceptors = InterceptorChain(cfg.interceptor_classes)
        self._intercepted = bool(self._interceptors)  # read per record: the chain is immutable
        self._partitioner = Partitioner.from_config(cfg)
        # No partitioner.class: send applies the built-in rules itself (murmur2 of the key, else sticky).
        self._builtin_rules = self._partitioner.custom is None
        self._ignore_keys = self._partitioner.ignore_keys
        self._sticky = self._partitioner.sticky
        self._adaptive = cfg.partitioner_adaptive_partitioning_enable
        self._pool = BufferPool(cfg.buffer_memory)
        self._accumulator = RecordAccumulator.from_config(cfg, self._pool)
        self._client = NetworkClient(net_config, handshakes=handshakes_for)
        self._metadata = self._client.metadata
        self._metrics = ProducerMetrics(cfg.metrics_sample_window_ms, cfg.metrics_num_samples)
        self._metrics.add_gauge("buffer-total-bytes", lambda: float(self._pool.total_memory))
        self._metrics.add_gauge("buffer-available-bytes", lambda: float(self._pool.available_memory))
        self._metrics.add_gauge("waiting-threads", lambda: float(self._pool.queued))
        self._metrics.add_gauge("bufferpool-wait-time-ns-total", lambda: self._pool.blocked_time_ms_total * 1e6)
        self._tm = (TransactionManager(transactional_id=cfg.transactional_id,
                                       transaction_timeout_ms=cfg.transaction_timeout_ms,
                                       retry_backoff_ms=cfg.retry_backoff_ms)
                    if cfg.enable_idempotence else None)
        self._adds_partitions = self._tm is not None and self._tm.is_transactional  # fixed: a switch keeps one
        self._sender = Sender(self._client, self._accumulator, cfg, transaction_manager=self._tm,
                              metrics=self._metrics)
        self._thread = SenderThread(self._sender, name=f"kafka-producer-network-thread | {cfg.client_id}")
        self._availability = self._sender.node_availability
        self._wakeup = self._client.wakeup  # per record: what SenderThread.wakeup calls, without its two hops
        # max.records.per.second / max.bytes.per.second: one budget for send() and send_batch()
        self._rate_limits = BatchRateLimits(cfg.max_records_per_second, cfg.max_bytes_per_second)
        self._rate_limited = self._rate_limits.active  # read per record: the limits are fixed
        # send's straight path (_append_plain) serves records that need none of these
        self._plain_sends = self._builtin_rules and not self._intercepted and not self._rate_limited
        self._arrow = ArrowSender(cfg, self._accumulator, self._partitioner, self._tm, self._partition_info,
                                  self._thread.wakeup, self._rate_limits)
        self._max_block_ms = cfg.max_block_ms
        self._size_limit = min(cfg.max_request_size, cfg.buffer_memory)
        # The most memory one new per-record batch takes (a codec's records limit is at most max.request.size):
        # with this much free, a send takes memory without waiting, whatever the compression estimate does.
        self._largest_new_batch = min(max(cfg.batch_size, cfg.max_request_size), cfg.buffer_memory)
        # topic -> its PartitionInfo as of a metadata version and set of unavailable nodes: a cache written by any
        # sending thread; whole-entry dict writes are atomic, and a stale entry is only recomputed.
        self._partition_cache: dict[str, _CachedPartitionInfo] = {}
        self._close_lock = threading.Lock()
        self._closed = False  # guarded by _close_lock
        # Only the sender thread touches the client from here on.
        self._thread.start()

    # ------------------------------------------------------------------------------------------ sending

    @property
    def rate_limited(self) -> bool:
        """Whether max.records.per.second or max.bytes.per.second is set: send and send_batch may then wait."""
        return self._rate_limited

    def send(self, topic: str, value: _Bytes, key: _Bytes = None, partition: SupportsIndex | None = None,
             timestamp_ms: SupportsIndex | None = None,
             headers: Iterable[tuple[str | bytes, _Bytes]] | Mapping[str, _Bytes] | None = None,
             callback: Callback | None = None) -> Future[RecordMetadata]:
        """Queue one record; the future completes with its RecordMetadata once the broker acknowledged it.

        ``callback(metadata, error)`` runs on the sender thread when it completes. Raises at once for local
        failures: closed producer, fatal/abortable transaction state, no metadata or memory within max.block.ms,
        a record too large."""
        self._check_sendable()
        if (partition is None and timestamp_ms is None and not headers and self._plain_sends
                and type(value) is bytes and (key is None or type(key) is bytes) and type(topic) is str):
            # The common record, straight through: nothing to convert, intercept or wait for.
            cached = self._partition_cache.get(topic)
            if (cached is not None and cached.metadata_version == self._metadata.version
                    and cached.unavailable is self._availability.unavailable and cached.info.partition_count):
                size = HEADER_SIZE + RECORD_OVERHEAD_BOUND + len(value) + (len(key) if key is not None else 0)
                if size <= self._size_limit:
                    return self._append_plain(cached, topic, value, key, size, callback)
        # The per-record path: plain bytes and ints pass through untouched; only what is given is converted.
        partition = partition if partition is None or type(partition) is int else _as_int(partition, "partition")
        timestamp_ms = (timestamp_ms if timestamp_ms is None or type(timestamp_ms) is int
                        else _as_int(timestamp_ms, "timestamp_ms"))
        value_b = value if value is None or type(value) is bytes else _to_bytes(value, "value")
        key_b = key if key is None or type(key) is bytes else _to_bytes(key, "key")
        header_t: tuple[tuple[str, bytes | None], ...] = ()
        if headers:
            pairs = headers.items() if isinstance(headers, Mapping) else headers  # a dict, as confluent-kafka's
            header_t = tuple((_header_key(k), _to_bytes(v, f"header {k!r}")) for k, v in pairs)
        record: ProducerRecord | None = None
        if self._intercepted:
            record = self._interceptors.on_send(ProducerRecord(topic, value_b, key_b, header_t, partition,
                                                               timestamp_ms))
            topic, value_b, key_b, partition, timestamp_ms = (record.topic, record.value, record.key,
                                                               record.partition, record.timestamp_ms)
            header_t = tuple(record.headers)
        if timestamp_ms is not None and timestamp_ms < 0:  # as Java's ProducerRecord (the broker would take it)
            raise SerializationError(f"timestamp_ms={timestamp_ms}: record timestamps are epoch milliseconds >= 0 "
                                     "(1970 or later); pass None for the send time")
        if timestamp_ms is not None and timestamp_ms > MAX_INT64:  # Java's is a long; the wire field is int64
            raise SerializationError(f"timestamp_ms={timestamp_ms}: more than a signed 64-bit integer holds (the "
                                     "wire's timestamp field); record timestamps are epoch milliseconds")
        tp: TopicPartition | None = None
        try:
            started = now = _monotonic_ns() // 1_000_000  # monotonic_ms's clock, without its call per record
            # The common case read inline: the topic's partitions cached for the current metadata and availability.
            # Its metadata.max.idle.ms is renewed below, once per new batch rather than per record.
            cached = self._partition_cache.get(topic) if type(topic) is str else None
            if (cached is not None and cached.metadata_version == self._metadata.version
                    and cached.unavailable is self._availability.unavailable
                    and (partition is None or partition < cached.info.partition_count)):
                num_partitions, available = cached.info
            else:
                num_partitions, available = self._partition_info(topic, self._max_block_ms,
                                                                 0 if partition is None else partition + 1)
                cached = self._partition_cache.get(topic)
                now = monotonic_ms()
            if header_t:
                size = self._record_size(key_b, value_b, header_t)
            else:  # the bound of record_size_bound, inline; near a limit, the exact size decides
                size = (HEADER_SIZE + RECORD_OVERHEAD_BOUND + (len(key_b) if key_b is not None else 0)
                        + (len(value_b) if value_b is not None else 0))
                if size > self._size_limit:
                    size = self._record_size(key_b, value_b, header_t)
            if partition is None and self._builtin_rules and num_partitions > 0:
                # The built-in partitioner's rules, inline (Partitioner.partition's): this runs per record.
                if key_b is not None and not self._ignore_keys:
                    chosen, sticky = (murmur2(key_b) & 0x7FFFFFFF) % num_partitions, False
                else:
                    chosen, sticky = self._sticky.current(topic, num_partitions, available), True
            else:
                chosen, sticky = self._partitioner.partition(topic, key_b, num_partitions, partition, available)
            tps = cached.partitions if cached is not None else ()
            tp = tps[chosen] if chosen < len(tps) else TopicPartition(topic, chosen)
            if self._adds_partitions:
                assert self._tm is not None  # (transactional)
                self._tm.maybe_add_partition(tp)
            if self._rate_limited:
                wait = self._rate_limits.reserve(1, size)
                if wait > 0:  # (not part of max.block.ms: the deadline moves by the wait)
                    time.sleep(wait)
                    started += int(wait * 1000)
                    now = monotonic_ms()
            timestamp = timestamp_ms if timestamp_ms is not None else time.time_ns() // 1_000_000
            remaining = self._max_block_ms - (now - started)
            if remaining < 0:
                remaining = 0
            on_done = callback if not self._intercepted else self._completion(callback, tp)
            result = self._accumulator.append(tp, timestamp, key_b, value_b, header_t, now, remaining, on_done)
        except KafkaError as exc:
            if self._intercepted:
                failed = record or ProducerRecord(topic, value_b, key_b, header_t, partition, timestamp_ms)
                self._interceptors.on_send_error(failed, tp, exc)
            raise
        return self._appended(topic, chosen, size, sticky, result, now)

    def _append_plain(self, cached: _CachedPartitionInfo, topic: str, value: bytes, key: bytes | None, size: int,
                      callback: Callback | None) -> Future[RecordMetadata]:
        """``send``'s common case once its checks passed: bytes value and key, no partition, timestamp or headers,
        the topic's partitions cached for the current metadata, ``size`` (the record's bound) within the limits,
        and ``_plain_sends`` (built-in partitioner, no interceptors, no rate limit). What ``send`` does then, in
        one call: the built-in partitioner's rules, the append (waiting only for buffer memory), the sticky
        partition's accounting and the sender's wake-up."""
        num_partitions, available = cached.info
        if key is not None and not self._ignore_keys:
            chosen, sticky = (murmur2(key) & 0x7FFFFFFF) % num_partitions, False
        else:
            chosen, sticky = self._sticky.current(topic, num_partitions, available), True
        tp = cached.partitions[chosen]
        if self._adds_partitions:
            assert self._tm is not None  # (transactional)
            self._tm.maybe_add_partition(tp)
        now = _monotonic_ns() // 1_000_000
        result = self._accumulator.append(tp, time.time_ns() // 1_000_000, key, value, (), now,
                                          self._max_block_ms, callback)
        return self._appended(topic, chosen, size, sticky, result, now)

    def _appended(self, topic: str, chosen: int, size: int, sticky: bool, result: AppendResult,
                  now: int) -> Future[RecordMetadata]:
        """After a record's append: the sticky partition's accounting, the topic's idle timer, the sender's
        wake-up; returns the record's future."""
        if sticky and self._sticky.on_append(topic, chosen, size, result.batch_is_full) and self._adaptive:
            # The sticky partition moved: weight the next draw by queue depth so slower brokers get less
            # (KIP-794). Once per switch: batch_is_full holds for every record while batches queue up behind.
            self._partitioner.update_partition_load(topic, self._accumulator.queue_sizes(topic))
        if result.new_batch_created:
            # metadata.max.idle.ms counts from the last send: renewed with each new batch, so it lags the last
            # record by at most the life of an open batch (linger.ms), far below the expiry.
            self._metadata.touch_topic(topic, now)
            self._wakeup()
        elif result.batch_is_full:
            self._wakeup()
        return result.future

    def _completion(self, callback: Callback | None, tp: TopicPartition) -> Callback:
        """The interceptors' on_acknowledgement, then ``callback``: run by the batch when it completes (a
        callback that raises is logged there)."""
        interceptors = self._interceptors

        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            interceptors.on_acknowledgement(metadata or RecordMetadata(tp.topic, tp.partition, -1, -1), error)
            if callback is not None:
                callback(metadata, error)

        return done

    def send_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> Future[BatchSendResult]:
        """Queue a whole Arrow batch/table, vectorized; the future gives records, bytes and offsets per partition.

        Columns as the Spark sink: ``value`` (string|binary, required; null = tombstone), ``key`` (string|binary),
        ``topic`` (string; used when ``topic`` is None), ``partition`` (int; null -> partitioner), ``headers``
        (list<struct<key: string, value: binary>>), ``timestamp`` (timestamp or int64 ms; default: send time).
        Other columns are ignored. A bad column raises SerializationError naming it, before anything is queued.
        ``data`` may also be any table with the Arrow stream interface (``__arrow_c_stream__``: a RecordBatchReader,
        recent Polars data frames), read whole first."""
        self._check_sendable()
        data = as_table_input(data)
        if self._interceptors:
            data = self._interceptors.on_send_batch(topic or "", data)
        return self._arrow.send(topic, data, self._interceptors if self._interceptors else None)

    def prepare_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> PreparedBatch:
        """Do what ``send_batch`` does before queueing -- checks (the same errors), partitioning, encoding -- and
        return the result for :meth:`send_prepared`, for a caller with CPU to spend while it waits: e.g. encode a
        task's first rows while ``start_init_transactions`` is on the wire. Needs no transaction; may block up to
        max.block.ms for the topic's metadata. Holds its encoded batches until sent (outside buffer.memory)."""
        self._ensure_open()
        self._raise_if_fatal()
        data = as_table_input(data)
        if self._interceptors:
            data = self._interceptors.on_send_batch(topic or "", data)
        return self._arrow.prepare(topic, data)

    def send_prepared(self, prepared: PreparedBatch) -> Future[BatchSendResult]:
        """Queue what :meth:`prepare_batch` of this producer encoded (once), as ``send_batch`` would have."""
        if not isinstance(prepared, PreparedBatch):
            raise TypeError(f"send_prepared takes what prepare_batch() returned, got {type(prepared).__name__}; "
                            "send a table or record batch with send_batch()")
        self._check_sendable()
        return self._arrow.send_prepared(prepared, self._interceptors if self._interceptors else None)

    def _record_size(self, key: bytes | None, value: bytes | None,
                     headers: tuple[tuple[str, bytes | None], ...]) -> int:
        """The record's size in a batch of its own; raises RecordTooLargeError if it can never be sent. An upper
        bound (varints at their widest) is enough unless it comes near a limit: then the exact size decides."""
        header_bytes = sum(len(k.encode("utf-8")) + (len(v) if v else 0) for k, v in headers) if headers else 0
        size = HEADER_SIZE + record_size_bound(len(key) if key else 0, len(value) if value else 0, header_bytes,
                                               len(headers))
        if size <= self._size_limit:
            return size
        size = HEADER_SIZE + record_size(0, 0, key, value, headers)
        if size > self.config.max_request_size:
            raise RecordTooLargeError(
                f"the record is {size} bytes when serialized, larger than max.request.size "
                f"({self.config.max_request_size}); send a smaller record or raise max.request.size")
        if size > self.config.buffer_memory:
            raise RecordTooLargeError(
                f"the record is {size} bytes when serialized, larger than buffer.memory "
                f"({self.config.buffer_memory}); send a smaller record or raise buffer.memory")
        return size

    def _partition_info(self, topic: str, max_block_ms: int, needed: int = 0) -> PartitionInfo:
        """(partition count, the sticky partitioner's candidates or None for all), cached per metadata version and
        set of unavailable nodes. Candidates: partitions with a leader, less those whose leader took no data for
        partitioner.availability.timeout.ms (if that leaves none, all with a leader, as Java). ``needed``: the
        highest partition the caller names, plus one; see ``_refresh_if_fewer``."""
        if type(topic) is not str or not topic:  # (before the metadata's topic set: a refresh would fail on it)
            raise SerializationError(f"topic must be a non-empty str, got {type(topic).__name__} {topic!r}")
        info = self._cached_partition_info(topic, max_block_ms)
        if info.partition_count < needed and self._refresh_if_fewer(topic, needed, max_block_ms):
            info = self._cached_partition_info(topic, max_block_ms)
        return info

    def _refresh_if_fewer(self, topic: str, needed: int, max_block_ms: int) -> bool:
        """A record names a partition the cached metadata does not have: partitions may have been added since the
        last refresh, so refresh once (within ``max_block_ms``) before the caller refuses the record. Java keeps
        refreshing until max.block.ms; one answer tells a stale cache from a wrong partition without making a
        wrong partition wait a minute. True if the metadata was refreshed."""
        metadata = self._metadata
        version = metadata.request_update()
        self._thread.wakeup()
        refreshed = metadata.wait_for_update(version, max_block_ms)
        self._raise_if_fatal()
        _log.debug("topic %r: partition %d named, metadata had fewer; refreshed: %s, now %d partition(s)", topic,
                   needed - 1, refreshed, len(metadata.partitions_for(topic) or []))
        return refreshed

    def _cached_partition_info(self, topic: str, max_block_ms: int) -> PartitionInfo:
        self._metadata.touch_topic(topic, monotonic_ms())  # metadata.max.idle.ms counts from the last send
        version = self._metadata.version
        unavailable = self._availability.unavailable
        cached = self._partition_cache.get(topic)
        if cached is not None and cached.metadata_version == version and cached.unavailable is unavailable:
            return cached.info
        count = self._wait_on_metadata(topic, max_block_ms)
        parts = self._metadata.partitions_for(topic) or []
        leaders = {p: self._metadata.leader_for(topic, p) for p in parts}
        info = PartitionInfo(count, sticky_candidates(parts, leaders, unavailable))
        partitions = tuple(TopicPartition(topic, p) for p in range(count))
        self._partition_cache[topic] = _CachedPartitionInfo(version, unavailable, info, partitions)
        return info

    def _wait_on_metadata(self, topic: str, max_block_ms: int) -> int:
        """The topic's partition count, waiting up to ``max_block_ms`` for it to appear in the metadata."""
        metadata = self._metadata
        if metadata.add_topic(topic, monotonic_ms()):
            self._thread.wakeup()
        partitions = metadata.partitions_for(topic)
        if partitions is not None:
            return len(partitions)
        deadline = monotonic_ms() + max_block_ms
        while True:
            self._raise_if_fatal()  # e.g. SASL authentication failed: say so now, not at max.block.ms
            error = metadata.topic_error(topic)
            if error is not None and not error.retriable:
                raise error
            remaining = deadline - monotonic_ms()
            if remaining <= 0:
                failed = metadata.connection_error
                where = f" (last error: {error})" if error is not None else (
                    f" (the last failed connection: {failed})" if failed is not None else "")
                creation = ("allow.auto.create.topics=false, so the producer does not ask the broker to create it: "
                            "create the topic first (or set allow.auto.create.topics=true)"
                            if not metadata.allow_auto_create_topics
                            else "check the topic exists (or may be auto-created)")
                # max_block_ms is what is left of the call's budget (send_batch spends it across steps): name both.
                raise KafkaTimeoutError(f"topic {topic!r} not present in metadata after {max_block_ms} ms "
                                        f"(max.block.ms={self._max_block_ms}){where}; {creation}, and that "
                                        "the brokers are reachable")
            version = metadata.request_update()
            self._thread.wakeup()
            metadata.wait_for_update(version, remaining)
            self._ensure_open()
            partitions = metadata.partitions_for(topic)
            if partitions is not None:
                return len(partitions)

    def partitions_for(self, topic: str, needed: int = 0) -> list[int]:
        """The topic's partition numbers (waits up to max.block.ms for metadata). ``needed``: if the cached metadata
        has fewer partitions, refresh it once first (partitions may have been added since)."""
        self._ensure_open()
        self._raise_if_fatal()
        self._partition_info(topic, self.config.max_block_ms, needed)
        return self._metadata.partitions_for(topic) or []

    def flush(self, timeout_s: float | None = None) -> None:
        """Send everything queued now (ignoring linger.ms) and wait until all of it completed, successfully or
        not. Raises KafkaTimeoutError if ``timeout_s`` passes first, or the fatal error that stopped the producer.
        From a callback: IllegalStateError at once (it would wait for the thread running the callback)."""
        self._refuse_on_sender_thread("flush()")
        self._accumulator.begin_flush()
        self._thread.wakeup()
        if not self._accumulator.await_flush_completion(timeout_s):
            raise KafkaTimeoutError(f"flush did not complete within {timeout_s} s")
        self._raise_if_fatal()  # the records failed with it; the producer cannot send any more either

    # ------------------------------------------------------------------------------------ for the asyncio producer

    def _sends_without_blocking(self, topic: str, partition: object, record_bound: int) -> bool:
        """True if ``send`` of a record of at most ``record_bound`` bytes to ``topic`` (``partition``, or the
        partitioner's) would return without waiting: the topic's partitions are cached, a named partition is among
        them, and buffer.memory has room for a new batch. A snapshot, true for as long as no other thread takes
        memory: :class:`~spark_kafka_sink.producer.async_producer.AsyncKafkaProducer` asks it on its event loop's
        thread, its producer's only allocating thread, right before calling ``send`` there. Once per record: the
        partition check of ``_partitions_cached`` inline, and room for the largest batch any record up to
        max.request.size can need checked first, before the topic's own bound (``_new_batch_bound``)."""
        cached = self._partition_cache.get(topic)
        if cached is None or (partition is not None and not (type(partition) is int
                                                             and 0 <= partition < cached.info.partition_count)):
            return False
        pool = self._pool
        return (pool.can_allocate_now(self._largest_new_batch) and record_bound <= self._largest_new_batch) or \
            pool.can_allocate_now(self._new_batch_bound(topic, record_bound))

    def _send_now(self, topic: str, value: object, key: object, callback: Callback | None
                  ) -> Future[RecordMetadata] | None:
        """``send(topic, value, key, callback=callback)`` if it is ``send``'s common case (``_append_plain``) and
        cannot wait: buffer.memory has room for a new batch (as ``_sends_without_blocking``, the same snapshot
        for the same caller). None, having done nothing, otherwise. Raises what ``send`` raises before queueing
        (closed, fatal, transaction state)."""
        self._check_sendable()
        if not (self._plain_sends and type(value) is bytes and (key is None or type(key) is bytes)
                and type(topic) is str):
            return None
        cached = self._partition_cache.get(topic)
        if (cached is None or cached.metadata_version != self._metadata.version
                or cached.unavailable is not self._availability.unavailable or not cached.info.partition_count):
            return None
        size = HEADER_SIZE + RECORD_OVERHEAD_BOUND + len(value) + (len(key) if key is not None else 0)
        largest = self._largest_new_batch
        if size > self._size_limit or not (
                (size <= largest and self._pool.can_allocate_now(largest))
                or self._pool.can_allocate_now(self._new_batch_bound(topic, size))):
            return None
        return self._append_plain(cached, topic, value, key, size, callback)

    def _staging_room(self, topic: str, record_bound: int) -> int:
        """For the asyncio producer opening a stage (records it gathers before ``_send_run``): buffer.memory's
        free bytes now if a record of ``record_bound`` bytes to ``topic`` would be queued without waiting
        (``_sends_without_blocking``), else 0 (the record takes ``send``'s waiting path)."""
        if not self._sends_without_blocking(topic, None, record_bound):
            return 0
        return self._pool.available_memory

    def _send_run(self, topic: str, timestamps: Sequence[int], keys: Sequence[bytes | None],
                  values: Sequence[bytes], callbacks: Sequence[Callback | None] | None, places: RowPlaces) -> int:
        """Queue records that ``send`` would queue one by one through ``_append_plain`` (bytes values, bytes or
        None keys, no partition, timestamp or headers; each within the size limits), many at a time, in order:
        the asyncio producer's records staged on its loop. Each queued row's place lands in ``places`` (its
        future made from it when asked); rows placed already were queued by an earlier call and are skipped.
        Never waits.

        Returns 0 once every row is queued; the bytes of buffer.memory a new batch needs, having stopped there
        (wait for them, then call again); -1 for rows this path does not take now (a custom partitioner,
        interceptors, a rate limit, or the topic's partitions not cached for the current metadata: ``send``
        them one by one). Raises what ``send`` raises before queueing (closed, fatal, transaction state).
        Per-partition order is the rows' order; keyed rows are partitioned as ``send`` does (Java's murmur2),
        headerless rows without keys go to the sticky partition, which moves where ``send`` would move it."""
        self._check_sendable()
        if not self._plain_sends:
            return -1
        cached = self._partition_cache.get(topic)
        if cached is None or cached.metadata_version != self._metadata.version \
                or cached.unavailable is not self._availability.unavailable:
            if not self._metadata.partitions_for(topic):
                return -1  # not in the metadata yet: send waits for it
            self._cached_partition_info(topic, 0)  # the metadata has it: rebuilt without waiting
            cached = self._partition_cache.get(topic)
        if cached is None or not cached.info.partition_count:
            return -1
        n = len(values)
        waiting = places.unplaced()
        if not waiting:
            return 0
        placed = places.placed
        rows: Sequence[int] = range(n) if waiting == n else [i for i in range(n) if placed[i] is None]
        unkeyed = self._ignore_keys or keys.count(None) == n
        segments: list[tuple[bool, Sequence[int]]]
        if unkeyed:
            segments = [(True, rows)]
        else:  # runs of keyed and of keyless rows, in order: keyless ones take the sticky partition
            segments = [(keyless, list(group)) for keyless, group in
                        itertools.groupby(rows, key=lambda row: keys[row] is None)]
        for sticky, segment in segments:
            needs = (self._append_sticky(topic, cached, segment, timestamps, keys, values, callbacks, places)
                     if sticky else
                     self._append_keyed(topic, cached, segment, timestamps, keys, values, callbacks, places))
            if needs:
                return needs
        return 0

    def _append_sticky(self, topic: str, cached: _CachedPartitionInfo, rows: Sequence[int],
                       timestamps: Sequence[int], keys: Sequence[bytes | None], values: Sequence[bytes],
                       callbacks: Sequence[Callback | None] | None, places: RowPlaces) -> int:
        """``_send_run``'s keyless rows: runs to the sticky partition, each ending where it switches."""
        num_partitions, available = cached.info
        sticky, accumulator = self._sticky, self._accumulator
        start, end = 0, len(rows)
        while start < end:
            chosen = sticky.current(topic, num_partitions, available)
            tp = cached.partitions[chosen]
            if self._adds_partitions:
                assert self._tm is not None  # (transactional)
                self._tm.maybe_add_partition(tp)
            soft, hard = sticky.run_budget(topic, chosen)
            now = _monotonic_ns() // 1_000_000
            run = accumulator.append_run(tp, rows[start:], timestamps, keys, values, callbacks, places, now,
                                         soft, hard)
            if run.needs_memory:
                return run.needs_memory
            assert run.appended  # a run appends its first row unless it needs memory
            start += run.appended
            if sticky.on_append(topic, chosen, run.run_bytes, run.batch_is_full) and self._adaptive:
                self._partitioner.update_partition_load(topic, accumulator.queue_sizes(topic))
            self._after_run(topic, run, now)
        return 0

    def _append_keyed(self, topic: str, cached: _CachedPartitionInfo, rows: Sequence[int],
                      timestamps: Sequence[int], keys: Sequence[bytes | None], values: Sequence[bytes],
                      callbacks: Sequence[Callback | None] | None, places: RowPlaces) -> int:
        """``_send_run``'s keyed rows: murmur2 of every key at once, then one run per partition, in row order."""
        num_partitions = cached.info.partition_count
        hashes = murmur2_array(pa.array([keys[row] for row in rows], pa.binary()))
        chosen = (hashes.astype(np.int64) & 0x7FFFFFFF) % num_partitions
        order = np.argsort(chosen, kind="stable")
        ordered = chosen[order]
        bounds = np.flatnonzero(np.diff(ordered)) + 1
        rows_array = np.asarray(rows, dtype=np.int64)[order]
        for part, group in zip(np.split(ordered, bounds), np.split(rows_array, bounds), strict=True):
            tp = cached.partitions[int(part[0])]
            if self._adds_partitions:
                assert self._tm is not None  # (transactional)
                self._tm.maybe_add_partition(tp)
            pending: list[int] = group.tolist()
            while pending:
                now = _monotonic_ns() // 1_000_000
                run = self._accumulator.append_run(tp, pending, timestamps, keys, values, callbacks, places, now)
                if run.needs_memory:
                    return run.needs_memory
                assert run.appended  # a run appends its first row unless it needs memory
                pending = pending[run.appended:]
                self._after_run(topic, run, now)
        return 0

    def _after_run(self, topic: str, run: RunAppend, now: int) -> None:
        """As ``_appended`` after a record: the topic's idle timer and the sender's wake-up, once per run."""
        if run.new_batch_created:
            self._metadata.touch_topic(topic, now)
            self._wakeup()
        elif run.batch_is_full:
            self._wakeup()

    def _partitions_cached(self, topic: str, partition: object) -> bool:
        """``topic``'s partitions are cached (``send`` need not wait for metadata), ``partition`` among them."""
        cached = self._partition_cache.get(topic)
        return cached is not None and (partition is None or (type(partition) is int
                                                             and 0 <= partition < cached.info.partition_count))

    def _new_batch_bound(self, topic: str, record_bound: int) -> int:
        """The most memory one new batch of ``topic`` takes for a record of ``record_bound`` bytes: twice the
        topic's records limit now (the sender thread may raise the limit between the check and the append, by a
        fraction per built batch: see CompressionRatioEstimator), within buffer.memory, at least the record."""
        limit = self._accumulator.compression_ratio.records_limit(topic)
        total = self._pool.total_memory
        return max(min(2 * limit, total), min(record_bound, total))

    def _has_memory(self, size: int) -> bool:
        """``size`` bytes of buffer.memory are free now and nobody waits ahead (see ``_sends_without_blocking``)."""
        return self._pool.can_allocate_now(size)

    def _wait_for_memory(self, size: int, max_block_ms: int) -> None:
        """Block until ``size`` bytes of buffer.memory are free, waiting in its FIFO queue up to ``max_block_ms``
        (then BufferExhaustedError, as ``send`` raises); takes nothing. The asyncio producer runs it on a worker
        thread, then sends on its loop's thread."""
        self._ensure_open()
        self._thread.wakeup()  # a waiter makes the sender send at once, without lingering: let it see that now
        self._pool.allocate(size, max_block_ms)
        self._pool.deallocate(size)

    def _await_partitions(self, topic: str, max_block_ms: int, needed: int = 0) -> None:
        """Wait up to ``max_block_ms`` for ``topic``'s metadata (``needed``: see ``_partition_info``), raising what
        ``send`` raises; the asyncio producer runs it on a worker thread."""
        self._ensure_open()
        self._raise_if_fatal()
        self._partition_info(topic, max_block_ms, needed)

    def metrics(self) -> dict[str, float]:
        """Metrics by their Java names (record-send-rate, byte-rate, batch-size-avg, request-latency-avg,
        record-retry-rate, record-error-rate, buffer-available-bytes, ...)."""
        return self._metrics.snapshot(monotonic_ms())

    # ------------------------------------------------------------------------------------------ transactions

    def _transactional(self, what: str) -> TransactionManager:
        if self._tm is None or not self._tm.is_transactional:
            raise IllegalStateError(f"{what} needs a transactional.id in the producer config")
        return self._tm

    def _refuse_on_sender_thread(self, what: str) -> None:
        """Callbacks (and interceptors' on_acknowledgement) run on the sender thread, which a call that waits for
        the sender would wait for: flush() forever, the transaction calls for max.block.ms. As Java since 4.0
        (KIP-1118, for flush), such a call fails at once instead."""
        if threading.current_thread() is self._thread:
            raise IllegalStateError(
                f"{what} was called from a producer callback: callbacks run on the producer's sender thread, and "
                f"{what} waits for that thread, so it could never finish. Call it from your own thread, e.g. "
                "after the send's future completed")

    def _await(self, future: Future[None], timeout_s: float | None, what: str, group_id: str | None = None) -> None:
        self._thread.wakeup()
        timeout = self.config.max_block_ms / 1000 if timeout_s is None else timeout_s
        try:
            future.result(timeout)
        except concurrent.futures.TimeoutError:
            limit = f"max.block.ms={self.config.max_block_ms}" if timeout_s is None else "its timeout_s"
            tid = self._tm.transactional_id if self._tm is not None else None
            who = f"the transaction coordinator of transactional.id {tid!r}"
            then = "call it again, or raise max.block.ms, to keep waiting"
            if group_id is not None:
                who += f" or the coordinator of consumer group {group_id!r}"
                then = ("the offsets stay queued: commit_transaction() sends them first (and fails if they fail), "
                        "abort_transaction() aborts them with the rest")
            raise KafkaTimeoutError(
                f"{what} did not complete within {timeout:g} s ({limit}): {who} did not answer in time (its broker "
                f"down or unreachable, or the coordinator still loading after a move). Check the brokers; {then}"
            ) from None

    def init_transactions(self, timeout_s: float | None = None) -> None:
        """Find the coordinator and get a producer id/epoch for transactional.id: fences older producers with the
        same id and aborts what they left open. ``timeout_s`` defaults to max.block.ms. After a timeout, call it
        again: it waits for the same round trips (no other transactional call is accepted until one returns)."""
        self._ensure_open()
        self._refuse_on_sender_thread("init_transactions()")
        self._await(self._transactional("init_transactions()").initialize_transactions(), timeout_s,
                    "init_transactions()")

    def start_init_transactions(self) -> None:
        """Start ``init_transactions`` and return at once: its round trips (FindCoordinator, InitProducerId) run on
        the sender thread while the caller works; the next ``init_transactions()`` waits for this start (and raises
        what it met), even if it is over by then. Nothing can be sent before that call and ``begin_transaction``."""
        self._ensure_open()
        self._transactional("init_transactions()").initialize_transactions()
        self._thread.wakeup()

    def begin_transaction(self) -> None:
        self._ensure_open()
        self._transactional("begin_transaction()").begin_transaction()

    def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Flush, then commit. Raises the abortable error if a send failed (call ``abort_transaction``), or a
        fatal one (ProducerFencedError...: close the producer). After a timeout, call it again: it waits for the
        same commit, and nothing else (abort included) is accepted until one call returns."""
        self._ensure_open()
        self._refuse_on_sender_thread("commit_transaction()")
        started = time.monotonic()
        future = self._transactional("commit_transaction()").begin_commit()
        self.flush(timeout_s)
        remaining = None if timeout_s is None else max(0.0, timeout_s - (time.monotonic() - started))
        self._await(future, remaining, "commit_transaction()")

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        """Drop unsent records of the transaction, wait for in-flight ones, then abort it."""
        self._ensure_open()
        self._refuse_on_sender_thread("abort_transaction()")
        self._await(self._transactional("abort_transaction()").begin_abort(), timeout_s, "abort_transaction()")

    def send_offsets_to_transaction(
            self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
            group_metadata: ConsumerGroupMetadata | str, timeout_s: float | None = None) -> None:
        """Commit a consumer group's offsets as part of the open transaction (Java's ``sendOffsetsToTransaction``):
        they become the group's committed offsets if and only if the transaction commits. ``offsets`` maps each
        (topic, partition) -- a :class:`TopicPartition` or a plain tuple -- to the next offset to read (the last
        processed + 1), an int or an :class:`OffsetAndMetadata`. ``group_metadata``: a
        :class:`ConsumerGroupMetadata` with the consumer's generation and member id, so that a consumer a
        rebalance left behind cannot commit (KIP-447), or just the group id. Waits up to ``timeout_s`` (default
        max.block.ms) for the group coordinator to take them; no offsets: nothing is sent (as Java)."""
        self._ensure_open()
        self._refuse_on_sender_thread("send_offsets_to_transaction()")
        tm = self._transactional("send_offsets_to_transaction()")
        group = group_metadata if isinstance(group_metadata, ConsumerGroupMetadata) else \
            ConsumerGroupMetadata(group_metadata)
        to_commit = offsets_to_commit(offsets)
        if not to_commit:
            tm.fail_if_not_ready_for_send()
            return
        self._await(tm.send_offsets(to_commit, group), timeout_s, "send_offsets_to_transaction()", group.group_id)

    def switch_transactional_id(self, transactional_id: str) -> None:
        """Serve another transactional.id from now on, keeping everything else: connections and their API
        versions, metadata, the sender thread, buffers. For a producer whose transaction is ended elsewhere (the
        Spark sink's driver commits each task's transaction by its :meth:`transaction_identity`): this producer
        lets go of the open transaction, if any, without ending it, and can no longer end it itself. Call
        ``init_transactions()`` next, as with a new producer.

        Only when every record sent was answered (after ``flush()``) and no init/commit/abort call is running;
        otherwise IllegalStateError, and nothing changes. A producer that failed raises its error."""
        self._ensure_open()
        self._raise_if_fatal()
        tm = self._transactional("switch_transactional_id()")
        if self._accumulator.has_undrained():
            raise IllegalStateError(f"switch_transactional_id({transactional_id!r}): records are still queued: "
                                    "flush() first")
        tm.switch_transactional_id(transactional_id)
        self.config = dataclasses.replace(self.config, transactional_id=transactional_id)

    def transaction_identity(self) -> TransactionIdentity:
        """(transactional.id, producer id, epoch): what another process needs to end the open transaction."""
        return self._transactional("transaction_identity()").transaction_identity()

    @property
    def usable(self) -> bool:
        """True while this producer can take more records: open, its sender thread alive, not stopped by a fatal
        connection error, its transaction manager (if any) not failed. A producer cache reuses one only while true."""
        if self._closed or not self._thread.is_alive() or self._metadata.fatal_error is not None:
            return False
        tm = self._tm
        return tm is None or not (tm.has_fatal_error or tm.has_abortable_error)

    # ------------------------------------------------------------------------------------------ closing

    def _raise_if_fatal(self) -> None:
        """Raise the fatal connection error that stopped this producer, if any (see the module docstring)."""
        error = self._metadata.fatal_error
        if error is not None:
            # A copy per raise: raising one instance from many threads would chain their tracebacks together.
            raise copy.copy(error).with_traceback(None)

    def _check_sendable(self) -> None:
        """Raise what every send raises before it queues anything: the producer is closed, a fatal error stopped
        it, or its transaction takes no records now."""
        if self._closed:  # a plain read: set once under _close_lock, never reset
            raise ProducerClosedError("the producer is closed: no more records can be sent")
        if self._metadata.fatal_error is not None:
            self._raise_if_fatal()
        tm = self._tm
        if tm is not None:
            tm.fail_if_not_ready_for_send()

    def _ensure_open(self) -> None:
        if self._closed:  # a plain read: set once under _close_lock, never reset
            raise ProducerClosedError("the producer is closed: no more records can be sent")

    def close(self, timeout_s: float | None = None, *, abort_open_transaction: bool = True) -> None:
        """Send what is queued and wait for it up to ``timeout_s`` (None: no limit); then, or at once with
        ``timeout_s=0``, fail whatever is still pending with ProducerClosedError. Within that time an open
        transaction is aborted, as Java's close does, unless ``abort_open_transaction=False`` leaves it for
        another process to end (see the module docstring). Calling it again does nothing."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self._accumulator.close()
        if threading.current_thread() is self._thread:
            # From a callback: the sender thread cannot wait for itself. As Java: close(0) without blocking.
            _log.warning("close() called from a producer callback: pending records are failed, not sent")
            self._thread.force_close()
            return
        if timeout_s is None or timeout_s > 0:
            self._thread.initiate_close(abort_transaction=abort_open_transaction)
            self._thread.join(timeout_s)
        if self._thread.is_alive():
            self._thread.force_close()
            self._thread.join()
        self._interceptors.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KafkaProducer(client_id={self.config.client_id!r}, closed={self._closed})"

