"""Coordinator requests: one handler class per request (the Java client's ``TxnRequestHandler`` subclasses), each
owning how its request is built and how its answer is handled, and the narrow interface (:class:`TxnHost`)
through which it acts on the transaction manager.

Requests are built per negotiated version at send time (``TxnRequest.build``), capped by the transaction's
version (see the package docstring): TV1 sends AddPartitionsToTxn <= v3, EndTxn <= v4 and Produce <= v11; TV2
sends no AddPartitionsToTxn, Produce v12 and EndTxn v5, whose answer carries the producer id and epoch to use next.
Answers, as the Java client handles them:

=====================  ===================================================================================
FindCoordinator        NONE: remember the node; COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / LOAD: retry;
                       GROUP_AUTHORIZATION_FAILED for a consumer group (send_offsets_to_transaction): abortable
InitProducerId         NONE: new id/epoch -> READY; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: find again;
                       CONCURRENT_TRANSACTIONS (the id's last transaction is still completing: another client
                       just ended it, e.g. the Spark driver before the next micro-batch) retries after 20 ms,
                       doubling up to retry.backoff.ms; LOAD_IN_PROGRESS: retry; fenced / auth / other: fatal
AddPartitionsToTxn     per partition; CONCURRENT_TRANSACTIONS first in a transaction retries after 20 ms (the
                       previous transaction's markers are usually nearly written); LOAD_IN_PROGRESS /
                       UNKNOWN_TOPIC_OR_PARTITION: retry; TOPIC_AUTHORIZATION_FAILED, UNKNOWN_PRODUCER_ID,
                       INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE: abortable; otherwise as InitProducerId
EndTxn                 NONE: transaction complete (v5: adopt the returned producer id and epoch); as
                       InitProducerId otherwise (so INVALID_TXN_STATE: fatal)
=====================  ===================================================================================

An idempotent producer (no transactional.id) retries any retriable InitProducerId answer. Handlers run on the
sender thread with the manager's lock held (its ``handle_response`` takes it); see :class:`TxnRequest` for which
fields the sender reads without it.
"""

from __future__ import annotations

import abc
import enum
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any, Protocol

from spark_kafka_sink.errors import (
    COORDINATOR_BUSY_CODES,
    COORDINATOR_MOVED_CODES,
    FENCED_CODES,
    TXN_ABORTABLE_CODES,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    GroupAuthorizationFailedError,
    KafkaError,
    OperationNotAttemptedError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions._errors import broker_error, fenced_error
from spark_kafka_sink.producer.transactions._sequences import NO_PRODUCER_ID_AND_EPOCH, ProducerIdAndEpoch
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    ApiSpec,
)

__all__ = [
    "RequestKind", "Coordinator", "CallResult", "TxnHost", "TxnRequest", "FindCoordinatorHandler",
    "InitProducerIdHandler", "AddPartitionsToTxnHandler", "EndTxnHandler", "find_coordinator_body", "end_txn_body",
    "FIND_COORDINATOR_KEY_TYPE_GROUP", "FIND_COORDINATOR_KEY_TYPE_TRANSACTION", "MAX_END_TXN_VERSION",
    "MAX_ADD_PARTITIONS_VERSION",
    "MAX_TRANSACTIONAL_PRODUCE_VERSION", "TV2_END_TXN_VERSION", "TV2_PRODUCE_VERSION", "end_txn_version_range",
]

# FindCoordinator key_type
FIND_COORDINATOR_KEY_TYPE_GROUP = 0
FIND_COORDINATOR_KEY_TYPE_TRANSACTION = 1
# The transaction-version-1 flow (see the package docstring):
MAX_END_TXN_VERSION = 4  # v5 is transaction version 2 (bumps the epoch on every end)
MAX_ADD_PARTITIONS_VERSION = 3  # v4+ is for brokers
MAX_TRANSACTIONAL_PRODUCE_VERSION = 11
# The transaction-version-2 flow (KIP-890): the partition leader adds a partition to the transaction when a
# Produce v12+ (we stop at 12: v13 names topics by id) carries its first transactional batch; EndTxn v5 bumps the
# epoch and answers with the producer id and epoch of the next transaction.
TV2_PRODUCE_VERSION = 12
TV2_END_TXN_VERSION = 5


