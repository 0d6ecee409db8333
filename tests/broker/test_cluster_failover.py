"""The three-node cluster: kill a partition leader, see a new one elected, restart the node."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from confluent_kafka.admin import AdminClient

from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import create_topic, wait_for

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


def test_leader_failover_and_restart(cluster: KafkaCluster) -> None:
    topic = create_topic(cluster.bootstrap_servers, "failover", partitions=3, replication=3)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    old_leader, isr = _partition_state(admin, topic, 0)
    assert sorted(isr) == [1, 2, 3]

    cluster.kill_node(old_leader)
    assert old_leader not in cluster.running_node_ids()
    survivors = [n for n in (1, 2, 3) if n != old_leader]
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_of(survivors)})
    wait_for("a new leader for partition 0", lambda: _partition_state(admin, topic, 0)[0] in survivors, timeout=60)

    cluster.start_node(old_leader)
    wait_for("the restarted node back in the ISR", lambda: sorted(_partition_state(admin, topic, 0)[1]) == [1, 2, 3],
             timeout=60)
