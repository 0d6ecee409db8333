"""Batch exactly_once writes without transactionalIdPrefix draw their prefix from the pool (spark.id_pool): the ids
left on the coordinators stay within (writes at once) x (Spark partitions), writes running at once never share a
prefix, and a SIGKILLed write's prefix is taken over once its lease passed, its open transactions ended first.

Ids are counted with Kafka's own TransactionsCommand; rows read back at read_committed with librdkafka."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.spark.commit_log import CommitLog
from spark_kafka_sink.spark.id_pool import claim_prefix, pool_name, release_prefix
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import ConsumedRecord, wait_for
from tests.spark.conftest import kafka_transactions, write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]
CRASH_JOB = Path(__file__).with_name("pool_crash_job.py")
PARTITIONS = 3
ROWS = 12


def _write(spark: Any, bootstrap: str, topic: str, log_topic: str, rows: int = ROWS,
           partitions: int = PARTITIONS) -> None:
    df = spark.range(0, rows, 1, partitions).selectExpr("CAST(id AS STRING) AS value")
    write_df(df, bootstrap, topic=topic, deliveryGuarantee="exactly_once", commitLogTopic=log_topic)


def _options(bootstrap: str, log_topic: str) -> SinkOptions:
    return SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "deliveryGuarantee": "exactly_once",
                              "commitLogTopic": log_topic}, streaming=False)


def test_drivers_claiming_at_once_get_distinct_slots_and_freed_slots_are_reused(bootstrap: str) -> None:
    log_topic = f"pool-log-{uuid.uuid4().hex[:8]}"
    options = _options(bootstrap, log_topic)
    with ThreadPoolExecutor(6) as threads:  # six drivers racing for the lowest free slot through the log
        claims = [c for _, c in threads.map(lambda _: claim_prefix(options), range(6))]
    assert sorted(c.slot for c in claims if c is not None) == list(range(6))
    for claim in claims[:3]:
        release_prefix(options, claim)
    release_prefix(options, claims[0])  # again, as Spark's abort() after a failed commit(): no effect
    again = [claim_prefix(options)[1] for _ in range(4)]
    assert sorted(c.slot for c in again if c is not None) == sorted([c.slot for c in claims[:3] if c] + [6])


def test_thirty_writes_without_a_prefix_leave_one_prefix_of_ids(
        spark: Any, kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    log_topic, topic = f"pool-log-{uuid.uuid4().hex[:8]}", topic_factory(partitions=PARTITIONS)
    for _ in range(30):
        _write(spark, bootstrap, topic, log_topic)
    pool = pool_name(log_topic)
    ids = kafka_transactions(kafka, pool)
    # One write at a time: one prefix, one id per Spark partition, however many writes ran.
    assert set(ids) == {f"{pool}-0-{p}" for p in range(PARTITIONS)}, ids
    assert set(ids.values()) == {"CompleteCommit"}, ids
    assert sorted(int(r.value or b"") for r in readback(topic)) == sorted(list(range(ROWS)) * 30)


def test_writes_running_at_once_get_their_own_prefixes_and_stay_exact(
        spark: Any, kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    log_topic = f"pool-log-{uuid.uuid4().hex[:8]}"
    pool = pool_name(log_topic)
    # A write that holds slot 0 meanwhile (claimed as a driver claims it, released at the end).
    options, held = claim_prefix(_options(bootstrap, log_topic))
    assert held is not None and options.transactional_id_prefix == f"{pool}-0"
    topics = [topic_factory(partitions=PARTITIONS) for _ in range(2)]

    def three_writes(topic: str) -> None:
        # This thread's JVM thread needs the session as its active one: Spark looks Python data sources up there.
        spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)
        for _ in range(3):
            _write(spark, bootstrap, topic, log_topic)

    try:
        with ThreadPoolExecutor(2) as threads:  # two Spark jobs at once in the shared session
            for future in [threads.submit(three_writes, t) for t in topics]:
                future.result()
    finally:
        release_prefix(options, held)
    ids = kafka_transactions(kafka, pool)
    slots = {tid.rsplit("-", 2)[1] for tid in ids}
    # Slot 0 was held all along: no write used its ids; at most one more slot per write running at once.
    assert "0" not in slots and slots <= {"1", "2"} and len(ids) <= 2 * PARTITIONS, ids
    for topic in topics:
        assert sorted(int(r.value or b"") for r in readback(topic)) == sorted(list(range(ROWS)) * 3)
    # Released: the next write takes slot 0 again.
    _write(spark, bootstrap, topics[0], log_topic)
    assert f"{pool}-0-0" in kafka_transactions(kafka, pool)


def test_a_killed_write_prefix_is_reused_after_its_transactions_ended(
        spark: Any, kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    log_topic, topic = f"pool-log-{uuid.uuid4().hex[:8]}", topic_factory(partitions=PARTITIONS)
    pool, lease_ms = pool_name(log_topic), 3000
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    with open(tmp_path / "crash-driver.log", "w") as log:
        driver = subprocess.Popen([sys.executable, str(CRASH_JOB), bootstrap, topic, log_topic, str(lease_ms)],
                                  env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    crashed = {f"{pool}-0-0", f"{pool}-0-1"}
    try:
        wait_for("the crash job's two transactions to be open",
                 lambda: driver.poll() is None and all(
                     kafka_transactions(kafka, pool).get(tid) == "Ongoing" for tid in crashed), timeout=180,
                 interval=1.0)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(60)
    assert driver.returncode == -signal.SIGKILL, (tmp_path / "crash-driver.log").read_text()[-3000:]
    # The killed driver never released slot 0: it is free once its lease passed since the claim was appended.
    with CommitLog(log_topic, pool, _options(bootstrap, log_topic).producer_config(), 60.0) as commit_log:
        claimed_at = max(e.timestamp_ms for e in commit_log.entries() if e.kind == "0")
    wait_for("the killed write's lease to pass", lambda: time.time() * 1000 > claimed_at + lease_ms + 100)
    _write(spark, bootstrap, topic, log_topic, partitions=1)  # uses <pool>-0-0 only
    states = kafka_transactions(kafka, pool)
    assert set(states) == crashed, states  # the killed write's prefix, reused: no new ids
    # <pool>-0-1 was ended by the take-over (no task of the new write used it): fenced, its transaction aborted.
    assert states[f"{pool}-0-0"] == "CompleteCommit" and states[f"{pool}-0-1"] in ("Empty", "CompleteAbort"), states
    assert sorted(int(r.value or b"") for r in readback(topic)) == list(range(ROWS))  # none of the killed write's
