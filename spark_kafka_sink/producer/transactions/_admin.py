"""Ending or fencing a transaction from a process that did not write it (the Spark driver).

    identity = producer.transaction_identity()      # in the task: TransactionIdentity(id, producer id, epoch)
    end_transaction(config, identity, commit=True, timeout_s=60)   # in the driver, any process
    fence_transactional_id(config, "prefix-3", timeout_s=60)       # abort whatever "prefix-3" left open

The transaction coordinator checks transactional.id, producer id, epoch and the transaction's state -- not the
connection -- so any client can send EndTxn for a transaction another one wrote, as long as nobody bumped the
epoch in between. The EndTxn version must match the flow the transaction started with (the broker picks the flow
by the request version): <= v4 for transaction version 1, v5 for version 2 (which bumps the epoch at the end,
so the writer's producer must not start another transaction with the old epoch). The identity carries the version.
Each call opens its own short-lived connections; a :class:`CoordinatorSession` keeps one set for many calls from
one thread (the driver ending a job's transactions pays bootstrap, ApiVersions and Metadata once per thread, and
FindCoordinator once per transactional id, instead of all of them per transaction).

Outcomes of :func:`end_transaction`:

* NONE: done. Repeating a commit (or abort) that already completed answers NONE too, so retrying is safe (TV2:
  the coordinator recognises the epoch just before its bump as a retry).
* NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: find the coordinator again; COORDINATOR_LOAD_IN_PROGRESS /
  CONCURRENT_TRANSACTIONS and connection failures: retry after retry.backoff.ms, until ``timeout_s``.
* PRODUCER_FENCED / INVALID_PRODUCER_EPOCH -> :class:`ProducerFencedError`: the epoch moved on. For a commit this
  means the records are lost: the transaction stayed open past transaction.timeout.ms and the coordinator aborted
  it, or a newer producer with the same transactional.id fenced and aborted it. (Older brokers answer
  INVALID_TXN_STATE in the timeout case.)
* INVALID_TXN_STATE -> :class:`InvalidTxnStateError`: the transaction already ended the other way (or never
  started); anything else: the named broker error. Every failure message names the transaction.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any

from spark_kafka_sink.errors import (
    COORDINATOR_BUSY_CODES,
    COORDINATOR_MOVED_CODES,
    FENCED_CODES,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TransactionalIdNotFoundError,
    error_for_code,
)
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.security import check_security, handshakes_for
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.transactions._handlers import end_txn_body, end_txn_version_range, find_coordinator_body
from spark_kafka_sink.producer.transactions._sequences import ProducerIdAndEpoch
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import (
    DESCRIBE_PRODUCERS,
    DESCRIBE_TRANSACTIONS,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    LIST_TRANSACTIONS,
    ApiSpec,
)

__all__ = ["TransactionIdentity", "CoordinatorSession", "end_transaction", "fence_transactional_id",
           "ListedTransaction", "TransactionDescription", "OPEN_STATES"]



@dataclass(frozen=True)
class ListedTransaction:
    """One transactional id as ListTransactions lists it."""

    transactional_id: str
    producer_id: int
    state: str  # the coordinator's: Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort ...


#: The coordinator states of a transaction that holds records back from read_committed consumers.
OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class TransactionDescription:
    """One transactional id as DescribeTransactions tells it."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int  # the writer's transaction.timeout.ms
    start_time_ms: int  # wall clock when the open transaction began; -1 when none is open
    partitions: tuple[tuple[str, int], ...]  # (topic, partition) of the open transaction

    @property
    def open(self) -> bool:
        return self.state in OPEN_STATES


