"""``TransactionManager``: producer id / epoch, per-partition sequences, and the transaction state machine.

One instance per producer with idempotence on (the default); it behaves like the Java client's TransactionManager.
It is sans-IO: it never touches the network. The sender asks :meth:`next_request` for the one coordinator request
that is due (at most one is in flight), sends it, and feeds the answer back with :meth:`handle_response`.

States (``TxnState``) and the transition table ``TRANSITIONS`` (target <- allowed sources); any other transition
raises :class:`~spark_kafka_sink.errors.IllegalStateError` naming both states::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING_TRANSACTION -> READY
                                       ^             |  \\-> ABORTABLE_ERROR -> ABORTING_TRANSACTION -> READY
                                       |             \\-> ABORTING_TRANSACTION -> READY | INITIALIZING (epoch bump)
    READY -> UNINITIALIZED (idempotent producer: fetch a fresh producer id);  any state -> FATAL_ERROR

Idempotence: sequences are assigned when a batch is drained (``stamp``), retried batches keep them, and draining
a partition stops while an earlier batch of it awaits a retry (``should_stop_draining``), so a partition never has
its batches reordered. OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID that show a real gap make an idempotent
producer ask for a new epoch: InitProducerId (v3+ carrying the current id and epoch, which a Kafka 4 broker
answers with a fresh producer id for a null transactional id); the affected partitions' unfinished batches are
then renumbered from sequence 0 and retried. (The Java client bumps the epoch locally instead; asking the broker
costs one round trip per rare bump and keeps the broker the only source of ids.) DUPLICATE_SEQUENCE_NUMBER is
success. A transactional producer never bumps on its own: such errors make the transaction abortable, and the
abort is followed by InitProducerId with the current id/epoch, which resets every sequence.

Transactions use the explicit transaction-version-1 flow everywhere, even when the cluster finalized
``transaction.version`` 2: AddPartitionsToTxn (v <= 3) before the first batch to each new partition, Produce
v <= 11, EndTxn v <= 4. The broker chooses the flow per request version, and mixing the two inside one
transaction is not allowed; TV2's EndTxn v5 also bumps the epoch on every commit, which would stop a driver in
another process from ending the transaction knowing only (transactional.id, producer id, epoch) -- exactly what
:func:`end_transaction` does for the Spark driver.

Errors: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (reported as :class:`ProducerFencedError`),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and other unexpected coordinator answers are fatal: every later call raises
the same named error. TRANSACTION_ABORTABLE and failed produce requests inside a transaction are abortable:
commit raises, ``abort_transaction()`` recovers. NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE re-run
FindCoordinator (key type 1); CONCURRENT_TRANSACTIONS / COORDINATOR_LOAD_IN_PROGRESS retry after a backoff.

Threads: user threads (init / begin / commit / abort / send) and the sender thread share every field; the
re-entrant ``_lock`` guards them all. Result futures are completed while holding it (they have no callbacks that
re-enter the producer: only the facade waits on them).
"""

from __future__ import annotations

import copy
import enum
import heapq
import itertools
import logging
import threading
from concurrent.futures import Future
from typing import Any

from spark_kafka_sink.errors import IllegalStateError, KafkaError, error_for_code
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.sequences import (
    NO_PRODUCER_ID_AND_EPOCH,
    InFlightEntry,
    PartitionSequences,
    ProducerIdAndEpoch,
    SequencedBatch,
    increment_sequence,
)
from spark_kafka_sink.producer.transaction_admin import (
    TransactionIdentity,
    end_transaction,
    fence_transactional_id,
)
from spark_kafka_sink.producer.txn_requests import (
    Coordinator,
    RequestKind,
    TxnRequest,
    TxnResponseHandlers,
    fenced_error,
)

