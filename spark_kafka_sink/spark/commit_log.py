"""The commit log: a compacted Kafka topic where the driver records each exactly_once write that has a stable id.

A write has a stable id when the same write can run again under the same transactional ids: a streaming
micro-batch (writeId = the batch id) or a batch / ``foreachBatch`` write with the ``writeId`` option. For those,
the driver records, in order, for the prefix ``P`` and writeId ``W`` (JSON values, keys below):

* ``P/plan``: written and acknowledged before the first EndTxn: per Spark partition that wrote in a transaction
  its transactional id, producer id, epoch, transaction version, row count and row digest; plus the partitions
  ``carried`` over from an earlier run of the same W (committed then, skipped now) with their counts and digests;
* ``P/commit/<p>``: after EndTxn(commit) of partition p succeeded;
* ``P/complete``: after the last one, with the partitions the broker had aborted (``lost``: to be written again).

Every record of a prefix goes to one partition of the topic (murmur2 of the prefix), so a reader reads one
partition; compaction keeps the last record per key, so the log holds one plan, one completion and at most one
commit record per Spark partition number for each prefix, whatever the number of writes. Only the latest writeId
of a prefix is remembered (as a checkpoint remembers its latest state): a re-run of an older writeId writes again.

The driver writes with an idempotent, non-transactional producer, so reading the log never waits behind anybody's
open transaction. The topic is created on first use (CreateTopics; ``cleanup.policy=compact``, replication
min(3, brokers)). Before any task runs, :meth:`CommitLog.read` checks that the principal may create (if needed),
describe, read and write the topic -- Read and Write from the authorized operations the Metadata answer lists, so
the check writes nothing --; a missing ACL is a :class:`CommitLogAccessError` naming the topic, the operation to
allow and the ``commitLogTopic`` option.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from spark_kafka_sink.errors import (
    ClusterAuthorizationFailedError,
    ConfigError,
    KafkaError,
    TopicAlreadyExistsError,
    TopicAuthorizationFailedError,
    error_for_code,
)
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.partition_reader import read_partition
from spark_kafka_sink.net.security import check_security, handshakes_for
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import CREATE_TOPICS
from spark_kafka_sink.protocol.messages.cluster import AclOperation
from spark_kafka_sink.protocol.murmur2 import murmur2, partition_for_key

if TYPE_CHECKING:
    from spark_kafka_sink.producer import KafkaProducer, RecordMetadata

__all__ = ["CommitLog", "CommitLogAccessError", "Committed", "CommittedWrite", "LogEntry", "LoggedWrite",
           "PlannedTransaction", "COMMIT_LOG_PARTITIONS"]

#: Partitions of the commit log topic when this sink creates it (as __consumer_offsets has 50).
COMMIT_LOG_PARTITIONS = 50
_FORMAT = 1  # the "v" of every record: a reader refuses records of a newer format instead of misreading them
_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "3600000",  # roll hourly, so compaction reaches old records within hours, not days
    "min.compaction.lag.ms": "0",
}


class CommitLogAccessError(ConfigError):
    """The commit log topic cannot be created, read or written with these credentials; names topic and ACL."""


@dataclass(frozen=True)
class Committed:
    """What one Spark partition of a write committed: its rows and their digest (see :mod:`.digest`)."""

    rows: int
    digest: str


@dataclass(frozen=True)
class PlannedTransaction:
    """One Spark partition's open transaction, as the driver recorded it before ending it."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    transaction_version: int
    rows: int
    digest: str


@dataclass(frozen=True)
class LoggedWrite:
    """The latest write of a prefix, as the log tells it."""

    write_id: int
    planned: Mapping[int, PlannedTransaction]  # Spark partition -> transaction of the latest run
    carried: Mapping[int, Committed]  # committed by an earlier run of this writeId, skipped by the latest
    committed: frozenset[int] = frozenset()  # planned partitions recorded as committed
    complete: bool = False
    lost: frozenset[int] = frozenset()  # planned partitions the broker had aborted (write them again)

    def visible(self) -> CommittedWrite:
        """What this write made visible (call on a complete one): the partitions a re-run skips."""
        done = {p: Committed(t.rows, t.digest) for p, t in self.planned.items() if p not in self.lost}
        return CommittedWrite(self.write_id, {**self.carried, **done})


