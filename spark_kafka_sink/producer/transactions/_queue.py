"""The coordinator requests waiting to be sent and the one in flight. Rules (as the Java client's
``pendingRequests``): requests leave by kind priority (``RequestKind`` value, lower first), then in the order they
were queued; at most one is in flight; a request backing off (``not_before_ms``) holds back those behind it.

Not thread-safe: the transaction manager's lock guards every call.
"""

from __future__ import annotations

import heapq
import itertools

from spark_kafka_sink.producer.transactions._handlers import RequestKind, TxnRequest

__all__ = ["RequestQueue"]


class RequestQueue:
    """Coordinator requests by (kind priority, queueing order), and the one in flight."""

    def __init__(self) -> None:
        self._heap: list[tuple[int, int, TxnRequest]] = []
        self._order = itertools.count()
        self._in_flight: TxnRequest | None = None

    def __bool__(self) -> bool:
        """True if a request is queued (the one in flight does not count)."""
        return bool(self._heap)

    @property
    def in_flight(self) -> TxnRequest | None:
        return self._in_flight

    def push(self, req: TxnRequest) -> None:
        heapq.heappush(self._heap, (req.kind.value, next(self._order), req))

    def peek_due(self, now_ms: int) -> TxnRequest | None:
        """The request to send next, left queued; None if nothing is queued or it is still backing off (which
        holds back every request behind it)."""
        if not self._heap or self._heap[0][2].not_before_ms > now_ms:
            return None
        return self._heap[0][2]

    def pop(self) -> TxnRequest:
        return heapq.heappop(self._heap)[2]

    def take_all(self) -> list[TxnRequest]:
        """Empty the queue (the request in flight stays), returning what it held."""
        taken = [req for _, _, req in self._heap]
        self._heap.clear()
        return taken

    def has(self, kind: RequestKind, group_id: str | None = None) -> bool:
        """True if a request of ``kind`` about ``group_id`` (None: the transaction) is queued or in flight."""
        queued = [r for _, _, r in self._heap]
        if self._in_flight is not None:
            queued.append(self._in_flight)
        return any(r.kind is kind and r.group_id == group_id for r in queued)

    def sent(self, req: TxnRequest) -> None:
        self._in_flight = req

    def finished(self, req: TxnRequest) -> None:
        """``req`` was answered, failed or put back: no longer in flight."""
        if self._in_flight is req:
            self._in_flight = None

    def delay_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the head request's backoff ends; None if nothing is queued or one is in flight."""
        if not self._heap or self._in_flight is not None:
            return None
        return max(0, self._heap[0][2].not_before_ms - now_ms)
