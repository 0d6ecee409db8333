"""Coordinator requests of the transaction manager: how each is built and how its answer is handled.

A mixin of :class:`~spark_kafka_sink.producer.transactions.TransactionManager`, split out to keep files small;
its methods run with the manager's ``_lock`` held (``handle_response`` takes it) and use the manager's fields,
declared below for type checkers. Requests are built per negotiated version at send time (``TxnRequest.build``),
capped at the transaction-version-1 flow (see the manager's docstring).

Answers, as the Java client handles them:

=====================  ===================================================================================
FindCoordinator        NONE: remember the node; COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR / LOAD: retry
InitProducerId         NONE: new id/epoch -> READY; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: find again;
                       CONCURRENT_TRANSACTIONS / LOAD_IN_PROGRESS: retry; fenced / auth / other: fatal
AddPartitionsToTxn     per partition; CONCURRENT_TRANSACTIONS first in a transaction retries after 20 ms (the
                       previous transaction's markers are usually nearly written); TOPIC_AUTHORIZATION_FAILED,
                       UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING, TRANSACTION_ABORTABLE: abortable
EndTxn                 NONE: transaction complete; as InitProducerId otherwise; INVALID_TXN_STATE: fatal
=====================  ===================================================================================
"""

from __future__ import annotations

import enum
import heapq
import logging
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_kafka_sink.errors import (
    BrokerError,
    KafkaError,
    ProducerFencedError,
    UnknownBrokerError,
    error_for_code,
)
from spark_kafka_sink.protocol.messages import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    ApiSpec,
)
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions._sequences import NO_PRODUCER_ID_AND_EPOCH, ProducerIdAndEpoch

__all__ = ["RequestKind", "TxnRequest", "Coordinator", "TxnResponseHandlers", "broker_error", "fenced_error",
           "FIND_COORDINATOR_KEY_TYPE_TRANSACTION", "MAX_END_TXN_VERSION", "MAX_ADD_PARTITIONS_VERSION"]

_log = logging.getLogger(__name__)

FIND_COORDINATOR_KEY_TYPE_TRANSACTION = 1
MAX_END_TXN_VERSION = 4  # v5 is transaction version 2 (bumps the epoch on every end)
MAX_ADD_PARTITIONS_VERSION = 3  # v4+ is for brokers
_FIRST_ADD_PARTITIONS_BACKOFF_MS = 20
_INT32_MAX = (1 << 31) - 1

# Error codes handled by name below.
_NOT_COORDINATOR = frozenset({15, 16})  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
_RETRY = frozenset({14, 51})  # COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS
_FENCED = frozenset({47, 90})  # INVALID_PRODUCER_EPOCH, PRODUCER_FENCED
_ABORTABLE = frozenset({49, 59, 120})  # INVALID_PRODUCER_ID_MAPPING, UNKNOWN_PRODUCER_ID, TRANSACTION_ABORTABLE