def end_txn_version_range(transaction_version: int) -> tuple[int, int]:
    """EndTxn versions (min, max) a transaction of ``transaction_version`` may be ended with: the broker picks the
    flow by the version, so a TV2 transaction must end with v5 and a TV1 one with v4 at most."""
    if transaction_version >= 2:
        return TV2_END_TXN_VERSION, TV2_END_TXN_VERSION
    return 0, MAX_END_TXN_VERSION
_FIRST_ADD_PARTITIONS_BACKOFF_MS = 20  # also InitProducerId's first wait after CONCURRENT_TRANSACTIONS
_INT32_MAX = (1 << 31) - 1


class RequestKind(enum.Enum):
    """Kinds of coordinator request; the value is the send priority (lower first), as in the Java client (which
    gives partitions and offsets one priority: here partitions go first, which changes nothing, as the two never
    depend on each other)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS = 2
    ADD_OFFSETS = 3  # AddOffsetsToTxn, then TxnOffsetCommit (send_offsets_to_transaction)
    END_TXN = 4
    EPOCH_BUMP = 5  # InitProducerId with the current id/epoch, after an abort


class CallResult(Future[None]):
    """The outcome of a user call (init / commit / abort), as the Java client's ``TransactionalRequestResult``: it
    is *acknowledged* once a caller waited for it to the end (``result()`` or ``exception()`` returned or raised
    the call's own error), not when it merely finished. Until then a repeated call returns this same result, even
    after it is over, so a call that timed out and is made again waits for the answer it started; another call
    is refused (the manager's ``_cached_result``)."""

    acknowledged = False  # set by the waiting thread, read under the manager's lock: a bool, stale by a hair only

    def result(self, timeout: float | None = None) -> None:
        error = self.exception(timeout)  # raises TimeoutError only when the wait ran out
        if error is not None:
            raise error
        return None

    def exception(self, timeout: float | None = None) -> BaseException | None:
        error = super().exception(timeout)
        self.acknowledged = True
        return error


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


class TxnHost(Protocol):
    """What a handler may read and do of the transaction manager (``TransactionManager`` provides it). Every call
    is made with the manager's lock held."""

    @property
    def transactional_id(self) -> str | None: ...

    @property
    def is_transactional(self) -> bool: ...

    @property
    def retry_backoff_ms(self) -> int: ...

    @property
    def producer_id_and_epoch(self) -> ProducerIdAndEpoch: ...

    @property
    def has_partitions_in_transaction(self) -> bool:
        """True once an AddPartitionsToTxn of the open transaction succeeded."""

    def requeue(self, req: TxnRequest, now_ms: int, *, backoff_ms: int = 0, find_coordinator: bool = False) -> None:
        """Send ``req`` again after ``backoff_ms``; optionally to a freshly found coordinator."""

    def coordinator_found(self, coordinator: Coordinator, group_id: str | None = None) -> None:
        """FindCoordinator answered: the transaction coordinator, or (``group_id``) that consumer group's."""

    def enqueue(self, req: TxnRequest) -> None:
        """Queue a follow-up request (AddOffsetsToTxn's TxnOffsetCommit)."""

    def offsets_joined_transaction(self) -> None:
        """A consumer group's offsets partition joined the open transaction: EndTxn must really be sent."""

    def producer_id_granted(self, producer: ProducerIdAndEpoch) -> None:
        """InitProducerId succeeded: ``producer`` is the id/epoch to use from now on."""

    def partitions_added(self, partitions: frozenset[TopicPartition]) -> None: ...

    def complete_transaction(self, result: CallResult | None,
                             next_producer: ProducerIdAndEpoch | None = None) -> None:
        """EndTxn succeeded; ``result`` is the commit/abort call's future, completed once the producer is ready;
        ``next_producer``: the id/epoch an EndTxn v5 answer gives for the next transaction."""

    def transition_to_abortable_error(self, error: KafkaError) -> None: ...

    def transition_to_fatal_error(self, error: KafkaError) -> None: ...


def find_coordinator_body(key: str | None, version: int,
                          key_type: int = FIND_COORDINATOR_KEY_TYPE_TRANSACTION) -> dict[str, Any]:
    """FindCoordinator for a transactional id (or a consumer group), in the form of ``version`` (v4+ asks for a
    batch of keys)."""
    if version >= 4:
        return {"key_type": key_type, "coordinator_keys": [key]}
    return {"key": key, "key_type": key_type}


def end_txn_body(transactional_id: str | None, producer: ProducerIdAndEpoch, commit: bool) -> dict[str, Any]:
    """EndTxn (v0-v4: the same fields in every version we send)."""
    return {"transactional_id": transactional_id, "producer_id": producer.producer_id,
            "producer_epoch": producer.epoch, "committed": commit}


class TxnRequest(abc.ABC):
    """One coordinator request and the handling of its answer. The sender sends ``api`` (at most ``max_version``)
    to a coordinator if ``to_coordinator`` -- the consumer group ``group_id``'s, else the transaction's -- or else
    to any broker, with the body ``build(version)``; the manager feeds the answer to ``handle_response``.

    ``kind``, ``api``, ``max_version``, ``to_coordinator`` and ``group_id`` never change (the sender reads them
    without a lock); ``result`` and ``not_before_ms`` are guarded by the manager's lock.
    """

    def __init__(self, host: TxnHost, kind: RequestKind, api: ApiSpec, max_version: int, *, to_coordinator: bool,
                 result: CallResult | None = None, group_id: str | None = None) -> None:
        self.kind = kind
        self.api = api
        self.max_version = max_version
        self.to_coordinator = to_coordinator
        # The consumer group whose coordinator this request goes to (or, for FindCoordinator, looks up); None: the
        # transaction coordinator.
        self.group_id = group_id
        self.result = result  # what a user call waits on, if any
        self.not_before_ms = 0  # retry backoff
        self._host = host

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind.name}, not_before_ms={self.not_before_ms})"

    @abc.abstractmethod
    def build(self, version: int) -> dict[str, Any]:
        """The request body for the negotiated ``version``."""

    @abc.abstractmethod
    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        """Act on the decoded answer (sent with ``version``)."""

    def fail(self, error: BaseException) -> None:
        """Fail the user call waiting on this request, if any and not finished."""
        if self.result is not None and not self.result.done():
            self.result.set_exception(error)

    def succeed(self) -> None:
        if self.result is not None and not self.result.done():
            self.result.set_result(None)

    def _handle_error(self, code: int, context: str, now_ms: int) -> None:
        """The answer handling shared by every coordinator request except FindCoordinator and TxnOffsetCommit."""
        host = self._host
        if code in COORDINATOR_MOVED_CODES:
            host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms, find_coordinator=True)
        elif code in COORDINATOR_BUSY_CODES:
            host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms)
        elif code in FENCED_CODES:
            self._fail_fatally(fenced_error(broker_error(code, context), context))
        elif code in TXN_ABORTABLE_CODES and host.is_transactional:
            self._fail_abortably(broker_error(code, context))
        elif not host.is_transactional and error_for_code(code).retriable:
            host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms)
        else:
            self._fail_fatally(broker_error(code, context))

    def _fail_abortably(self, error: KafkaError) -> None:
        """The open transaction can only be aborted now; this request's call fails with the reason."""
        self._host.transition_to_abortable_error(error)
        self.fail(error)

    def _fail_fatally(self, error: KafkaError) -> None:
        """The producer cannot go on: the manager fails the calls it knows of (queued requests, the pending
        init/commit/abort), and this request's own call fails too (send_offsets_to_transaction's is not one)."""
        self._host.transition_to_fatal_error(error)
        self.fail(error)


