"""``RecordFuture``: a ``concurrent.futures.Future`` without a per-instance Condition, for futures made by the
thousand (a bulk batch's; a per-record batch's records get ``record_outcomes.LazyRecordFuture``, lighter still).

A standard Future builds a ``threading.Condition`` (with its RLock and waiter deque) in ``__init__``: about 1.6 KB
per pending future, more than a typical record and never counted in buffer.memory -- 300,000 pending 100-byte
records would cost ~500 MB beyond the buffer. This subclass creates its Condition only when first needed (someone
waits on it, or it completes), so a pending one costs ~250 bytes. It behaves exactly like a Future otherwise
(``result``, ``exception``, ``add_done_callback``, ``concurrent.futures.wait`` / ``as_completed``).

It starts RUNNING: a record handed to the producer cannot be recalled, so ``cancel()`` returns False (as the Java
client's futures refuse cancellation) and completing it later cannot hit InvalidStateError.

Completing one, adding a callback and reading a completed one's result do not create the Condition either: the
bulk path completes thousands of batch futures a second, each gathered by a callback and read once, and the
Condition was made for every one of them (~8 us of GIL time a batch).

Relies on Future's private field names (``_state``, ``_result``, ``_exception``, ``_waiters``,
``_done_callbacks``, ``_condition``, ``_invoke_callbacks``), unchanged in CPython since 3.2; the tests exercise
every public method and ``wait`` / ``as_completed`` racing completion. ``LazyConditionFuture`` holds what
``RecordFuture`` and ``record_outcomes.LazyRecordFuture`` share: the lazy Condition, the callback list and waking
both at completion; each says how it knows it is done.

Thread-safety: one lock, ``FUTURES_LOCK``, held for a few bytecodes, guards every future's state change, callback
list and lazy Condition (and ``RecordOutcomes``' completion, which is the lazy futures' state). A completion sets
the state under it and then notifies the Condition only if one exists; a waiter creates the Condition under it
and then checks the state under the Condition, so either the waiter sees FINISHED or the completion sees (and
notifies) its Condition.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, InvalidStateError
from concurrent.futures._base import FINISHED, LOGGER, RUNNING
from typing import Any, TypeVar

__all__ = ["FUTURES_LOCK", "LazyConditionFuture", "RecordFuture"]

_T = TypeVar("_T")
FUTURES_LOCK = threading.Lock()


class LazyConditionFuture(Future[_T]):
    """A Future whose Condition, waiter list and callback list are made when first needed (see the module
    docstring). Subclasses say when they are done (``done``) and may act when someone first waits or adds a
    callback (``_first_interest_locked``); their completion calls ``_wake``."""

    # A new future's fields are these class attributes: one is made per record sent, and setting instance
    # attributes cost more than the rest of making it. Each is set on the instance when it first changes; the
    # lists are made then (``_waiters`` with the Condition: whoever appends a waiter holds the Condition first).
    _cond: threading.Condition | None = None
    _waiters: list[Any] = ()  # type: ignore[assignment]
    _done_callbacks: list[Any] = ()  # type: ignore[assignment]

    def __init__(self) -> None:  # Future.__init__ is skipped on purpose: it builds the Condition eagerly
        pass

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with FUTURES_LOCK:
                cond = self._cond
                if cond is None:
                    self._waiters = []
                    cond = self._cond = threading.Condition()
                    self._first_interest_locked()
        return cond

    def _first_interest_locked(self) -> None:
        """Someone waits on this future or adds a callback to it (caller holds FUTURES_LOCK; not done yet or
        just done). Nothing to do unless the subclass must arrange to be woken."""

    def add_done_callback(self, fn: Callable[[Future[_T]], object]) -> None:
        with FUTURES_LOCK:
            if not self.done():
                if not self._done_callbacks:
                    self._done_callbacks = []
                self._done_callbacks.append(fn)
                self._first_interest_locked()
                return
        try:
            fn(self)
        except Exception:  # as Future: a failing callback is logged, not raised into the caller
            LOGGER.exception("exception calling callback for %r", self)

    def _wake(self, cond: threading.Condition | None, *, failed: bool) -> None:
        """Completed: wake the waiters (if a Condition was ever made), then run the callbacks, as Future does.
        Called outside FUTURES_LOCK: callbacks run here."""
        if cond is not None:
            with cond:
                for waiter in self._waiters:
                    if failed:
                        waiter.add_exception(self)
                    else:
                        waiter.add_result(self)
                cond.notify_all()
        self._invoke_callbacks()  # type: ignore[attr-defined]


class RecordFuture(LazyConditionFuture[_T]):
    """A Future with a lazily created Condition, completed by ``set_result`` / ``set_exception``."""

    _state = RUNNING
    _result: Any = None
    _exception: BaseException | None = None

    def done(self) -> bool:
        return self._state == FINISHED  # never cancelled: it starts RUNNING

    def result(self, timeout: float | None = None) -> _T:
        if self._state == FINISHED:  # _result/_exception are written before _state
            if self._exception is not None:
                raise self._exception
            result: _T = self._result
            return result
        return super().result(timeout)

    def exception(self, timeout: float | None = None) -> BaseException | None:
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def set_result(self, result: _T) -> None:
        with FUTURES_LOCK:
            already = self._state == FINISHED
            if not already:
                self._result = result
                self._state = FINISHED
            cond = self._cond
        self._notify(cond, already, failed=False)

    def set_exception(self, exception: BaseException | None) -> None:
        with FUTURES_LOCK:
            already = self._state == FINISHED
            if not already:
                self._exception = exception
                self._state = FINISHED
            cond = self._cond
        self._notify(cond, already, failed=True)

    def _notify(self, cond: threading.Condition | None, already: bool, *, failed: bool) -> None:
        if already:  # raised outside FUTURES_LOCK: repr() takes the Condition, which may need the lock
            raise InvalidStateError(f"{self._state}: {self!r}")
        self._wake(cond, failed=failed)
