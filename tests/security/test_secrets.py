"""Secrets stay secret: no password or key material in DEBUG logs of a whole authenticated session, in exception
messages, or in the repr/str of configs, settings, connections and handshakes."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import pytest

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.security import handshakes_for, handshakes_of
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.messages import PRODUCE
from spark_kafka_sink.protocol.record_batch import Record, encode_batch
from spark_kafka_sink.secret import Secret
from spark_kafka_sink.testing.certs import TestCertificates
from tests.net_settings import security_settings
from tests.security._client import connect, produce
from tests.security.conftest import PASSWORD, SecureBroker, create_topic_secure
from tests.security.test_secure_broker import our_settings

WRONG_PASSWORD = "wrong-Pa55word-QX81"


def _key_material(broker: SecureBroker) -> list[str]:
    """Distinctive lines of the private keys (PEM body lines), and the key password."""
    secrets = [broker.certs.client_key_password]
    for path in (broker.certs.client_key, broker.certs.client_key_encrypted, broker.certs.server_key):
        secrets += [line for line in path.read_text().splitlines() if line and not line.startswith("-----")]
    return secrets


def _leaks(texts: Iterable[str], secrets: list[str]) -> list[str]:
    return [f"{secret[:4]}... in {text[:200]!r}" for text in texts for secret in secrets if secret in text]


def _record_texts(records: list[logging.LogRecord]) -> list[str]:
    out = []
    for record in records:
        out.append(record.getMessage())
        out.append(repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            out.append(repr(record.exc_info[1]) + str(record.exc_info[1]))
        if record.exc_text:
            out.append(record.exc_text)
    return out


@pytest.mark.broker
def test_no_secret_in_debug_logs_or_errors_of_a_whole_session(
        secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    secrets = [PASSWORD, WRONG_PASSWORD, *_key_material(secure_broker)]
    errors: list[KafkaError] = []
    shown: list[str] = []
    topic = create_topic_secure(secure_broker)
    with caplog.at_level(logging.DEBUG):  # root logger: every logger of the package, and any other
        # SCRAM over TLS through the network client: bootstrap, metadata, then the leader's connection, produce.
        props = our_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-512")
        config = ProducerConfig.from_dict({"bootstrap.servers": secure_broker.address("SASL_SSL"),
                                          **props}).net_config()
        with NetworkClient(config, handshakes=handshakes_for) as client:
            md = client.fetch_metadata([topic], timeout_ms=10_000)
            batch = encode_batch([Record(b"k", b"v", int(time.time() * 1000))])
            client.request(md.leader_for(topic, 0), PRODUCE, lambda _v: {
                "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
                "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]}, 10_000)
            shown += [repr(client), repr(client.metadata)]
        # PLAIN (the token carries the password itself) and mutual TLS with an encrypted key.
        for listener, extra in (("SASL_PLAINTEXT", {"sasl.mechanism": "PLAIN"}),
                                ("MTLS", {"mutual_tls": "encrypted"})):
            mutual = extra.pop("mutual_tls", None)
            props = our_settings(secure_broker, listener, extra.get("sasl.mechanism"), mutual)
            with connect(secure_broker.address(listener), **props) as attempt:
                assert attempt.ready, attempt.error
                produce(attempt.conn, topic, [b"x"])
                shown += [repr(attempt.conn), str(attempt.conn)]
        # Failures: wrong passwords for each mechanism, wrong key password.
        for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"):
            props = our_settings(secure_broker, "SASL_SSL", mechanism, **{"sasl.password": WRONG_PASSWORD})
            with connect(secure_broker.address("SASL_SSL"), **props) as attempt:
                assert not attempt.ready
                errors.append(attempt.error)
        props = our_settings(secure_broker, "MTLS", mutual_tls="encrypted", **{"ssl.key.password": WRONG_PASSWORD})
        with connect(secure_broker.address("MTLS"), **props) as attempt:
            assert not attempt.ready
            errors.append(attempt.error)
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # DEBUG really was captured
    texts = _record_texts(caplog.records) + shown
    texts += [str(e) for e in errors] + [repr(e) for e in errors] + [repr(vars(e)) for e in errors]
    assert not _leaks(texts, secrets)
    assert [type(e).__name__ for e in errors] == ["SaslAuthenticationFailedError"] * 3 + ["ConfigError"]


def test_settings_and_producer_config_reprs_hide_secrets(certs: TestCertificates) -> None:
    key_password = certs.client_key_password
    options = {
        "bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.username": "alice", "sasl.password": PASSWORD, "ssl.key.password": key_password,
        "ssl.ca.location": str(certs.ca_cert), "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key_encrypted),
    }
    settings = security_settings(options)
    producer_config = ProducerConfig.from_dict(options)
    handshakes = handshakes_of(settings, "127.0.0.1")  # loads the encrypted key: the password really is used
    for obj in (settings, handshakes, producer_config, settings.sasl_password, settings.key_password):
        for secret in (PASSWORD, key_password):
            assert secret not in repr(obj) and secret not in str(obj)


def test_net_config_repr_hides_secrets() -> None:
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
                                       "sasl.username": "alice", "sasl.password": PASSWORD}).net_config()
    assert PASSWORD not in repr(config) and PASSWORD not in str(config)


def test_secret_wrappers_survive_net_config() -> None:
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
                                       "sasl.username": "alice", "sasl.password": Secret(PASSWORD)}).net_config()
    password = config.security.sasl_password
    assert password is not None and password.reveal() == PASSWORD
