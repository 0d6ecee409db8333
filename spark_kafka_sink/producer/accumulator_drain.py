"""The sender-side half of ``RecordAccumulator``: which nodes are ready, draining batches, retries and expiry.

    ready(leader_fn, now_ms) -> ReadyCheck(ready_nodes, next_ready_check_delay_ms, unknown_leader_topics)
    drain(leader_fn, nodes, max_request_size, now_ms, before_drain=None) -> {node_id: [ProducerBatch]}
    reenqueue(batch, now_ms)              expired_batches(now_ms) -> [ProducerBatch]
    mute(tp) / unmute(tp)                 expiry_error(batch, now_ms)

A mixin of :class:`~spark_kafka_sink.producer.accumulator.RecordAccumulator`, split out to keep files small; it
uses the accumulator's fields, declared below for type checkers. The sender calls these: ready / drain / expiry
run on its thread, which owns ``_drain_index`` and ``_next_batch_expiry_ms``. The locks are the accumulator's,
taken in the order its module docstring sets out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

from spark_kafka_sink.errors import DeliveryTimeoutError
from spark_kafka_sink.producer.batch import BatchState, ProducerBatch
from spark_kafka_sink.producer.record_metadata import TopicPartition

if TYPE_CHECKING:
    import random
    import threading

    from spark_kafka_sink.producer.accumulator import _PartitionQueue
    from spark_kafka_sink.producer.buffer_pool import BufferPool

__all__ = ["AccumulatorDrainMixin", "ReadyCheck", "LeaderFn", "NO_DELAY_LIMIT_MS"]

NO_DELAY_LIMIT_MS = 2**63 - 1  # next_ready_check_delay_ms when no queued batch has a timer running
LeaderFn = Callable[[TopicPartition], "int | None"]


class ReadyCheck(NamedTuple):
    ready_nodes: frozenset[int]
    next_ready_check_delay_ms: int  # when a not-yet-ready batch may become ready (linger or backoff)
    unknown_leader_topics: frozenset[str]  # have batches but no known leader: refresh their metadata


class AccumulatorDrainMixin:
    """``ready`` / ``drain`` / ``reenqueue`` / expiry of :class:`RecordAccumulator` (see the module docstring)."""

    if TYPE_CHECKING:  # fields and helpers of RecordAccumulator used here
        batch_size: int
        linger_ms: int
        retry_backoff_ms: int
        retry_backoff_max_ms: int
        delivery_timeout_ms: int
        pool: BufferPool
        _retry_jitter: float
        _rng: random.Random
        _lock: threading.Lock
        _muted: set[TopicPartition]
        _drain_index: dict[int, int]
        _next_batch_expiry_ms: int

        def _queue(self, tp: TopicPartition) -> _PartitionQueue: ...
        def _snapshot(self) -> tuple[list[_PartitionQueue], frozenset[TopicPartition], bool, bool]: ...

    def mute(self, tp: TopicPartition) -> None:
        """Stop draining ``tp`` (a batch of it is in flight and order must hold: max.in.flight=1)."""
        with self._lock:
            self._muted.add(tp)

    def unmute(self, tp: TopicPartition) -> None:
        with self._lock:
            self._muted.discard(tp)

    def ready(self, leader_fn: LeaderFn, now_ms: int) -> ReadyCheck:
        """Nodes with at least one sendable partition. Sendable: a full batch, linger.ms passed, a flush in
        progress, the accumulator closing, or the pool exhausted (someone waits for memory); never during a
        retry backoff. ``leader_fn(tp)`` gives the leader's node id or None when unknown."""
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
                full = len(queue.batches) > 1 or first.is_full(self.batch_size)
            leader = leader_fn(queue.tp)
            if leader is None:
                unknown.add(queue.tp.topic)
                continue
            if leader in ready or queue.tp in muted:
                continue
            if first.attempts > 0:  # a retry: sendable once its backoff is over, linger does not apply again
                if now_ms < first.retry_at_ms:
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
              before_drain: Callable[[ProducerBatch], bool] | None = None) -> dict[int, list[ProducerBatch]]:
        """Take at most one batch per partition for each node, up to ``max_request_size`` bytes per node (always
        at least one batch), starting each node's rotation where the last drain stopped (fairness).

        ``before_drain(batch)`` runs under the partition's lock for the batch about to leave its queue: return
        False to leave it queued (no producer id yet, an earlier sequence must go first...); it is where the
        transaction manager stamps ``set_producer_state``. Drained batches are closed and IN_FLIGHT."""
        queues, muted, _, _ = self._snapshot()
        by_node: dict[int, list[_PartitionQueue]] = {}
        for queue in sorted(queues, key=lambda q: q.tp):
            if queue.batches and queue.tp not in muted:  # an unlocked peek; _drain_node re-checks under the lock
                leader = leader_fn(queue.tp)
                if leader is not None:
                    by_node.setdefault(leader, []).append(queue)
        drained: dict[int, list[ProducerBatch]] = {}
        for node in nodes:
            drained[node] = self._drain_node(node, by_node.get(node, []), max_request_size, now_ms, before_drain)
        return drained

    def _drain_node(self, node: int, queues: list[_PartitionQueue], max_request_size: int, now_ms: int,
                    before_drain: Callable[[ProducerBatch], bool] | None) -> list[ProducerBatch]:
        out: list[ProducerBatch] = []
        if not queues:
            return out
        start = self._drain_index.get(node, 0) % len(queues)
        size = 0
        visited = 0
        for i in range(len(queues)):
            queue = queues[(start + i) % len(queues)]
            visited = i + 1
            with queue.lock:
                if not queue.batches:
                    continue
                first = queue.batches[0]
                if first.attempts > 0 and now_ms < first.retry_at_ms:
                    continue  # still backing off
                if out and size + first.size_in_bytes > max_request_size:
                    break  # the request is full; this partition goes first next time
                if before_drain is not None and not before_drain(first):
                    continue
                queue.batches.popleft()
                first.close()
            first.mark_in_flight(now_ms)
            size += first.size_in_bytes
            out.append(first)
        # As Java: remember the last partition visited, so one that did not fit this request goes first next time.
        self._drain_index[node] = (start + visited - 1) % len(queues)
        return out

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
        state = "in flight" if batch.state is BatchState.IN_FLIGHT else "queued"
        return DeliveryTimeoutError(
            f"{batch.record_count} record(s) for {batch.tp} expired {state}: {now_ms - batch.created_ms} ms since "
            f"the batch was created, past delivery.timeout.ms={self.delivery_timeout_ms}; the partition's leader "
            "may be down or unreachable")