@dataclass(frozen=True)
class CommittedWrite:
    """The latest complete write of a prefix: its writeId and, per Spark partition, what it committed. Picklable:
    the driver hands it to the tasks, which skip their partition when they run the same writeId."""

    write_id: int
    partitions: Mapping[int, Committed]


@dataclass(frozen=True)
class LogEntry:
    """One record of a prefix: ``kind`` is its key after ``<prefix>/``; ``value`` None for a tombstone."""

    offset: int
    timestamp_ms: int  # the writer's clock when it appended the record
    kind: str
    value: dict[str, Any] | None


@dataclass
class _Reading:
    plan: dict[str, Any] | None = None
    commits: dict[int, int] = field(default_factory=dict)  # Spark partition -> writeId of its last commit record
    complete: dict[str, Any] | None = None


class CommitLog:
    """Reads and appends the commit log of one transactionalIdPrefix. Use as a context manager (closes clients)."""

    def __init__(self, topic: str, prefix: str, producer_config: Mapping[str, Any], timeout_s: float) -> None:
        self.topic = topic
        self.prefix = prefix
        self._config = {k: v for k, v in producer_config.items() if k != "transactional.id"}
        self._timeout_s = timeout_s
        self._producer: KafkaProducer | None = None
        self._partition: int | None = None

    def __enter__(self) -> CommitLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(self._timeout_s)
            self._producer = None

    # ------------------------------------------------------------------------------------------ reading

    def read(self) -> LoggedWrite | None:
        """The latest write of this prefix (None if the log has none). Creates the topic on first use."""
        reading = _Reading()
        for entry in self.entries():
            if entry.value is None:
                continue
            if entry.kind == "plan":
                reading.plan = entry.value
            elif entry.kind == "complete":
                reading.complete = entry.value
            elif entry.kind.startswith("commit/"):
                reading.commits[int(entry.kind[len("commit/"):])] = int(entry.value["writeId"])
        return _assemble(reading)

    def entries(self, start_offset: int | None = None) -> list[LogEntry]:
        """This prefix's records in log order, from ``start_offset`` (default: the log start) to the current end.
        Creates the topic on first use."""
        with self._client() as client:
            partition = self._ensure(client)
            try:
                records = read_partition(client, self.topic, partition, start_offset=start_offset,
                                         isolation="read_uncommitted", timeout_ms=int(self._timeout_s * 1000))
            except KafkaError as exc:
                raise _access_error(exc, self.topic, "Read") from exc
        own = f"{self.prefix}/"
        found = []
        for record in records:
            key = record.key.decode("utf-8", "replace") if record.key is not None else ""
            if not key.startswith(own):
                continue  # another prefix whose records hash to the same partition
            value = None if record.value is None else json.loads(record.value)
            if value is not None and value.get("v", 0) > _FORMAT:
                raise ConfigError(f"commit log {self.topic!r} holds a record of a newer format ({value.get('v')}) "
                                  f"for prefix {self.prefix!r}: upgrade spark-kafka-sink", key="commitLogTopic")
            found.append(LogEntry(record.offset, record.timestamp_ms, key[len(own):], value))
        return found

    # ------------------------------------------------------------------------------------------ appending

    def append_plan(self, write_id: int, planned: Mapping[int, PlannedTransaction],
                    carried: Mapping[int, Committed]) -> int:
        """Record the plan and wait until the brokers have it: only then may the first EndTxn go out. Returns the
        plan's offset."""
        return self._append_acknowledged("plan", {
            "writeId": write_id,
            "planned": {str(p): {"tid": t.transactional_id, "pid": t.producer_id, "epoch": t.producer_epoch,
                                 "tv": t.transaction_version, "rows": t.rows, "digest": t.digest}
                        for p, t in sorted(planned.items())},
            "carried": {str(p): {"rows": c.rows, "digest": c.digest} for p, c in sorted(carried.items())},
        })

    def append_committed(self, write_id: int, partition: int) -> None:
        """Record that partition's EndTxn(commit) succeeded (not waited for: a lost one is found again by EndTxn)."""
        self._append(f"commit/{partition}", {"writeId": write_id})

    def append_complete(self, write_id: int, lost: frozenset[int] = frozenset()) -> None:
        self._append_acknowledged("complete", {"writeId": write_id, "lost": sorted(lost)})

    def flush(self) -> None:
        """Wait until every record appended so far was sent, acknowledged or not (a lost commit record is found
        again by the next run's EndTxn, which answers NONE for a transaction it committed before)."""
        if self._producer is not None:
            try:
                self._producer.flush(self._timeout_s)
            except KafkaError as exc:
                raise _access_error(exc, self.topic, "Write") from exc

    def append_entry(self, kind: str, value: dict[str, Any]) -> int:
        """Append ``<prefix>/<kind>`` and wait for the brokers' acknowledgement; returns the record's offset."""
        return self._append_acknowledged(kind, value)

    def _append_acknowledged(self, kind: str, value: dict[str, Any]) -> int:
        """Append and wait for the brokers' acknowledgement; raises if the record was not written."""
        future = self._append(kind, value)
        self.flush()
        try:
            return future.result(0).offset  # done: flush waited for it
        except KafkaError as exc:
            raise _access_error(exc, self.topic, "Write") from exc

    def _append(self, kind: str, value: dict[str, Any]) -> Future[RecordMetadata]:
        producer = self._writer()
        payload = json.dumps({"v": _FORMAT, **value}, separators=(",", ":")).encode()
        try:
            future = producer.send(self.topic, payload, key=f"{self.prefix}/{kind}".encode(),
                                   partition=self._partition)
        except KafkaError as exc:
            raise _access_error(exc, self.topic, "Write") from exc
        return future

    def _writer(self) -> KafkaProducer:
        if self._producer is None:
            from spark_kafka_sink.producer import KafkaProducer

            if self._partition is None:
                with self._client() as client:
                    self._ensure(client)
            config = dict(self._config)
            config.update({"acks": "all", "enable.idempotence": "true", "linger.ms": "0"})
            self._producer = KafkaProducer(config)
        return self._producer

    # ------------------------------------------------------------------------------------------ the topic

    def _client(self) -> NetworkClient:
        net_config = ProducerConfig.from_dict(self._config).net_config()
        check_security(net_config)
        return NetworkClient(net_config, handshakes=handshakes_for)

    def _ensure(self, client: NetworkClient) -> int:
        """The log partition of this prefix; creates the topic if it does not exist yet.

        Each request waits at most request.timeout.ms, and a lost connection or an unanswered request is tried again
        (retry.backoff.ms apart) until the log's timeout: the driver reads and appends the log during the commit,
        which must ride out a flapping link rather than fail on the first request the link swallowed."""
        deadline = time.monotonic() + self._timeout_s
        backoff_s = client.config.retry_backoff_ms / 1000
        created = False
        last_error: KafkaError | None = None
        while True:
            operation = "Describe"
            try:
                client.fetch_metadata([self.topic], self._request_ms(client, deadline),
                                      allow_auto_topic_creation=False, include_topic_authorized_operations=True)
                info = client.metadata.topic(self.topic)
                if info is not None and info.error_code == NO_ERROR and info.partitions and all(
                        p.leader_id is not None for p in info.partitions.values()):
                    _check_authorized(info.authorized_operations, self.topic)
                    count = len(info.partitions)
                    self._partition = partition_for_key(murmur2(self.prefix.encode()), count)
                    return self._partition
                if info is not None and info.error_code == TopicAuthorizationFailedError.code:
                    raise TopicAuthorizationFailedError(context=f"Metadata {self.topic}")
                if not created:
                    operation = "Create"
                    self._create(client, self._request_ms(client, deadline))
                    created = True
                pause_s = 0.05  # the new topic's leaders are being elected: poll the metadata again
            except KafkaError as exc:
                if not exc.retriable:
                    raise _access_error(exc, self.topic, operation) from exc
                last_error, pause_s = exc, backoff_s
            if time.monotonic() + pause_s > deadline:
                cause = "" if last_error is None else f"; last error: {last_error}"
                raise KafkaError(f"commit log topic {self.topic!r} did not become available within "
                                 f"{self._timeout_s:g} s{cause}")
            time.sleep(pause_s)

    def _request_ms(self, client: NetworkClient, deadline: float) -> int:
        """One request's timeout: request.timeout.ms, or less when the log's deadline comes first."""
        return max(1, min(client.config.request_timeout_ms, int((deadline - time.monotonic()) * 1000)))

    def _create(self, client: NetworkClient, timeout_ms: int) -> None:
        brokers = max(1, len(client.metadata.brokers()))
        body = {"topics": [{"name": self.topic, "num_partitions": COMMIT_LOG_PARTITIONS,
                            "replication_factor": min(3, brokers),
                            "configs": [{"name": k, "value": v} for k, v in _TOPIC_CONFIG.items()]}],
                "timeout_ms": timeout_ms}
        answer = client.request(None, CREATE_TOPICS, body, timeout_ms, raise_on_error=False)
        for result in answer.get("topics", []):
            code = int(result.get("error_code", NO_ERROR))
            if code in (NO_ERROR, TopicAlreadyExistsError.code):
                continue
            raise error_for_code(code)(result.get("error_message"), context=f"CreateTopics {self.topic}")


