"""Fixtures for the cluster fault tests: one 3-node KRaft cluster for the whole session (replication 3,
min.insync.replicas=2), every node running again before each test, and a local Spark session bound to it.

These tests are marked ``cluster`` and excluded from ``make test``; ``make test-cluster`` runs them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import _unwind_on_sigterm, local_spark, wait_for


@pytest.fixture(scope="session")
def kafka3() -> Iterator[KafkaCluster]:
    """Three KRaft nodes; leaders are not moved back automatically, so a test decides who leads."""
    _unwind_on_sigterm()
    fetch_jars()
    cluster = KafkaCluster(size=3, heap="512m", properties={"auto.leader.rebalance.enable": "false"}).start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def cluster3(kafka3: KafkaCluster) -> Iterator[KafkaCluster]:
    """The session's cluster with all three nodes running, before the test and again after it."""
    _restart_missing(kafka3)
    yield kafka3
    _restart_missing(kafka3)


def _restart_missing(cluster: KafkaCluster) -> None:
    for node_id in sorted(cluster.nodes):
        if node_id not in cluster.running_node_ids():
            cluster.start_node(node_id)
    wait_for("all three nodes answering", lambda: sorted(cluster.running_node_ids()) == [1, 2, 3])


@pytest.fixture(scope="session")
def spark3(kafka3: KafkaCluster) -> Iterator[Any]:
    """A local Spark session (2 threads, up to 3 attempts per task) with Spark's Kafka connector."""
    yield from local_spark("spark-kafka-sink-cluster-tests", "1g")
