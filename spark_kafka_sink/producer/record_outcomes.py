"""``RecordOutcomes`` and ``LazyRecordFuture``: the futures ``send`` returns, completed a batch at a time.

A per-record batch owns one ``RecordOutcomes``: its topic-partition, its records' timestamps and, once the broker
answered, the base offset, log-append time or error. Each record's future is a ``LazyRecordFuture`` holding only
that object and the record's index: completing the batch is one write under a lock, whatever its record count,
and a record's ``RecordMetadata`` is made when someone asks for it. Only futures someone waits on or added a
callback to are visited at completion (they are "watched"), to wake their waiters and run their callbacks, as a
``concurrent.futures.Future`` would.

The future is a ``concurrent.futures.Future``: ``result``, ``exception``, ``done``, ``add_done_callback``,
``concurrent.futures.wait`` / ``as_completed`` all work. Its ``_state`` / ``_result`` / ``_exception`` fields
(which Future's methods and those helpers read) are computed from the outcomes. It starts RUNNING and cannot be
cancelled (a record handed to the producer cannot be recalled, as in the Java client); only its batch completes it.

A batch split after MESSAGE_TOO_LARGE hands its records to smaller batches: ``redirect`` points its outcomes at
theirs (a record's index is then looked up in the part holding it) and moves the watched futures over.

Thread-safety: ``record_future.FUTURES_LOCK``, held for a few bytecodes, guards every outcome's completion, redirect
and watched list, and every future's lazily made Condition and callback list. A completion marks the outcome
finished under it and then wakes the futures watched at that moment; a future that starts being watched later
sees the outcome finished (it checks under the same lock), so no waiter is missed.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, RUNNING

from spark_kafka_sink.producer.record_future import FUTURES_LOCK, LazyConditionFuture
from spark_kafka_sink.producer.record_metadata import NO_OFFSET, NO_TIMESTAMP, RecordMetadata, TopicPartition

__all__ = ["RecordOutcomes", "LazyRecordFuture", "RowPlaces"]

_new_future = object.__new__


class RecordOutcomes:
    """One per-record batch's result, shared by its records' futures (see the module docstring)."""

    __slots__ = ("tp", "timestamps", "finished", "base_offset", "log_append_time_ms", "error", "_watched",
                 "_parts", "_part_starts")

    def __init__(self, tp: TopicPartition, timestamps: list[int]) -> None:
        self.tp = tp
        self.timestamps = timestamps  # per record, in append order (the batch's own list: it grows with it)
        self.finished = False  # guarded by FUTURES_LOCK; read without it (one attribute read)
        self.base_offset = NO_OFFSET
        self.log_append_time_ms = NO_TIMESTAMP
        self.error: BaseException | None = None
        self._watched: list[LazyRecordFuture] | None = None  # guarded by FUTURES_LOCK
        self._parts: list[RecordOutcomes] | None = None  # after a split: the parts, in record order
        self._part_starts: list[int] = []

    def locate(self, index: int) -> tuple[RecordOutcomes, int]:
        """Where record ``index`` ends: these outcomes, or (after a split) a part's, with its index there."""
        outcomes = self
        while outcomes._parts is not None:
            at = bisect.bisect_right(outcomes._part_starts, index) - 1
            index -= outcomes._part_starts[at]
            outcomes = outcomes._parts[at]
        return outcomes, index

    def metadata(self, index: int) -> RecordMetadata:
        """Record ``index``'s metadata (the outcomes finished without error)."""
        offset = NO_OFFSET if self.base_offset == NO_OFFSET else self.base_offset + index
        ts = self.timestamps[index] if self.log_append_time_ms == NO_TIMESTAMP else self.log_append_time_ms
        return RecordMetadata(self.tp.topic, self.tp.partition, offset, ts)

    def complete(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> None:
        """Finish every record at once; then wake the watched futures (outside the lock: callbacks run there)."""
        with FUTURES_LOCK:
            if self.finished:
                raise InvalidStateError(f"the records of {self.tp} were already completed")
            self.base_offset, self.log_append_time_ms, self.error = base_offset, log_append_time_ms, error
            self.finished = True
            watched, self._watched = self._watched, None
        for future in watched or ():
            future._finished()

    def redirect(self, parts: list[RecordOutcomes], counts: list[int]) -> None:
        """A split: records ``0..counts[0]-1`` now complete with ``parts[0]``, the next ``counts[1]`` with
        ``parts[1]``... Futures watched here move to their part."""
        starts = [0]
        for count in counts[:-1]:
            starts.append(starts[-1] + count)
        with FUTURES_LOCK:
            self._part_starts, self._parts = starts, parts
            watched, self._watched = self._watched, None
            for future in watched or ():
                future._watch_locked()

    def _watch_locked(self, future: LazyRecordFuture) -> bool:
        # Caller holds FUTURES_LOCK. False: already finished, nothing to wait for.
        if self.finished:
            return False
        if self._watched is None:
            self._watched = []
        self._watched.append(future)
        return True


class LazyRecordFuture(LazyConditionFuture[RecordMetadata]):
    """A record's future, completed with its batch (see the module docstring)."""

    _is_watched = False  # set under FUTURES_LOCK

    def __init__(self, outcomes: RecordOutcomes, index: int) -> None:  # Future.__init__ skipped on purpose
        self._outcomes = outcomes
        self._index = index

    def _located(self) -> tuple[RecordOutcomes, int]:
        outcomes = self._outcomes
        return (outcomes, self._index) if outcomes._parts is None else outcomes.locate(self._index)

    @property
    def _state(self) -> str:  # type: ignore[override]
        return FINISHED if self._located()[0].finished else RUNNING

    @property
    def _exception(self) -> BaseException | None:  # type: ignore[override]
        outcomes = self._located()[0]
        return outcomes.error if outcomes.finished else None

    @property
    def _result(self) -> RecordMetadata | None:  # type: ignore[override]
        outcomes, index = self._located()
        return outcomes.metadata(index) if outcomes.finished and outcomes.error is None else None

    def _first_interest_locked(self) -> None:
        if not self._is_watched:
            self._watch_locked()

    def _watch_locked(self) -> None:
        # Caller holds FUTURES_LOCK: be told when the record's outcome (or, after a split, its part's) finishes.
        self._is_watched = self._located()[0]._watch_locked(self)

    def done(self) -> bool:
        return self._located()[0].finished

    def running(self) -> bool:
        return not self.done()

    def result(self, timeout: float | None = None) -> RecordMetadata:
        outcomes, index = self._located()
        if outcomes.finished:
            if outcomes.error is not None:
                raise outcomes.error
            return outcomes.metadata(index)
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        outcomes = self._located()[0]
        if outcomes.finished:
            return outcomes.error
        return super().exception(timeout)

    def set_result(self, result: RecordMetadata) -> None:
        raise InvalidStateError("a record's future is completed by its batch, not by set_result")

    def set_exception(self, exception: BaseException | None) -> None:
        raise InvalidStateError("a record's future is completed by its batch, not by set_exception")

    def _finished(self) -> None:
        """Its outcome finished: wake its waiters, then run its callbacks, as Future does."""
        cond = self._cond
        self._wake(cond, failed=cond is not None and self._located()[0].error is not None)


class RowPlaces:
    """Where the rows of a many-at-a-time append went (``RecordAccumulator.append_run``): per row its batch's
    ``RecordOutcomes`` and its index there, or a Future made for the row some other way, or None while the row
    is not queued. A row's record future is made only when asked for (``future``): the appends store two list
    items per row, not an object."""

    __slots__ = ("placed", "indexes")

    def __init__(self, rows: int) -> None:
        self.placed: list[RecordOutcomes | Future[RecordMetadata] | None] = [None] * rows
        self.indexes: list[int] = [0] * rows

    def place(self, rows: Sequence[int], outcomes: RecordOutcomes, first: int) -> None:
        """``rows`` (in order) became records ``first``, ``first + 1``, ... of the batch of ``outcomes``."""
        if type(rows) is range and rows.step == 1:
            self.placed[rows.start:rows.stop] = [outcomes] * len(rows)
            self.indexes[rows.start:rows.stop] = range(first, first + len(rows))
        else:
            placed, indexes = self.placed, self.indexes
            for index, row in enumerate(rows, first):
                placed[row] = outcomes
                indexes[row] = index

    def unplaced(self) -> int:
        return self.placed.count(None)

    def future(self, row: int) -> Future[RecordMetadata] | None:
        """The row's record future (None while not queued)."""
        placed = self.placed[row]
        if type(placed) is RecordOutcomes:
            future = _new_future(LazyRecordFuture)  # as ProducerBatch.try_append makes one: see there
            future._outcomes = placed
            future._index = self.indexes[row]
            return future
        return placed  # type: ignore[return-value]
