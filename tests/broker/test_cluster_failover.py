"""The three-node cluster: kill a partition leader, see a new one elected, restart the node."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka.admin import AdminClient

from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import create_topic

pytestmark = pytest.mark.cluster


@pytest.fixture(scope="module")
def cluster() -> Iterator[KafkaCluster]:
    c = KafkaCluster(size=3, heap="512m").start()
    try:
        yield c
    finally:
        c.stop()


def _partition_state(admin: AdminClient, topic: str, partition: int) -> tuple[int, list[int]]:
    p = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
    return p.leader, list(p.isrs)


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.2)  # poll interval of a condition wait


def test_leader_failover_and_restart(cluster: KafkaCluster) -> None:
    topic = create_topic(cluster.bootstrap_servers, "failover", partitions=3, replication=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    old_leader, isr = _partition_state(admin, topic, 0)
    assert sorted(isr) == [1, 2, 3]

    cluster.kill_node(old_leader)
    assert old_leader not in cluster.running_node_ids()
    survivors = [n for n in (1, 2, 3) if n != old_leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(survivors)})
    _wait_for("a new leader for partition 0",
              lambda: _partition_state(admin, topic, 0)[0] in survivors)

    cluster.start_node(old_leader)
    _wait_for("the restarted node back in the ISR",
              lambda: sorted(_partition_state(admin, topic, 0)[1]) == [1, 2, 3])
