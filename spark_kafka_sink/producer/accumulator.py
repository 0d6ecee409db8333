"""``RecordAccumulator``: per-partition queues of batches between ``send()`` and the sender (Java semantics).

Appending side (user threads)::

    append(tp, timestamp_ms, key, value, headers, now_ms, max_block_ms, callback=None) -> AppendResult
    append_encoded(tp, encoded_batches, now_ms, max_block_ms) -> list[Future[BatchMetadata]]   # the Arrow path
    begin_flush() / await_flush_completion(timeout_s) -> bool
    abort_incomplete_batches(error)       abort_undrained_batches(error)       close()

Sender side (the sender thread)::

    ready(leader_fn, now_ms, epoch_fn) -> ReadyCheck(ready_nodes, next_ready_check_delay_ms, unknown_leader_topics)
    drain(leader_fn, nodes, max_request_size, now_ms, before_drain=None, epoch_fn) -> {node_id: [ProducerBatch]}
    reenqueue(batch, now_ms)              expired_batches(now_ms) -> [ProducerBatch]
    take_unbuilt() -> [ProducerBatch]     (batches a drain took whose records could not be built: fail them)
    split_and_reenqueue(batch, parts)     (a batch refused as too large goes on as smaller ones)
    mute(tp) / unmute(tp)                 expiry_error(batch, now_ms)

Retries wait out their backoff (``retry.backoff.ms`` doubling up to ``retry.backoff.max.ms``), except one whose
partition has a newer leader than the one its last attempt went to (``epoch_fn``: the partition's cached leader
epoch, which a refresh or a Produce answer naming the new leader raises): as Java's (KIP-951), it goes at once.

Memory: each new batch takes ``max(its records limit, its first record)`` bytes (the limit: batch.size, more with a
codec, see :mod:`~spark_kafka_sink.producer.compression_ratio`; bulk: the encoded size) from the
BufferPool before it is created and gives them back once it reaches a final state, whoever completes it (sender,
expiry, abort): ``ProducerBatch.on_complete`` calls ``_on_batch_complete``, which also drops the batch from the
:class:`~spark_kafka_sink.producer.incomplete_batches.IncompleteBatches` that flush and abort walk.

Locks. Order: a partition's lock may be held when taking ``_lock`` (or, in ``before_drain``, the transaction
manager's lock), never the reverse; no lock is held while blocking in the pool or completing futures.
* ``_PartitionQueue.lock`` guards that partition's deque and every append into its open batch;
* ``_lock`` guards ``_queues`` (insertions; lookups are plain dict reads), ``_muted`` (written by the sender thread
  only, which may read it unlocked), ``_flushes_in_progress``
  and writes of ``_closed`` (a bool, read without the lock);
* ``_incomplete`` guards itself (a leaf lock, taken under a partition's lock when a batch is queued);
* ``_drain_index``, ``_unbuilt`` and ``_next_batch_expiry_ms`` are owned by the sender thread (ready / drain / expiry
  run there).
"""

from __future__ import annotations

import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import NamedTuple

from spark_kafka_sink.errors import DeliveryTimeoutError, ProducerClosedError
from spark_kafka_sink.producer.batch import BatchState, ProducerBatch, RecordCallback
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.compression_ratio import CompressionRatioEstimator
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.incomplete_batches import IncompleteBatches
from spark_kafka_sink.producer.record_metadata import BatchMetadata, RecordMetadata, TopicPartition
from spark_kafka_sink.producer.record_outcomes import RowPlaces
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, Header, record_size

__all__ = ["RecordAccumulator", "AppendResult", "ReadyCheck", "LeaderFn", "EpochFn", "NO_DELAY_LIMIT_MS"]

NO_DELAY_LIMIT_MS = 2**63 - 1  # next_ready_check_delay_ms when no queued batch has a timer running
LeaderFn = Callable[[TopicPartition], "int | None"]  # a partition's leader node id, None when unknown
EpochFn = Callable[[TopicPartition], int]  # a partition's leader epoch, -1 when unknown


