"""Helpers for the cluster fault tests: who leads what, condition waits with deadlines, a paced writer that
remembers what was acknowledged, and the lost / duplicated / order check every test prints."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka.admin import AdminClient

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import ConsumedRecord, create_topic, read_topic, wait_for


def admin_for(cluster: KafkaCluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": cluster.bootstrap_of(cluster.running_node_ids())})


def partition_state(cluster: KafkaCluster, topic: str, partition: int) -> tuple[int, list[int], list[int]]:
    """(leader, replicas in preferred order, ISR) as the running nodes report it."""
    p = admin_for(cluster).list_topics(topic, timeout=10).topics[topic].partitions[partition]
    return p.leader, list(p.replicas), list(p.isrs)


def leader_of(cluster: KafkaCluster, topic: str, partition: int) -> int:
    return partition_state(cluster, topic, partition)[0]


def wait_full_isr(cluster: KafkaCluster, topic: str, partitions: Iterable[int]) -> float:
    return wait_for(f"{topic} {list(partitions)} fully in sync", lambda: all(
        sorted(partition_state(cluster, topic, p)[2]) == [1, 2, 3] for p in partitions))


def java_hash(text: str) -> int:
    """Java's String.hashCode (32-bit, signed)."""
    h = 0
    for ch in text:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def transaction_coordinator(cluster: KafkaCluster, transactional_id: str) -> int:
    """The node leading ``__transaction_state`` partition abs(hashCode) % partitions: the id's coordinator."""
    return _coordinator(cluster, "__transaction_state", transactional_id)


def group_coordinator(cluster: KafkaCluster, group_id: str) -> int:
    """The node leading ``__consumer_offsets`` partition abs(hashCode) % partitions: the group's coordinator."""
    return _coordinator(cluster, "__consumer_offsets", group_id)


def _coordinator(cluster: KafkaCluster, internal_topic: str, key: str) -> int:
    md = admin_for(cluster).list_topics(internal_topic, timeout=10).topics[internal_topic]
    h = java_hash(key)
    partition = 0 if h == -(1 << 31) else abs(h) % len(md.partitions)
    return int(md.partitions[partition].leader)


def new_topic(cluster: KafkaCluster, partitions: int = 3) -> str:
    """A topic replicated to every node, up to 3 (on the 3-node cluster min.insync.replicas=2 is its default)."""
    return create_topic(cluster.bootstrap_servers, f"c-{uuid.uuid4().hex[:10]}", partitions,
                        replication=min(3, len(cluster.nodes)))


def end_offsets(cluster: KafkaCluster, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
    """Per partition: the log end offset (read_uncommitted) or the last stable offset (read_committed).

    A leader moving, or not yet known to the broker asked (librdkafka does not flag these as retriable here), is
    asked again for up to 30 s."""
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    transient = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
               KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._TIMED_OUT}

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_of(cluster.running_node_ids()),
                         "group.id": f"wm-{uuid.uuid4().hex}", "isolation.level": isolation})
    deadline = time.monotonic() + 30
    try:
        while True:
            try:
                partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
                return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                        for p in sorted(partitions)}
            except KafkaException as exc:
                error = exc.args[0]
                if not (error.retriable() or error.code() in transient) or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)  # poll interval of a condition wait
    finally:
        consumer.close()


@dataclass
class Unit:
    """One send (a record, or one send_batch call): the ids it carries, when it was queued and completed."""

    ids: range
    queued_at: float
    completed_at: float = 0.0
    error: BaseException | None = None


