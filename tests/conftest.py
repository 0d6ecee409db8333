"""Session fixtures: a real Kafka broker, a topic factory, a real Spark session, and independent read-back.

Everything written by the code under test is read back with clients that share none of its code:
confluent-kafka (librdkafka) and Spark's own ``format("kafka")`` source.
"""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars, spark_connector_jars


def _unwind_on_sigterm() -> None:
    """Make SIGTERM (CI cancelling, `kill`) unwind like Ctrl-C, so fixture teardown stops brokers and deletes data.

    A SIGKILL cannot be caught: then the kernel kills the JVMs (PR_SET_PDEATHSIG) and the next run sweeps the
    data folder.
    """

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _raise)


@pytest.fixture(scope="session")
def kafka() -> Iterator[KafkaCluster]:
    """A single-node KRaft broker for the whole session, on free ports.

    Its Kafka release is ``KAFKA_VERSION`` (default 4.4.0) and a 4.x cluster's transaction.version is
    ``KAFKA_TRANSACTION_VERSION`` (default: the release's); ``make test-versions`` runs the core set that way.
    """
    _unwind_on_sigterm()
    fetch_jars()
    cluster = KafkaCluster(size=1).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def bootstrap(kafka: KafkaCluster) -> str:
    return kafka.bootstrap_servers


def create_topic(bootstrap_servers: str, name: str, partitions: int = 3, replication: int = 1,
                 config: dict[str, str] | None = None) -> str:
    """Create a topic with confluent-kafka's admin client and wait until it exists."""
    # NewTopic is re-exported by confluent_kafka.admin without being listed in its stubs' __all__.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication, config=config or {})],
        operation_timeout=30,
    )
    futures[name].result(timeout=60)
    # Creation is acknowledged by the controller before every broker has the metadata: wait until it is visible.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        md = admin.list_topics(name, timeout=10)
        topic = md.topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
            p.leader >= 0 for p in topic.partitions.values()
        ):
            return name
        time.sleep(0.05)  # poll interval of a condition wait
    raise AssertionError(f"topic {name} never became visible with {partitions} partitions within 60 s")


@pytest.fixture
def topic_factory(bootstrap: str) -> Callable[..., str]:
    """``topic_factory(partitions=3, replication=1, config=None) -> name``: a fresh, uniquely named topic."""

    def make(partitions: int = 3, replication: int = 1, config: dict[str, str] | None = None) -> str:
        return create_topic(bootstrap, f"t-{uuid.uuid4().hex[:12]}", partitions, replication, config)

    return make


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90.0, interval: float = 0.1) -> float:
    """Poll ``check`` until true; return the seconds it took. Raises naming ``what`` after ``timeout``."""
    started = time.monotonic()
    while not check():
        if time.monotonic() - started > timeout:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)  # poll interval of a condition wait
    return time.monotonic() - started


def pause_process(pid: int, timeout: float = 10.0) -> None:
    """SIGSTOP ``pid`` and return once every thread of it is stopped: kill() returns before a busy JVM's threads
    have all stopped, and a broker thread still running then can answer a request sent "after" the pause."""
    os.kill(pid, signal.SIGSTOP)
    deadline = time.monotonic() + timeout
    while True:
        states = []
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    states.append(f.read().rsplit(")", 1)[1].split()[0])  # the field after "(comm)"
            except FileNotFoundError:
                continue  # a thread that ended meanwhile
        if all(state in "tTZX" for state in states):
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"process {pid} did not stop within {timeout:g} s of SIGSTOP: thread states {states}")
        time.sleep(0.001)  # polling the kernel's thread states, not waiting out a guess


@dataclass(frozen=True)
class ConsumedRecord:
    """One record as an independent client (librdkafka) saw it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def read_topic(bootstrap_servers: str, topic: str, isolation: str = "read_committed",
               timeout: float = 60.0) -> list[ConsumedRecord]:
    """Every record of ``topic`` visible at ``isolation``, sorted by (partition, offset), read with confluent-kafka.

    Reads until each partition reports end-of-partition (for read_committed: the last stable offset), so the call
    returns as soon as everything visible was read; it raises if that takes longer than ``timeout``.
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers,
        "group.id": f"readback-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": isolation,
        "auto.offset.reset": "earliest",
    })
    try:
        md = consumer.list_topics(topic, timeout=10)
        partitions = sorted(md.topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        at_eof: set[int] = set()
        records: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout
        while len(at_eof) < len(partitions):
            if time.monotonic() > deadline:
                raise AssertionError(f"reading {topic} did not reach the end of partitions "
                                     f"{sorted(set(partitions) - at_eof)} within {timeout}s")
            for msg in consumer.consume(num_messages=10000, timeout=1.0):
                err = msg.error()
                msg_topic, partition, offset = msg.topic(), msg.partition(), msg.offset()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                        at_eof.add(partition)
                        continue
                    raise AssertionError(f"read-back error: {err}")
                assert msg_topic is not None and partition is not None and offset is not None  # set on every message
                at_eof.discard(partition)
                # A consumed message's headers are a list of (str, bytes | None), or None when it has none.
                headers = cast("list[tuple[str, bytes | None]] | None", msg.headers())
                records.append(ConsumedRecord(
                    topic=msg_topic, partition=partition, offset=offset, key=msg.key(),
                    value=msg.value(), headers=tuple(headers or ()), timestamp_ms=msg.timestamp()[1],
                ))
        return sorted(records, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


@pytest.fixture
def readback(bootstrap: str) -> Callable[..., list[ConsumedRecord]]:
    """``readback(topic, isolation="read_committed") -> [ConsumedRecord]`` through confluent-kafka."""

    def read(topic: str, isolation: str = "read_committed", timeout: float = 60.0) -> list[ConsumedRecord]:
        return read_topic(bootstrap, topic, isolation, timeout)

    return read


def local_spark(app_name: str, driver_memory: str, conf: dict[str, str] | None = None) -> Iterator[Any]:
    """A real local Spark session (2 threads, up to 3 attempts per task) with Spark's Kafka connector on the
    classpath, stopped when the generator closes; ``conf``: further Spark settings."""
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (the venv's), which has pyarrow and the package.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2,3]")
        .appName(app_name)
        .config("spark.jars", ",".join(str(p) for p in spark_connector_jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
    )
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark(kafka: KafkaCluster) -> Iterator[Any]:
    """The session's Spark: Python workers reused between tasks, as Spark's default."""
    yield from local_spark("spark-kafka-sink-tests", "3g",
                           {"spark.sql.shuffle.partitions": "4", "spark.python.worker.reuse": "true"})


def spark_read_topic(spark_session: Any, bootstrap_servers: str, topic: str) -> Any:
    """The topic as a DataFrame read by Spark's own Kafka source, read_committed."""
    return (
        spark_session.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .option("kafka.isolation.level", "read_committed")
        .option("includeHeaders", "true")
        .load()
    )