class FindCoordinatorHandler(TxnRequest):
    """FindCoordinator for the transactional id (key type transaction) or, with ``group_id``, for that consumer
    group (key type group: where send_offsets_to_transaction's TxnOffsetCommit goes), sent to any broker."""

    def __init__(self, host: TxnHost, group_id: str | None = None) -> None:
        super().__init__(host, RequestKind.FIND_COORDINATOR, FIND_COORDINATOR, FIND_COORDINATOR.max_version,
                         to_coordinator=False, group_id=group_id)
        self._key = host.transactional_id if group_id is None else group_id
        self._key_type = FIND_COORDINATOR_KEY_TYPE_TRANSACTION if group_id is None else FIND_COORDINATOR_KEY_TYPE_GROUP

    def build(self, version: int) -> dict[str, Any]:
        return find_coordinator_body(self._key, version, self._key_type)

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        if version >= 4:
            entries = body.get("coordinators") or [
                {"error_code": CoordinatorNotAvailableError.code, "node_id": -1, "host": "", "port": -1}]
            answer = entries[0]
        else:
            answer = body
        code = answer["error_code"]
        host = self._host
        if code == NO_ERROR:
            host.coordinator_found(Coordinator(answer["node_id"], answer["host"], answer["port"]), self.group_id)
        elif code in COORDINATOR_MOVED_CODES or code in COORDINATOR_BUSY_CODES:
            host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms)
        elif code == GroupAuthorizationFailedError.code and self.group_id is not None:
            # Not allowed to see the group: its offsets cannot join, but the transaction can still be aborted.
            host.transition_to_abortable_error(broker_error(code, f"FindCoordinator for group {self.group_id!r}",
                                                            answer.get("error_message")))
        else:
            host.transition_to_fatal_error(broker_error(code, "FindCoordinator", answer.get("error_message")))


