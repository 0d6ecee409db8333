"""The Spark driver cut from a transaction coordinator during an exactly_once commit (the coordinator's client link
set down just after the commit recorded its plan; the commit gate in commit_gate/ stops it there). Back within
the commit's timeout, the commit retries and completes; cut past it, the job fails naming the committed and the
uncommitted Spark partitions, and a re-run of the writeId finishes the job exactly once. Read back with
confluent-kafka at read_committed."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.faults import check_ids, leader_of, new_topic, out_of_order, read_all, transaction_coordinator
from tests.conftest import create_topic, wait_for
from tests.network.conftest import NetCluster
from tests.spark.conftest import write_df

pytestmark = pytest.mark.network

PARTITIONS = 3
ROWS = 20_000
TASKS = 4
REQUEST_TIMEOUT_MS = 3000
MAX_BLOCK_MS = 20_000  # the driver's commit retries for this long (as Java's commitTransaction)
CUT_S = 6.0  # the outage of the first test: shorter than the commit's timeout


def _layout(net: NetCluster) -> tuple[str, str, int]:
    """A commit log topic and a transactionalIdPrefix whose task 0's coordinator leads neither the commit log nor
    every other task's transaction: cutting it stops some EndTxn, not the log nor the whole commit. Returns (log
    topic, prefix, that coordinator)."""
    cluster = net.cluster
    _ensure_transaction_state(net)
    log_topic = create_topic(cluster.bootstrap_servers, f"net-commits-{uuid.uuid4().hex[:8]}", 1, 3,
                             {"cleanup.policy": "compact"})
    log_leader = leader_of(cluster, log_topic, 0)
    for _ in range(200):
        prefix = f"cut-{uuid.uuid4().hex[:8]}"
        coordinators = [transaction_coordinator(cluster, f"{prefix}-{p}") for p in range(TASKS)]
        if coordinators[0] != log_leader and len(set(coordinators)) > 1:
            return log_topic, prefix, coordinators[0]
    raise AssertionError("no transactionalIdPrefix with the coordinators spread over the nodes in 200 draws")


def _ensure_transaction_state(net: NetCluster) -> None:
    """The cluster's first transaction creates __transaction_state, whose leaders say who coordinates an id."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": net.bootstrap, "transactional.id": f"warm-{uuid.uuid4().hex}"})
    producer.init_transactions(60)


class _GatedWrite(threading.Thread):
    """An exactly_once write in a thread whose commit stops after its plan until released."""

    def __init__(self, spark: Any, net: NetCluster, gate: Path, topic: str, log_topic: str, prefix: str,
                 armed: bool) -> None:
        super().__init__(name="gated-write", daemon=True)
        self.spark, self.net, self.gate = spark, net, gate
        self.topic, self.log_topic, self.prefix = topic, log_topic, prefix
        self.error: BaseException | None = None
        self.returned_at = 0.0
        for name in ("armed", "taken", "paused", "release"):
            (gate / name).unlink(missing_ok=True)
        if armed:
            (gate / "armed").write_text("")
        self.start()

    def run(self) -> None:
        self.spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(self.spark._jsparkSession)
        frame = self.spark.range(0, ROWS, 1, TASKS).selectExpr(
            "CAST(id AS STRING) AS value", f"CAST(id % {PARTITIONS} AS INT) AS partition")
        try:
            write_df(frame, self.net.bootstrap, topic=self.topic, deliveryGuarantee="exactly_once",
                     transactionalIdPrefix=self.prefix, writeId=1, commitLogTopic=self.log_topic,
                     **{"kafka.request.timeout.ms": str(REQUEST_TIMEOUT_MS), "kafka.max.block.ms": str(MAX_BLOCK_MS),
                        "kafka.socket.connection.setup.timeout.ms": "1000",
                        "kafka.socket.connection.setup.timeout.max.ms": "2000"})
        except BaseException as exc:  # noqa: B036 -- the test asserts on it
            self.error = exc
        finally:
            self.returned_at = time.monotonic()

    def cut_at_commit(self, cut: Any) -> float:
        """Wait for the commit to stop after its plan, call ``cut()``, release the commit; returns when it cut."""
        wait_for("the commit to record its plan", lambda: (self.gate / "paused").exists(), timeout=300)
        cut()
        cut_at = time.monotonic()
        (self.gate / "release").write_text("")
        return cut_at

    def finish(self, timeout: float = 400.0) -> BaseException | None:
        self.join(timeout)
        assert not self.is_alive(), f"the write did not return within {timeout:.0f} s"
        return self.error


