"""``DeliveryFuture`` and ``LoopRelay``: a producer future's outcome handed to an asyncio event loop.

The producer's futures complete on its sender thread, a batch at a time (``record_outcomes``): completing a batch
costs the same whatever its record count, and only futures someone watches are visited. A ``DeliveryFuture``
keeps that: it holds the producer's future and does nothing until it is awaited. Awaited while pending, it makes
one loop future and adds one done callback to the producer's future; the callback, on the sender thread, hands
the pair to the loop's ``LoopRelay``, which wakes the loop once (``call_soon_threadsafe``) for everything handed
over since its last run -- a batch of awaited records costs one wake-up, not one each. Awaited once done, it
returns (or raises) at once, without touching the loop.

Cancelling a task that awaits a ``DeliveryFuture`` cancels only that wait: the record stays queued and is sent
(a record handed to the producer cannot be recalled, as in the Java client); await the same ``DeliveryFuture``
again for its outcome.

Thread-safety: ``LoopRelay._handed`` is a deque appended to by the sender thread and emptied by the loop thread
(deque appends and pops are atomic); ``_scheduled`` is set by the sender thread and cleared by the loop thread
before it empties the deque, so a hand-over either sees it clear (and schedules a run) or lands in the deque
before the run that cleared it empties it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Generator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

__all__ = ["DeliveryFuture", "LoopRelay"]

_T = TypeVar("_T")


class LoopRelay:
    """Hands completed producer futures to one event loop's futures, one loop wake-up per burst."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self._handed: deque[tuple[asyncio.Future[Any], Future[Any]]] = deque()  # see the module docstring
        self._scheduled = False  # set by the handing thread, cleared by the loop thread

    def watch(self, source: Future[_T]) -> asyncio.Future[_T]:
        """A loop future completed like ``source`` (on the loop's thread, once ``source`` completes)."""
        target: asyncio.Future[_T] = self.loop.create_future()
        source.add_done_callback(lambda done: self._hand_over(target, done))
        return target

    def _hand_over(self, target: asyncio.Future[Any], source: Future[Any]) -> None:
        # Runs on the thread completing ``source`` (the sender's, or the caller's if it was already done).
        self._handed.append((target, source))
        if not self._scheduled:
            self._scheduled = True
            try:
                self.loop.call_soon_threadsafe(self._run)
            except RuntimeError:  # the loop is closed: nobody is left to await the outcome
                pass

    def _run(self) -> None:
        self._scheduled = False
        handed = self._handed
        while handed:
            target, source = handed.popleft()
            if target.done():  # its awaiting task was cancelled: the record's outcome is still in ``source``
                continue
            error = source.exception()
            if error is None:
                target.set_result(source.result())
            else:
                target.set_exception(error)


class DeliveryFuture(Generic[_T]):
    """An awaitable outcome of something the producer queued: ``await`` it for the result (a record's
    RecordMetadata, a table's BatchSendResult) or its error. Lazy: see the module docstring."""

    __slots__ = ("_source", "_relay")

    def __init__(self, source: Future[_T], relay: LoopRelay) -> None:
        self._source = source
        self._relay = relay

    def done(self) -> bool:
        return self._source.done()

    def result(self) -> _T:
        """The outcome now: the result, or its error raised; InvalidStateError while pending (await it instead)."""
        if not self._source.done():
            raise asyncio.InvalidStateError("the outcome is not known yet: await it")
        return self._source.result(0)

    @property
    def concurrent_future(self) -> Future[_T]:
        """The producer's own future (for threads, or ``concurrent.futures.wait``)."""
        return self._source

    def __await__(self) -> Generator[Any, None, _T]:
        if self._source.done():
            return self._source.result(0)
        # A loop future per await, not one shared: cancelling one awaiting task must not cancel another's wait.
        return (yield from self._relay.watch(self._source).__await__())

    def __repr__(self) -> str:
        return f"DeliveryFuture({'done' if self._source.done() else 'pending'})"