__all__ = [
    "TxnState",
    "TRANSITIONS",
    "TransactionManager",
    "TransactionAbortedError",
    "ProducerIdAndEpoch",
    "Coordinator",
    "TxnRequest",
    "RequestKind",
    "TransactionIdentity",
    "end_transaction",
    "fence_transactional_id",
    "MAX_TRANSACTIONAL_PRODUCE_VERSION",
]

_log = logging.getLogger(__name__)

#: Produce v12 lets a transaction-version-2 coordinator add partitions implicitly; we stay on the v1 flow.
MAX_TRANSACTIONAL_PRODUCE_VERSION = 11


class TransactionAbortedError(KafkaError):
    """The record was never sent: its transaction was aborted (by ``abort_transaction()`` or after an error)."""


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


class TransactionManager(TxnResponseHandlers):
    """Producer id, epoch, sequences and (with a transactional.id) the transaction state machine."""

    def __init__(self, *, transactional_id: str | None, transaction_timeout_ms: int, retry_backoff_ms: int) -> None:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.RLock()
        # Everything below is guarded by _lock.
        self._state = TxnState.UNINITIALIZED
        self._last_error: KafkaError | None = None
        self._producer = NO_PRODUCER_ID_AND_EPOCH
        self._partitions: dict[TopicPartition, PartitionSequences] = {}
        self._entries: dict[SequencedBatch, InFlightEntry] = {}  # batches with a sequence, by identity
        self._unresolved: dict[TopicPartition, int] = {}  # partition -> sequence after an expired sent batch
        self._rewrite_on_bump: set[TopicPartition] = set()  # partitions renumbered when the new epoch arrives
        self._bump_required = False
        self._queue: list[tuple[int, int, TxnRequest]] = []  # heap by (priority, enqueue order)
        self._counter = itertools.count()
        self._in_flight: TxnRequest | None = None
        self._coordinator: Coordinator | None = None
        self._new_partitions: set[TopicPartition] = set()  # sent to, not yet in an AddPartitionsToTxn
        self._pending_partitions: set[TopicPartition] = set()  # in the AddPartitionsToTxn in flight
        self._txn_partitions: set[TopicPartition] = set()  # added to the current transaction
        self._transaction_started = False  # a partition was added: EndTxn must really be sent
        self._pending_result: tuple[TxnState, Future[None]] | None = None  # user call in progress, for re-calls

    # ----------------------------------------------------------------------------------------- queries

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def state(self) -> TxnState:
        with self._lock:
            return self._state

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch:
        with self._lock:
            return self._producer

    @property
    def last_error(self) -> KafkaError | None:
        with self._lock:
            return self._last_error

    @property
    def has_fatal_error(self) -> bool:
        return self.state is TxnState.FATAL_ERROR

    @property
    def has_abortable_error(self) -> bool:
        return self.state is TxnState.ABORTABLE_ERROR

    @property
    def is_aborting(self) -> bool:
        return self.state is TxnState.ABORTING_TRANSACTION

    @property
    def is_completing(self) -> bool:
        return self.state in (TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION)

    @property
    def coordinator(self) -> Coordinator | None:
        with self._lock:
            return self._coordinator

    # ----------------------------------------------------------------------------------------- transitions

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

    def _require_transactional(self, what: str) -> None:
        if not self.is_transactional:
            raise IllegalStateError(f"{what} needs a transactional.id in the producer config")

    # ----------------------------------------------------------------------------------------- user calls

    def initialize_transactions(self) -> Future[None]:
        """Start FindCoordinator + InitProducerId; re-calling while it runs returns the same future."""
        self._require_transactional("init_transactions()")
        with self._lock:
            cached = self._cached_result(TxnState.INITIALIZING)
            if cached is not None:
                return cached
            self._raise_if_failed()
            self._transition(TxnState.INITIALIZING)
            req = self._init_producer_id_request(bump=False)
            self._enqueue(req)
            return self._remember(req)

    def begin_transaction(self) -> None:
        self._require_transactional("begin_transaction()")
        with self._lock:
            self._raise_if_failed()
            if self._state is TxnState.UNINITIALIZED:
                raise IllegalStateError("call init_transactions() before begin_transaction()")
            self._transition(TxnState.IN_TRANSACTION)

    def begin_commit(self) -> Future[None]:
        self._require_transactional("commit_transaction()")
        with self._lock:
            cached = self._cached_result(TxnState.COMMITTING_TRANSACTION)
            if cached is not None:
                return cached
            self._raise_if_failed()
            self._transition(TxnState.COMMITTING_TRANSACTION)
            return self._begin_completing(commit=True)

    def begin_abort(self) -> Future[None]:
        self._require_transactional("abort_transaction()")
        with self._lock:
            cached = self._cached_result(TxnState.ABORTING_TRANSACTION)
            if cached is not None:
                return cached
            if self._state is TxnState.ABORTING_TRANSACTION:
                return self._begin_completing(commit=False)  # an earlier abort attempt failed: try again
            if self._state is not TxnState.ABORTABLE_ERROR:
                self._raise_if_failed()
            self._transition(TxnState.ABORTING_TRANSACTION)
            self._new_partitions.clear()  # nothing more will be sent to them
            return self._begin_completing(commit=False)

    def _begin_completing(self, commit: bool) -> Future[None]:
        if self._new_partitions:
            self._enqueue(self._add_partitions_request())
        end = self._end_txn_request(commit)
        self._enqueue(end)
        if not (self._bump_required and not commit):
            return self._remember(end)
        # Sequences are inconsistent after a failed batch: a fresh epoch after the abort resets them all.
        bump = self._init_producer_id_request(bump=True)
        self._enqueue(bump)
        return self._remember(bump)

    def _cached_result(self, state: TxnState) -> Future[None] | None:
        if self._pending_result is not None and not self._pending_result[1].done():
            if self._pending_result[0] is state:
                return self._pending_result[1]
            raise IllegalStateError(f"a {self._pending_result[0].name} call is still in progress; retry it first")
        self._pending_result = None
        return None

    def _remember(self, req: TxnRequest) -> Future[None]:
        assert req.result is not None  # every user-visible request carries one
        self._pending_result = (self._state, req.result)
        return req.result

    def fail_if_not_ready_for_send(self) -> None:
        """Raise the fatal/abortable error, or IllegalStateError when a transactional send is out of place."""
        with self._lock:
            self._raise_if_failed()
            if self.is_transactional:
                if not self._producer.is_valid:
                    raise IllegalStateError("call init_transactions() before sending with a transactional.id")
                if self._state is not TxnState.IN_TRANSACTION:
                    raise IllegalStateError(f"cannot send in state {self._state.name}: call begin_transaction()")

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        """A transactional send to ``tp``: add it to the transaction before its first batch goes out."""
        with self._lock:
            if tp not in self._txn_partitions and tp not in self._pending_partitions:
                self._new_partitions.add(tp)

    def is_send_to_partition_allowed(self, tp: TopicPartition) -> bool:
        with self._lock:
            if self._state is TxnState.FATAL_ERROR:
                return False
            return not self.is_transactional or tp in self._txn_partitions

    def transaction_identity(self) -> TransactionIdentity:
        with self._lock:
            self._require_transactional("transaction_identity()")
            if not self._producer.is_valid:
                raise IllegalStateError("no producer id yet: call init_transactions() first")
            assert self.transactional_id is not None
            return TransactionIdentity(self.transactional_id, self._producer.producer_id, self._producer.epoch)

    # ----------------------------------------------------------------------------------------- sender: requests

    def maybe_request_producer_id(self) -> None:
        """Idempotent producer, once per sender round: fetch the first producer id, or a fresh one after an epoch
        bump was requested."""
        if self.is_transactional:
            return
        with self._lock:
            if self._state is TxnState.READY and self._bump_required:
                self._bump_required = False
                self._transition(TxnState.UNINITIALIZED)  # keep _producer: InitProducerId v3+ carries it
            if self._state is TxnState.UNINITIALIZED:
                self._transition(TxnState.INITIALIZING)
                self._enqueue(self._init_producer_id_request(bump=self._producer.is_valid))

    def has_in_flight_request(self) -> bool:
        with self._lock:
            return self._in_flight is not None

    def has_pending_requests(self) -> bool:
        with self._lock:
            return bool(self._queue) or bool(self._new_partitions) or self._in_flight is not None

    def next_request(self, now_ms: int, has_incomplete_batches: bool) -> TxnRequest | None:
        """The coordinator request to send now, or None (nothing due, backing off, or EndTxn waiting for the
        batches of the transaction to finish). The caller must then call ``request_sent`` or ``requeue``."""
        with self._lock:
            if self._in_flight is not None:
                return None
            if self._new_partitions and self._state is not TxnState.FATAL_ERROR:
                self._enqueue(self._add_partitions_request())
            while self._queue:
                req = self._queue[0][2]
                if req.kind is RequestKind.END_TXN and has_incomplete_batches:
                    return None  # commit only what the broker acknowledged; abort only once nothing is in flight
                if req.not_before_ms > now_ms:
                    return None
                heapq.heappop(self._queue)
                if self._state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR) and self._last_error is not None:
                    if not (self._state is TxnState.ABORTABLE_ERROR and req.kind is RequestKind.FIND_COORDINATOR):
                        _fail(req.result, _fresh(self._last_error))
                        continue
                if req.kind is RequestKind.END_TXN and not self._transaction_started:
                    # Nothing was added to this transaction: there is nothing to end on the broker.
                    self._complete_transaction()
                    _done(req.result)
                    continue
                if req.to_coordinator and self._coordinator is None:
                    heapq.heappush(self._queue, (req.kind.value, next(self._counter), req))
                    self._lookup_coordinator()
                    continue
                return req
            return None

    def next_request_delay_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the head request's backoff ends (None: nothing queued), for the sender's poll."""
        with self._lock:
            if not self._queue or self._in_flight is not None:
                return None
            return max(0, self._queue[0][2].not_before_ms - now_ms)

    def request_sent(self, req: TxnRequest) -> None:
        with self._lock:
            self._in_flight = req

    def requeue(self, req: TxnRequest, now_ms: int, *, backoff_ms: int = 0, find_coordinator: bool = False) -> None:
        """Put ``req`` back (not sent, or to retry); optionally after re-finding the coordinator."""
        with self._lock:
            if self._in_flight is req:
                self._in_flight = None
            if self._state is TxnState.FATAL_ERROR:
                _fail(req.result, _fresh(self._last_error) if self._last_error else None)
                return
            req.not_before_ms = now_ms + backoff_ms
            self._enqueue(req)
            if find_coordinator and req.to_coordinator:
                self._lookup_coordinator()

    def handle_request_failure(self, req: TxnRequest, error: BaseException, now_ms: int) -> None:
        """Disconnected or timed out: resend after a backoff, to a freshly found coordinator if it was one."""
        _log.info("%s failed (%s); retrying", req.kind.name, error)
        self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms, find_coordinator=True)

    def _enqueue(self, req: TxnRequest) -> None:
        heapq.heappush(self._queue, (req.kind.value, next(self._counter), req))

    def _lookup_coordinator(self) -> None:
        self._coordinator = None
        if not any(r.kind is RequestKind.FIND_COORDINATOR for _, _, r in self._queue) and not (
            self._in_flight is not None and self._in_flight.kind is RequestKind.FIND_COORDINATOR
        ):
            self._enqueue(self._find_coordinator_request())

    # ----------------------------------------------------------------------------------------- sender: sequences

    def should_stop_draining(self, batch: SequencedBatch) -> bool:
        """True if ``batch`` (the head of its partition's deque) must not be drained now (Java's
        shouldStopDrainBatchesForPartition): no usable producer id, partition not yet in the transaction, an
        epoch change still draining, an unresolved sequence, or an earlier batch of the partition in flight."""
        tp = batch.tp
        with self._lock:
            if self._state in (TxnState.FATAL_ERROR, TxnState.UNINITIALIZED, TxnState.INITIALIZING):
                return True
            if not self._producer.is_valid or (self.is_transactional and tp not in self._txn_partitions):
                return True
            entry = self._entries.get(batch)
            seqs = self._partitions.get(tp)
            if seqs is None or not seqs.in_flight:
                return False
            if entry is None:
                # A new batch must wait while the partition still finishes batches of an older id/epoch (else
                # sequence 0 of the new epoch could overtake them) or while a sequence is unresolved.
                return seqs.producer != self._producer or tp in self._unresolved
            # A retry goes out only when it is the partition's first unfinished batch: one at a time, in order.
            return entry is not seqs.in_flight[0]

    def stamp(self, batch: Any) -> None:
        """At drain: give a new batch the next sequence (or restamp a renumbered one) and set its producer
        state. ``batch`` is a ``ProducerBatch`` (``set_producer_state`` / ``reset_producer_state``)."""
        with self._lock:
            entry = self._entries.get(batch)
            if entry is None:
                seqs = self._partitions.get(batch.tp)
                if seqs is None:
                    seqs = self._partitions[batch.tp] = PartitionSequences(producer=self._producer)
                elif seqs.producer != self._producer and not seqs.in_flight:
                    seqs.start_at_beginning(self._producer)  # the older epoch's batches are all finished
                entry = InFlightEntry(batch, seqs.producer, seqs.next_sequence, batch.record_count)
                seqs.next_sequence = increment_sequence(seqs.next_sequence, batch.record_count)
                seqs.add(entry)
                self._entries[batch] = entry
            want = (entry.producer.producer_id, entry.producer.epoch, entry.base_sequence)
        if (batch.producer_id, batch.producer_epoch, batch.base_sequence) != want:
            if batch.has_sequence:
                batch.reset_producer_state()
            batch.set_producer_state(*want, self.is_transactional)

    def batch_succeeded(self, batch: SequencedBatch, base_offset: int) -> None:
        with self._lock:
            entry = self._entries.pop(batch, None)
            if entry is not None:
                self._partitions[batch.tp].acknowledge(entry, base_offset)

    def can_retry(self, batch: SequencedBatch, error_code: int, log_start_offset: int) -> bool:
        """Whether a produce error on a sequenced batch should be retried (Java's TransactionManager.canRetry);
        may request an epoch bump for the partition."""
        retriable = error_for_code(error_code).retriable
        with self._lock:
            entry = self._entries.get(batch)
            seqs = self._partitions.get(batch.tp)
            if entry is None or seqs is None:
                return retriable
            tp = batch.tp
            if error_code == 59:  # UNKNOWN_PRODUCER_ID: the broker lost our state
                if entry.sequence_reset:
                    return True  # answer to the send before our renumbering
                if 0 <= seqs.last_acked_offset < log_start_offset:
                    # Retention deleted the log head and the producer state with it; nothing was lost.
                    if self.is_transactional:
                        seqs.start_at_beginning(self._producer)
                    else:
                        self._request_epoch_bump(tp)
                    return True
                if not self.is_transactional:
                    self._request_epoch_bump(tp)
                    return True
                return False
            if error_code == 45:  # OUT_OF_ORDER_SEQUENCE_NUMBER
                unresolved = tp in self._unresolved
                if not unresolved and (entry.sequence_reset or not seqs.is_next_sequence(entry.base_sequence)):
                    return True  # an earlier batch failed first: this one is retried after it, in order
                if not self.is_transactional:
                    if not unresolved or self._unresolved[tp] == entry.base_sequence:
                        self._request_epoch_bump(tp)  # a real gap
                    return True
                return False
            return retriable

    def batch_failed(self, batch: SequencedBatch, error: BaseException, *, maybe_written: bool) -> None:
        """A batch reached a final failure. ``maybe_written``: it was sent and its fate is unknown (expired)."""
        with self._lock:
            self._maybe_transition_to_error(error)
            entry = self._entries.pop(batch, None)
            if entry is None or self._state is TxnState.FATAL_ERROR:
                return
            seqs = self._partitions[batch.tp]
            seqs.remove(entry)
            if self.is_transactional:
                self._bump_required = True  # renumber everything after the abort
            elif maybe_written:
                following = increment_sequence(entry.base_sequence, entry.record_count)
                self._unresolved[batch.tp] = max(self._unresolved.get(batch.tp, following), following)
            else:
                self._request_epoch_bump(batch.tp)  # the broker did not write it: a gap from here on

    def _maybe_transition_to_error(self, error: BaseException) -> None:
        code = getattr(error, "code", None)
        if code in (47, 90):
            self._fatal(fenced_error(error, "Produce"))
        elif code in _FATAL_CODES or (isinstance(error, KafkaError) and error.fatal):
            self._fatal(error if isinstance(error, KafkaError) else KafkaError(str(error)))
        elif self.is_transactional and not isinstance(error, TransactionAbortedError):
            wrapped = error if isinstance(error, KafkaError) else KafkaError(str(error))
            self._abortable(wrapped)

    def maybe_resolve_sequences(self) -> None:
        """Once a partition with an expired sent batch has nothing in flight: if later batches were acknowledged,
        the expired one was written too; otherwise its fate is unknown and the sequences must restart."""
        with self._lock:
            for tp in list(self._unresolved):
                seqs = self._partitions[tp]
                if seqs.in_flight:
                    continue
                del self._unresolved[tp]
                if seqs.is_next_sequence(seqs.next_sequence):
                    continue
                if self.is_transactional:
                    self._bump_required = True
                    self._abortable(KafkaError(
                        f"no acknowledgement for some batches sent to {tp} and they can no longer be retried; "
                        "abort the transaction and continue"))
                else:
                    self._request_epoch_bump(tp)

    def _request_epoch_bump(self, tp: TopicPartition) -> None:
        _log.info("sequence gap on %s: requesting a new producer epoch", tp)
        self._bump_required = True
        self._rewrite_on_bump.add(tp)

    def _set_producer(self, producer: ProducerIdAndEpoch, *, reset_all: bool) -> None:
        # Caller holds _lock. Called with the InitProducerId answer.
        _log.info("%s for %s", producer, self.transactional_id or "idempotent producer")
        self._producer = producer
        if reset_all:
            self._partitions.clear()
            self._entries.clear()
            self._unresolved.clear()
            self._rewrite_on_bump.clear()
            return
        for tp in self._rewrite_on_bump:
            seqs = self._partitions.get(tp)
            if seqs is not None:
                seqs.start_at_beginning(producer)
            self._unresolved.pop(tp, None)
        self._rewrite_on_bump.clear()

    def _producer_granted(self, producer: ProducerIdAndEpoch) -> None:
        # Caller holds _lock: InitProducerId succeeded.
        self._set_producer(producer, reset_all=self.is_transactional)
        self._transition(TxnState.READY)

    def _complete_transaction(self) -> None:
        # Caller holds _lock: EndTxn succeeded (or was not needed).
        self._transition(TxnState.INITIALIZING if self._bump_required else TxnState.READY)
        self._transaction_started = False
        self._new_partitions.clear()
        self._pending_partitions.clear()
        self._txn_partitions.clear()


def _fresh(error: KafkaError) -> KafkaError:
    clone = copy.copy(error)
    clone.__traceback__ = None
    return clone


def _fail(result: Future[None] | None, error: BaseException | None) -> None:
    if result is not None and not result.done():
        result.set_exception(error or IllegalStateError("the producer failed"))


def _done(result: Future[None] | None) -> None:
    if result is not None and not result.done():
        result.set_result(None)

