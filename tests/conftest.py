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
from spark_kafka_sink.testing.broker_jars import fetch_jars, spark_avro_jars, spark_connector_jars
from spark_kafka_sink.testing.registry import TestRegistry


def _unwind_on_sigterm() -> None:
    """Make SIGTERM (CI cancelling, `kill`) unwind like Ctrl-C, so fixture teardown stops brokers and deletes data.

    A SIGKILL cannot be caught: then the kernel kills the JVMs (PR_SET_PDEATHSIG) and the next run sweeps the
    data folder.
    """

    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, _raise)


# make test runs the suite in several processes (pytest-xdist, --dist loadgroup): a process starts the session's
# broker, Spark session and secure broker the first time one of its tests asks for them. These groups keep each of
# those to as few processes as the parallelism needs: every test of a module shares its process (module fixtures
# start once), the secure broker's tests all share one, the Spark tests share SPARK_PROCESSES sessions, and the
# schema registry's other tests one registry. make test-cluster runs in processes too: the tests on the 3-node
# cluster share one (the cluster starts once), the tests on a Spark cluster of their own (standalone, Connect)
# another, and each other module goes where there is room. make test-network's tests share one process (their
# cluster on network namespaces starts once).
SPARK_PROCESSES = 2
_THREE_NODE_FIXTURES = frozenset({"kafka3", "cluster3"})
_SPARK_CLUSTER_FIXTURES = frozenset({"standalone", "server"})
_NETWORK_FIXTURES = frozenset({"net_session", "net"})


@pytest.hookimpl(wrapper=True)  # the marks go on before pytest-xdist's own hook reads them into the test ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Iterator[None]:
    if getattr(config.option, "loadgroup", False):  # set in pytest-xdist's workers under --dist loadgroup only
        _group_for_xdist(items)
    yield


def _group_for_xdist(items: list[pytest.Item]) -> None:
    fixtures_of: dict[str, set[str]] = {}  # per module, what any of its tests uses
    for item in items:
        fixtures_of.setdefault(item.nodeid.split("::")[0], set()).update(getattr(item, "fixturenames", ()))
    spark_modules = sorted(module for module, fixtures in fixtures_of.items() if "spark" in fixtures)
    for item in items:
        module = item.nodeid.split("::")[0]
        fixtures = fixtures_of[module]
        if fixtures & _THREE_NODE_FIXTURES:
            group = "three-node-cluster"
        elif fixtures & _NETWORK_FIXTURES:
            group = "network-cluster"  # one cluster on namespaces of its own
        elif fixtures & _SPARK_CLUSTER_FIXTURES:
            group = "spark-clusters"
        elif module.startswith("tests/security/"):
            group = "secure-broker"
        elif module in spark_modules:
            group = f"spark-{spark_modules.index(module) % SPARK_PROCESSES}"
        elif "schema_registry" in fixtures:
            group = "schema-registry"  # one registry JVM for all of them but the Spark ones
        else:
            group = module
        item.add_marker(pytest.mark.xdist_group(group))


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


