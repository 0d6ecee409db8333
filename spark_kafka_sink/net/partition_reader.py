"""Reading one partition from an offset to its end, blocking: ListOffsets and Fetch against the partition leader.

    records = read_partition(client, "control-topic", 0, timeout_ms=30_000)                  # everything committed
    records = read_partition(client, "t", 2, start_offset=40, isolation="read_uncommitted", timeout_ms=10_000)

Not a consumer: no group, no fetch session, no position kept between calls. One call takes a snapshot of the end
(ListOffsets LATEST: the last stable offset under read_committed, the high watermark otherwise) and the start
(``start_offset``, else ListOffsets EARLIEST), then fetches until the end and returns the records in offset order
as :class:`~spark_kafka_sink.protocol.record_batch.DecodedRecord` (offset, timestamp_ms, key, value, headers).
Records written after the snapshot are not read; an open transaction holds the end back at its first offset
under read_committed, so the call returns at once rather than waiting for it.

What is dropped is decided by :func:`~spark_kafka_sink.protocol.record_batch.visible_records`: transaction
markers always, records of aborted transactions under read_committed (as the Java consumer does).

Every fetched batch is checked whole (CRC-32C, lengths, framing) before any of its records is used; a corrupt one
raises :class:`~spark_kafka_sink.errors.ProtocolError` at once naming the partition, the fetch offset, the node
and the batch's offset (the leader would send the same bytes again, so it is not retried).

Errors: NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE and OFFSET_NOT_AVAILABLE (and a
lost connection) refresh the metadata and retry after retry.backoff.ms; when ``timeout_ms`` runs out a
:class:`~spark_kafka_sink.errors.KafkaTimeoutError` names the last of them (also its ``__cause__``). Any other
broker error raises its named :class:`~spark_kafka_sink.errors.BrokerError` at once, e.g.
``OffsetOutOfRangeError`` for a start offset below the log start.

The client is any :class:`PartitionReaderClient` -- in practice a
:class:`~spark_kafka_sink.net.client.NetworkClient`, used from the calling thread only (its blocking helpers must
not run alongside ``poll`` in another thread).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import partial
from typing import Any, Literal, NamedTuple, Protocol, TypeVar

from spark_kafka_sink.errors import (
    BrokerError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NotLeaderOrFollowerError,
    OffsetNotAvailableError,
    ProtocolError,
    UnknownTopicOrPartitionError,
    raise_for_code,
)
from spark_kafka_sink.net.client import Body
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.protocol.messages import FETCH, LIST_OFFSETS, ApiSpec
from spark_kafka_sink.protocol.messages.fetch import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    READ_COMMITTED,
    READ_UNCOMMITTED,
)
from spark_kafka_sink.protocol.record_batch import DecodedRecord, decode_batches, visible_records

__all__ = ["PartitionReaderClient", "Isolation", "RETRY_WITH_NEW_METADATA_CODES", "read_partition"]

log = logging.getLogger(__name__)
_T = TypeVar("_T")

Isolation = Literal["read_committed", "read_uncommitted"]
_ISOLATION_LEVELS: dict[str, int] = {"read_committed": READ_COMMITTED, "read_uncommitted": READ_UNCOMMITTED}

#: Partition errors that mean "ask the cluster again where the partition is, then retry".
RETRY_WITH_NEW_METADATA_CODES = frozenset({
    NotLeaderOrFollowerError.code, UnknownTopicOrPartitionError.code, LeaderNotAvailableError.code,
    OffsetNotAvailableError.code,
})
_DEFAULT_MAX_BYTES = 1 << 20  # per Fetch, as the Java consumer's max.partition.fetch.bytes


class PartitionReaderClient(Protocol):
    """What :func:`read_partition` needs of a network client (:class:`~spark_kafka_sink.net.client.NetworkClient`)."""

    @property
    def config(self) -> NetConfig: ...

    @property
    def metadata(self) -> Metadata: ...

    def request(self, node_id: int | None, api: ApiSpec, body: Body, timeout_ms: int, *,
                min_version: int | None = None, max_version: int | None = None,
                raise_on_error: bool = True) -> dict[str, Any]: ...

    def fetch_metadata(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None, *,
                       allow_auto_topic_creation: bool = True) -> Metadata: ...


def read_partition(client: PartitionReaderClient, topic: str, partition: int, *, start_offset: int | None = None,
                   isolation: Isolation = "read_committed", timeout_ms: int, max_bytes: int = _DEFAULT_MAX_BYTES,
                   clock: Callable[[], int] = monotonic_ms,
                   sleep: Callable[[float], None] = time.sleep) -> list[DecodedRecord]:
    """The records of ``topic``-``partition`` from ``start_offset`` (default: the log start) to its current end,
    in offset order; [] when there are none (an empty partition, or a start at or past the end). See the module
    docstring for what is read and what raises.

    ``max_bytes`` bounds each Fetch (the broker still returns a larger first batch whole). ``clock`` (monotonic
    ms) and ``sleep`` (seconds) are for tests.
    """
    if isolation not in _ISOLATION_LEVELS:
        raise ValueError(f"isolation must be one of {sorted(_ISOLATION_LEVELS)}, got {isolation!r}")
    if start_offset is not None and start_offset < 0:
        raise ValueError(f"start_offset must be >= 0 or None (the log start), got {start_offset}")
    if timeout_ms < 0 or max_bytes <= 0:
        raise ValueError(f"timeout_ms must be >= 0 and max_bytes > 0, got {timeout_ms} and {max_bytes}")
    read = _PartitionRead(client, topic, partition, _ISOLATION_LEVELS[isolation], clock() + timeout_ms, timeout_ms,
                          max_bytes, clock, sleep)
    return read.run(start_offset)


class _FetchOutcome(NamedTuple):
    """One Fetch answer for our partition, with its visible records already picked out."""

    records: list[DecodedRecord]
    next_offset: int  # where the next Fetch starts
    partition_end: int  # the leader's end for our isolation level, as of this answer
    throttle_ms: int  # quota delay the broker asked for


class _PartitionRead:
    """One call of :func:`read_partition`; owned by the calling thread."""

    def __init__(self, client: PartitionReaderClient, topic: str, partition: int, isolation_level: int,
                 deadline_ms: int, timeout_ms: int, max_bytes: int, clock: Callable[[], int],
                 sleep: Callable[[float], None]) -> None:
        self._client = client
        self._topic = topic
        self._partition = partition
        self._isolation_level = isolation_level
        self._deadline_ms = deadline_ms
        self._timeout_ms = timeout_ms
        self._max_bytes = max_bytes
        self._clock = clock
        self._sleep = sleep
        self._leader: int | None = None  # None: look it up in fresh metadata before the next request
        self._where = f"{topic}-{partition}"

    @property
    def _read_committed(self) -> bool:
        return self._isolation_level == READ_COMMITTED

    # ------------------------------------------------------------------------------------------ the read

    def run(self, start_offset: int | None) -> list[DecodedRecord]:
        end = self._with_retries("ListOffsets latest", lambda leader: self._list_offset(leader, LATEST_TIMESTAMP))
        start = start_offset if start_offset is not None else self._with_retries(
            "ListOffsets earliest", lambda leader: self._list_offset(leader, EARLIEST_TIMESTAMP))
        log.debug("reading %s from %d to %d (%s)", self._where, start, end,
                  "read_committed" if self._read_committed else "read_uncommitted")
        records: list[DecodedRecord] = []
        position = start
        while position < end:
            fetch = partial(self._fetch, position=position, end=end)
            outcome = self._with_retries(f"Fetch at offset {position}", fetch)
            records.extend(outcome.records)
            if outcome.next_offset > position:
                position = outcome.next_offset
            elif outcome.throttle_ms > 0:
                self._pause("the broker throttled the fetch", outcome.throttle_ms)
            elif outcome.partition_end < end:
                # A new leader whose end has not caught up with the old one's yet: wait for it.
                self._leader = None
                self._pause(f"the leader's end {outcome.partition_end} is behind {end}",
                            self._client.config.retry_backoff_ms)
            else:
                # Nothing visible in [position, end): e.g. compaction removed every record before an open
                # transaction, and read_committed may not look past it.
                break
        return records

    def _list_offset(self, leader: int, timestamp: int) -> int:
        def body(version: int) -> Mapping[str, Any]:
            return {"isolation_level": self._isolation_level,
                    "topics": [{"name": self._topic,
                                "partitions": [{"partition_index": self._partition, "timestamp": timestamp}]}],
                    "timeout_ms": self._request_timeout_ms()}

        answer = self._client.request(leader, LIST_OFFSETS, body, self._request_timeout_ms(),
                                      min_version=2 if self._read_committed else None)
        part = self._our_partition(answer["topics"], "name", "partitions", "ListOffsets")
        self._raise_for_partition_error(part["error_code"], "ListOffsets")
        return int(part["offset"])

    def _fetch(self, leader: int, position: int, end: int) -> _FetchOutcome:
        def body(version: int) -> Mapping[str, Any]:
            # max_wait_ms 0: everything below the end is there already, so the broker need not wait for more.
            return {"max_wait_ms": 0, "min_bytes": 1, "max_bytes": self._max_bytes,
                    "isolation_level": self._isolation_level,
                    "topics": [{"topic": self._topic, "partitions": [
                        {"partition": self._partition, "fetch_offset": position,
                         "partition_max_bytes": self._max_bytes}]}]}

        answer = self._client.request(leader, FETCH, body, self._request_timeout_ms())
        part = self._our_partition(answer["responses"], "topic", "partitions", "Fetch")
        self._raise_for_partition_error(part["error_code"], f"Fetch at offset {position}")
        aborted = [(int(a["producer_id"]), int(a["first_offset"])) for a in part["aborted_transactions"] or ()]
        data = part["records"] or b""
        try:
            batches = decode_batches(data)  # checks every batch's CRC-32C and framing before any record is used
        except ProtocolError as exc:
            # Not retried (as the Java consumer's CorruptRecordException): the leader would send the same bytes.
            raise ProtocolError(
                f"corrupt record batch in the Fetch response for {self._where} at offset {position} from node "
                f"{leader}: {exc}. Nothing from it was used; check the leader's log segment for that offset "
                "(kafka-dump-log.sh --deep-iteration reports isValid: false) or restore the replica") from exc
        if data and not batches:
            # Fetch v3+ returns a first batch larger than max_bytes whole (KIP-74): a cut one is a broken answer.
            raise ProtocolError(f"the Fetch response for {self._where} at offset {position} holds {len(data)} bytes "
                                "but not one whole record batch")
        visible = visible_records(batches, aborted, read_committed=self._read_committed, start_offset=position,
                                  end_offset=end)
        partition_end = part["last_stable_offset"] if self._read_committed else part["high_watermark"]
        return _FetchOutcome(visible.records, visible.next_offset, int(partition_end),
                             int(answer.get("throttle_time_ms", 0)))

    # ------------------------------------------------------------------------------------------ leader, retries

    def _leader_id(self) -> int:
        if self._leader is not None:
            return self._leader
        metadata = self._client.fetch_metadata([self._topic], self._request_timeout_ms(),
                                                allow_auto_topic_creation=False)
        error = metadata.topic_error(self._topic)
        if error is not None:
            raise error
        if self._partition not in (metadata.partitions_for(self._topic) or ()):
            raise UnknownTopicOrPartitionError(f"topic {self._topic!r} has no partition {self._partition}",
                                               context=f"Metadata for {self._where}")
        leader = metadata.leader_for(self._topic, self._partition)
        if leader is None:
            raise LeaderNotAvailableError(context=f"Metadata for {self._where}")
        self._leader = leader
        return leader

    def _with_retries(self, what: str, step: Callable[[int], _T]) -> _T:
        """Run ``step(leader)``; on a metadata-class error or a lost connection, back off, find the leader again
        and retry until the deadline."""
        while True:
            try:
                return step(self._leader_id())
            except (BrokerError, KafkaConnectionError, KafkaTimeoutError) as exc:
                if isinstance(exc, BrokerError) and exc.code not in RETRY_WITH_NEW_METADATA_CODES:
                    raise
                self._leader = None
                self._pause(f"{what} for {self._where} failed: {exc}", self._client.config.retry_backoff_ms, exc)

    def _pause(self, why: str, wait_ms: int, cause: KafkaError | None = None) -> None:
        """Sleep ``wait_ms`` before trying again, or raise KafkaTimeoutError if that would pass the deadline."""
        if self._clock() + wait_ms >= self._deadline_ms:
            raise KafkaTimeoutError(f"could not read {self._where} within {self._timeout_ms} ms: {why}") from cause
        log.debug("reading %s: %s; trying again in %d ms", self._where, why, wait_ms)
        self._sleep(wait_ms / 1000)

    def _request_timeout_ms(self) -> int:
        remaining = self._deadline_ms - self._clock()
        if remaining <= 0:
            raise KafkaTimeoutError(f"could not read {self._where} within {self._timeout_ms} ms")
        return min(remaining, self._client.config.request_timeout_ms)

    # ------------------------------------------------------------------------------------------ answers

    def _our_partition(self, topics: Sequence[Mapping[str, Any]], name_key: str, partitions_key: str,
                       api: str) -> Mapping[str, Any]:
        for t in topics:
            if t[name_key] == self._topic:
                partitions: Sequence[Mapping[str, Any]] = t[partitions_key]
                for p in partitions:
                    if p["partition_index"] == self._partition:
                        return p
        raise ProtocolError(f"the {api} response does not mention {self._where}, which it was asked for")

    def _raise_for_partition_error(self, code: int, what: str) -> None:
        raise_for_code(code, None, f"{what} for {self._where}")
