"""``RecordFuture``: the ``concurrent.futures.Future`` handed out per record, without a per-instance Condition.

A standard Future builds a ``threading.Condition`` (with its RLock and waiter deque) in ``__init__``: about 1.6 KB
per pending future, more than a typical record and never counted in buffer.memory -- 300,000 pending 100-byte
records would cost ~500 MB beyond the buffer. This subclass creates its Condition only when first needed (someone
waits on it, or it completes), so a pending one costs ~250 bytes. It behaves exactly like a Future otherwise
(``result``, ``exception``, ``add_done_callback``, ``concurrent.futures.wait`` / ``as_completed``).

It starts RUNNING: a record handed to the producer cannot be recalled, so ``cancel()`` returns False (as the Java
client's futures refuse cancellation) and completing it later cannot hit InvalidStateError.

Relies on Future's private field names (``_state``, ``_result``, ``_exception``, ``_waiters``,
``_done_callbacks``, ``_condition``), unchanged in CPython since 3.2; the tests exercise every public method.
Thread-safety: the lazy Condition is created under the module's ``_CREATE_LOCK``, so two threads cannot each make
one; everything else is as in Future (guarded by the Condition).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from concurrent.futures._base import RUNNING
from typing import Any, TypeVar

__all__ = ["RecordFuture"]

_T = TypeVar("_T")
_CREATE_LOCK = threading.Lock()


class RecordFuture(Future[_T]):
    """A Future with a lazily created Condition (see the module docstring)."""

    def __init__(self) -> None:  # Future.__init__ is skipped on purpose: it builds the Condition eagerly
        self._cond: threading.Condition | None = None
        self._state = RUNNING
        self._result: Any = None
        self._exception: BaseException | None = None
        self._waiters: list[Any] = []
        self._done_callbacks: list[Any] = []

    @property
    def _condition(self) -> threading.Condition:  # type: ignore[override]
        cond = self._cond
        if cond is None:
            with _CREATE_LOCK:
                cond = self._cond
                if cond is None:
                    cond = self._cond = threading.Condition()
        return cond
