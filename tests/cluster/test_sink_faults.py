"""The Spark sink (local Spark) writing to a 3-node cluster while a partition leader, the transaction coordinator,
or two of the three nodes are SIGKILLed. Read back with confluent-kafka at read_committed; each test prints records
lost and duplicated and how long the cluster took to recover."""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from tests.cluster.faults import (
    check_ids,
    end_offsets,
    leader_of,
    new_topic,
    read_all,
    transaction_coordinator,
    wait_for,
    wait_full_isr,
)
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = pytest.mark.cluster

ROWS = 400_000
TASKS = 4
PARTITIONS = 3


def _frame(spark: Any) -> Any:
    """ids 0..ROWS-1 in TASKS Spark partitions of contiguous ids; Kafka partition = id % PARTITIONS."""
    return spark.range(0, ROWS, 1, TASKS).selectExpr("CAST(id AS STRING) AS value",
                                                     f"CAST(id % {PARTITIONS} AS INT) AS partition")


def _out_of_order(records: list[ConsumedRecord]) -> int:
    """Within each Kafka partition, the ids from one Spark task must ascend (each task writes its rows in order)."""
    last: dict[tuple[int, int], int] = {}
    wrong = 0
    for r in records:
        i = int(r.value or b"-1")
        key = (r.partition, i * TASKS // ROWS)
        wrong += key in last and i <= last[key]
        last[key] = i
    return wrong


class _FaultThread(threading.Thread):
    """Once the write has put records in the topic: SIGKILL a node chosen then, wait for the cluster to recover
    (a new leader), start the node again and wait until it is back in sync."""

    def __init__(self, cluster: KafkaCluster, topic: str, choose: str, prefix: str = "") -> None:
        super().__init__(name="fault", daemon=True)
        self.cluster, self.topic, self.choose, self.prefix = cluster, topic, choose, prefix
        self.victim = -1
        self.killed_at = 0.0
        self.recovery_s = 0.0
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            wait_for("the first records of the write", lambda: sum(end_offsets(self.cluster, self.topic).values()) > 0,
                     timeout=180)
            if self.choose == "leader":
                self.victim = leader_of(self.cluster, self.topic, 0)
            else:
                self.victim = transaction_coordinator(self.cluster, f"{self.prefix}-0")
            self.killed_at = time.monotonic()
            self.cluster.kill_node(self.victim)
            survivors = [n for n in (1, 2, 3) if n != self.victim]
            self.recovery_s = wait_for("partition 0 led by a survivor",
                                       lambda: leader_of(self.cluster, self.topic, 0) in survivors)
            self.cluster.start_node(self.victim)
            wait_full_isr(self.cluster, self.topic, range(PARTITIONS))
        except BaseException as exc:  # noqa: B036 -- re-raised by the test
            self.failure = exc


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_sink_while_a_leader_is_sigkilled_and_restarted(cluster3: KafkaCluster, spark3: Any, guarantee: str) -> None:
    topic = new_topic(cluster3, PARTITIONS)
    fault = _FaultThread(cluster3, topic, "leader")
    fault.start()
    write_df(_frame(spark3), cluster3.bootstrap_servers, topic=topic, deliveryGuarantee=guarantee)
    written_at = time.monotonic()
    fault.join(300)
    assert fault.failure is None, fault.failure
    assert 0 < fault.killed_at < written_at, "the node was not killed during the write"
    records = read_all(cluster3, topic)
    verdict = check_ids(records, set(range(ROWS)))
    verdict.out_of_order = _out_of_order(records)
    verdict.report(f"sink {guarantee}: leader {fault.victim} SIGKILLed mid-write and restarted", fault.recovery_s)
    assert verdict.lost == 0 and verdict.extra == 0
    if guarantee == "exactly_once":
        assert (verdict.read, verdict.duplicated, verdict.out_of_order) == (ROWS, 0, 0)


def test_sink_exactly_once_with_the_transaction_coordinator_sigkilled(cluster3: KafkaCluster, spark3: Any) -> None:
    """The coordinator of task 0's transaction dies mid-write: the write commits completely, or fails leaving
    nothing visible or open; a re-run of the same writeId then leaves exactly ROWS records either way."""
    topic = new_topic(cluster3, PARTITIONS)
    prefix = f"coordkill-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"topic": topic, "deliveryGuarantee": "exactly_once",
                               "transactionalIdPrefix": prefix, "writeId": 1}
    fault = _FaultThread(cluster3, topic, "coordinator", prefix)
    fault.start()
    outcome = "committed"
    try:
        write_df(_frame(spark3), cluster3.bootstrap_servers, **options)
    except Exception as exc:  # noqa: BLE001 -- either outcome is allowed; the checks below decide
        outcome = f"failed: {type(exc).__name__}"
    written_at = time.monotonic()
    fault.join(300)
    assert fault.failure is None, fault.failure
    assert 0 < fault.killed_at < written_at, "the coordinator was not killed during the write"
    wait_for("no open transaction (last stable offset = log end offset)", lambda: end_offsets(
        cluster3, topic, "read_committed") == end_offsets(cluster3, topic, "read_uncommitted"), timeout=120)
    first = read_all(cluster3, topic)
    if outcome == "committed":
        assert len(first) == ROWS
    else:
        assert first == [], f"a failed exactly_once write left {len(first)} records visible"
    write_df(_frame(spark3), cluster3.bootstrap_servers, **options)  # the re-run
    records = read_all(cluster3, topic)
    verdict = check_ids(records, set(range(ROWS)))
    verdict.out_of_order = _out_of_order(records)
    verdict.report(f"sink exactly_once: coordinator {fault.victim} SIGKILLed mid-write ({outcome}), then re-run",
                   fault.recovery_s)
    print(f"  per partition: {dict(sorted(Counter(r.partition for r in records).items()))}")
    assert (verdict.read, verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (ROWS, 0, 0, 0, 0)


# ------------------------------------------------------------------------------------------ the abort branch


def _gated(spark: Any, gate_file: Path) -> Any:
    """The rows of ``_frame`` in TASKS + 1 Spark partitions: ids 0..ROWS-2 as ``_frame`` has them, and the last id
    alone in a fifth task, through a Python UDF that waits for ``gate_file`` to exist and then fails the task (in
    every attempt): the write fails for certain, and only once the test says so."""
    from pyspark.sql import functions as F

    path = str(gate_file)

    def gate(value: str) -> str:
        import os
        import time as clock

        deadline = clock.monotonic() + 300
        while not os.path.exists(path) and clock.monotonic() < deadline:
            clock.sleep(0.1)  # poll interval of a condition wait (the test's gate file)
        raise RuntimeError(f"injected failure at row {value} (the test's gate)")

    rows = spark.range(0, ROWS - 1, 1, TASKS).selectExpr("CAST(id AS STRING) AS value",
                                                          f"CAST(id % {PARTITIONS} AS INT) AS partition")
    last = spark.range(ROWS - 1, ROWS, 1, 1).select(
        F.udf(gate, "string", useArrow=False)(F.col("id").cast("string")).alias("value"),  # no pandas here
        (F.col("id") % PARTITIONS).cast("int").alias("partition"))
    return rows.unionByName(last)


def test_sink_exactly_once_fails_after_a_coordinator_sigkill_leaving_nothing_then_a_rerun_writes_n(
        cluster3: KafkaCluster, spark3: Any, tmp_path: Path) -> None:
    """The abort branch of a coordinator kill, made certain: the coordinator of task 0's transaction is SIGKILLed
    mid-write; once another node coordinates, the last task fails (all its attempts), so the job fails and the
    driver aborts the finished tasks' transactions and fences the failed one's id, on the new coordinators. Nothing
    is visible to read_committed and nothing stays open; a re-run of the same writeId then writes exactly ROWS."""
    topic = new_topic(cluster3, PARTITIONS)
    prefix = f"coordabort-{uuid.uuid4().hex[:8]}"
    options: dict[str, Any] = {"topic": topic, "deliveryGuarantee": "exactly_once",
                               "transactionalIdPrefix": prefix, "writeId": 1}
    gate_file = tmp_path / "fail-now"
    victim: list[int] = []
    killed_at: list[float] = []
    failover_s: list[float] = []

    def fault() -> None:
        wait_for("the first records of the write", lambda: sum(end_offsets(cluster3, topic).values()) > 0,
                 timeout=180)
        victim.append(transaction_coordinator(cluster3, f"{prefix}-0"))
        killed_at.append(time.monotonic())
        cluster3.kill_node(victim[0])
        failover_s.append(wait_for(f"a new coordinator for {prefix}-0",
                                   lambda: transaction_coordinator(cluster3, f"{prefix}-0") not in (victim[0], -1)))
        gate_file.touch()

    frame = _gated(spark3, gate_file)
    fault_thread = _Background(fault)
    error: Exception | None = None
    try:
        write_df(frame, cluster3.bootstrap_servers, **options)
    except Exception as exc:  # noqa: BLE001 -- the failure is the point; checked below
        error = exc
    failed_at = time.monotonic()
    assert error is not None, "the gated write did not fail"
    assert "injected failure at row" in str(error), str(error)[-3000:]
    fault_thread.finish()
    assert killed_at and killed_at[0] < failed_at
    cluster3.start_node(victim[0])
    wait_full_isr(cluster3, topic, range(PARTITIONS))
    nothing_open_s = wait_for("no open transaction (last stable offset = log end offset)", lambda: end_offsets(
        cluster3, topic, "read_committed") == end_offsets(cluster3, topic, "read_uncommitted"), timeout=120)
    written = sum(end_offsets(cluster3, topic).values())
    first = read_all(cluster3, topic)
    assert written > 0, "the failed write sent nothing: the abort branch was not exercised"
    assert first == [], f"the failed exactly_once write left {len(first)} records visible"
    rerun_started = time.monotonic()
    write_df(_frame(spark3), cluster3.bootstrap_servers, **options)  # the re-run
    rerun_s = time.monotonic() - rerun_started
    records = read_all(cluster3, topic)
    verdict = check_ids(records, set(range(ROWS)))
    verdict.out_of_order = _out_of_order(records)
    verdict.report(f"sink exactly_once: coordinator {victim[0]} SIGKILLed mid-write, then the write failed",
                   failover_s[0])
    print(f"  the failed write left {written} records in the log (aborted), 0 visible; nothing open "
          f"{nothing_open_s:.1f} s after the restart; the re-run wrote {len(records)} in {rerun_s:.1f} s")
    assert (verdict.read, verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (ROWS, 0, 0, 0, 0)


class _Background(threading.Thread):
    """Runs ``target`` beside the write; ``finish()`` joins it and re-raises its failure."""

    def __init__(self, target: Any) -> None:
        super().__init__(name="fault", daemon=True)
        self._target_fn = target
        self.failure: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self._target_fn()
        except BaseException as exc:  # noqa: B036 -- re-raised by finish()
            self.failure = exc

    def finish(self, timeout: float = 300.0) -> None:
        self.join(timeout)
        assert not self.is_alive(), "the fault thread did not finish"
        if self.failure is not None:
            raise AssertionError(f"the fault thread failed: {self.failure!r}") from self.failure


# ------------------------------------------------------------------------------------------ two of three down


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_sink_with_two_of_three_nodes_sigkilled_fails_after_the_delivery_timeout(
        cluster3: KafkaCluster, spark3: Any, guarantee: str, caplog: pytest.LogCaptureFixture) -> None:
    """acks=all cannot be met with one node left (and no controller quorum): every task attempt fails after
    kafka.delivery.timeout.ms with an error naming it (or NOT_ENOUGH_REPLICAS), the job fails, and nothing is
    reported written that is not. The nodes return once the job has failed (the driver is then aborting):
    exactly_once leaves nothing visible or open; at_least_once's rows read back are ids of the job, none twice
    beyond task retries, and its report counts no row that is not there."""
    topic = new_topic(cluster3, PARTITIONS)
    delivery_timeout_ms = 8_000
    options: dict[str, Any] = {
        "topic": topic, "deliveryGuarantee": guarantee, "transactionalIdPrefix": f"down2-{uuid.uuid4().hex[:8]}",
        "kafka.delivery.timeout.ms": delivery_timeout_ms, "kafka.request.timeout.ms": 3_000,
        "kafka.max.block.ms": 8_000}
    if guarantee == "at_least_once":
        del options["transactionalIdPrefix"]
    tasks = 2
    frame = spark3.range(0, ROWS, 1, tasks).selectExpr("CAST(id AS STRING) AS value",
                                                       f"CAST(id % {PARTITIONS} AS INT) AS partition")
    group = f"down2-{uuid.uuid4().hex[:8]}"
    outcome: list[BaseException | None] = []

    def write() -> None:
        spark3.sparkContext.setJobGroup(group, "two of three nodes down")
        try:
            write_df(frame, cluster3.bootstrap_servers, **options)
            outcome.append(None)
        except Exception as exc:  # noqa: BLE001 -- the failure is the point; checked below
            outcome.append(exc)

    def job_failed() -> bool:
        tracker = spark3.sparkContext.statusTracker()
        infos = [tracker.getJobInfo(j) for j in tracker.getJobIdsForGroup(group)]
        return any(i is not None and i.status == "FAILED" for i in infos) or bool(outcome)

    caplog.set_level(logging.WARNING, logger="spark_kafka_sink.spark")
    writer = threading.Thread(target=write, name="two-down-write", daemon=True)
    writer.start()
    victims: list[int] = []
    try:
        wait_for("the first records of the write", lambda: sum(end_offsets(cluster3, topic).values()) > 0,
                 timeout=180)
        survivor = leader_of(cluster3, topic, 0)
        victims = [n for n in (1, 2, 3) if n != survivor]
        for node in victims:
            cluster3.kill_node(node)
        killed_at = time.monotonic()
        wait_for("the Spark job to fail", job_failed, timeout=300)
        failed_after_s = time.monotonic() - killed_at
    finally:
        for node in victims:
            cluster3.start_node(node)
    writer.join(300)
    assert not writer.is_alive() and outcome, "the write did not return"
    error = outcome[0]
    assert error is not None, "the write succeeded with two of three nodes down"
    text = str(error)
    named = re.findall(r"[A-Za-z]*Error: [^\n]*(?:delivery\.timeout\.ms|NOT_ENOUGH_REPLICAS)[^\n]*", text)
    assert named, f"the job's error names neither delivery.timeout.ms nor NOT_ENOUGH_REPLICAS:\n{text[-4000:]}"
    assert failed_after_s >= delivery_timeout_ms / 1000 * 0.9, f"failed {failed_after_s:.1f} s after the kill"
    rejoin_s = wait_full_isr(cluster3, topic, range(PARTITIONS))
    nothing_open_s = wait_for("no open transaction (last stable offset = log end offset)", lambda: end_offsets(
        cluster3, topic, "read_committed") == end_offsets(cluster3, topic, "read_uncommitted"), timeout=120)
    records = read_all(cluster3, topic)
    in_log = sum(end_offsets(cluster3, topic).values())
    warnings = [r.getMessage() for r in caplog.records if r.name.startswith("spark_kafka_sink.spark")]
    assert not any("pykafka-sink committed" in w for w in warnings), "a failed write was reported committed"
    ids = [int(r.value or b"-1") for r in records]
    duplicated = len(ids) - len(set(ids))
    print(f"\n[sink {guarantee}: nodes {victims} SIGKILLed mid-write, acks=all] the job failed "
          f"{failed_after_s:.1f} s after the kill (delivery.timeout.ms={delivery_timeout_ms}); {in_log} records "
          f"in the log, {len(records)} visible to read_committed ({duplicated} duplicated); nodes back in sync "
          f"{rejoin_s:.1f} s after the restart, nothing open {nothing_open_s:.1f} s after that")
    print(f"  e.g. {named[0][:400]}")
    for w in warnings:
        print(f"  driver: {w[:300]}")
    assert set(ids) <= set(range(ROWS))
    if guarantee == "exactly_once":
        assert records == [], f"a failed exactly_once write left {len(records)} records visible"
        fenced = [w for w in warnings if "write failed" in w]
        assert fenced and f"fenced {tasks} failed task id(s)" in fenced[-1], warnings
    else:
        # What the driver says it keeps (rows acknowledged by successful tasks) must be there.
        kept = [int(m.group(1)) for w in warnings if (m := re.search(r"keeps the (\d+) rows already acknowledged",
                                                                     w))]
        assert kept and kept[-1] <= len(set(ids)), warnings
