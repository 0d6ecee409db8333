"""The transaction manager's state machine: ``TxnState``, the transition table ``TRANSITIONS``, and the methods
that move between states (a mixin of :class:`~spark_kafka_sink.producer.transactions.TransactionManager`, split
out to keep files small; it uses the manager's fields, declared below for type checkers).

States (``TxnState``) and the transition table ``TRANSITIONS`` (target <- allowed sources); any other transition
raises :class:`~spark_kafka_sink.errors.IllegalStateError` naming both states::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                       ^             |  \\-> ABORTABLE_ERROR -> ABORTING_TRANSACTION -> READY
                                       |             \\-> ABORTING_TRANSACTION -> READY | INITIALIZING (epoch bump)
    READY -> UNINITIALIZED (idempotent producer: fetch a fresh producer id);  any state -> FATAL_ERROR

Every method here runs with the manager's re-entrant ``_lock`` held (``transition_to_fatal_error`` takes it).
"""

from __future__ import annotations

import copy
import enum
import logging
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from spark_kafka_sink.errors import IllegalStateError, KafkaError, TransactionAbortedError
from spark_kafka_sink.producer.transactions._handlers import RequestKind, TxnRequest, fenced_error

__all__ = ["TxnState", "TRANSITIONS", "TxnStateMachine"]

# The manager's logger, as before this module was split out of it: state changes are logged under its name.
_log = logging.getLogger("spark_kafka_sink.producer.transactions")


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"  # InitProducerId in progress
    READY = "ready"  # has a producer id; idempotent producers stay here
    IN_TRANSACTION = "in_transaction"
    COMMITTING_TRANSACTION = "committing_transaction"  # flushing, then EndTxn(commit)
    ABORTING_TRANSACTION = "aborting_transaction"  # dropping unsent batches, then EndTxn(abort)
    ABORTABLE_ERROR = "abortable_error"  # the transaction can only be aborted
    FATAL_ERROR = "fatal_error"  # the producer can only be closed


_S = TxnState
#: target state -> the states it may be entered from.
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    _S.UNINITIALIZED: frozenset({_S.READY}),  # an idempotent producer drops its id to fetch a fresh one
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),  # first id; epoch bump after abort
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.FATAL_ERROR: frozenset(TxnState),  # always reachable, never left
}

# Fatal errors from produce responses, whether transactional or not (as Java's maybeTransitionToErrorState).
_FATAL_CODES = frozenset({31, 35, 47, 53, 90})  # CLUSTER_AUTH, UNSUPPORTED_VERSION, INVALID_EPOCH, TXN_ID_AUTH, FENCED


class TxnStateMachine:
    """Transitions of :class:`TransactionManager` between ``TxnState`` values (see the module docstring)."""

    if TYPE_CHECKING:  # fields of TransactionManager used here
        transactional_id: str | None
        _lock: Any
        _state: TxnState
        _last_error: KafkaError | None
        _queue: list[tuple[int, int, TxnRequest]]
        _pending_result: tuple[TxnState, Future[None]] | None

        @property
        def is_transactional(self) -> bool: ...

    def _transition(self, target: TxnState, error: KafkaError | None = None) -> None:
        # Caller holds _lock.
        if self._state not in TRANSITIONS[target]:
            raise IllegalStateError(
                f"transactional.id {self.transactional_id!r}" if self.is_transactional else "idempotent producer",
                from_state=self._state, to_state=target,
            )
        if error is not None:
            self._last_error = error
        elif target not in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR, TxnState.ABORTING_TRANSACTION):
            self._last_error = None
        _log.debug("transaction manager %s -> %s", self._state.name, target.name)
        self._state = target

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        """Enter FATAL_ERROR with ``error`` (from the sender: e.g. a SASL authentication failure), failing every
        queued or pending user call with it. Does nothing if already fatal: the first error is the one reported."""
        with self._lock:
            if self._state is not TxnState.FATAL_ERROR:
                self._fatal(error)

    def _fatal(self, error: KafkaError) -> None:
        # Caller holds _lock. Every queued or in-flight user call fails with it too.
        if self._state is not TxnState.FATAL_ERROR:
            _log.error("producer entered a fatal state: %s", error)
            self._transition(TxnState.FATAL_ERROR, error)
        for _, _, req in self._queue:
            _fail(req.result, error)
        self._queue.clear()
        if self._pending_result is not None:
            _fail(self._pending_result[1], error)
            self._pending_result = None

    def _abortable(self, error: KafkaError) -> None:
        # Caller holds _lock.
        if self._state is TxnState.ABORTING_TRANSACTION:
            return  # already aborting: the error changes nothing
        if self._state in TRANSITIONS[TxnState.ABORTABLE_ERROR]:
            _log.info("transaction must be aborted: %s", error)
            self._transition(TxnState.ABORTABLE_ERROR, error)

    def _raise_if_failed(self) -> None:
        # Caller holds _lock. A fresh copy each time: re-raising one instance would grow its traceback forever.
        if self._state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR) and self._last_error is not None:
            raise _fresh(self._last_error)

    def _maybe_transition_to_error(self, error: BaseException) -> None:
        code = getattr(error, "code", None)
        if code in (47, 90):
            self._fatal(fenced_error(error, "Produce"))
        elif code in _FATAL_CODES or (isinstance(error, KafkaError) and error.fatal):
            self._fatal(error if isinstance(error, KafkaError) else KafkaError(str(error)))
        elif self.is_transactional and not isinstance(error, TransactionAbortedError):
            wrapped = error if isinstance(error, KafkaError) else KafkaError(str(error))
            self._abortable(wrapped)

    def _error_for_request(self, req: TxnRequest) -> KafkaError | None:
        # Caller holds _lock. A failed producer sends nothing more, except that FindCoordinator may still help
        # the abort that an abortable error calls for.
        if self._last_error is None:
            return None
        if self._state is TxnState.FATAL_ERROR or (
                self._state is TxnState.ABORTABLE_ERROR and req.kind is not RequestKind.FIND_COORDINATOR):
            return _fresh(self._last_error)
        return None


def _fresh(error: KafkaError) -> KafkaError:
    clone = copy.copy(error)
    clone.__traceback__ = None
    return clone


def _fail(result: Future[None] | None, error: BaseException | None) -> None:
    if result is not None and not result.done():
        result.set_exception(error or IllegalStateError("the producer failed"))