class InitProducerIdHandler(TxnRequest):
    """InitProducerId: the first producer id, or (``bump``) a fresh identity after the current id/epoch, which v3+
    carries. A transactional producer sends it to its coordinator, which bumps the epoch of the same id; an
    idempotent one sends it to any broker, which hands out a new producer id at epoch 0 (every release tested,
    3.7-4.3: tests/producer/test_epoch_bump_broker.py)."""

    def __init__(self, host: TxnHost, *, bump: bool, transaction_timeout_ms: int) -> None:
        txn_id = host.transactional_id
        kind = RequestKind.EPOCH_BUMP if bump and txn_id is not None else RequestKind.INIT_PRODUCER_ID
        super().__init__(host, kind, INIT_PRODUCER_ID, INIT_PRODUCER_ID.max_version, to_coordinator=txn_id is not None,
                         result=CallResult())
        self._transactional_id = txn_id
        self._current = host.producer_id_and_epoch if bump else NO_PRODUCER_ID_AND_EPOCH
        self._concurrent_backoff_ms = _FIRST_ADD_PARTITIONS_BACKOFF_MS  # next wait after CONCURRENT_TRANSACTIONS
        # An idempotent producer has no transactions to time out: Java sends the maximum.
        self._timeout_ms = transaction_timeout_ms if txn_id is not None else _INT32_MAX

    def build(self, version: int) -> dict[str, Any]:
        body: dict[str, Any] = {"transactional_id": self._transactional_id, "transaction_timeout_ms": self._timeout_ms}
        if version >= 3:  # a transactional id's coordinator bumps this id's epoch rather than fencing by a new id
            body["producer_id"], body["producer_epoch"] = self._current.producer_id, self._current.epoch
        return body

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        code = body["error_code"]
        if code == ConcurrentTransactionsError.code and self._transactional_id is not None:
            # Markers of the id's previous transaction are being written: usually done within milliseconds.
            backoff = min(self._host.retry_backoff_ms, self._concurrent_backoff_ms)
            self._concurrent_backoff_ms *= 2
            self._host.requeue(self, now_ms, backoff_ms=backoff)
            return
        if code != NO_ERROR:
            self._handle_error(code, "InitProducerId", now_ms)
            return
        self._host.producer_id_granted(ProducerIdAndEpoch(body["producer_id"], body["producer_epoch"]))
        self.succeed()