def _unknown_epoch(tp: TopicPartition) -> int:
    return -1


class AppendResult(NamedTuple):
    future: Future[RecordMetadata]
    batch_is_full: bool  # wake the sender: a batch is ready regardless of linger.ms
    new_batch_created: bool


_new_result = tuple.__new__


class RunAppend(NamedTuple):
    """What one ``append_run`` did: ``appended`` rows (their bound bytes ``run_bytes``), whether the batch
    they went to is full (as ``AppendResult``'s), whether it was opened for them, and ``needs_memory``: the bytes a
    new batch needs that buffer.memory could not give at once (0: none was needed, or it was given)."""

    appended: int
    run_bytes: int
    batch_is_full: bool
    new_batch_created: bool
    needs_memory: int


class ReadyCheck(NamedTuple):
    ready_nodes: frozenset[int]
    next_ready_check_delay_ms: int  # when a not-yet-ready batch may become ready (linger or backoff)
    unknown_leader_topics: frozenset[str]  # have batches but no known leader: refresh their metadata


@dataclass(eq=False)
class _PartitionQueue:
    tp: TopicPartition
    lock: threading.Lock = field(default_factory=threading.Lock)
    batches: deque[ProducerBatch] = field(default_factory=deque)  # guarded by lock


class RecordAccumulator:
    """Per-partition batch queues with bounded memory (see the module docstring)."""

    def __init__(
        self,
        *,
        batch_size: int,
        compression: str,
        linger_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        delivery_timeout_ms: int,
        pool: BufferPool,
        transactional: bool = False,
        compression_level: int | None = None,
        max_request_size: int = 1 << 20,
        retry_jitter: float = 0.2,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.compression = compression
        self.compression_level = compression_level
        # How many uncompressed bytes a batch may hold: batch.size counts compressed bytes, estimated (Java's).
        self.compression_ratio = CompressionRatioEstimator(compression, batch_size, max_request_size)
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.transactional = transactional
        self._retry_jitter = retry_jitter
        self._rng = rng or random.Random()  # owned by the sender thread (reenqueue)
        self._clock = clock  # only for await_flush_completion's deadline
        self._incomplete = IncompleteBatches()  # guarded by its own lock; completed batches leave it
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._queues: dict[TopicPartition, _PartitionQueue] = {}
        self._muted: set[TopicPartition] = set()
        self._flushes_in_progress = 0
        self._closed = False
        # Owned by the sender thread:
        self._drain_index: dict[int, int] = {}
        self._unbuilt: list[ProducerBatch] = []  # taken off their queues by a drain, for the sender to fail
        self._next_batch_expiry_ms = NO_DELAY_LIMIT_MS

    @classmethod
    def from_config(cls, config: ProducerConfig, pool: BufferPool | None = None, **kwargs: object
                    ) -> RecordAccumulator:
        return cls(batch_size=config.batch_size, compression=config.compression_type, linger_ms=config.linger_ms,
                   retry_backoff_ms=config.retry_backoff_ms, retry_backoff_max_ms=config.retry_backoff_max_ms,
                   delivery_timeout_ms=config.delivery_timeout_ms,
                   pool=pool if pool is not None else BufferPool(config.buffer_memory),
                   transactional=config.is_transactional, max_request_size=config.max_request_size,
                   compression_level=config.effective_compression_level, **kwargs)  # type: ignore[arg-type]

    # ------------------------------------------------------------------------------------------ appending

    def _queue(self, tp: TopicPartition) -> _PartitionQueue:
        queue = self._queues.get(tp)  # a dict read is atomic; insertion below is serialised
        if queue is None:
            with self._lock:
                queue = self._queues.setdefault(tp, _PartitionQueue(tp))
        return queue

    def _check_open(self) -> None:
        if self._closed:
            raise ProducerClosedError("the producer is closed: no more records can be sent")

    def append(self, tp: TopicPartition, timestamp_ms: int, key: bytes | None, value: bytes | None,
               headers: Sequence[Header], now_ms: int, max_block_ms: int, callback: RecordCallback | None = None
               ) -> AppendResult:
        """Append one record to ``tp``'s open batch, or to a new one (blocking up to ``max_block_ms`` for memory).
        The returned future completes when the batch does; then ``callback`` runs (see ``ProducerBatch``)."""
        if self._closed:
            self._check_open()
        queue = self._queues.get(tp) or self._queue(tp)
        with queue.lock:
            # _try_append inline: this runs once per record sent.
            batches = queue.batches
            if batches:
                last = batches[-1]
                if last.is_open:
                    future = last.try_append(timestamp_ms, key, value, headers, now_ms, callback)
                    if future is not None:
                        # tuple.__new__: a NamedTuple's own constructor is a Python function, called per record.
                        return _new_result(AppendResult, (future, len(batches) > 1 or last.is_full(), False))
                    self._close(last)  # full: the next record opens a new batch, this one can go
        # A new batch is needed: reserve its memory without holding any lock (this may block). It holds its records
        # uncompressed until it is built: reserve what it may hold (batch.size, more with a codec that compresses).
        limit = self.compression_ratio.records_limit(tp.topic)
        size = max(limit, HEADER_SIZE + record_size(0, 0, key, value, headers))
        self.pool.allocate(size, max_block_ms)
        try:
            with queue.lock:
                self._check_open()
                result = self._try_append(queue, timestamp_ms, key, value, headers, now_ms, callback)
                if result is not None:  # another thread opened a batch while we waited for memory
                    return result
                batch = ProducerBatch.for_records(tp, limit, self.compression, now_ms,
                                                  allocated_bytes=size, transactional=self.transactional,
                                                  compression_level=self.compression_level)
                future = batch.try_append(timestamp_ms, key, value, headers, now_ms, callback)
                assert future is not None  # the first record always fits
                self._track(batch)
                size = 0  # owned by the batch now
                queue.batches.append(batch)
                full = len(queue.batches) > 1 or batch.is_full()
                return AppendResult(future, full, True)
        finally:
            if size:
                self.pool.deallocate(size)

    def append_run(self, tp: TopicPartition, rows: Sequence[int], timestamps: Sequence[int],
                   keys: Sequence[bytes | None], values: Sequence[bytes],
                   callbacks: Sequence[RecordCallback | None] | None, places: RowPlaces, now_ms: int,
                   soft_budget: int = 1 << 62, hard_budget: int = 1 << 62) -> RunAppend:
        """Append headerless records ``rows`` (non-empty) to ``tp``'s open batch, or else to one new batch, in
        order, under one hold of the partition's lock (``ProducerBatch.append_run``: their places land in ``places``;
        the budgets stop a sticky partition's run where ``send`` would switch). Never waits: a new batch whose
        memory buffer.memory cannot give at once appends nothing and returns that size as ``needs_memory``."""
        if self._closed:
            self._check_open()
        queue = self._queues.get(tp) or self._queue(tp)
        with queue.lock:
            batches = queue.batches
            if batches and batches[-1].is_open:
                last = batches[-1]
                count, run_bytes, refused = last.append_run(rows, timestamps, keys, values, callbacks, places,
                                                            now_ms, soft_budget, hard_budget, len(batches) > 1)
                if refused:
                    self._close(last)  # full: the next record opens a new batch, this one can go
                if count:
                    return RunAppend(count, run_bytes, len(batches) > 1 or last.is_full(), False, 0)
        first = rows[0]
        limit = self.compression_ratio.records_limit(tp.topic)
        size = max(limit, HEADER_SIZE + record_size(0, 0, keys[first], values[first], ()))
        if not self.pool.try_allocate(size):
            return RunAppend(0, 0, False, False, size)
        try:
            with queue.lock:
                self._check_open()
                batches = queue.batches
                if batches and batches[-1].is_open:  # another thread opened one meanwhile: go on in it
                    self.pool.deallocate(size)
                    size = 0
                    return self.append_run(tp, rows, timestamps, keys, values, callbacks, places, now_ms,
                                           soft_budget, hard_budget)
                batch = ProducerBatch.for_records(tp, limit, self.compression, now_ms,
                                                  allocated_bytes=size, transactional=self.transactional,
                                                  compression_level=self.compression_level)
                count, run_bytes, _ = batch.append_run(rows, timestamps, keys, values, callbacks, places, now_ms,
                                                       soft_budget, hard_budget, bool(batches))
                assert count  # the first record always fits
                self._track(batch)
                size = 0  # owned by the batch now
                batches.append(batch)
                return RunAppend(count, run_bytes, len(batches) > 1 or batch.is_full(), True, 0)
        finally:
            if size:
                self.pool.deallocate(size)

    def _try_append(self, queue: _PartitionQueue, timestamp_ms: int, key: bytes | None, value: bytes | None,
                    headers: Sequence[Header], now_ms: int, callback: RecordCallback | None
                    ) -> AppendResult | None:
        # Caller holds queue.lock. The batch's state is read without its lock: OPEN -> CLOSED happens only under
        # queue.lock (held here), so an OPEN read stays true until this append returns.
        batches = queue.batches
        if not batches:
            return None
        last = batches[-1]
        if not last.is_open:
            return None
        future = last.try_append(timestamp_ms, key, value, headers, now_ms, callback)
        if future is None:
            self._close(last)  # full: the next record opens a new batch, this one can go
            return None
        return AppendResult(future, len(batches) > 1 or last.is_full(), False)

    def _close(self, batch: ProducerBatch) -> None:
        """Close a per-record batch (caller holds its partition's lock); the first close builds it, and its
        compression ratio updates the topic's estimate."""
        if batch.state is BatchState.OPEN:
            batch.close()
            if batch.build_error is None:
                self.compression_ratio.observe(batch.tp.topic, batch.uncompressed_size, batch.size_in_bytes)

    def append_encoded(self, tp: TopicPartition, encoded_batches: Iterable[EncodedBatch], now_ms: int,
                       max_block_ms: int, wakeup: Callable[[], None] | None = None
                       ) -> list[Future[BatchMetadata]]:
        """Queue record batches encoded by the Arrow encoder, each as a closed ProducerBatch with one future.

        Memory is reserved batch by batch, each waiting up to ``max_block_ms``, so an input larger than
        buffer.memory streams through as the sender frees memory. If a wait fails, the batches queued before it
        stay queued and are sent (a flush waits for them); the error is raised. One loop step per batch.

        ``wakeup`` (the sender's) is called before waiting for memory: a sender that saw nothing to send sleeps
        up to its poll timeout, and the memory waited for may be held by batches queued since (by this call or
        the caller's previous ones) that it has not seen. The caller wakes the sender once it queued what it
        has: a wakeup per call costs the caller a GIL hand-over each (~0.7 ms on a loaded machine)."""
        futures: list[Future[BatchMetadata]] = []
        queue = self._queue(tp)
        for encoded in encoded_batches:
            self._check_open()
            size = len(encoded.data)
            if not self.pool.try_allocate(size):
                if wakeup is not None:
                    wakeup()
                self.pool.allocate(size, max_block_ms)
            batch = ProducerBatch.from_encoded(tp, encoded, now_ms, allocated_bytes=size)
            self.compression_ratio.observe(tp.topic, encoded.uncompressed_size, size)
            with queue.lock:
                closed = self._closed
                if not closed:
                    if queue.batches:
                        self._close(queue.batches[-1])  # keep order: later records go after the bulk rows
                    self._track(batch)
                    queue.batches.append(batch)
            if closed:
                self.pool.deallocate(size)
                self._check_open()
            assert batch.batch_future is not None  # bulk batches always have one
            futures.append(batch.batch_future)
        return futures

    def _track(self, batch: ProducerBatch) -> None:
        batch.on_complete = self._on_batch_complete
        self._incomplete.add(batch)

    def _on_batch_complete(self, batch: ProducerBatch) -> None:
        self._incomplete.remove(batch)
        self.pool.deallocate(batch.allocated_bytes)

    def _snapshot(self) -> tuple[list[_PartitionQueue], frozenset[TopicPartition], bool, bool]:
        with self._lock:
            return (list(self._queues.values()), frozenset(self._muted), self._flushes_in_progress > 0,
                    self._closed)

    # ------------------------------------------------------------------------------------------ sender side

    def mute(self, tp: TopicPartition) -> None:
        """Stop draining ``tp`` (a batch of it is in flight and order must hold: max.in.flight=1)."""
        with self._lock:
            self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        if tp not in self._muted:  # the common case, read unlocked: only the sender thread writes _muted
            return
        with self._lock:
            self._muted.discard(tp)

    def ready(self, leader_fn: LeaderFn, now_ms: int, epoch_fn: EpochFn = _unknown_epoch) -> ReadyCheck:
        """Nodes with at least one sendable partition. Sendable: a full batch, linger.ms passed, a flush in
        progress, the accumulator closing, or the pool exhausted (someone waits for memory); never during a
        retry backoff, unless the partition's leader changed since (module docstring). ``leader_fn(tp)`` gives the
        leader's node id or None when unknown, ``epoch_fn(tp)`` its epoch."""
        queues, muted, flushing, closed = self._snapshot()
        exhausted = self.pool.is_exhausted
        ready: set[int] = set()
        unknown: set[str] = set()
        next_delay = NO_DELAY_LIMIT_MS
        for queue in queues:
            with queue.lock:
                if not queue.batches:
                    continue
                first = queue.batches[0]
                full = len(queue.batches) > 1 or first.is_full()
            leader = leader_fn(queue.tp)
            if leader is None:
                unknown.add(queue.tp.topic)
                continue
            if leader in ready or queue.tp in muted:
                continue
            if first.attempts > 0:  # a retry: sendable once its backoff is over, linger does not apply again
                if now_ms < first.retry_at_ms and not first.leader_changed_since_sent(epoch_fn(queue.tp)):
                    next_delay = min(next_delay, first.retry_at_ms - now_ms)
                else:
                    ready.add(leader)
                continue
            waited = max(now_ms - first.created_ms, 0)  # linger runs from the batch's first record, as Java
            if full or waited >= self.linger_ms or exhausted or closed or flushing:
                ready.add(leader)
            else:
                next_delay = min(next_delay, self.linger_ms - waited)
        return ReadyCheck(frozenset(ready), next_delay, frozenset(unknown))

    def drain(self, leader_fn: LeaderFn, nodes: Iterable[int], max_request_size: int, now_ms: int,
              before_drain: Callable[[ProducerBatch], bool] | None = None, epoch_fn: EpochFn = _unknown_epoch
              ) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to ``max_request_size`` bytes per node (always
        at least one batch), starting each node's rotation where the last drain stopped (fairness).

        ``before_drain(batch)`` runs under the partition's lock for the batch about to leave its queue: return
        False to leave it queued (no producer id yet, an earlier sequence must go first...); it is where the
        transaction manager stamps ``set_producer_state``. Drained batches are closed and IN_FLIGHT, each with its
        partition's leader epoch (``epoch_fn``) as it left."""
        queues, muted, _, _ = self._snapshot()
        by_node: dict[int, list[_PartitionQueue]] = {}
        for queue in sorted(queues, key=lambda q: q.tp):
            if queue.batches and queue.tp not in muted:  # an unlocked peek; _drain_node re-checks under the lock
                leader = leader_fn(queue.tp)
                if leader is not None:
                    by_node.setdefault(leader, []).append(queue)
        drained: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            drained[node] = self._drain_node(node, by_node.get(node, []), max_request_size, now_ms, before_drain,
                                             epoch_fn)
        return drained

    def _drain_node(self, node: int, queues: list[_PartitionQueue], max_request_size: int, now_ms: int,
                    before_drain: Callable[[ProducerBatch], bool] | None, epoch_fn: EpochFn) -> list[ProducerBatch]:
        out: list[ProducerBatch] = []
        if not queues:
            return out
        start = self._drain_index.get(node, 0) % len(queues)
        size = 0
        visited = 0
        for i in range(len(queues)):
            queue = queues[(start + i) % len(queues)]
            visited = i + 1
            epoch = epoch_fn(queue.tp)
            with queue.lock:
                if not queue.batches:
                    continue
                first = queue.batches[0]
                if first.attempts > 0 and now_ms < first.retry_at_ms and not first.leader_changed_since_sent(epoch):
                    continue  # still backing off
                if out and size + first.size_in_bytes > max_request_size:
                    break  # the request is full; this partition goes first next time
                unbuilt = first.build_error is not None  # closed by an append, its build failed: no stamp
                if not unbuilt and before_drain is not None and not before_drain(first):
                    continue
                queue.batches.popleft()
                self._close(first)
            if first.build_error is not None:
                self._unbuilt.append(first)  # never sent: the sender fails it
                continue
            first.mark_in_flight(now_ms, epoch)
            size += first.size_in_bytes
            out.append(first)
        # As Java: remember the last partition visited, so one that did not fit this request goes first next time.
        self._drain_index[node] = (start + visited - 1) % len(queues)
        return out

    def take_unbuilt(self) -> list[ProducerBatch]:
        """The batches drains took off their queues because their records could not be built (``build_error``):
        the sender fails them, as it would a batch the broker refused. Each is returned once."""
        unbuilt, self._unbuilt = self._unbuilt, []
        return unbuilt

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch that failed retriably back at the FRONT of its queue (before batches with a higher
        sequence, so idempotent order holds) with an exponential, jittered retry backoff."""
        exponent = batch.attempts  # 0 for the first retry
        backoff = self.retry_backoff_ms * (2 ** min(exponent, 32))
        if self._retry_jitter:
            backoff *= self._rng.uniform(1 - self._retry_jitter, 1 + self._retry_jitter)
        batch.mark_retrying(now_ms, int(min(backoff, self.retry_backoff_max_ms)))
        queue = self._queue(batch.tp)
        with queue.lock:
            position = 0
            if batch.has_sequence:
                sequence = batch.base_sequence
                while (position < len(queue.batches) and queue.batches[position].has_sequence
                       and queue.batches[position].base_sequence < sequence):
                    position += 1
            queue.batches.insert(position, batch)

    def split_and_reenqueue(self, batch: ProducerBatch, parts: list[ProducerBatch]) -> None:
        """Java's splitAndReenqueue: ``parts`` (``batch.split(...)``, stamped with sequences if idempotent) go to
        the FRONT of the partition's queue as batches never tried (before batches with a higher sequence), then
        ``batch`` ends SPLIT and frees its memory -- in that order, so a flush never misses its records."""
        queue = self._queue(batch.tp)
        with queue.lock:
            position = 0
            if parts and parts[0].has_sequence:
                sequence = parts[0].base_sequence
                while (position < len(queue.batches) and queue.batches[position].has_sequence
                       and queue.batches[position].base_sequence < sequence):
                    position += 1
            for offset, part in enumerate(parts):
                self._track(part)
                queue.batches.insert(position + offset, part)
        batch.mark_split()

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery.timeout.ms, oldest first per partition. The
        caller fails them (``batch.done(-1, -1, self.expiry_error(batch, now_ms))``); memory returns then."""
        queues, _, _, _ = self._snapshot()
        expired: list[ProducerBatch] = []
        next_expiry = NO_DELAY_LIMIT_MS
        for queue in queues:
            with queue.lock:
                while queue.batches:
                    first = queue.batches[0]
                    if not first.has_reached_delivery_timeout(now_ms, self.delivery_timeout_ms):
                        next_expiry = min(next_expiry, first.created_ms + self.delivery_timeout_ms)
                        break
                    expired.append(queue.batches.popleft())
        self._next_batch_expiry_ms = next_expiry
        return expired

    @property
    def next_batch_expiry_ms(self) -> int:
        """When the oldest queued batch expires (as of the last ``expired_batches`` call)."""
        return self._next_batch_expiry_ms

    def expiry_error(self, batch: ProducerBatch, now_ms: int) -> DeliveryTimeoutError:
        if batch.state is BatchState.IN_FLIGHT:
            state = "in flight (it may have been written)"
        elif batch.attempts:
            state = (f"waiting to be retried after {batch.attempts} failed attempt(s) (it may have been written: "
                     "an attempt that timed out can still reach the log)")
        else:
            state = "queued, never sent"
        last = f"; the last attempt failed with: {batch.last_error}" if batch.last_error is not None else ""
        error = DeliveryTimeoutError(
            f"{batch.record_count} record(s) for {batch.tp} expired {state}: {now_ms - batch.created_ms} ms since "
            f"the batch was created, past delivery.timeout.ms={self.delivery_timeout_ms}; the partition's leader "
            f"may be down or unreachable{last}")
        error.__cause__ = batch.last_error
        return error

    # ------------------------------------------------------------------------------------ flush / abort / close

    def begin_flush(self) -> None:
        """From now until ``await_flush_completion`` returns, every batch is sendable without lingering."""
        with self._lock:
            self._flushes_in_progress += 1

    def await_flush_completion(self, timeout_s: float | None = None) -> bool:
        """Wait until every batch incomplete at this call is complete (futures set, memory freed). False if
        ``timeout_s`` passed first. Ends the flush started by ``begin_flush`` either way."""
        try:
            pending = self._incomplete.copy_all()
            deadline = None if timeout_s is None else self._clock() + timeout_s
            for batch in pending:
                remaining = None if deadline is None else max(deadline - self._clock(), 0.0)
                if not batch.await_completion(remaining):
                    return False
            return True
        finally:
            with self._lock:
                self._flushes_in_progress -= 1

    @property
    def flush_in_progress(self) -> bool:
        with self._lock:
            return self._flushes_in_progress > 0

    def has_undrained(self) -> bool:
        queues, _, _, _ = self._snapshot()
        return any(queue.batches for queue in queues)

    def has_incomplete(self) -> bool:
        return not self._incomplete.is_empty()

    def queue_sizes(self, topic: str) -> dict[int, int]:
        """Queued batches per partition of ``topic`` (input for adaptive partitioning)."""
        queues, _, _, _ = self._snapshot()
        return {q.tp.partition: len(q.batches) for q in queues if q.tp.topic == topic}

    def abort_undrained_batches(self, error: BaseException) -> int:
        """Abort every batch still queued (not in flight): a transaction abort. Returns how many."""
        queues, _, _, _ = self._snapshot()
        aborted: list[ProducerBatch] = []
        for queue in queues:
            with queue.lock:
                aborted.extend(queue.batches)
                queue.batches.clear()
        for batch in aborted:
            batch.abort(error)
        return len(aborted)

    def abort_incomplete_batches(self, error: BaseException) -> int:
        """Abort every incomplete batch, queued or in flight (forced close, fatal error). Returns how many."""
        count = self.abort_undrained_batches(error)
        for batch in self._incomplete.copy_all():
            count += batch.abort(error)
        return count

    def close(self) -> None:
        """No more appends (ProducerClosedError); everything queued becomes sendable; blocked allocations fail."""
        with self._lock:
            self._closed = True
        self.pool.close()

    @property
    def closed(self) -> bool:
        with self._lock:
            return self._closed
