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

``StagedDelivery`` is a record's ``DeliveryFuture`` while the record may still be staged on the loop
(``StagedRecords``: ``AsyncKafkaProducer`` gathers a burst of sends there and queues them together); its
producer future exists once the records were queued, and awaiting it before then queues them first.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Awaitable, Callable, Generator
from concurrent.futures import Future
from typing import Any, Generic, TypeVar

from spark_kafka_sink.producer.record_metadata import RecordMetadata
from spark_kafka_sink.producer.record_outcomes import RowPlaces

__all__ = ["DeliveryFuture", "LoopRelay", "StagedRecords", "StagedDelivery"]

_T = TypeVar("_T")
_log = logging.getLogger(__name__)


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


class StagedRecords:
    """Records an ``AsyncKafkaProducer`` gathered on its loop for one topic, in call order, not yet queued: their
    columns (send times in epoch ms, keys, values, callbacks -- None until one has one), their bound bytes (and the
    most it may reach), and once they are handed to the producer, where each row went (``places``; a row not
    queued yet has none). Loop thread only. ``settle`` queues every staged record of the producer (awaitable)."""

    __slots__ = ("topic", "timestamps", "keys", "values", "callbacks", "places", "opened_ms", "size", "limit",
                 "settle")

    def __init__(self, topic: str, opened_ms: int, limit: int, settle: Callable[[], Awaitable[None]]) -> None:
        self.topic = topic
        self.limit = limit  # handed over once ``size`` (the records' bound bytes) reaches it
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes] = []
        self.callbacks: list[Any] | None = None
        self.places: RowPlaces | None = None
        self.opened_ms = opened_ms
        self.size = 0
        self.settle = settle

    def handed(self) -> RowPlaces:
        """Where the rows went, made on the first hand-over."""
        places = self.places
        if places is None:
            places = self.places = RowPlaces(len(self.values))
        return places

    def fail(self, error: BaseException) -> None:
        """Every row not queued ends with ``error`` (its callback runs with it, as a failed send's would)."""
        placed = self.handed().placed
        for row, place in enumerate(placed):
            if place is None:
                failed: Future[RecordMetadata] = Future()
                failed.set_exception(error)
                placed[row] = failed
                callback = self.callbacks[row] if self.callbacks is not None else None
                if callback is not None:
                    try:
                        callback(None, error)
                    except Exception:  # noqa: BLE001 -- as the producer's callbacks: logged, never raised
                        _log.exception("a send callback raised")


class StagedDelivery(DeliveryFuture[RecordMetadata]):
    """A record's ``DeliveryFuture`` that may still be staged (``StagedRecords``): pending until queued; awaiting
    it queues the staged records first, then waits as ``DeliveryFuture`` does."""

    __slots__ = ("_staged", "_index")

    def __init__(self, staged: StagedRecords, index: int, relay: LoopRelay) -> None:  # no source yet
        self._staged = staged
        self._index = index
        self._relay = relay

    def _handed(self) -> Future[RecordMetadata] | None:
        try:
            return self._source
        except AttributeError:
            places = self._staged.places
            source = None if places is None else places.future(self._index)
            if source is not None:
                self._source = source
            return source

    def done(self) -> bool:
        source = self._handed()
        return source is not None and source.done()

    def result(self) -> RecordMetadata:
        source = self._handed()
        if source is None or not source.done():
            raise asyncio.InvalidStateError("the outcome is not known yet: await it")
        return source.result(0)

    @property
    def concurrent_future(self) -> Future[RecordMetadata]:
        source = self._handed()
        if source is None:
            raise asyncio.InvalidStateError("the record is still staged on the event loop: await it, or the "
                                            "producer's flush(), first")
        return source

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        source = self._handed()
        if source is None:
            yield from self._staged.settle().__await__()
            source = self._handed()
            assert source is not None  # settle queued it, or failed it
        if source.done():
            return source.result(0)
        return (yield from self._relay.watch(source).__await__())

    def __repr__(self) -> str:
        source = self._handed()
        return f"DeliveryFuture({'staged' if source is None else 'done' if source.done() else 'pending'})"
