"""KafkaProducer stops on a connection error that reconnecting cannot fix, and says so from every waiting call.

Scripted peers stand in for the brokers (tests/net/fake_broker.py) and the handshake factory is replaced by one
that fails the leader's connection as a wrong SASL password does; the real-broker versions are in tests/security.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import SaslAuthenticationFailedError
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.handshake import Handshake
from spark_kafka_sink.producer import producer as producer_module
from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.protocol.messages import METADATA
from tests.net.fake_broker import FakeBroker, Peer
from tests.net.test_client import RejectingAuth


def bootstrap_script(leader_port: int) -> Any:
    """ApiVersions, then every Metadata request answered with topic t (partitions 0, 1) led by node 1 at
    ``leader_port`` -- asked for or not, so the producer knows t without a refresh through node 1."""

    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        while True:
            header, _ = peer.read_request()
            assert header.api_key == METADATA.key, header
            peer.respond(header, {
                "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": leader_port, "rack": None}],
                "cluster_id": "fake", "controller_id": 1,
                "topics": [{"error_code": 0, "name": "t", "partitions": [
                    {"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": [1], "isr_nodes": [1]} for p in (0, 1)]}],
            })

    return script


def test_pending_records_flush_and_later_calls_get_the_fatal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    leader_attempts: list[int] = []
    with FakeBroker(lambda peer: peer.wait_closed()) as leader, \
            FakeBroker(bootstrap_script(leader.port)) as bootstrap:

        def handshakes(host: str, port: int, config: NetConfig) -> list[Handshake]:
            if port != leader.port:
                return []  # the bootstrap connection is fine: the metadata arrives
            leader_attempts.append(port)
            return [RejectingAuth()]

        monkeypatch.setattr(producer_module, "handshakes_for", handshakes)
        with KafkaProducer({"bootstrap.servers": bootstrap.address, "enable.idempotence": "false", "acks": "1",
                            "linger.ms": 600_000, "max.block.ms": 20_000}) as producer:
            assert producer.partitions_for("t") == [0, 1]
            # linger.ms keeps both records queued: nothing connects to the leader before flush().
            pending = [producer.send("t", value=b"v", partition=p) for p in (0, 1)]
            with pytest.raises(SaslAuthenticationFailedError, match="bad password"):
                producer.flush(10)
            for future in pending:
                error = future.exception(0)
                assert isinstance(error, SaslAuthenticationFailedError) and "bad password" in str(error)
            with pytest.raises(SaslAuthenticationFailedError, match="bad password"):
                producer.send("t", value=b"late")
            with pytest.raises(SaslAuthenticationFailedError, match="bad password"):
                producer.send_batch("t", pa.table({"value": [b"x"]}))
            with pytest.raises(SaslAuthenticationFailedError, match="bad password"):
                producer.partitions_for("t")
            with pytest.raises(SaslAuthenticationFailedError, match="bad password"):
                producer.flush(10)
    assert leader_attempts == [leader.port]  # one attempt: no reconnecting until max.block.ms


def test_the_sender_waits_for_a_connection_being_set_up_without_spinning(monkeypatch: pytest.MonkeyPatch) -> None:
    """An idempotent producer wants InitProducerId while its only connection is still being set up (here a handshake
    waiting for work elsewhere, as a SASL login waits for a KDC). The sender then waits in poll for the
    connection's events; it used to poll with a 0 ms timeout in a loop, one core busy for the whole setup."""
    import threading

    from spark_kafka_sink.net import client as client_module
    from spark_kafka_sink.net.handshake import HandshakeContext, HandshakeStatus
    from tests.conftest import wait_for

    release = threading.Event()

    class Waits:
        name = "WAITS"

        def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
            return self.step(ctx, now_ms)

        def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
            return HandshakeStatus.WAIT if not release.is_set() else HandshakeStatus.DONE

    zero_polls: list[int] = []
    steps: list[int] = []
    real_poll = client_module.NetworkClient.poll

    def poll(self: Any, timeout_ms: int, now_ms: int) -> Any:
        (zero_polls if timeout_ms == 0 else steps).append(timeout_ms)
        return real_poll(self, timeout_ms, now_ms)

    monkeypatch.setattr(client_module.NetworkClient, "poll", poll)
    monkeypatch.setattr(producer_module, "handshakes_for", lambda host, port, config: [Waits()])
    with FakeBroker(lambda peer: peer.wait_closed()) as broker:
        producer = KafkaProducer({"bootstrap.servers": broker.address, "max.block.ms": 5_000})
        try:
            wait_for("the sender to poll 100 times while the handshake waits",
                     lambda: len(steps) + len(zero_polls) >= 100, timeout=10)
            assert len(zero_polls) < 20, f"{len(zero_polls)} of {len(zero_polls) + len(steps)} polls waited 0 ms"
        finally:
            release.set()
            # Not a graceful close: one landing while ApiVersions is in flight waits for its answer (as Java's
            # does) up to the connection setup timeout, and this fake broker never answers.
            producer.close(0)
