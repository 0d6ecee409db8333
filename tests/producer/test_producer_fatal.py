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
