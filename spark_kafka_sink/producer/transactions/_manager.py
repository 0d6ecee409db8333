"""``TransactionManager``: one per producer with idempotence on (the default), like the Java client's. It owns the
producer id/epoch, the transaction state (moved only through the ``TRANSITIONS`` check of :mod:`._states`), the
partitions of the open transaction, the user calls in progress, and the hooks the sender, accumulator and facade
call. It keeps three collaborators: a :class:`~._sequences.SequenceBook` (per-partition sequences), a
:class:`~._queue.RequestQueue` (coordinator requests) and the handler of each request (:mod:`._handlers`), which
acts on the manager through its ``TxnHost`` methods.

Sans-IO: it never touches the network. The sender asks :meth:`TransactionManager.next_request` for the one
coordinator request that is due (at most one is in flight), sends it, and feeds the answer back with
:meth:`TransactionManager.handle_response`.

Failures: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (reported as :class:`ProducerFencedError`), authorization and
other unexpected answers are fatal: the manager fails every queued or pending user call and every later call
raises a fresh copy of the same error. Abortable errors (TRANSACTION_ABORTABLE, a failed batch inside a
transaction) fail the commit; ``abort_transaction()`` recovers. After an abort that follows a failed batch the
sequences are inconsistent: InitProducerId with the current id/epoch (a new epoch) resets them before the abort's
future completes.

Threads: user threads (init / begin / commit / abort / send) and the sender thread share every field; the
re-entrant ``_lock`` guards them all, including the collaborators, which have no lock of their own. Result
futures are completed while holding it (they have no callbacks that re-enter the producer: only the facade waits
on them). The accumulator's ``before_drain`` calls ``should_stop_draining`` and ``stamp`` with a partition lock
held (partition lock before ``_lock``, never the reverse); ``stamp`` takes the batch's own lock only after
releasing ``_lock``.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from spark_kafka_sink.errors import (
    FENCED_CODES,
    PRODUCE_FATAL_CODES,
    IllegalStateError,
    KafkaError,
    TransactionAbortedError,
)
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions._admin import TransactionIdentity
from spark_kafka_sink.producer.transactions._errors import fenced_error
from spark_kafka_sink.producer.transactions._handlers import (
    MAX_TRANSACTIONAL_PRODUCE_VERSION,
    TV2_PRODUCE_VERSION,
    AddPartitionsToTxnHandler,
    CallResult,
    Coordinator,
    EndTxnHandler,
    FindCoordinatorHandler,
    InitProducerIdHandler,
    RequestKind,
    TxnRequest,
)
from spark_kafka_sink.producer.transactions._offsets import (
    AddOffsetsToTxnHandler,
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    TxnOffsetCommitHandler,
)
from spark_kafka_sink.producer.transactions._queue import RequestQueue
from spark_kafka_sink.producer.transactions._sequences import (
    NO_PRODUCER_ID_AND_EPOCH,
    NO_SEQUENCE,
    ProducerIdAndEpoch,
    SequenceBook,
    SequencedBatch,
    StampableBatch,
)
from spark_kafka_sink.producer.transactions._states import TRANSITIONS, TxnState

__all__ = ["TransactionManager"]

_log = logging.getLogger(__name__)
_MAX_KNOWN_COORDINATORS = 4096  # transactional ids whose coordinator is remembered (a Spark job's partitions)


class TransactionManager:
    """Producer id, epoch, sequences and (with a transactional.id) the transaction state machine."""

    def __init__(self, *, transactional_id: str | None, transaction_timeout_ms: int, retry_backoff_ms: int) -> None:
        # transactional_id: never switches between None and a string, so ``is_transactional`` is read without the
        # lock; the string changes only in switch_transactional_id, under _lock, while no request or sequenced
        # batch is outstanding (the requests built afterwards read the new one). Set once here, read by every
        # thread without the lock:
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._lock = threading.RLock()
        # Everything below is guarded by _lock (the collaborators too: they have no lock of their own).
        self._state = TxnState.UNINITIALIZED
        self._last_error: KafkaError | None = None
        self._producer = NO_PRODUCER_ID_AND_EPOCH
        self._sequences = SequenceBook(transactional=transactional_id is not None)
        self._requests = RequestQueue()
        self._coordinator: Coordinator | None = None
        # Coordinators found, by transactional.id: a producer that serves many ids in turn (see
        # switch_transactional_id) asks FindCoordinator once per id while the coordinator stays where it was.
        self._known_coordinators: dict[str, Coordinator] = {}
        # Consumer groups' coordinators (send_offsets_to_transaction), by group id.
        self._group_coordinators: dict[str, Coordinator] = {}
        self._new_partitions: set[TopicPartition] = set()  # sent to, not yet in an AddPartitionsToTxn
        self._pending_partitions: set[TopicPartition] = set()  # in the AddPartitionsToTxn in flight
        self._txn_partitions: set[TopicPartition] = set()  # added to the current transaction
        self._transaction_started = False  # a partition was added: EndTxn must really be sent
        # The cluster's finalized transaction.version as last seen in an ApiVersions answer (observe_features),
        # and the version of the open (or last) transaction, fixed at begin so one transaction never mixes flows.
        self._cluster_transaction_version = 0
        self._transaction_version = 1
        # The last init/commit/abort call whose outcome no caller has waited for yet (see _cached_result).
        self._pending_result: tuple[TxnState, CallResult] | None = None

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
    def transaction_version(self) -> int:
        """The transaction protocol of the open (or last) transaction: 2 (KIP-890) or 1."""
        with self._lock:
            return self._transaction_version

    @property
    def produce_max_version(self) -> int | None:
        """Highest Produce version for transactional batches (None: no cap beyond the client's own)."""
        if not self.is_transactional:
            return None
        with self._lock:
            return TV2_PRODUCE_VERSION if self._transaction_version >= 2 else MAX_TRANSACTIONAL_PRODUCE_VERSION

    def observe_features(self, finalized: dict[str, int]) -> None:
        """The finalized features of a broker that answered (sender thread); the next transaction uses TV2 when
        the cluster finalized ``transaction.version`` >= 2."""
        with self._lock:
            self._cluster_transaction_version = finalized.get("transaction.version", 0)

    @property
    def coordinator(self) -> Coordinator | None:
        with self._lock:
            return self._coordinator

    def coordinator_of(self, req: TxnRequest) -> Coordinator | None:
        """Where a ``to_coordinator`` request goes: its consumer group's coordinator, else the transaction's."""
        with self._lock:
            return self._coordinator if req.group_id is None else self._group_coordinators.get(req.group_id)

    @property
    def has_partitions_in_transaction(self) -> bool:
        """True once an AddPartitionsToTxn of the open transaction succeeded."""
        with self._lock:
            return bool(self._txn_partitions)

    def _require_transactional(self, what: str) -> None:
        if not self.is_transactional:
            raise IllegalStateError(f"{what} needs a transactional.id in the producer config")

    # ----------------------------------------------------------------------------------------- user calls

    def initialize_transactions(self) -> Future[None]:
        """Start FindCoordinator + InitProducerId; made again before a caller waited for it: the same future."""
        self._require_transactional("init_transactions()")
        with self._lock:
            cached = self._cached_result(TxnState.INITIALIZING)
            if cached is not None:
                return cached
            self._raise_if_failed()
            self._transition(TxnState.INITIALIZING)
            req = self._init_producer_id_request(bump=False)
            self._requests.push(req)
            return self._remember(req)

    def begin_transaction(self) -> None:
        self._require_transactional("begin_transaction()")
        with self._lock:
            self._cached_result(None)  # raises while an init/commit/abort was not waited for
            self._raise_if_failed()
            if self._state is TxnState.UNINITIALIZED:
                raise IllegalStateError("call init_transactions() before begin_transaction()")
            self._transition(TxnState.IN_TRANSACTION)
            self._transaction_version = 2 if self._cluster_transaction_version >= 2 else 1

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

    def send_offsets(self, offsets: dict[TopicPartition, OffsetAndMetadata],
                     group: ConsumerGroupMetadata) -> Future[None]:
        """Add ``group``'s ``offsets`` to the open transaction: AddOffsetsToTxn then TxnOffsetCommit (TV1), or
        TxnOffsetCommit alone (TV2, as Java 4.x). Not one of the calls a later call must wait for: a commit queued
        behind it is sent after it (requests leave by kind, one at a time)."""
        self._require_transactional("send_offsets_to_transaction()")
        with self._lock:
            self._cached_result(None)  # raises while an init/commit/abort was not waited for
            self._raise_if_failed()
            if self._state is not TxnState.IN_TRANSACTION:
                raise IllegalStateError(f"send_offsets_to_transaction() needs an open transaction (state "
                                        f"{self._state.name}): call begin_transaction() first")
            result = CallResult()
            if self._transaction_version >= 2:
                self._transaction_started = True
                self._requests.push(TxnOffsetCommitHandler(self, offsets, group, result, transaction_version=2))
            else:
                self._requests.push(AddOffsetsToTxnHandler(self, offsets, group, result))
            return result

    def _begin_completing(self, commit: bool) -> CallResult:
        if self._new_partitions:
            self._requests.push(self._add_partitions_request())
        end = EndTxnHandler(self, commit=commit, transaction_version=self._transaction_version)
        self._requests.push(end)
        return self._remember(end)

    def _cached_result(self, state: TxnState | None) -> CallResult | None:
        """Java's rule for a call made again: the last init/commit/abort call's result, until a caller waited for
        it, is returned to the same call (``state``, the one it moves to; None: a call with no result of its own)
        even once it is over (a call that timed out waits for the answer it started, not a second round), and
        refuses any other call; once waited for, it is forgotten."""
        pending = self._pending_result
        if pending is None or pending[1].acknowledged:
            self._pending_result = None
            return None
        if pending[0] is state:
            return pending[1]
        raise _unwaited_call_error(*pending)

    def _remember(self, req: TxnRequest) -> CallResult:
        assert req.result is not None  # every user-visible request carries one
        self._pending_result = (self._state, req.result)
        return req.result

    def fail_if_not_ready_for_send(self) -> None:
        """Raise the fatal/abortable error, or IllegalStateError when a transactional send is out of place."""
        if self.transactional_id is None and self._state is not TxnState.FATAL_ERROR:  # not is_transactional
            return  # per-record fast path: an unlocked read of one attribute; a race only delays the error a record
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
            if self._transaction_version >= 2:
                # TV2: the partition leader adds it when the batch (Produce v12) arrives; no AddPartitionsToTxn.
                self._txn_partitions.add(tp)
                self._transaction_started = True
            elif tp not in self._txn_partitions and tp not in self._pending_partitions:
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
            coordinator = self._coordinator.node_id if self._coordinator is not None else -1
            return TransactionIdentity(self.transactional_id, self._producer.producer_id, self._producer.epoch,
                                       self._transaction_version, coordinator)

    def switch_transactional_id(self, transactional_id: str) -> None:
        """Serve ``transactional_id`` from now on, as a new producer would (a cache lends one producer to the tasks
        of many Spark partitions in turn). The transaction open under the old id, if any, is left as it is, for
        the holder of its :meth:`transaction_identity` to end (the Spark driver); this manager forgets it, its
        producer id, epoch and sequences, and goes back to UNINITIALIZED: ``initialize_transactions`` fetches a
        producer id for the new id (which also fences an earlier producer of it). The coordinator of an id seen
        before is remembered. Only in READY or IN_TRANSACTION with every coordinator request answered and every
        sequenced batch answered; anything else raises :class:`IllegalStateError` (a failed manager raises its
        error) and changes nothing."""
        self._require_transactional("switch_transactional_id()")
        with self._lock:
            last_call = self._pending_result
            if last_call is not None and not last_call[1].done():
                raise _unwaited_call_error(*last_call)
            self._pending_result = None  # a finished call's outcome goes with the old id
            self._raise_if_failed()
            busy = [what for what, pending in (
                ("a coordinator request", bool(self._requests) or self._requests.in_flight is not None),
                ("partitions waiting to join the transaction", bool(self._new_partitions or self._pending_partitions)),
                ("batches without an answer", self._sequences.has_unanswered_batches),
            ) if pending]
            if busy:
                raise IllegalStateError(
                    f"transactional.id {self.transactional_id!r} cannot be switched to {transactional_id!r} with "
                    f"{', '.join(busy)} outstanding: only a producer whose records were all acknowledged can serve "
                    "another transactional.id")
            self._transition(TxnState.UNINITIALIZED)  # from READY or IN_TRANSACTION only (TRANSITIONS)
            _log.debug("transactional.id %r -> %r", self.transactional_id, transactional_id)
            self.transactional_id = transactional_id
            self._producer = NO_PRODUCER_ID_AND_EPOCH
            self._sequences = SequenceBook(transactional=True)
            self._coordinator = self._known_coordinators.get(transactional_id)
            self._txn_partitions.clear()
            self._transaction_started = False

    # ----------------------------------------------------------------------------------------- sender: requests

    def maybe_request_producer_id(self) -> None:
        """Idempotent producer, once per sender round: fetch the first producer id, or a fresh one after an epoch
        bump was requested."""
        if self.is_transactional:
            return
        with self._lock:
            if self._state is TxnState.READY and self._sequences.epoch_bump_required:
                self._sequences.epoch_bump_started()
                self._transition(TxnState.UNINITIALIZED)  # keep _producer: InitProducerId v3+ carries it
            if self._state is TxnState.UNINITIALIZED:
                self._transition(TxnState.INITIALIZING)
                self._requests.push(self._init_producer_id_request(bump=self._producer.is_valid))

    def has_in_flight_request(self) -> bool:
        with self._lock:
            return self._requests.in_flight is not None

    def has_pending_requests(self) -> bool:
        with self._lock:
            return bool(self._requests) or bool(self._new_partitions) or self._requests.in_flight is not None

    def next_request(self, now_ms: int, has_incomplete_batches: bool) -> TxnRequest | None:
        """The coordinator request to send now, or None (nothing due, backing off, or EndTxn waiting for the
        batches of the transaction to finish). The caller must then call ``request_sent`` or ``requeue``."""
        with self._lock:
            if self._requests.in_flight is not None:
                return None
            if self._new_partitions and self._state is not TxnState.FATAL_ERROR:
                self._requests.push(self._add_partitions_request())
            while (req := self._requests.peek_due(now_ms)) is not None:
                if req.kind is RequestKind.END_TXN and has_incomplete_batches:
                    return None  # commit only what the broker acknowledged; abort only once nothing is in flight
                self._requests.pop()
                error = self._error_for_request(req)
                if error is not None:
                    req.fail(error)
                    continue
                if req.kind is RequestKind.END_TXN:
                    self._sequences.forget_abandoned_batches()
                    if not self._transaction_started:
                        # Nothing was added to this transaction: there is nothing to end on the broker.
                        self.complete_transaction(req.result)
                        continue
                if req.to_coordinator and self.coordinator_of(req) is None:
                    self._requests.push(req)
                    self._lookup_coordinator(req.group_id)
                    continue
                return req
            return None

    def next_request_delay_ms(self, now_ms: int) -> int | None:
        """Milliseconds until the head request's backoff ends (None: nothing queued), for the sender's poll."""
        with self._lock:
            return self._requests.delay_ms(now_ms)

    def request_sent(self, req: TxnRequest) -> None:
        with self._lock:
            self._requests.sent(req)

    def requeue(self, req: TxnRequest, now_ms: int, *, backoff_ms: int = 0, find_coordinator: bool = False) -> None:
        """Put ``req`` back (not sent, or to retry); optionally after re-finding the coordinator."""
        with self._lock:
            self._requests.finished(req)
            error = self._error_for_request(req)
            if self._state is TxnState.FATAL_ERROR and error is not None:
                req.fail(error)
                return
            req.not_before_ms = now_ms + backoff_ms
            self._requests.push(req)
            if find_coordinator and req.to_coordinator:
                self._lookup_coordinator(req.group_id)

    def handle_request_failure(self, req: TxnRequest, error: BaseException, now_ms: int) -> None:
        """Disconnected or timed out: resend after a backoff, to a freshly found coordinator if it was one."""
        _log.info("%s failed (%s); retrying", req.kind.name, error)
        self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms, find_coordinator=True)

    def handle_response(self, req: TxnRequest, version: int, body: dict[str, Any], now_ms: int) -> None:
        """Feed the decoded answer to ``req`` (sent with ``version``) to its handler."""
        with self._lock:
            self._requests.finished(req)
            req.handle_response(version, body, now_ms)

    def _lookup_coordinator(self, group_id: str | None = None) -> None:
        # Caller holds _lock. The transaction's coordinator, or (group_id) that consumer group's.
        if group_id is not None:
            self._group_coordinators.pop(group_id, None)
        else:
            self._coordinator = None
            if self.transactional_id is not None:
                self._known_coordinators.pop(self.transactional_id, None)
        if not self._requests.has(RequestKind.FIND_COORDINATOR, group_id):
            self._requests.push(FindCoordinatorHandler(self, group_id))

    def _init_producer_id_request(self, *, bump: bool) -> InitProducerIdHandler:
        return InitProducerIdHandler(self, bump=bump, transaction_timeout_ms=self.transaction_timeout_ms)

    def _add_partitions_request(self) -> AddPartitionsToTxnHandler:
        # Caller holds _lock: the new partitions are pending until the answer.
        partitions = frozenset(self._new_partitions)
        self._pending_partitions |= partitions
        self._new_partitions.clear()
        return AddPartitionsToTxnHandler(self, partitions)

    def _has_usable_producer_id(self) -> bool:
        # Caller holds _lock. Nothing is drained without one, nor while a new one is being fetched.
        return self._producer.is_valid and self._state not in (
            TxnState.FATAL_ERROR, TxnState.UNINITIALIZED, TxnState.INITIALIZING)

    # ----------------------------------------------------------------------------------------- handler callbacks
    # The TxnHost interface of the request handlers; they call it with _lock held (from handle_response).

    def coordinator_found(self, coordinator: Coordinator, group_id: str | None = None) -> None:
        with self._lock:
            if group_id is not None:
                _remember(self._group_coordinators, group_id, coordinator)
                _log.debug("group coordinator of %r is node %s", group_id, coordinator)
                return
            self._coordinator = coordinator
            if self.transactional_id is not None:
                _remember(self._known_coordinators, self.transactional_id, coordinator)
            _log.debug("transaction coordinator of %r is node %s", self.transactional_id, coordinator)

    def producer_id_granted(self, producer: ProducerIdAndEpoch) -> None:
        """InitProducerId succeeded: a transactional producer starts every sequence afresh, an idempotent one
        renumbers the partitions that asked for the new epoch."""
        with self._lock:
            _log.info("%s for %s", producer, self.transactional_id or "idempotent producer")
            self._producer = producer
            self._sequences.start_epoch(producer, reset_all=self.is_transactional)
            self._transition(TxnState.READY)

    def enqueue(self, req: TxnRequest) -> None:
        with self._lock:
            self._requests.push(req)

    def offsets_joined_transaction(self) -> None:
        with self._lock:
            self._transaction_started = True

    def partitions_added(self, partitions: frozenset[TopicPartition]) -> None:
        with self._lock:
            self._txn_partitions |= partitions
            self._pending_partitions -= partitions
            self._transaction_started = True

    def complete_transaction(self, result: CallResult | None,
                             next_producer: ProducerIdAndEpoch | None = None) -> None:
        """EndTxn succeeded (or was not needed). TV2 (``next_producer``, from EndTxn v5): the coordinator bumped the
        epoch -- or, with the epoch exhausted, gave a new producer id with epoch 0 -- and the producer adopts it,
        every sequence starting afresh. TV1: after a failed batch the sequences are inconsistent: InitProducerId
        with the current id/epoch (a new epoch) resets them all before the caller's ``result`` completes."""
        with self._lock:
            self._transaction_started = False
            self._new_partitions.clear()
            self._pending_partitions.clear()
            self._txn_partitions.clear()
            if next_producer is not None:
                _log.info("%s for %s after EndTxn", next_producer, self.transactional_id)
                self._producer = next_producer
                if self._sequences.epoch_bump_required:
                    self._sequences.epoch_bump_started()
                self._sequences.start_epoch(next_producer, reset_all=True)
            if not self._sequences.epoch_bump_required:
                self._transition(TxnState.READY)
                _done(result)
                return
            self._transition(TxnState.INITIALIZING)
            self._sequences.epoch_bump_started()
            bump = self._init_producer_id_request(bump=True)
            bump.result = result
            self._requests.push(bump)

    def transition_to_abortable_error(self, error: KafkaError) -> None:
        """The open transaction can only be aborted now; nothing changes if it is already aborting or there is no
        transaction to abort."""
        with self._lock:
            if self._state is TxnState.ABORTING_TRANSACTION:
                return  # already aborting: the error changes nothing
            if self._state in TRANSITIONS[TxnState.ABORTABLE_ERROR]:
                _log.info("transaction must be aborted: %s", error)
                self._transition(TxnState.ABORTABLE_ERROR, error)

    def transition_to_fatal_error(self, error: KafkaError) -> None:
        """Enter FATAL_ERROR with ``error`` (a broker answer, or from the sender: e.g. a SASL authentication
        failure), failing every queued or pending user call with it. Does nothing if already fatal: the first
        error is the one reported."""
        with self._lock:
            if self._state is TxnState.FATAL_ERROR:
                return
            _log.error("producer entered a fatal state: %s", error)
            self._transition(TxnState.FATAL_ERROR, error)
            for req in self._requests.take_all():
                req.fail(error)
            if self._pending_result is not None:
                _fail(self._pending_result[1], error)
                self._pending_result = None

    # ----------------------------------------------------------------------------------------- sender: sequences

    def should_stop_draining(self, batch: SequencedBatch) -> bool:
        """True if ``batch`` (the head of its partition's deque) must not be drained now (Java's
        shouldStopDrainBatchesForPartition): no usable producer id, partition not yet in the transaction, an
        epoch change still draining, an unresolved sequence, or an earlier batch of the partition in flight."""
        with self._lock:
            if not self._has_usable_producer_id():
                return True
            if self.is_transactional and batch.tp not in self._txn_partitions:
                return True
            return self._sequences.must_wait(batch, self._producer)

    def stamp(self, batch: StampableBatch) -> None:
        """At drain: give a new batch the next sequence (or restamp a renumbered one) and set its producer
        state. The batch's own lock is taken after the manager's is released."""
        with self._lock:
            entry = self._sequences.entry_at_drain(batch, self._producer)
            want = (entry.producer.producer_id, entry.producer.epoch, entry.base_sequence)
        stamped = batch.producer_state
        if stamped != want:
            if stamped[2] != NO_SEQUENCE:
                batch.reset_producer_state()
            batch.set_producer_state(*want, self.is_transactional)

    def split_batch(self, batch: SequencedBatch, parts: Sequence[StampableBatch]) -> None:
        """``batch`` was refused as too large and goes on as ``parts``: they get its sequences, in order, with its
        producer id and epoch (Java: ProducerBatch.split + addInFlightBatch), stamped now so the accumulator can
        queue them in sequence order."""
        with self._lock:
            entries = self._sequences.split(batch, list(parts))
        if not entries:
            return  # the batch had no sequence
        for part, entry in zip(parts, entries, strict=True):
            part.set_producer_state(entry.producer.producer_id, entry.producer.epoch, entry.base_sequence,
                                    self.is_transactional)

    def batch_succeeded(self, batch: SequencedBatch, base_offset: int) -> None:
        with self._lock:
            self._sequences.acknowledge(batch, base_offset)

    def can_retry(self, batch: SequencedBatch, error_code: int, log_start_offset: int) -> bool:
        """Whether a produce error on a sequenced batch should be retried (Java's TransactionManager.canRetry);
        may request an epoch bump for the partition."""
        with self._lock:
            return self._sequences.can_retry(batch, error_code, log_start_offset, self._producer)

    def batch_failed(self, batch: SequencedBatch, error: BaseException, *, maybe_written: bool) -> None:
        """A batch reached a final failure. ``maybe_written``: it was sent and its fate is unknown (expired)."""
        with self._lock:
            self._maybe_transition_to_error(error)
            self._sequences.batch_failed(batch, maybe_written=maybe_written,
                                         producer_failed=self._state is TxnState.FATAL_ERROR)

    def maybe_resolve_sequences(self) -> None:
        """Once a partition with an expired sent batch has nothing in flight: if later batches were acknowledged,
        the expired one was written too; otherwise its fate is unknown and the sequences must restart (inside a
        transaction: after the transaction is aborted)."""
        with self._lock:
            for tp in self._sequences.resolve_sequences():
                self.transition_to_abortable_error(KafkaError(
                    f"no acknowledgement for some batches sent to {tp} and they can no longer be retried; "
                    "abort the transaction and continue"))

    # ----------------------------------------------------------------------------------------- state machine

    def _transition(self, target: TxnState, error: KafkaError | None = None) -> None:
        # Caller holds _lock. The one place _state changes.
        self._state.check_transition(
            target, f"transactional.id {self.transactional_id!r}" if self.is_transactional else "idempotent producer")
        if error is not None:
            self._last_error = error
        elif target not in (TxnState.ABORTABLE_ERROR, TxnState.FATAL_ERROR, TxnState.ABORTING_TRANSACTION):
            self._last_error = None
        _log.debug("transaction manager %s -> %s", self._state.name, target.name)
        self._state = target

    def _raise_if_failed(self) -> None:
        # Caller holds _lock. A fresh copy each time: re-raising one instance would grow its traceback forever.
        if self._state in (TxnState.FATAL_ERROR, TxnState.ABORTABLE_ERROR) and self._last_error is not None:
            raise _fresh(self._last_error)

    def _maybe_transition_to_error(self, error: BaseException) -> None:
        # Caller holds _lock. A batch failed for good (as Java's maybeTransitionToErrorState).
        code = getattr(error, "code", None)
        if code in FENCED_CODES:
            self.transition_to_fatal_error(fenced_error(error, "Produce"))
        elif code in PRODUCE_FATAL_CODES or (isinstance(error, KafkaError) and error.fatal):
            self.transition_to_fatal_error(error if isinstance(error, KafkaError) else KafkaError(str(error)))
        elif self.is_transactional and not isinstance(error, TransactionAbortedError):
            wrapped = error if isinstance(error, KafkaError) else KafkaError(str(error))
            self.transition_to_abortable_error(wrapped)

    def _error_for_request(self, req: TxnRequest) -> KafkaError | None:
        # Caller holds _lock. A failed producer sends nothing more, except that FindCoordinator may still help
        # the abort that an abortable error calls for.
        if self._last_error is None:
            return None
        if self._state is TxnState.FATAL_ERROR or (
                self._state is TxnState.ABORTABLE_ERROR and req.kind is not RequestKind.FIND_COORDINATOR):
            return _fresh(self._last_error)
        return None


