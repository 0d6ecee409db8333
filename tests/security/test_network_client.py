"""The security handshakes plugged into the NetworkClient: bootstrap, metadata, then the leader's own connection,
all secured; and a fatal setup error reaches the caller at once instead of a reconnect loop."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from spark_kafka_sink.errors import KafkaError, SaslAuthenticationFailedError, UntrustedCertificateError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.handshake import Handshake
from spark_kafka_sink.net.security import handshakes_for
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.messages import METADATA, PRODUCE
from spark_kafka_sink.protocol.record_batch import Record, encode_batch
from tests.security.conftest import SecureBroker, create_topic_secure, read_back_secure
from tests.security.test_secure_broker import our_settings

pytestmark = pytest.mark.broker

TIMEOUT_MS = 10_000


def counting_factory() -> tuple[Callable[[str, int, NetConfig], Sequence[Handshake]], list[str]]:
    """handshakes_for, recording each connection attempt's address."""
    attempts: list[str] = []

    def factory(host: str, port: int, config: NetConfig) -> Sequence[Handshake]:
        attempts.append(f"{host}:{port}")
        return handshakes_for(host, port, config)

    return factory, attempts


@pytest.mark.parametrize(("listener", "mechanism", "mutual_tls"), [
    ("SASL_SSL", "SCRAM-SHA-512", None),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256", None),
    ("MTLS", None, "encrypted"),
])
def test_metadata_then_produce_to_the_leader(secure_broker: SecureBroker, listener: str, mechanism: str | None,
                                             mutual_tls: str | None) -> None:
    topic = create_topic_secure(secure_broker)
    props = our_settings(secure_broker, listener, mechanism, mutual_tls)
    config = ProducerConfig.from_dict({"bootstrap.servers": secure_broker.address(listener), **props}).net_config()
    factory, attempts = counting_factory()
    with NetworkClient(config, handshakes=factory) as client:
        md = client.fetch_metadata([topic], timeout_ms=TIMEOUT_MS)
        leader = md.leader_for(topic, 0)
        assert leader == 1
        batch = encode_batch([Record(b"k", f"nc-{listener}".encode(), int(time.time() * 1000))])
        body = client.request(leader, PRODUCE, lambda _v: {
            "transactional_id": None, "acks": -1, "timeout_ms": TIMEOUT_MS,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, TIMEOUT_MS)
        assert body["responses"][0]["partition_responses"][0]["error_code"] == 0
    # The bootstrap connection and the leader's (node 1, from metadata) each ran the handshakes once.
    assert attempts == [secure_broker.address(listener)] * 2
    records = read_back_secure(secure_broker, listener, topic, expected=1, mechanism=mechanism or "PLAIN",
                               mutual_tls=mutual_tls is not None)
    assert records == [(b"k", f"nc-{listener}".encode())]


@pytest.mark.parametrize(("listener", "overrides", "error_type"), [
    ("SASL_SSL", {"sasl.password": "not-the-password"}, SaslAuthenticationFailedError),
    ("SSL", {"ssl.ca.location": "untrusted"}, UntrustedCertificateError),
])
def test_fatal_setup_error_reaches_the_caller_without_retrying(
        secure_broker: SecureBroker, listener: str, overrides: dict[str, Any], error_type: type[KafkaError]) -> None:
    props = our_settings(secure_broker, listener, "SCRAM-SHA-256")
    if overrides.get("ssl.ca.location") == "untrusted":
        overrides = {"ssl.ca.location": str(secure_broker.certs.untrusted_ca_cert)}
    props.update(overrides)
    config = ProducerConfig.from_dict({"bootstrap.servers": secure_broker.address(listener), **props}).net_config()
    factory, attempts = counting_factory()
    started = time.monotonic()
    with NetworkClient(config, handshakes=factory) as client:
        with pytest.raises(KafkaError) as info:
            client.request(None, METADATA, lambda _v: {"topics": [], "allow_auto_topic_creation": False}, TIMEOUT_MS)
    elapsed = time.monotonic() - started
    assert len(attempts) == 1, f"{len(attempts)} connection attempts in {elapsed:.1f}s: a retry storm"
    assert isinstance(info.value, error_type) and info.value.fatal, repr(info.value)
    assert elapsed < TIMEOUT_MS / 1000 / 2
