"""``RecordAccumulator``: per-partition queues of batches between ``send()`` and the sender (Java semantics).

    append(tp, timestamp_ms, key, value, headers, now_ms, max_block_ms) -> AppendResult
    append_encoded(tp, encoded_batches, now_ms, max_block_ms) -> list[Future[BatchMetadata]]   # the Arrow path
    ready(leader_fn, now_ms) -> ReadyCheck(ready_nodes, next_ready_check_delay_ms, unknown_leader_topics)
    drain(leader_fn, nodes, max_request_size, now_ms, before_drain=None) -> {node_id: [ProducerBatch]}
    reenqueue(batch, now_ms)              expired_batches(now_ms) -> [ProducerBatch]
    begin_flush() / await_flush_completion(timeout_s) -> bool
    abort_incomplete_batches(error)       abort_undrained_batches(error)       close()

This module holds construction, the appending side and flush / abort / close; the sender side (ready, drain,
reenqueue, expiry, mute) is the mixin :class:`~spark_kafka_sink.producer.accumulator_drain.AccumulatorDrainMixin`.

Memory: each new batch takes ``max(batch.size, its first record)`` bytes (bulk: the encoded size) from the
BufferPool before it is created and gives them back once it reaches a final state, whoever completes it (sender,
expiry, abort): ``ProducerBatch.on_complete`` calls ``_on_batch_complete``.

Locks. Order: a partition's lock may be held when taking ``_lock`` (or, in ``before_drain``, the transaction
manager's lock), never the reverse; no lock is held while blocking in the pool or completing futures.
* ``_PartitionQueue.lock`` guards that partition's deque and every append into its open batch;
* ``_lock`` guards ``_queues`` (insertions; lookups are plain dict reads), ``_muted``, ``_incomplete``,
  ``_flushes_in_progress`` and writes of ``_closed`` (a bool, read without the lock);
* ``_drain_index`` and ``_next_batch_expiry_ms`` are owned by the sender thread (ready / drain / expiry run there).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import NamedTuple

from spark_kafka_sink.errors import ProducerClosedError
from spark_kafka_sink.producer.accumulator_drain import NO_DELAY_LIMIT_MS, AccumulatorDrainMixin, ReadyCheck
from spark_kafka_sink.producer.batch import BatchState, ProducerBatch
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.record_metadata import BatchMetadata, RecordMetadata, TopicPartition
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, Header, record_size

__all__ = ["RecordAccumulator", "AppendResult", "ReadyCheck", "NO_DELAY_LIMIT_MS"]

_log = logging.getLogger(__name__)


class AppendResult(NamedTuple):
    future: Future[RecordMetadata]
    batch_is_full: bool  # wake the sender: a batch is ready regardless of linger.ms
    new_batch_created: bool


@dataclass(eq=False)
class _PartitionQueue:
    tp: TopicPartition
    lock: threading.Lock = field(default_factory=threading.Lock)
    batches: deque[ProducerBatch] = field(default_factory=deque)  # guarded by lock


class RecordAccumulator(AccumulatorDrainMixin):
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
        retry_jitter: float = 0.2,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.batch_size = batch_size
        self.compression = compression
        self.compression_level = compression_level
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.delivery_timeout_ms = delivery_timeout_ms
        self.pool = pool
        self.transactional = transactional
        self._retry_jitter = retry_jitter
        self._rng = rng or random.Random()
        self._clock = clock  # only for await_flush_completion's deadline
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._queues: dict[TopicPartition, _PartitionQueue] = {}
        self._muted: set[TopicPartition] = set()
        self._incomplete: set[ProducerBatch] = set()
        self._flushes_in_progress = 0
        self._closed = False
        # Owned by the sender thread:
        self._drain_index: dict[int, int] = {}
        self._next_batch_expiry_ms = NO_DELAY_LIMIT_MS

    @classmethod
    def from_config(cls, config: ProducerConfig, pool: BufferPool | None = None, **kwargs: object
                    ) -> RecordAccumulator:
        return cls(batch_size=config.batch_size, compression=config.compression_type, linger_ms=config.linger_ms,
                   retry_backoff_ms=config.retry_backoff_ms, retry_backoff_max_ms=config.retry_backoff_max_ms,
                   delivery_timeout_ms=config.delivery_timeout_ms,
                   pool=pool if pool is not None else BufferPool(config.buffer_memory),
                   transactional=config.is_transactional,
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
               headers: Sequence[Header], now_ms: int, max_block_ms: int) -> AppendResult:
        """Append one record to ``tp``'s open batch, or to a new one (blocking up to ``max_block_ms`` for memory).
        The returned future completes when the batch does."""
        self._check_open()
        queue = self._queue(tp)
        with queue.lock:
            result = self._try_append(queue, timestamp_ms, key, value, headers, now_ms)
            if result is not None:
                return result
        # A new batch is needed: reserve its memory without holding any lock (this may block).
        size = max(self.batch_size, HEADER_SIZE + record_size(0, 0, key, value, headers))
        self.pool.allocate(size, max_block_ms)
        try:
            with queue.lock:
                self._check_open()
                result = self._try_append(queue, timestamp_ms, key, value, headers, now_ms)
                if result is not None:  # another thread opened a batch while we waited for memory
                    return result
                batch = ProducerBatch.for_records(tp, self.batch_size, self.compression, now_ms,
                                                  allocated_bytes=size, transactional=self.transactional,
                                                  compression_level=self.compression_level)
                future = batch.try_append(timestamp_ms, key, value, headers, now_ms)
                assert future is not None  # the first record always fits
                self._track(batch)
                size = 0  # owned by the batch now
                queue.batches.append(batch)
                full = len(queue.batches) > 1 or batch.is_full(self.batch_size)
                return AppendResult(future, full, True)
        finally:
            if size:
                self.pool.deallocate(size)

    def _try_append(self, queue: _PartitionQueue, timestamp_ms: int, key: bytes | None, value: bytes | None,
                    headers: Sequence[Header], now_ms: int) -> AppendResult | None:
        # Caller holds queue.lock.
        if not queue.batches:
            return None
        last = queue.batches[-1]
        if last.state is not BatchState.OPEN:
            return None
        future = last.try_append(timestamp_ms, key, value, headers, now_ms)
        if future is None:
            last.close()  # full: the next record opens a new batch, this one can go
            return None
        return AppendResult(future, len(queue.batches) > 1 or last.is_full(self.batch_size), False)

    def append_encoded(self, tp: TopicPartition, encoded_batches: Iterable[EncodedBatch], now_ms: int,
                       max_block_ms: int) -> list[Future[BatchMetadata]]:
        """Queue record batches encoded by the Arrow encoder, each as a closed ProducerBatch with one future.

        Memory is reserved batch by batch, each waiting up to ``max_block_ms``, so an input larger than
        buffer.memory streams through as the sender frees memory. If a wait fails, the batches queued before it
        stay queued and are sent (a flush waits for them); the error is raised. One loop step per batch."""
        futures: list[Future[BatchMetadata]] = []
        queue = self._queue(tp)
        for encoded in encoded_batches:
            self._check_open()
            size = len(encoded.data)
            self.pool.allocate(size, max_block_ms)
            batch = ProducerBatch.from_encoded(tp, encoded, now_ms, allocated_bytes=size)
            with queue.lock:
                closed = self._closed
                if not closed:
                    if queue.batches and queue.batches[-1].state is BatchState.OPEN:
                        queue.batches[-1].close()  # keep order: later records go after the bulk rows
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
        with self._lock:
            self._incomplete.add(batch)

    def _on_batch_complete(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._incomplete.discard(batch)
        self.pool.deallocate(batch.allocated_bytes)

    def _snapshot(self) -> tuple[list[_PartitionQueue], frozenset[TopicPartition], bool, bool]:
        with self._lock:
            return (list(self._queues.values()), frozenset(self._muted), self._flushes_in_progress > 0,
                    self._closed)

    # ------------------------------------------------------------------------------------------ flush / close

    def begin_flush(self) -> None:
        """From now until ``await_flush_completion`` returns, every batch is sendable without lingering."""
        with self._lock:
            self._flushes_in_progress += 1

    def await_flush_completion(self, timeout_s: float | None = None) -> bool:
        """Wait until every batch incomplete at this call is complete (futures set, memory freed). False if
        ``timeout_s`` passed first. Ends the flush started by ``begin_flush`` either way."""
        try:
            with self._lock:
                pending = list(self._incomplete)
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
        with self._lock:
            return bool(self._incomplete)

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
        with self._lock:
            remaining = list(self._incomplete)
        for batch in remaining:
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
