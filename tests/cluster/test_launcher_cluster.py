"""The test launcher's three-node cluster itself: a killed partition leader is replaced, and the node restarts
into the ISR. Every fault test in this folder relies on both; this checks them without the project's client."""

from __future__ import annotations

import pytest
from confluent_kafka.admin import AdminClient

from spark_kafka_sink.testing.broker import KafkaCluster
from tests.cluster.faults import new_topic
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster


def _partition_state(admin: AdminClient, topic: str, partition: int) -> tuple[int, list[int]]:
    p = admin.list_topics(topic, timeout=10).topics[topic].partitions[partition]
    return p.leader, list(p.isrs)


def test_leader_failover_and_restart(cluster3: KafkaCluster) -> None:
    topic = new_topic(cluster3, 3)
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    old_leader, isr = _partition_state(admin, topic, 0)
    assert sorted(isr) == [1, 2, 3]

    cluster3.kill_node(old_leader)
    assert old_leader not in cluster3.running_node_ids()
    survivors = [n for n in (1, 2, 3) if n != old_leader]
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_of(survivors)})
    wait_for("a new leader for partition 0", lambda: _partition_state(admin, topic, 0)[0] in survivors, timeout=60)

    cluster3.start_node(old_leader)
    wait_for("the restarted node back in the ISR", lambda: sorted(_partition_state(admin, topic, 0)[1]) == [1, 2, 3],
             timeout=60)