def _remember(known: dict[str, Coordinator], key: str, coordinator: Coordinator) -> None:
    """Remember ``key``'s coordinator, forgetting the oldest entry once ``_MAX_KNOWN_COORDINATORS`` are known."""
    if key not in known and len(known) >= _MAX_KNOWN_COORDINATORS:
        del known[next(iter(known))]
    known[key] = coordinator


def _fresh(error: KafkaError) -> KafkaError:
    clone = copy.copy(error)
    clone.__traceback__ = None
    return clone


_CALL_NAMES = {TxnState.INITIALIZING: "init_transactions()", TxnState.COMMITTING_TRANSACTION: "commit_transaction()",
               TxnState.ABORTING_TRANSACTION: "abort_transaction()"}


def _unwaited_call_error(state: TxnState, result: CallResult) -> IllegalStateError:
    call = _CALL_NAMES[state]
    progress = "is still in progress" if not result.done() else "ended, but no caller has waited for it"
    return IllegalStateError(f"the last {call} call {progress} (it timed out, or was only started): call {call} "
                             "again and let it return first")


def _fail(result: Future[None], error: BaseException) -> None:
    if not result.done():
        result.set_exception(error)


def _done(result: Future[None] | None) -> None:
    if result is not None and not result.done():
        result.set_result(None)
