"""The transaction manager's states (``TxnState``) and the one table of moves between them (``TRANSITIONS``:
target <- the states it may be entered from). :meth:`TxnState.check_transition` is the gate every move passes;
any move not in the table raises :class:`~spark_kafka_sink.errors.IllegalStateError` naming both states::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                       ^             |  \\-> ABORTABLE_ERROR -> ABORTING_TRANSACTION -> READY
                                       |             \\-> ABORTING_TRANSACTION -> READY | INITIALIZING (epoch bump)
    READY -> UNINITIALIZED (idempotent producer: fetch a fresh producer id);  any state -> FATAL_ERROR
    READY | IN_TRANSACTION -> UNINITIALIZED (a transactional producer takes another transactional.id; the open
                                             transaction is left to whoever ends it: switch_transactional_id)
"""

from __future__ import annotations

import enum

from spark_kafka_sink.errors import IllegalStateError

__all__ = ["TxnState", "TRANSITIONS"]


class TxnState(enum.Enum):
    UNINITIALIZED = "uninitialized"
    INITIALIZING = "initializing"  # InitProducerId in progress
    READY = "ready"  # has a producer id; idempotent producers stay here
    IN_TRANSACTION = "in_transaction"
    COMMITTING_TRANSACTION = "committing_transaction"  # flushing, then EndTxn(commit)
    ABORTING_TRANSACTION = "aborting_transaction"  # dropping unsent batches, then EndTxn(abort)
    ABORTABLE_ERROR = "abortable_error"  # the transaction can only be aborted
    FATAL_ERROR = "fatal_error"  # the producer can only be closed

    def check_transition(self, target: TxnState, owner: str) -> None:
        """Return if ``TRANSITIONS`` allows moving from this state to ``target``; else raise
        :class:`IllegalStateError` with ``from_state``/``to_state`` set and ``owner`` (who tried) as its message."""
        if self not in TRANSITIONS[target]:
            hint = _HINTS.get((self, target))
            raise IllegalStateError(f"{owner}: {hint}" if hint else owner, from_state=self, to_state=target)


_S = TxnState
#: target state -> the states it may be entered from.
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    # An idempotent producer drops its id to fetch a fresh one; a transactional one takes another transactional.id.
    _S.UNINITIALIZED: frozenset({_S.READY, _S.IN_TRANSACTION}),
    _S.INITIALIZING: frozenset({_S.UNINITIALIZED, _S.ABORTING_TRANSACTION}),  # first id; epoch bump after abort
    _S.READY: frozenset({_S.INITIALIZING, _S.COMMITTING_TRANSACTION, _S.ABORTING_TRANSACTION}),
    _S.IN_TRANSACTION: frozenset({_S.READY}),
    _S.COMMITTING_TRANSACTION: frozenset({_S.IN_TRANSACTION}),
    _S.ABORTING_TRANSACTION: frozenset({_S.IN_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.ABORTABLE_ERROR: frozenset({_S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION, _S.ABORTABLE_ERROR}),
    _S.FATAL_ERROR: frozenset(TxnState),  # always reachable, never left
}

_NO_TRANSACTION = "no transaction is open: call begin_transaction() first"
_NOT_INITIALIZED = "call init_transactions() first, then begin_transaction()"
_ONE_INIT = "init_transactions() was already called: it runs once per producer (and transactional.id)"
#: (from, to) -> what the caller should do instead, for the moves a user's own calls can attempt.
_HINTS: dict[tuple[TxnState, TxnState], str] = {
    (_S.READY, _S.COMMITTING_TRANSACTION): _NO_TRANSACTION,
    (_S.READY, _S.ABORTING_TRANSACTION): _NO_TRANSACTION,
    (_S.UNINITIALIZED, _S.COMMITTING_TRANSACTION): _NOT_INITIALIZED,
    (_S.UNINITIALIZED, _S.ABORTING_TRANSACTION): _NOT_INITIALIZED,
    (_S.IN_TRANSACTION, _S.IN_TRANSACTION):
        "a transaction is already open: commit_transaction() or abort_transaction() it first",
    (_S.READY, _S.INITIALIZING): _ONE_INIT,
    (_S.IN_TRANSACTION, _S.INITIALIZING): _ONE_INIT,
}