def _check_authorized(operations: int | None, topic: str) -> None:
    """Fail now, before any task writes, if the principal may not read or write the log: reading is needed by the
    next run's recovery, writing by this write's commit (found only then, the tasks' transactions would be open)."""
    if operations is None:
        return  # the broker did not say (Metadata before v8): the first Fetch or Produce will
    for operation in (AclOperation.READ, AclOperation.WRITE):
        if not operation.allowed_in(operations):
            name = operation.name.capitalize()
            raise _access_error(TopicAuthorizationFailedError(context=f"{name} {topic}"), topic, name)


def _access_error(exc: KafkaError, topic: str, operation: str) -> KafkaError:
    if isinstance(exc, (TopicAuthorizationFailedError, ClusterAuthorizationFailedError)):
        where = f"topic {topic!r} (or on the cluster)" if operation == "Create" else f"topic {topic!r}"
        return CommitLogAccessError(
            f"exactly_once keeps its commit log (writeIds, and the claims of transactional id prefixes for writes "
            f"without transactionalIdPrefix) in topic {topic!r}, but this principal may not "
            f"{operation.lower()} it ({type(exc).__name__}): allow {operation} on {where} for the sink's principal "
            f"(it needs Describe, Read and Write on that topic, and Create once unless the topic exists: create it "
            f"yourself with cleanup.policy=compact), or name a topic it may use with the commitLogTopic option",
            key="commitLogTopic")
    return exc


def _assemble(reading: _Reading) -> LoggedWrite | None:
    plan = reading.plan
    if plan is None:
        return None
    write_id = int(plan["writeId"])
    planned = {int(p): PlannedTransaction(t["tid"], int(t["pid"]), int(t["epoch"]), int(t["tv"]), int(t["rows"]),
                                          str(t["digest"]))
               for p, t in plan.get("planned", {}).items()}
    carried = {int(p): Committed(int(c["rows"]), str(c["digest"])) for p, c in plan.get("carried", {}).items()}
    committed = frozenset(p for p, w in reading.commits.items() if w == write_id and p in planned)
    complete = reading.complete is not None and int(reading.complete["writeId"]) == write_id
    lost = frozenset(int(p) for p in reading.complete.get("lost", [])) if complete and reading.complete else frozenset()
    return LoggedWrite(write_id, planned, carried, committed, complete, lost)