@dataclass(frozen=True)
class TransactionIdentity:
    """What another process needs to end a transaction: transactional.id, producer id, epoch and the transaction
    version it started with (1: classic, 2: KIP-890). Picklable."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int = 1
    # The node id of the transaction coordinator the writer used, or -1: a hint that spares the ender a
    # FindCoordinator (it looks the coordinator up anyway if the hint is unknown to it or answers NOT_COORDINATOR).
    coordinator: int = -1

    def __str__(self) -> str:
        return (f"transaction {self.transactional_id!r} (producer id {self.producer_id}, "
                f"epoch {self.producer_epoch}, transaction version {self.transaction_version})")


def end_transaction(config: Mapping[str, Any], identity: TransactionIdentity, commit: bool,
                    timeout_s: float) -> None:
    """Commit (``commit=True``) or abort the open transaction ``identity`` with EndTxn, from any process.

    ``config`` is producer config (Java names; only connection and security settings, retry.backoff.ms and
    transaction.timeout.ms are used). Retriable failures are retried until ``timeout_s``; see the module
    docstring for what raises. Raises :class:`KafkaTimeoutError` naming the last error if time runs out.
    """
    with CoordinatorSession(config) as session:
        session.end_transaction(identity, commit, timeout_s)


def fence_transactional_id(config: Mapping[str, Any], transactional_id: str, timeout_s: float) -> None:
    """InitProducerId for ``transactional_id``: the coordinator aborts any transaction it left open and bumps
    its epoch, so a zombie still holding the old epoch can no longer write or commit."""
    with CoordinatorSession(config) as session:
        session.fence_transactional_id(transactional_id, timeout_s)


class CoordinatorSession:
    """Connections for many coordinator calls (:meth:`end_transaction`, :meth:`fence_transactional_id`, and the
    KIP-664 views :meth:`list_transactions`, :meth:`describe_transaction`, :meth:`transaction_start_offsets`) made by
    one thread at a time: the bootstrap, ApiVersions and Metadata round trips are paid once, and each
    transactional id's coordinator is looked up once (again after NOT_COORDINATOR or a connection failure).
    ``config`` as for :func:`end_transaction`. Not thread-safe: one session per thread. Close it (or use
    ``with``)."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        parsed = ProducerConfig.from_dict(config)
        self._backoff_s = parsed.retry_backoff_ms / 1000
        self._timeout_ms = parsed.transaction_timeout_ms
        net_config = parsed.net_config()
        check_security(net_config)  # bad TLS files or key password: a ConfigError naming the option, before any socket
        self._client = NetworkClient(net_config, handshakes=handshakes_for)
        self._coordinators: dict[str, int] = {}  # transactional id -> coordinator node id, as last found

    def end_transaction(self, identity: TransactionIdentity, commit: bool, timeout_s: float) -> None:
        """As :func:`end_transaction`, over this session's connections."""
        action = "commit" if commit else "abort"
        producer = ProducerIdAndEpoch(identity.producer_id, identity.producer_epoch)

        def build(version: int) -> dict[str, Any]:
            return end_txn_body(identity.transactional_id, producer, commit)

        def outcome(code: int) -> KafkaError | None:
            return _end_txn_error(code, identity, commit, self._timeout_ms)

        min_version, max_version = end_txn_version_range(identity.transaction_version)
        if identity.coordinator >= 0:
            self._coordinators.setdefault(identity.transactional_id, identity.coordinator)
        self._call_coordinator(identity.transactional_id, f"{action} {identity}", END_TXN, build, outcome,
                               timeout_s, min_version=min_version, max_version=max_version)

    def fence_transactional_id(self, transactional_id: str, timeout_s: float) -> None:
        """As :func:`fence_transactional_id`, over this session's connections."""

        def build(version: int) -> dict[str, Any]:
            return {"transactional_id": transactional_id, "transaction_timeout_ms": self._timeout_ms}

        def outcome(code: int) -> KafkaError | None:
            cls = error_for_code(code)
            return cls(f"could not fence transactional.id {transactional_id!r}", context="InitProducerId")

        self._call_coordinator(transactional_id, f"fence transactional.id {transactional_id!r}", INIT_PRODUCER_ID,
                               build, outcome, timeout_s)

    def list_transactions(self, prefix: str, timeout_s: float) -> list[ListedTransaction]:
        """Every transactional id starting with ``prefix`` the coordinators know (ListTransactions to every broker:
        each answers for the transaction log partitions it leads), in id order. Ids stay listed, in a Complete* or
        Empty state, until transactional.id.expiration.ms after their last use."""
        client = self._client
        deadline = time.monotonic() + timeout_s
        request_timeout_ms = client.config.request_timeout_ms

        def remaining_ms() -> int:
            return max(1, min(request_timeout_ms, int((deadline - time.monotonic()) * 1000)))

        def build(version: int) -> dict[str, Any]:
            body: dict[str, Any] = {"state_filters": [], "producer_id_filters": []}
            if version >= 2:  # let the broker filter (the prefix holds letters, digits, '.', '_' and '-' only)
                body["transactional_id_pattern"] = re.escape(prefix) + ".*"
            return body

        client.fetch_metadata([], remaining_ms())
        found: dict[str, ListedTransaction] = {}
        for node_id in sorted(client.metadata.brokers()):
            body = self._retry_busy(partial(client.request, node_id, LIST_TRANSACTIONS, build, remaining_ms(),
                                            raise_on_error=False), deadline, f"ListTransactions to node {node_id}")
            for entry in body.get("transaction_states", []):
                tid = str(entry["transactional_id"])
                if tid.startswith(prefix):
                    found[tid] = ListedTransaction(tid, int(entry["producer_id"]), str(entry["transaction_state"]))
        return [found[t] for t in sorted(found)]

    def describe_transaction(self, transactional_id: str, timeout_s: float) -> TransactionDescription | None:
        """DescribeTransactions at the id's coordinator; None when the coordinator does not know the id."""
        deadline = time.monotonic() + timeout_s
        while True:
            body = self._call_coordinator(
                transactional_id, f"describe transactional.id {transactional_id!r}", DESCRIBE_TRANSACTIONS,
                lambda version: {"transactional_ids": [transactional_id]},
                lambda code: error_for_code(code)(context=f"DescribeTransactions {transactional_id!r}"),
                max(0.001, deadline - time.monotonic()))
            entry = body["transaction_states"][0]
            code = int(entry.get("error_code", NO_ERROR))
            if code == TransactionalIdNotFoundError.code:
                return None
            if code in COORDINATOR_MOVED_CODES or code in COORDINATOR_BUSY_CODES:
                self._coordinators.pop(transactional_id, None)
                if time.monotonic() + self._backoff_s >= deadline:
                    raise error_for_code(code)(context=f"DescribeTransactions {transactional_id!r}")
                time.sleep(self._backoff_s)  # retry.backoff.ms, as for every coordinator answer
                continue
            if code != NO_ERROR:
                raise error_for_code(code)(context=f"DescribeTransactions {transactional_id!r}")
            return TransactionDescription(
                transactional_id, str(entry["transaction_state"]), int(entry["producer_id"]),
                int(entry["producer_epoch"]), int(entry["transaction_timeout_ms"]),
                int(entry["transaction_start_time_ms"]),
                tuple(sorted((str(t["topic"]), int(p)) for t in entry.get("topics", []) for p in t["partitions"])))

    def transaction_start_offsets(self, producer_id: int, partitions: Sequence[tuple[str, int]],
                                  timeout_s: float) -> dict[tuple[str, int], int]:
        """Where producer ``producer_id``'s open transaction begins in each of ``partitions`` (DescribeProducers to
        their leaders): read_committed consumers of a partition wait at that offset until the transaction ends.
        A partition whose leader no longer holds an open transaction of that producer is left out."""
        client = self._client
        deadline = time.monotonic() + timeout_s
        request_timeout_ms = client.config.request_timeout_ms

        def remaining_ms() -> int:
            return max(1, min(request_timeout_ms, int((deadline - time.monotonic()) * 1000)))

        if not partitions:
            return {}
        client.fetch_metadata(sorted({t for t, _ in partitions}), remaining_ms())
        by_leader: dict[int, dict[str, list[int]]] = {}
        for topic, partition in partitions:
            info = client.metadata.topic(topic)
            leader = None if info is None or partition not in info.partitions else info.partitions[partition].leader_id
            if leader is not None:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(partition)
        found: dict[tuple[str, int], int] = {}
        for leader, topics in sorted(by_leader.items()):
            body = {"topics": [{"name": t, "partition_indexes": sorted(ps)} for t, ps in sorted(topics.items())]}
            answer = self._retry_busy(partial(client.request, leader, DESCRIBE_PRODUCERS, body, remaining_ms(),
                                              raise_on_error=False), deadline, f"DescribeProducers to node {leader}")
            for topic_answer in answer.get("topics", []):
                for partition_answer in topic_answer["partitions"]:
                    if int(partition_answer.get("error_code", NO_ERROR)) != NO_ERROR:
                        continue  # leadership moved meanwhile: the partition is left out
                    for producer in partition_answer["active_producers"]:
                        start = int(producer["current_txn_start_offset"])
                        if int(producer["producer_id"]) == producer_id and start >= 0:
                            found[(str(topic_answer["name"]), int(partition_answer["partition_index"]))] = start
        return found

    def _retry_busy(self, call: Callable[[], dict[str, Any]], deadline: float, what: str) -> dict[str, Any]:
        """``call()`` again after retry.backoff.ms while it fails retriably or answers a busy coordinator."""
        while True:
            try:
                body = call()
                code = _answer_code(body)
                if code == NO_ERROR:
                    return body
                error: KafkaError = error_for_code(code)(context=what)
            except KafkaError as exc:
                error = exc
            if not error.retriable or time.monotonic() + self._backoff_s >= deadline:
                raise error
            time.sleep(self._backoff_s)  # retry.backoff.ms, as for every coordinator answer

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> CoordinatorSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call_coordinator(self, transactional_id: str, what: str, api: ApiSpec,
                          build: Callable[[int], dict[str, Any]], outcome: Callable[[int], KafkaError | None],
                          timeout_s: float, *, min_version: int | None = None,
                          max_version: int | None = None) -> dict[str, Any]:
        """FindCoordinator (unless known), then ``api`` to it; retry retriable answers until ``timeout_s``.
        Returns the answer (a top-level error_code NONE, or none at all)."""
        client = self._client
        deadline = time.monotonic() + timeout_s
        last_error: BaseException | None = None
        request_timeout_ms = client.config.request_timeout_ms

        def remaining_ms() -> int:
            return max(1, min(request_timeout_ms, int((deadline - time.monotonic()) * 1000)))

        while True:
            if last_error is not None:
                if time.monotonic() + self._backoff_s >= deadline:
                    raise KafkaTimeoutError(f"could not {what} within {timeout_s:g} s; last error: {last_error}")
                time.sleep(self._backoff_s)  # retry.backoff.ms between attempts, as the producer does
            try:
                coordinator = self._coordinators.get(transactional_id)
                if coordinator is not None and client.metadata.broker(coordinator) is None:
                    client.fetch_metadata([], remaining_ms())  # a node id learnt elsewhere: its address
                    if client.metadata.broker(coordinator) is None:
                        coordinator = None
                if coordinator is None:
                    coordinator = _find_coordinator(client, transactional_id, remaining_ms())
                    self._coordinators[transactional_id] = coordinator
                body = client.request(coordinator, api, build, remaining_ms(), min_version=min_version,
                                      max_version=max_version, raise_on_error=False)
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                last_error = exc
                self._coordinators.pop(transactional_id, None)
                continue
            code = _answer_code(body)
            if code == NO_ERROR:
                return body
            if code in COORDINATOR_MOVED_CODES or code in COORDINATOR_BUSY_CODES:
                last_error = error_for_code(code)(context=f"{api.name} for {transactional_id!r}")
                if code in COORDINATOR_MOVED_CODES:
                    self._coordinators.pop(transactional_id, None)
                continue
            error = outcome(code)
            if error is not None:
                raise error


