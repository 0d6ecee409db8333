"""The Spark sink (local Spark) writing to a 3-node cluster while a partition leader, or the transaction
coordinator, is SIGKILLed. Read back with confluent-kafka at read_committed; each test prints records lost and
duplicated and how long the cluster took to recover."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
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