class RequestKind(enum.Enum):
    """Kinds of coordinator request; the value is the send priority (lower first), as in the Java client."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS = 2
    END_TXN = 3
    EPOCH_BUMP = 4  # InitProducerId with the current id/epoch, after an abort


@dataclass(frozen=True, slots=True)
class Coordinator:
    node_id: int
    host: str
    port: int


@dataclass(eq=False)
class TxnRequest:
    """One coordinator request. ``to_coordinator``: send to the transaction coordinator, else to any broker."""

    kind: RequestKind
    api: ApiSpec
    max_version: int
    to_coordinator: bool
    build: Callable[[int], dict[str, Any]]  # negotiated version -> request body
    result: Future[None] | None = None  # what a user call waits on, if any
    partitions: frozenset[TopicPartition] = frozenset()  # ADD_PARTITIONS
    not_before_ms: int = 0  # retry backoff
    attempts: int = field(default=0)


def broker_error(code: int, context: str, message: str | None = None) -> BrokerError:
    """The named exception for a broker error code."""
    cls = error_for_code(code)
    if cls is UnknownBrokerError:
        return UnknownBrokerError(message, context=context, code=code)
    return cls(message, context=context)


def fenced_error(cause: BaseException | None, context: str) -> ProducerFencedError:
    """INVALID_PRODUCER_EPOCH and PRODUCER_FENCED both mean "a newer producer epoch owns this transactional.id"."""
    err = ProducerFencedError(
        "a newer producer with the same transactional.id fenced this one (or the coordinator aborted its "
        "transaction after transaction.timeout.ms); close this producer and create a new one",
        context=context,
    )
    err.__cause__ = cause
    return err


class TxnResponseHandlers:
    """The request queue, request builders and answer handlers of the TransactionManager (a mixin; see the
    module docstring). One request is in flight at a time; the queue is a heap by (kind priority, order)."""

    if TYPE_CHECKING:  # fields and helpers of TransactionManager that the handlers use
        transactional_id: str | None
        transaction_timeout_ms: int
        retry_backoff_ms: int
        _lock: Any
        _producer: ProducerIdAndEpoch
        _in_flight: TxnRequest | None
        _coordinator: Coordinator | None
        _new_partitions: set[TopicPartition]
        _pending_partitions: set[TopicPartition]
        _txn_partitions: set[TopicPartition]
        _transaction_started: bool
        _queue: list[tuple[int, int, TxnRequest]]
        _counter: Iterator[int]

        @property
        def is_transactional(self) -> bool: ...
        def _fatal(self, error: KafkaError) -> None: ...
        def _has_fatal_error(self) -> bool: ...
        def _error_for_request(self, req: TxnRequest) -> KafkaError | None: ...
        def _abortable(self, error: KafkaError) -> None: ...
        def _producer_granted(self, producer: ProducerIdAndEpoch) -> None: ...
        def _complete_transaction(self, result: Future[None] | None) -> None: ...
        def _forget_abandoned_batches(self) -> None: ...

    # ----------------------------------------------------------------------------------------- the queue

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
            if self._new_partitions and not self._has_fatal_error():
                self._enqueue(self._add_partitions_request())
            while self._queue:
                req = self._queue[0][2]
                if req.kind is RequestKind.END_TXN and has_incomplete_batches:
                    return None  # commit only what the broker acknowledged; abort only once nothing is in flight
                if req.not_before_ms > now_ms:
                    return None
                heapq.heappop(self._queue)
                error = self._error_for_request(req)
                if error is not None:
                    _fail(req.result, error)
                    continue
                if req.kind is RequestKind.END_TXN:
                    self._forget_abandoned_batches()
                    if not self._transaction_started:
                        # Nothing was added to this transaction: there is nothing to end on the broker.
                        self._complete_transaction(req.result)
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
            error = self._error_for_request(req)
            if self._has_fatal_error() and error is not None:
                _fail(req.result, error)
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

    # ----------------------------------------------------------------------------------------- builders

    def _find_coordinator_request(self) -> TxnRequest:
        key = self.transactional_id

        def build(version: int) -> dict[str, Any]:
            if version >= 4:  # batched form
                return {"key_type": FIND_COORDINATOR_KEY_TYPE_TRANSACTION, "coordinator_keys": [key]}
            return {"key": key, "key_type": FIND_COORDINATOR_KEY_TYPE_TRANSACTION}

        return TxnRequest(RequestKind.FIND_COORDINATOR, FIND_COORDINATOR, FIND_COORDINATOR.max_version, False, build)

    def _init_producer_id_request(self, *, bump: bool) -> TxnRequest:
        current = self._producer if bump else NO_PRODUCER_ID_AND_EPOCH
        txn_id = self.transactional_id
        # An idempotent producer has no transactions to time out: Java sends the maximum.
        timeout = self.transaction_timeout_ms if txn_id is not None else _INT32_MAX

        def build(version: int) -> dict[str, Any]:
            body: dict[str, Any] = {"transactional_id": txn_id, "transaction_timeout_ms": timeout}
            if version >= 3:  # lets the coordinator bump the epoch of this id rather than hand out a new one
                body["producer_id"], body["producer_epoch"] = current.producer_id, current.epoch
            return body

        kind = RequestKind.EPOCH_BUMP if bump and txn_id is not None else RequestKind.INIT_PRODUCER_ID
        return TxnRequest(kind, INIT_PRODUCER_ID, INIT_PRODUCER_ID.max_version, txn_id is not None, build, Future())

    def _add_partitions_request(self) -> TxnRequest:
        partitions = frozenset(self._new_partitions)
        self._pending_partitions |= partitions
        self._new_partitions.clear()
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(partitions):
            by_topic.setdefault(topic, []).append(partition)

        def build(version: int) -> dict[str, Any]:
            return {
                "v3_and_below_transactional_id": self.transactional_id,
                "v3_and_below_producer_id": self._producer.producer_id,
                "v3_and_below_producer_epoch": self._producer.epoch,
                "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }

        return TxnRequest(RequestKind.ADD_PARTITIONS, ADD_PARTITIONS_TO_TXN, MAX_ADD_PARTITIONS_VERSION, True, build,
                          partitions=partitions)

    def _end_txn_request(self, commit: bool) -> TxnRequest:
        def build(version: int) -> dict[str, Any]:
            return {"transactional_id": self.transactional_id, "producer_id": self._producer.producer_id,
                    "producer_epoch": self._producer.epoch, "committed": commit}

        return TxnRequest(RequestKind.END_TXN, END_TXN, MAX_END_TXN_VERSION, True, build, Future())

    # ----------------------------------------------------------------------------------------- answers

    def handle_response(self, req: TxnRequest, version: int, body: dict[str, Any], now_ms: int) -> None:
        """Feed the decoded answer to ``req`` (sent with ``version``)."""
        with self._lock:
            if self._in_flight is req:
                self._in_flight = None
            if req.kind is RequestKind.FIND_COORDINATOR:
                self._on_find_coordinator(req, version, body, now_ms)
            elif req.kind in (RequestKind.INIT_PRODUCER_ID, RequestKind.EPOCH_BUMP):
                self._on_init_producer_id(req, body, now_ms)
            elif req.kind is RequestKind.ADD_PARTITIONS:
                self._on_add_partitions(req, body, now_ms)
            else:
                self._on_end_txn(req, body, now_ms)

    def _common_errors(self, req: TxnRequest, code: int, context: str, now_ms: int) -> None:
        """The answer handling shared by every coordinator request except FindCoordinator."""
        if code in _NOT_COORDINATOR:
            self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms, find_coordinator=True)
        elif code in _RETRY:
            self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms)
        elif code in _FENCED:
            self._fatal(fenced_error(broker_error(code, context), context))
        elif code in _ABORTABLE and self.is_transactional:
            error = broker_error(code, context)
            self._abortable(error)
            _fail(req.result, error)
        elif not self.is_transactional and error_for_code(code).retriable:
            self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms)
        else:
            self._fatal(broker_error(code, context))

    def _on_find_coordinator(self, req: TxnRequest, version: int, body: dict[str, Any], now_ms: int) -> None:
        if version >= 4:
            entries = body.get("coordinators") or [{"error_code": 15, "node_id": -1, "host": "", "port": -1}]
            answer = entries[0]
        else:
            answer = body
        code = answer["error_code"]
        if code == 0:
            self._coordinator = Coordinator(answer["node_id"], answer["host"], answer["port"])
            _log.debug("transaction coordinator of %r is node %s", self.transactional_id, self._coordinator)
        elif code in _NOT_COORDINATOR or code in _RETRY:
            self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms)
        else:
            self._fatal(broker_error(code, "FindCoordinator", answer.get("error_message")))

    def _on_init_producer_id(self, req: TxnRequest, body: dict[str, Any], now_ms: int) -> None:
        code = body["error_code"]
        if code != 0:
            self._common_errors(req, code, "InitProducerId", now_ms)
            return
        self._producer_granted(ProducerIdAndEpoch(body["producer_id"], body["producer_epoch"]))
        _done(req.result)

    def _on_add_partitions(self, req: TxnRequest, body: dict[str, Any], now_ms: int) -> None:
        unauthorized: list[TopicPartition] = []
        for topic in body["results_by_topic_v3_and_below"]:
            for result in topic["results_by_partition"]:
                code = result["partition_error_code"]
                tp = TopicPartition(topic["name"], result["partition_index"])
                if code in (0, 55):  # NONE, OPERATION_NOT_ATTEMPTED (another partition failed)
                    continue
                if code == 29:  # TOPIC_AUTHORIZATION_FAILED
                    unauthorized.append(tp)
                    continue
                if code == 51 and not self._txn_partitions:
                    self.requeue(req, now_ms, backoff_ms=min(self.retry_backoff_ms, _FIRST_ADD_PARTITIONS_BACKOFF_MS))
                elif code in (14, 3):  # still loading; the partition's metadata not yet everywhere
                    self.requeue(req, now_ms, backoff_ms=self.retry_backoff_ms)
                else:
                    self._common_errors(req, code, f"AddPartitionsToTxn {tp}", now_ms)
                return
        if unauthorized:
            self._abortable(broker_error(29, "AddPartitionsToTxn " + ", ".join(map(str, unauthorized))))
            return
        self._txn_partitions |= req.partitions
        self._pending_partitions -= req.partitions
        self._transaction_started = True

    def _on_end_txn(self, req: TxnRequest, body: dict[str, Any], now_ms: int) -> None:
        code = body["error_code"]
        if code != 0:
            self._common_errors(req, code, "EndTxn", now_ms)
            return
        self._complete_transaction(req.result)


def _fail(result: Future[None] | None, error: BaseException) -> None:
    if result is not None and not result.done():
        result.set_exception(error)


def _done(result: Future[None] | None) -> None:
    if result is not None and not result.done():
        result.set_result(None)
