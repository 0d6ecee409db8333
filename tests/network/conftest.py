"""Fixtures for the network fault tests: one 3-node KRaft cluster on a network of its own (tests/network/netns.py)
for the whole module set, toxiproxy in front of each node's PROXIED listener, and a local Spark session.

Marked ``network`` and excluded from ``make test``; ``make test-network`` runs them (as root: namespaces).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster, free_port
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import _unwind_on_sigterm, local_spark, wait_for
from tests.network.netns import TestNetwork
from tests.network.proxy import Toxiproxy


@dataclass
class NetCluster:
    """The cluster, the network its nodes run on, and the proxy in front of them."""

    cluster: KafkaCluster
    network: TestNetwork
    proxy: Toxiproxy

    @property
    def bootstrap(self) -> str:
        """Clients straight to the nodes' client addresses (the links a test cuts)."""
        return self.cluster.bootstrap_servers

    @property
    def proxied_bootstrap(self) -> str:
        """Clients through toxiproxy (the links a test slows down)."""
        return ",".join(f"127.0.0.1:{port}" for port in self.network.proxy_ports.values())


@pytest.fixture(scope="session")
def net_session() -> Iterator[NetCluster]:
    _unwind_on_sigterm()
    fetch_jars()
    network = TestNetwork(size=3, proxy_ports={i: free_port() for i in (1, 2, 3)}).create()
    proxy: Toxiproxy | None = None
    cluster: KafkaCluster | None = None
    try:
        proxy = Toxiproxy().start()
        # Quick failure detection: a node cut from the quorum is fenced and its partitions led elsewhere within
        # seconds (the launcher's template sets broker.session.timeout.ms=6000).
        cluster = KafkaCluster(size=3, heap="512m", networks=network.node_networks(), properties={
            "auto.leader.rebalance.enable": "false",
            "replica.lag.time.max.ms": "5000",
            "controller.quorum.fetch.timeout.ms": "2000",
        }).start()
        for node_id, node in cluster.nodes.items():
            proxy.add_proxy(f"node{node_id}", network.proxy_ports[node_id],
                            f"{node.host}:{node.listener_ports['PROXIED']}")
        yield NetCluster(cluster, network, proxy)
    finally:
        if cluster is not None:
            cluster.stop()
        if proxy is not None:
            proxy.stop()
        network.destroy()


@pytest.fixture
def net(net_session: NetCluster) -> Iterator[NetCluster]:
    """The session's network cluster whole (every link up, no toxic, all three nodes in the quorum), before the
    test and again after it."""
    _heal(net_session)
    yield net_session
    _heal(net_session)


def _heal(net: NetCluster) -> None:
    net.network.heal()
    for node_id in net.cluster.nodes:
        net.proxy.heal(f"node{node_id}")
    wait_for("all three nodes answering with the whole cluster", lambda: _all_answer(net.cluster), timeout=120)


def _all_answer(cluster: KafkaCluster) -> bool:
    try:
        cluster.wait_ready(timeout=0.0)
        return True
    except Exception:
        return False


COMMIT_GATE_DIR = Path(__file__).parent / "commit_gate"


@pytest.fixture(scope="session")
def commit_gate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder through which a test stops the Spark driver's commit after its plan (commit_gate/sitecustomize)."""
    return tmp_path_factory.mktemp("commit-gate")


@pytest.fixture(scope="session")
def net_spark(net_session: NetCluster, commit_gate: Path) -> Iterator[Any]:
    """A local Spark session (2 threads, up to 3 attempts per task) with Spark's Kafka connector, whose Python
    processes load the commit gate (its JVM, started here, hands this environment to them)."""
    os.environ["SKS_NET_COMMIT_GATE"] = str(commit_gate)
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(COMMIT_GATE_DIR), os.environ.get("PYTHONPATH")) if p)
    yield from local_spark("spark-kafka-sink-network-tests", "1g")