def _message(error: BaseException | None) -> str:
    get = getattr(error, "getMessage", None)
    return str(get() if callable(get) else error)


def _assert_exact(net: NetCluster, topic: str, label: str, recovery_s: float) -> None:
    """Every one of the ROWS ids once, in each task's order per partition; the figures printed."""
    records = read_all(net.cluster, topic)
    verdict = check_ids(records, set(range(ROWS)))
    verdict.out_of_order = out_of_order(records, ROWS, TASKS)
    verdict.report(label, recovery_s)
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)
    assert verdict.read == ROWS


def test_coordinator_back_within_the_commit_timeout(net: NetCluster, net_spark: Any, commit_gate: Path) -> None:
    topic = new_topic(net.cluster, PARTITIONS)
    log_topic, prefix, coordinator = _layout(net)
    write = _GatedWrite(net_spark, net, commit_gate, topic, log_topic, prefix, armed=True)
    cut_at = write.cut_at_commit(lambda: net.network.cut_client(coordinator))
    healer = threading.Timer(CUT_S, lambda: net.network.heal(coordinator))  # the outage's length, injected
    healer.start()
    try:
        error = write.finish()
    finally:
        healer.join()
    healed_at = cut_at + CUT_S
    assert error is None, _message(error)
    _assert_exact(net, topic, f"exactly_once commit, coordinator {coordinator} cut {CUT_S:g} s",
                  write.returned_at - healed_at)
    # The commit waited for the link: it cannot have finished before the coordinator was reachable again.
    assert write.returned_at >= healed_at, write.returned_at - cut_at


def test_coordinator_cut_past_the_commit_timeout_then_rerun(net: NetCluster, net_spark: Any,
                                                            commit_gate: Path) -> None:
    topic = new_topic(net.cluster, PARTITIONS)
    log_topic, prefix, coordinator = _layout(net)
    failed_ids = [p for p in range(TASKS) if transaction_coordinator(net.cluster, f"{prefix}-{p}") == coordinator]
    write = _GatedWrite(net_spark, net, commit_gate, topic, log_topic, prefix, armed=True)
    cut_at = write.cut_at_commit(lambda: net.network.cut_client(coordinator))
    try:
        error = write.finish()
    finally:
        net.network.heal(coordinator)
    healed_at = time.monotonic()
    message = _message(error)
    print(f"\n[exactly_once commit, coordinator {coordinator} cut for good] failed after "
          f"{write.returned_at - cut_at:.1f} s: {message[:1500]}")
    assert error is not None, "the commit succeeded with its coordinator cut off"
    # kafka.max.block.ms bounds the commit, then the abort that Spark calls after it: about twice that in all.
    took_s = write.returned_at - cut_at
    assert MAX_BLOCK_MS / 1000 <= took_s < 3 * MAX_BLOCK_MS / 1000, took_s
    committed_ids = sorted(set(range(TASKS)) - set(failed_ids))
    assert f"Spark partitions {committed_ids} were committed" in message, message
    assert f"partitions {failed_ids} were not" in message, message
    assert "same writeId (1)" in message, message
    # The committed tasks' rows are in the log, but read_committed consumers see past the open transactions of
    # the others only once those end: at most the committed rows are visible now.
    partial = read_all(net.cluster, topic)
    assert len(partial) <= ROWS // TASKS * len(committed_ids), len(partial)

    rerun = _GatedWrite(net_spark, net, commit_gate, topic, log_topic, prefix, armed=False)
    assert rerun.finish() is None, _message(rerun.error)
    _assert_exact(net, topic, f"after the re-run of writeId 1 ({len(partial)} rows visible before it)",
                  rerun.returned_at - healed_at)