def _answer_code(body: Mapping[str, Any]) -> int:
    return int(body.get("error_code", NO_ERROR))


def _end_txn_error(code: int, identity: TransactionIdentity, commit: bool, timeout_ms: int) -> KafkaError:
    if code in FENCED_CODES:
        if commit:
            message = (
                f"{identity} cannot be committed: its producer epoch was fenced. Either the transaction stayed "
                f"open longer than transaction.timeout.ms ({timeout_ms} ms) and the broker aborted it, or a newer "
                "producer with the same transactional.id (e.g. a retried task) fenced and aborted it. Its records "
                "will never be visible to read_committed consumers: write the data again, within the timeout.")
        else:
            message = (f"{identity} is no longer open under this epoch (it ended, timed out and was aborted by the "
                       "broker, or was fenced by a newer producer): there is nothing left to abort with it")
        return ProducerFencedError(message, context="EndTxn")
    if code == InvalidTxnStateError.code:
        other = "aborted (e.g. after transaction.timeout.ms on older brokers)" if commit else "committed"
        return error_for_code(code)(f"{identity} cannot be {'committed' if commit else 'aborted'}: it was already "
                                    f"{other}, or never started", context="EndTxn")
    return error_for_code(code)(f"{'commit' if commit else 'abort'} of {identity} failed", context="EndTxn")


def _find_coordinator(client: NetworkClient, transactional_id: str, timeout_ms: int) -> int:
    """The transaction coordinator's node id; the broker list is fetched first so the client can reach it."""
    if not client.metadata.brokers():
        client.fetch_metadata([], timeout_ms)

    def build(version: int) -> dict[str, Any]:
        return find_coordinator_body(transactional_id, version)

    body = client.request(None, FIND_COORDINATOR, build, timeout_ms, raise_on_error=False)
    answer = (body.get("coordinators") or [body])[0]
    code = int(answer.get("error_code", NO_ERROR))
    if code != NO_ERROR:
        raise error_for_code(code)(answer.get("error_message"),
                                   context=f"FindCoordinator for transactional.id {transactional_id!r}")
    node_id = int(answer["node_id"])
    if client.metadata.broker(node_id) is None:
        client.fetch_metadata([], timeout_ms)  # a broker that joined after our last look
    return node_id