class AddPartitionsToTxnHandler(TxnRequest):
    """AddPartitionsToTxn (<= v3, the client form) for ``partitions``, before their first batch is sent."""

    def __init__(self, host: TxnHost, partitions: frozenset[TopicPartition]) -> None:
        super().__init__(host, RequestKind.ADD_PARTITIONS, ADD_PARTITIONS_TO_TXN, MAX_ADD_PARTITIONS_VERSION,
                         to_coordinator=True)
        self.partitions = partitions
        self._by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            self._by_topic.setdefault(topic, []).append(partition)

    def build(self, version: int) -> dict[str, Any]:
        producer = self._host.producer_id_and_epoch
        return {
            "v3_and_below_transactional_id": self._host.transactional_id,
            "v3_and_below_producer_id": producer.producer_id,
            "v3_and_below_producer_epoch": producer.epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in self._by_topic.items()],
        }

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        host = self._host
        unauthorized: list[TopicPartition] = []
        for topic in body["results_by_topic_v3_and_below"]:
            for result in topic["results_by_partition"]:
                code = result["partition_error_code"]
                tp = TopicPartition(topic["name"], result["partition_index"])
                if code in (NO_ERROR, OperationNotAttemptedError.code):  # not attempted: another partition failed
                    continue
                if code == TopicAuthorizationFailedError.code:
                    unauthorized.append(tp)
                    continue
                if code == ConcurrentTransactionsError.code and not host.has_partitions_in_transaction:
                    host.requeue(self, now_ms, backoff_ms=min(host.retry_backoff_ms, _FIRST_ADD_PARTITIONS_BACKOFF_MS))
                elif code in (CoordinatorLoadInProgressError.code, UnknownTopicOrPartitionError.code):
                    host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms)  # the topic's metadata not everywhere
                else:
                    self._handle_error(code, f"AddPartitionsToTxn {tp}", now_ms)
                return
        if unauthorized:
            host.transition_to_abortable_error(broker_error(
                TopicAuthorizationFailedError.code, "AddPartitionsToTxn " + ", ".join(map(str, unauthorized))))
            return
        host.partitions_added(self.partitions)


class EndTxnHandler(TxnRequest):
    """EndTxn: commit or abort the open transaction, <= v4 for a TV1 transaction, v5 for a TV2 one; ``result`` is
    what the user's call waits on. A retry (lost answer, coordinator moved) resends the same id and epoch: the
    producer adopts a v5 answer's new epoch only once it has it, and the coordinator answers a repeated end of a
    transaction it already ended as a success (TV2: it recognises the previous epoch)."""

    def __init__(self, host: TxnHost, *, commit: bool, transaction_version: int = 1) -> None:
        # A cluster that finalized TV2 serves EndTxn v5, so the negotiated version is v5 exactly.
        super().__init__(host, RequestKind.END_TXN, END_TXN, end_txn_version_range(transaction_version)[1],
                         to_coordinator=True, result=CallResult())
        self.commit = commit

    def build(self, version: int) -> dict[str, Any]:
        return end_txn_body(self._host.transactional_id, self._host.producer_id_and_epoch, self.commit)

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        code = body["error_code"]
        if code != NO_ERROR:
            self._handle_error(code, "EndTxn", now_ms)
            return
        next_producer = None
        if version >= TV2_END_TXN_VERSION and body.get("producer_id", -1) >= 0:
            next_producer = ProducerIdAndEpoch(body["producer_id"], body["producer_epoch"])
        self._host.complete_transaction(self.result, next_producer)