@dataclass
class PacedWriter:
    """Writes ids 0, 1, 2 ... to ``topic`` (value = the id, partition = id % partitions) at about ``rate`` ids/s
    until stopped, with ``send_batch`` (``batch_rows`` per call) or ``send``; keeps every unit's outcome."""

    producer: KafkaProducer
    topic: str
    partitions: int
    mode: str  # "send_batch" or "send"
    rate: float
    batch_rows: int = 1000
    units: list[Unit] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None

    def start(self) -> PacedWriter:
        self._thread = threading.Thread(target=self._run, name="paced-writer", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 300.0) -> None:
        """Stop queueing, flush and wait for every unit's outcome."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join(timeout)
        self.producer.flush(timeout)
        if self.failure is not None:
            raise AssertionError(f"the writer thread failed: {self.failure!r}") from self.failure

    def _run(self) -> None:
        started = time.monotonic()
        next_id = 0
        try:
            while not self._stop.is_set():
                if self.mode == "send_batch":
                    ids = range(next_id, next_id + self.batch_rows)
                    table = pa.table({
                        "value": pa.array([str(i).encode() for i in ids], pa.binary()),
                        "partition": pa.array([i % self.partitions for i in ids], pa.int32()),
                    })
                    unit = Unit(ids, time.monotonic())
                    self._track(unit, self.producer.send_batch(self.topic, table))
                else:
                    ids = range(next_id, next_id + 1)
                    unit = Unit(ids, time.monotonic())
                    self._track(unit, self.producer.send(self.topic, value=str(next_id).encode(),
                                                         partition=next_id % self.partitions))
                next_id = ids.stop
                ahead = started + next_id / self.rate - time.monotonic()
                if ahead > 0:
                    time.sleep(ahead)  # pacing the load, not waiting for a condition
        except BaseException as exc:  # noqa: B036 -- reported by stop()
            self.failure = exc

    def _track(self, unit: Unit, future: Future[Any]) -> None:
        with self._lock:
            self.units.append(unit)

        def done(f: Future[Any]) -> None:
            unit.error = f.exception()
            unit.completed_at = time.monotonic()

        future.add_done_callback(done)

    def snapshot(self) -> list[Unit]:
        with self._lock:
            return list(self.units)

    def acked_after(self, moment: float) -> int:
        """How many units queued at or after ``moment`` were acknowledged."""
        return sum(1 for u in self.snapshot() if u.queued_at >= moment and u.completed_at and u.error is None)

    def recovery_after(self, moment: float) -> float:
        """Seconds from ``moment`` to the first acknowledgement of a unit queued at or after it."""
        done = [u.completed_at for u in self.snapshot()
                if u.queued_at >= moment and u.completed_at and u.error is None]
        return min(done) - moment if done else float("inf")

    def acked_ids(self) -> set[int]:
        return {i for u in self.snapshot() if u.completed_at and u.error is None for i in u.ids}

    def failed_ids(self) -> set[int]:
        return {i for u in self.snapshot() if u.error is not None for i in u.ids}

    def errors(self) -> list[BaseException]:
        return [u.error for u in self.snapshot() if u.error is not None]


@dataclass
class Verdict:
    expected: int
    read: int
    lost: int
    duplicated: int
    out_of_order: int
    extra: int

    def report(self, name: str, recovery_s: float | None = None) -> None:
        recovery = f", recovery {recovery_s:.1f} s" if recovery_s is not None else ""
        print(f"\n[{name}] expected {self.expected}, read {self.read}: lost {self.lost}, duplicated "
              f"{self.duplicated}, out of order {self.out_of_order}, unexpected {self.extra}{recovery}")


def check_ids(records: list[ConsumedRecord], expected: set[int], partitions: int | None = None,
              allowed_extra: set[int] | frozenset[int] = frozenset()) -> Verdict:
    """Compare what a consumer read (values = ids) with ``expected``. With ``partitions``, id i must be in
    partition i % partitions and each partition's ids must ascend (records written in order). ``allowed_extra``:
    ids whose send failed, which may or may not have been written."""
    seen = Counter(int(r.value or b"-1") for r in records)
    lost = len(expected - set(seen))
    duplicated = sum(n - 1 for n in seen.values() if n > 1)
    extra = len(set(seen) - expected - set(allowed_extra))
    out_of_order = 0
    by_partition: dict[int, list[int]] = {}
    for r in records:
        by_partition.setdefault(r.partition, []).append(int(r.value or b"-1"))
    for p, ids in by_partition.items():
        if partitions is not None:
            out_of_order += sum(1 for i in ids if i % partitions != p)
        out_of_order += sum(1 for a, b in zip(ids, ids[1:], strict=False) if b <= a)
    return Verdict(len(expected), len(records), lost, duplicated, out_of_order, extra)


def out_of_order(records: list[ConsumedRecord], rows: int, tasks: int) -> int:
    """Within each Kafka partition, the ids from one Spark task must ascend (each task writes its rows in order)."""
    last: dict[tuple[int, int], int] = {}
    wrong = 0
    for r in records:
        i = int(r.value or b"-1")
        key = (r.partition, i * tasks // rows)
        wrong += key in last and i <= last[key]
        last[key] = i
    return wrong


def read_all(cluster: KafkaCluster, topic: str, isolation: str = "read_committed") -> list[ConsumedRecord]:
    return read_topic(cluster.bootstrap_servers, topic, isolation, timeout=180.0)