@pytest.fixture(scope="session")
def schema_registry() -> Iterator[TestRegistry]:
    """A real schema registry (Apicurio Registry, Confluent-compatible API) for the session, on free ports; started
    only when a test asks for it. Its compatibility level is NONE until a test sets one (Confluent's default is
    BACKWARD); tests use subjects of their own (their own topics)."""
    _unwind_on_sigterm()
    registry = TestRegistry().start()
    try:
        yield registry
    finally:
        registry.stop(keep_files=False)


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
    """A real local Spark session (2 threads, up to 3 attempts per task) with Spark's Kafka connector and its Avro
    functions (from_avro) on the classpath, stopped when the generator closes; ``conf``: further Spark settings."""
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter (the venv's), which has pyarrow and the package.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2,3]")
        .appName(app_name)
        .config("spark.jars", ",".join(str(p) for p in [*spark_connector_jars(), *spark_avro_jars()]))
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", driver_memory)
        .config("spark.sql.session.timeZone", "UTC")
        # The driver JVM lives for one test session: the JIT's first tier alone costs less CPU than C2 saves it.
        .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1")
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


@dataclass(frozen=True)
class SparkState:
    """What one test can change in the session's shared Spark and leave behind for the next."""

    conf: dict[str, str]
    temporary_views: frozenset[str]


def spark_state(session: Any) -> SparkState:
    views = frozenset(t.name for t in session.catalog.listTables() if t.isTemporary)
    return SparkState(conf=dict(session.conf.getAll), temporary_views=views)


def _default_setting(session: Any, key: str) -> str | None:
    """An unset setting's value as Spark reads it (its SQL default), or None for a key Spark has no default for."""
    try:
        return cast("str | None", session.conf.get(key))
    except Exception:  # pyspark raises its own error class for a key with no value and no default
        return None


def restore_spark_state(session: Any, before: SparkState) -> list[str]:
    """Put the shared Spark session back as ``before`` found it; return what the test had left changed (empty when
    nothing): running streaming queries (stopped), runtime settings (reset or unset), temporary views (dropped)."""
    leaked = []
    for query in session.streams.active:
        leaked.append(f"streaming query {query.name or query.id} still running (stopped now)")
        query.stop()
    now = spark_state(session)
    for key in sorted(set(now.conf) | set(before.conf)):
        if now.conf.get(key) == before.conf.get(key):
            continue
        if key in before.conf:
            session.conf.set(key, before.conf[key])
        else:
            session.conf.unset(key)
            if _default_setting(session, key) == now.conf[key]:
                continue  # set back to its default value explicitly: nothing a later test can tell apart
        leaked.append(f"Spark setting {key}={now.conf.get(key)!r} (was {before.conf.get(key)!r})")
    for view in sorted(now.temporary_views - before.temporary_views):
        leaked.append(f"temporary view {view}")
        session.catalog.dropTempView(view)
    return leaked


_BROKER_BASELINES: dict[int, dict[tuple[str, str], str]] = {}  # id(cluster) -> its run-time configs at first look


def _run_time_broker_configs(cluster: KafkaCluster) -> dict[tuple[str, str], str]:
    """(node id, name) -> value of each broker config set at run time; node id "" for the cluster-wide default
    (every node reports it; librdkafka cannot name the default resource itself)."""
    # confluent-kafka's stubs leave these re-exports out of confluent_kafka.admin's __all__.
    from confluent_kafka.admin import AdminClient, ConfigResource, ConfigSource, ResourceType  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    resources = [ConfigResource(ResourceType.BROKER, str(node_id)) for node_id in sorted(cluster.running_node_ids())]
    found: dict[tuple[str, str], str] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=30).items():
        for name, entry in future.result(timeout=30).items():
            if entry.source == ConfigSource.DYNAMIC_BROKER_CONFIG.value:
                found[(resource.name, name)] = str(entry.value)
            elif entry.source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value:
                found[("", name)] = str(entry.value)
    return found


def restore_broker_state(cluster: KafkaCluster) -> list[str]:
    """Put the shared broker back as the session found it; return what the test had left changed (empty when
    nothing): a stopped node (started again) and a node's broker config set at run time (deleted or set back). A
    cluster-wide default set at run time is reported, not put back (librdkafka cannot address it)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    leaked = []
    for node_id in sorted(set(cluster.nodes) - set(cluster.running_node_ids())):
        leaked.append(f"broker node {node_id} not running (started again)")
        cluster.start_node(node_id)
    if leaked:
        cluster.wait_ready()
    now = _run_time_broker_configs(cluster)
    baseline = _BROKER_BASELINES.setdefault(id(cluster), now)
    changes: dict[str, list[ConfigEntry]] = {}
    for node, name in sorted(set(now) | set(baseline)):
        was, left = baseline.get((node, name)), now.get((node, name))
        if was == left:
            continue
        where = f"broker {node}" if node else "the cluster-wide default"
        leaked.append(f"{where} config {name}={left!r} (was {was!r})")
        if node:
            op = AlterConfigOpType.SET if was is not None else AlterConfigOpType.DELETE
            changes.setdefault(node, []).append(ConfigEntry(name, was, incremental_operation=op))
    if changes:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        resources = [ConfigResource(ResourceType.BROKER, node, incremental_configs=entries)
                     for node, entries in changes.items()]
        for future in admin.incremental_alter_configs(resources).values():
            future.result(timeout=30)
    return leaked


@pytest.fixture(autouse=True)
def shared_state_guard(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tests share one broker and one Spark session per process; each makes its own topics and transactional ids,
    so records, transactions and commit logs cannot meet. What can leak is the shared processes' own state: after
    each test that used them, this puts back what the test changed (a Spark setting, a temporary view, a running
    streaming query, a node's broker config set at run time, a stopped broker) and fails that test, naming it, so
    the next test neither passes nor fails by accident."""
    session = request.getfixturevalue("spark") if "spark" in request.fixturenames else None
    cluster = request.getfixturevalue("kafka") if "kafka" in request.fixturenames else None
    before = spark_state(session) if session is not None else None
    if cluster is not None:
        _BROKER_BASELINES.setdefault(id(cluster), _run_time_broker_configs(cluster))
    yield
    leaked = restore_spark_state(session, before) if session is not None and before is not None else []
    if cluster is not None:
        leaked += restore_broker_state(cluster)
    if leaked:
        pytest.fail("the test left the shared broker or Spark session changed (put back now): " + "; ".join(leaked))


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
