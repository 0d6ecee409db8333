"""The cluster metadata cache: brokers, topics, partitions and their leaders, as the last Metadata answer said.

    md = Metadata(config)                      # usually owned by a NetworkClient (client.metadata)
    md.add_topic("t", now_ms)                  # a topic of interest: included in every refresh
    md.touch_topic("t", now_ms)                # it is still used (metadata.max.idle.ms starts again)
    md.leader_for("t", 0) -> 1 | None          # None: unknown topic/partition or no leader right now
    md.partitions_for("t") -> [0, 1, 2] | None # None: topic not (yet) known
    md.topic_error("t") -> BrokerError | None  # e.g. UnknownTopicOrPartitionError, kept until a refresh clears it
    md.request_update() -> version             # ask for a refresh; wait_for_update(version, timeout_ms) blocks
    md.needs_update(now_ms) / time_to_next_update(now_ms)   # metadata.max.age.ms, retry.backoff.ms
    md.update(response_body, now_ms)           # a decoded Metadata response (any version)
    md.update_partition_leadership(leaders, node_endpoints)   # new leaders a Produce answer named (KIP-951)
    md.fatal_error -> KafkaError | None        # a connection failed in a way reconnecting cannot fix
    md.connection_error -> KafkaError | None   # why the last failed connection attempt failed (for timeouts)

The network client refreshes the cache from ``poll()`` when it is due (as Java's NetworkClient does) and from the
blocking ``fetch_metadata``. Refreshes ask for the topics of interest with allow_auto_topic_creation from
allow.auto.create.topics (default true, the Java producer's), so the first send to a new topic can create it
where the broker allows that; with false a missing topic stays missing (UNKNOWN_TOPIC_OR_PARTITION).

Idle topics (as Java's ProducerMetadata): every send renews its topic's expiry, now + metadata.max.idle.ms. An
update drops from the topics of interest, and from the cache, each topic whose expiry passed, so a producer that
once wrote to many topics stops asking for them all; a topic not yet in the cache is kept until it arrives. The
next send to a dropped topic adds it again (and waits for its metadata, as a first send does).

Fatal errors (as the Java client's ``Metadata.fatalError``): when a connection fails with an error whose ``fatal``
flag is set -- SASL authentication failed, untrusted certificate, host name mismatch, TLS against a plaintext
port -- the network client records it here with :meth:`Metadata.set_fatal_error`. It stays (the configuration is
wrong; reconnecting would only repeat it), wakes every thread waiting for an update, and the producer raises it
from the waiting call instead of a timeout that would not say why.

New leaders between refreshes (KIP-951, as Java's ``Metadata.updatePartitionLeadership``): a broker that is no
longer a partition's leader answers Produce (v10+) with NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH and the new
leader's id and epoch, plus the addresses of such leaders. :meth:`Metadata.update_partition_leadership` applies
them to the cached partitions at once, so a retry goes to the new leader without waiting for a refresh (which
``retry.backoff.ms`` may hold back). A new leader is taken only with a higher epoch than the cached one, for a
partition still cached, and when its address is known; a full refresh still follows.

Thread-safety: producer user threads read the cache and wait for updates while the sender thread updates it,
so every field below is guarded by ``_lock`` (an RLock under the ``_updated`` condition).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from spark_kafka_sink.errors import BrokerError, KafkaError, error_for_code
from spark_kafka_sink.net.config import NetConfig, format_address
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.cluster import NO_AUTHORIZED_OPERATIONS

__all__ = ["BrokerInfo", "PartitionInfo", "TopicInfo", "Metadata"]


@dataclass(frozen=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return format_address(self.host, self.port)


@dataclass(frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader_id: int | None  # None when the partition has no leader right now
    leader_epoch: int  # -1 when unknown
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline_replicas: tuple[int, ...] = ()
    error_code: int = NO_ERROR  # or e.g. LEADER_NOT_AVAILABLE


@dataclass(frozen=True)
class TopicInfo:
    name: str
    error_code: int  # NO_ERROR, or e.g. UNKNOWN_TOPIC_OR_PARTITION / LEADER_NOT_AVAILABLE while being created
    partitions: Mapping[int, PartitionInfo]
    topic_id: Any = None  # uuid.UUID on Metadata v10+
    is_internal: bool = False
    # What this client's principal may do with the topic: a bitfield, bit ``1 << AclOperation`` (see
    # protocol.messages.cluster). None unless the Metadata request asked for it (v8+).
    authorized_operations: int | None = None


class Metadata:
    """Thread-safe cluster metadata cache (see the module docstring)."""

    def __init__(self, config: NetConfig) -> None:
        self._max_age_ms = config.metadata_max_age_ms
        self._max_idle_ms = config.metadata_max_idle_ms
        self._backoff_ms = config.retry_backoff_ms
        self._allow_auto_create = config.allow_auto_create_topics
        self._lock = threading.RLock()
        self._updated = threading.Condition(self._lock)  # notified after every update / failed update
        # All below: guarded by _lock.
        self._brokers: dict[int, BrokerInfo] = {}
        self._topics: dict[str, TopicInfo] = {}
        self._interest: set[str] = set()
        # topic of interest -> when it expires (last use + metadata.max.idle.ms). Also written by touch_topic
        # without the lock: one dict store per send, atomic; update() reads it under the lock.
        self._expiry_ms: dict[str, int] = {}
        self._cluster_id: str | None = None
        self._controller_id: int | None = None
        self._need_update = True  # nothing known yet
        self._last_refresh_ms: int | None = None  # last successful or failed attempt (for the backoff)
        self._last_success_ms: int | None = None
        self._version = 0  # bumped by every successful update
        self._closed = False
        self._fatal_error: KafkaError | None = None  # written once (under _lock); see fatal_error
        self._connection_error: KafkaError | None = None  # see connection_error

    # ----------------------------------------------------------------------------------------- reading

    @property
    def version(self) -> int:
        # Read without the lock: one int, bumped under it once an update's data is in place; the producer
        # compares it on every send. A read racing an update is the version just before or just after it.
        return self._version

    @property
    def cluster_id(self) -> str | None:
        with self._lock:
            return self._cluster_id

    @property
    def controller_id(self) -> int | None:
        with self._lock:
            return self._controller_id

    def brokers(self) -> dict[int, BrokerInfo]:
        with self._lock:
            return dict(self._brokers)

    def broker(self, node_id: int) -> BrokerInfo | None:
        with self._lock:
            return self._brokers.get(node_id)

    def topic(self, topic: str) -> TopicInfo | None:
        with self._lock:
            return self._topics.get(topic)

    def topics(self) -> dict[str, TopicInfo]:
        with self._lock:
            return dict(self._topics)

    def partitions_for(self, topic: str) -> list[int] | None:
        """Sorted partition numbers of ``topic``; None while the topic is unknown or in error."""
        with self._lock:
            info = self._topics.get(topic)
            if info is None or info.error_code != NO_ERROR or not info.partitions:
                return None
            return sorted(info.partitions)

    def partition(self, topic: str, partition: int) -> PartitionInfo | None:
        with self._lock:
            info = self._topics.get(topic)
            return None if info is None else info.partitions.get(partition)

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The leader's node id, or None (unknown topic/partition, no leader, or a leader we have no address for)."""
        with self._lock:  # (partition() inlined: the sender asks twice per partition per round)
            info = self._topics.get(topic)
            part = None if info is None else info.partitions.get(partition)
            if part is None or part.leader_id is None or part.leader_id not in self._brokers:
                return None
            return part.leader_id

    def leader_epoch_for(self, topic: str, partition: int) -> int:
        """The cached leader epoch of the partition, -1 when unknown (or the broker does not report epochs)."""
        with self._lock:
            info = self._topics.get(topic)
            part = None if info is None else info.partitions.get(partition)
            return -1 if part is None else part.leader_epoch

    def topic_error(self, topic: str) -> BrokerError | None:
        """The error the last refresh reported for ``topic`` (as an exception to raise or inspect), else None."""
        with self._lock:
            info = self._topics.get(topic)
            if info is None or info.error_code == NO_ERROR:
                return None
        cls = error_for_code(info.error_code)
        return cls(context=f"Metadata for topic {topic}")

    # ----------------------------------------------------------------------------------------- topics of interest

    def add_topic(self, topic: str, now_ms: int) -> bool:
        """Include ``topic`` in refreshes, used at ``now_ms``; True (and a refresh is requested) if it was new."""
        with self._lock:
            self._expiry_ms[topic] = now_ms + self._max_idle_ms
            if topic in self._interest:
                return False
            self._interest.add(topic)
            if topic not in self._topics:
                self._need_update = True
                # As Java's requestUpdateForNewTopics: a topic never asked for skips the retry.backoff.ms since
                # the last refresh (e.g. the bootstrap one), so the first send to it does not wait ~100 ms.
                # Once per topic: a missing one still backs off between its later refreshes.
                self._last_refresh_ms = None
            return True

    def touch_topic(self, topic: str, now_ms: int) -> None:
        """``topic`` was sent to at ``now_ms``: renew its expiry (cheap: called per record; no lock, see above)."""
        self._expiry_ms[topic] = now_ms + self._max_idle_ms

    def remove_topic(self, topic: str) -> None:
        with self._lock:
            self._interest.discard(topic)
            self._expiry_ms.pop(topic, None)

    def topics_of_interest(self) -> list[str]:
        with self._lock:
            return sorted(self._interest)

    def request_body(self) -> dict[str, Any]:
        """A Metadata request body for the topics of interest (none: brokers only), allow_auto_topic_creation as
        allow.auto.create.topics says."""
        with self._lock:
            topics = [{"name": t} for t in sorted(self._interest)]
        return {"topics": topics, "allow_auto_topic_creation": self._allow_auto_create}

    @property
    def allow_auto_create_topics(self) -> bool:
        return self._allow_auto_create

    # ----------------------------------------------------------------------------------------- refresh policy

    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the version to wait beyond."""
        with self._lock:
            self._need_update = True
            return self._version

    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until a refresh is due (0 = now): requested, or older than metadata.max.age.ms, and not
        within retry.backoff.ms of the last attempt."""
        with self._lock:
            if self._last_success_ms is None or self._need_update:
                due = 0
            else:
                due = max(0, self._last_success_ms + self._max_age_ms - now_ms)
            backoff = 0 if self._last_refresh_ms is None else max(0, self._last_refresh_ms + self._backoff_ms - now_ms)
            return max(due, backoff)

    def needs_update(self, now_ms: int) -> bool:
        return self.time_to_next_update(now_ms) == 0

    def failed_update(self, now_ms: int) -> None:
        """A refresh attempt failed: back off retry.backoff.ms before the next one; wake waiters to re-check."""
        with self._updated:
            self._last_refresh_ms = now_ms
            self._updated.notify_all()

    def wait_for_update(self, version: int, timeout_ms: int) -> bool:
        """Block until the version exceeds ``version`` (True) or ``timeout_ms`` passes / the cache closes / a fatal
        error is recorded (False)."""
        with self._updated:
            return self._updated.wait_for(
                lambda: self._version > version or self._closed or self._fatal_error is not None,
                timeout_ms / 1000) and self._version > version

    @property
    def fatal_error(self) -> KafkaError | None:
        """The first connection error that reconnecting cannot fix, else None (see the module docstring)."""
        # Read without the lock: one reference, written once; the producer checks it on every send.
        return self._fatal_error

    @property
    def connection_error(self) -> KafkaError | None:
        """Why the last connection that failed did, until a Metadata answer arrives: what a caller that timed out
        waiting for metadata reports (e.g. a broker refusing connections, a handshake waiting for a KDC, or a link
        slower than request.timeout.ms). A connection merely coming up does not clear it: on a slow link each one
        comes up and then times out its Metadata request, and the caller must still be told why."""
        return self._connection_error  # one reference, written by the network thread

    def set_connection_error(self, error: KafkaError | None) -> None:
        self._connection_error = error

    def set_fatal_error(self, error: KafkaError) -> None:
        """Record a fatal connection error (the first one wins) and wake every waiter."""
        with self._updated:
            if self._fatal_error is None:
                self._fatal_error = error
            self._updated.notify_all()

    def close(self) -> None:
        """Wake every waiter; they see no new version."""
        with self._updated:
            self._closed = True
            self._updated.notify_all()

    # ----------------------------------------------------------------------------------------- update

    def update(self, body: Mapping[str, Any], now_ms: int) -> None:
        """Apply a decoded Metadata response: brokers replaced; each topic in the answer replaced.

        A partition whose leader epoch went backwards (an answer from a broker with stale metadata) keeps its
        cached entry, as the Java client does.
        """
        brokers = {
            int(b["node_id"]): BrokerInfo(int(b["node_id"]), str(b["host"]), int(b["port"]), b.get("rack"))
            for b in body["brokers"]
        }
        controller = body.get("controller_id", -1)
        with self._updated:
            topics = dict(self._topics)
            for t in body["topics"]:
                name = t.get("name")
                if name is None:
                    continue  # topics asked by id only; we ask by name
                topics[name] = self._merge_topic(name, t, topics.get(name))
            for name in self._expired_topics(topics, now_ms):
                self._interest.discard(name)
                self._expiry_ms.pop(name, None)
                topics.pop(name, None)
            self._brokers = brokers
            self._topics = topics
            self._cluster_id = body.get("cluster_id")
            self._controller_id = None if controller is None or controller < 0 else int(controller)
            self._need_update = False
            self._last_refresh_ms = now_ms
            self._last_success_ms = now_ms
            self._connection_error = None  # an answer arrived: no failure stands between a waiter and metadata
            self._version += 1
            self._updated.notify_all()

    def update_partition_leadership(self, leaders: Mapping[tuple[str, int], tuple[int, int]],
                                    node_endpoints: Iterable[Mapping[str, Any]] = ()) -> set[tuple[str, int]]:
        """Apply new leaders a Produce answer named: ``leaders`` maps (topic, partition) to (leader id, leader
        epoch); ``node_endpoints``: the answer's addresses of those leaders (decoded: node_id, host, port, rack).
        Returns the partitions updated (module docstring: only a higher epoch, a cached partition, a leader whose
        address is known). The version goes up when anything changed, as after a refresh."""
        nodes = [BrokerInfo(int(e["node_id"]), str(e["host"]), int(e["port"]), e.get("rack"))
                 for e in node_endpoints if int(e["node_id"]) >= 0]
        with self._updated:
            brokers = {**{b.node_id: b for b in nodes}, **self._brokers}  # known addresses win, as Java's
            topics = dict(self._topics)
            updated: set[tuple[str, int]] = set()
            for (topic, index), (leader, epoch) in leaders.items():
                info = topics.get(topic)
                cached = None if info is None else info.partitions.get(index)
                if (info is None or cached is None or leader < 0 or epoch <= cached.leader_epoch
                        or leader not in brokers):
                    continue
                partitions = dict(info.partitions)
                partitions[index] = replace(cached, leader_id=leader, leader_epoch=epoch)
                topics[topic] = info = replace(info, partitions=partitions)
                updated.add((topic, index))
            if updated:
                self._brokers = brokers
                self._topics = topics
                self._version += 1
                self._updated.notify_all()
            return updated

    def _expired_topics(self, topics: Mapping[str, TopicInfo], now_ms: int) -> list[str]:
        # Caller holds _lock. Java's retainTopic: a topic still waiting for its first metadata stays.
        return [name for name in self._interest
                if name in topics and self._expiry_ms.get(name, now_ms) <= now_ms]

    @staticmethod
    def _merge_topic(name: str, t: Mapping[str, Any], old: TopicInfo | None) -> TopicInfo:
        operations = int(t.get("topic_authorized_operations", NO_AUTHORIZED_OPERATIONS))
        partitions: dict[int, PartitionInfo] = {}
        for p in t["partitions"]:
            index = int(p["partition_index"])
            leader = int(p["leader_id"])
            new = PartitionInfo(
                topic=name,
                partition=index,
                leader_id=leader if leader >= 0 else None,
                leader_epoch=int(p.get("leader_epoch", -1)),
                replicas=tuple(p["replica_nodes"]),
                isr=tuple(p["isr_nodes"]),
                offline_replicas=tuple(p.get("offline_replicas") or ()),
                error_code=int(p["error_code"]),
            )
            cached = None if old is None else old.partitions.get(index)
            if cached is not None and 0 <= new.leader_epoch < cached.leader_epoch:
                new = cached  # stale answer: keep what a newer epoch told us
            partitions[index] = new
        return TopicInfo(
            name=name,
            error_code=int(t["error_code"]),
            partitions=partitions,
            topic_id=t.get("topic_id"),
            is_internal=bool(t.get("is_internal", False)),
            authorized_operations=None if operations == NO_AUTHORIZED_OPERATIONS else operations,
        )

    def __repr__(self) -> str:
        with self._lock:
            return (f"Metadata(version={self._version}, cluster_id={self._cluster_id!r}, "
                    f"brokers={sorted(self._brokers)}, topics={sorted(self._topics)})")
