"""Shared, lazily started resources of one benchmark run: the broker, topics, the Spark session, CPU pinning.

The broker is ``spark_kafka_sink.testing.KafkaCluster`` (one KRaft node from the Maven jars, on free ports, logging
every request for ``benchmarks.request_count``), started on first use and stopped at the end, or an existing one
given with ``--bootstrap``. Every measured run writes to a
fresh topic that is deleted afterwards, so no run pays for the previous one's data.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.request_count import RequestLog
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import REPO_ROOT, fetch_jars, spark_avro_jars, spark_connector_jars
from spark_kafka_sink.testing.registry import TestRegistry

__all__ = ["Context", "pinned_to_one_core", "TARGET_ROUNDS"]

# The least rounds of the comparisons whose targets are ratios between our own contenders or against the do-nothing
# writer (Context.target_rounds).
TARGET_ROUNDS = 5


@dataclass
class Context:
    rounds: int
    quick: bool
    log: Callable[[str], None] = print
    bootstrap_arg: str | None = None
    spark_memory: str = "4g"
    _cluster: KafkaCluster | None = None
    _registry: TestRegistry | None = None
    _spark: Any = None
    _worker_reuse: bool = True  # spark.python.worker.reuse of the next Spark application (fresh_spark)
    _topics: list[str] = field(default_factory=list)

    def target_rounds(self) -> int:
        """Rounds of the comparisons whose targets are ratios between our own contenders or against the do-nothing
        writer: the main Spark one ("exactly_once >= 0.9x at_least_once", which issue 16 asks as a median of 5
        rounds), 200 small tasks (their rounds spanned 0.6-1.1x in 3-round runs) and the one large table (0.3-1.3x).
        At least ``TARGET_ROUNDS``; ``--quick`` keeps its own."""
        return self.rounds if self.quick else max(self.rounds, TARGET_ROUNDS)

    # ------------------------------------------------------------------------------------------- broker
    @property
    def bootstrap(self) -> str:
        if self.bootstrap_arg:
            return self.bootstrap_arg
        if self._cluster is None:
            self.log("  starting a local Kafka broker (KRaft, one node) ...")
            fetch_jars()
            # Every request logged (benchmarks.request_count): Spark comparisons report requests per API.
            self._cluster = KafkaCluster(size=1, log_config=REPO_ROOT / "conf" / "kafka" /
                                         "log4j2-requests.properties", short_lived=False).start()
            self.log(f"  broker at {self._cluster.bootstrap_servers}")
        return self._cluster.bootstrap_servers

    @property
    def request_log(self) -> RequestLog | None:
        """The broker's request log (None with ``--bootstrap``: a broker this run did not start)."""
        _ = self.bootstrap
        if self._cluster is None:
            return None
        node = next(iter(self._cluster.nodes.values()))
        return RequestLog(node.data_dir / "logs" / "requests.log")

    def broker_pids(self) -> list[int]:
        return self._cluster.pids() if self._cluster is not None else []

    def _admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, partitions: int, prefix: str = "bench") -> str:
        from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        admin = self._admin()
        admin.create_topics([NewTopic(name, num_partitions=partitions, replication_factor=1)],
                            operation_timeout=30)[name].result(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # wait until every partition has a leader in the metadata
            topic = admin.list_topics(name, timeout=10).topics.get(name)
            if topic is not None and topic.error is None and len(topic.partitions) == partitions and all(
                    p.leader >= 0 for p in topic.partitions.values()):
                self._topics.append(name)
                self._wait_writable(name, partitions, deadline)
                return name
            time.sleep(0.1)
        raise RuntimeError(f"topic {name} never got leaders for its {partitions} partitions")

    def _wait_writable(self, name: str, partitions: int, deadline: float) -> None:
        """Wait until the leader serves every partition (ListOffsets answers), not only until metadata names it.

        Metadata lists the leader a moment before the broker has created the partition's log. A producer that
        pipelines batches (max.in.flight > 1, idempotent) and writes in that moment can have its first batch
        refused (NOT_LEADER_OR_FOLLOWER) while the next one is appended; the broker accepts any first sequence
        from a producer it does not know yet, so the retried first batch is then out of order and the Java
        client (kafka-clients 3.9, Spark's format("kafka")) retries it until delivery.timeout.ms. Observed here
        on fresh topics; a benchmark must not measure that race.
        """
        from confluent_kafka import Consumer, KafkaException, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
        try:
            pending = set(range(partitions))
            while pending and time.monotonic() < deadline:
                for p in sorted(pending):
                    with contextlib.suppress(KafkaException):
                        consumer.get_watermark_offsets(TopicPartition(name, p), timeout=5)
                        pending.discard(p)
                if pending:
                    time.sleep(0.1)
            if pending:
                raise RuntimeError(f"partitions {sorted(pending)} of {name} never answered ListOffsets")
        finally:
            consumer.close()

    def topic_record_count(self, name: str) -> int:
        """Records in the topic by end offsets (counts transaction markers too, one per partition and commit)."""
        from confluent_kafka import Consumer, TopicPartition

        # read_uncommitted: the high watermark, not the last stable offset (which lags behind commit markers)
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"bench-{uuid.uuid4().hex}",
                             "isolation.level": "read_uncommitted"})
        try:
            parts = consumer.list_topics(name, timeout=10).topics[name].partitions
            total = 0
            for p in parts:
                low, high = consumer.get_watermark_offsets(TopicPartition(name, p), timeout=10)
                total += high - low
            return total
        finally:
            consumer.close()

    def delete_topic(self, name: str) -> None:
        # The client must outlive the request: a temporary one was freed as soon as delete_topics returned, the
        # request never left, and (errors suppressed) every run's topic stayed on disk (~50 GB per `make bench`).
        admin = self._admin()
        with contextlib.suppress(Exception):
            admin.delete_topics([name], operation_timeout=30)[name].result(timeout=60)
        with contextlib.suppress(ValueError):
            self._topics.remove(name)

    # ---------------------------------------------------------------------------------- schema registry
    @property
    def registry_url(self) -> str:
        """The Confluent-compatible API of a schema registry (Apicurio, in memory) started on first use."""
        if self._registry is None:
            self.log("  starting a schema registry (Apicurio) ...")
            self._registry = TestRegistry().start()
        return self._registry.url

    # -------------------------------------------------------------------------------------------- spark
    @property
    def spark(self) -> Any:
        if self._spark is None:
            self._spark = self._start_spark()
        return self._spark

    def fresh_spark(self, worker_reuse: bool = True) -> None:
        """Start the next ``spark`` use on a new Spark application, i.e. new Python workers, with
        ``spark.python.worker.reuse`` = ``worker_reuse``. A reused worker keeps every module earlier jobs imported,
        and pyspark runs a full ``gc.collect()`` after each task, which walks them all: once the send_batch writer
        had imported the producer into the do-nothing writer's workers, that writer's 10,000-row tasks took
        20.9-21.5 ms instead of 15.3-17.1. Each Spark comparison starts fresh, so no result depends on which
        comparison ran before it. ``--quick`` measures nothing, so its comparisons share one application unless
        the worker reuse setting changes (each restart costs make test-bench's smoke run ~10-15 s)."""
        if self.quick and self._spark is not None and worker_reuse == self._worker_reuse:
            return
        self._worker_reuse = worker_reuse
        if self._spark is not None:
            self.log(f"  restarting Spark for fresh Python workers (spark.python.worker.reuse="
                     f"{str(worker_reuse).lower()}) ...")
            self._spark.stop()
            self._spark = None

    def _start_spark(self) -> Any:
        from pyspark.sql import SparkSession

        self.log("  starting Spark (local[2]) ...")
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
        # Python workers import benchmarks.spark_noop (the do-nothing writer) from the repo root.
        paths = [str(REPO_ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
        jars = ",".join(str(p) for p in spark_connector_jars() + spark_avro_jars())
        session = (
            SparkSession.builder.master("local[2]")
            .appName("spark-kafka-sink-bench")
            .config("spark.jars", jars)
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.driver.memory", self.spark_memory)
            .config("spark.sql.shuffle.partitions", "12")
            .config("spark.python.worker.reuse", str(self._worker_reuse).lower())
            .config("spark.sql.session.timeZone", "UTC")
            .getOrCreate()
        )
        session.sparkContext.setLogLevel("ERROR")
        return session

    # -------------------------------------------------------------------------------------------- CPU
    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds (user + system) used so far by: the broker JVM, Spark's JVM, Spark's Python workers (with
        the workers they have reaped), and this driver process. Differences of two snapshots say where a run's
        CPU went, which on a 2-core machine is what bounds every contender."""
        import psutil

        me = psutil.Process()
        broker = set(self.broker_pids())
        out = {"broker": 0.0, "spark_jvm": 0.0, "python_workers": 0.0, "driver": 0.0}
        t = me.cpu_times()
        out["driver"] = t.user + t.system
        for proc in me.children(recursive=True):
            try:
                t = proc.cpu_times()
                cmd = proc.cmdline()
            except psutil.Error:
                continue
            if proc.pid in broker:
                out["broker"] += t.user + t.system
            elif "pyspark.daemon" in cmd:
                out["python_workers"] += t.user + t.system + t.children_user + t.children_system
            elif cmd and cmd[0].endswith("java") and "org.apache.spark.deploy.SparkSubmit" in cmd:
                out["spark_jvm"] += t.user + t.system
        return out

    # ------------------------------------------------------------------------------------------ cleanup
    def close(self) -> None:
        for name in list(self._topics):
            self.delete_topic(name)
        if self._spark is not None:
            with contextlib.suppress(Exception):
                self._spark.stop()
            self._spark = None
        if self._cluster is not None:
            self._cluster.stop()
            self._cluster = None
        if self._registry is not None:
            self._registry.stop(keep_files=False)
            self._registry = None


@contextlib.contextmanager
def pinned_to_one_core() -> Iterator[int | None]:
    """Run the block with the calling thread (and threads it starts) allowed on one CPU only; yields that CPU.

    Linux applies affinity per thread: this pins the thread that does the measured work (encoders run inline in
    it), not threads that already exist elsewhere in the process.
    """
    if not hasattr(os, "sched_getaffinity"):
        yield None
        return
    before = os.sched_getaffinity(0)
    cpu = max(before)
    os.sched_setaffinity(0, {cpu})
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, before)


def results_dir() -> Path:
    return REPO_ROOT / "benchmarks" / "results"
