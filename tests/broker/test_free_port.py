"""The launcher's port picker: a port it handed out is never handed out again, even when the kernel offers it."""

from __future__ import annotations

import socket
from typing import Any

import pytest

from spark_kafka_sink.testing import broker
from spark_kafka_sink.testing.broker_jars import fetch_jars


def test_a_port_the_kernel_offers_again_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    offered = iter([41001, 41001, 41001, 41002])  # the kernel reuses a just-closed probe port

    class Probe:
        def __init__(self, *args: Any) -> None:
            self.port = next(offered)

        def __enter__(self) -> Probe:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def bind(self, address: tuple[str, int]) -> None:
            pass

        def getsockname(self) -> tuple[str, int]:
            return ("127.0.0.1", self.port)

    monkeypatch.setattr(broker, "_HANDED_OUT", set())
    monkeypatch.setattr(socket, "socket", Probe)
    assert [broker.free_port(), broker.free_port()] == [41001, 41002]


def test_many_ports_are_all_distinct() -> None:
    ports = [broker.free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)


@pytest.mark.broker
def test_a_node_whose_port_was_taken_meanwhile_starts_again_on_other_ports(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process may take a probed port before the node binds it: the node exits with "Address already in
    use", and the cluster starts again on new ports. Shown with a real listener on the first port handed out."""
    fetch_jars()
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    first = [int(taken.getsockname()[1])]
    probe = broker.free_port

    def free_port() -> int:
        return first.pop() if first else probe()

    monkeypatch.setattr(broker, "free_port", free_port)
    try:
        with broker.KafkaCluster(size=1) as cluster:
            (node,) = cluster.nodes.values()
            assert node.port != taken.getsockname()[1]
            with socket.create_connection(("127.0.0.1", node.port), timeout=10):
                pass  # the restarted node listens
    finally:
        taken.close()
