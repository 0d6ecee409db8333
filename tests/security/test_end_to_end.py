"""The public entry points over secured listeners: ``KafkaProducer`` and the Spark sink (``format("pykafka-sink")``
with ``kafka.security.protocol`` ...), each read back with confluent-kafka using the same security settings; and a
wrong password stops the producer at once instead of reconnecting until max.block.ms."""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import (
    HostnameMismatchError,
    KafkaError,
    SaslAuthenticationFailedError,
    SecurityProtocolMismatchError,
    TlsHandshakeError,
    UntrustedCertificateError,
)
from spark_kafka_sink.testing.certs import java_keystore, java_truststore
from tests.security.conftest import PASSWORD, USER, SecureBroker, create_topic_secure, read_back_secure

# A hang (reconnecting forever) must fail the test, not stall the suite.
pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

MAX_BLOCK_MS = 20_000


def producer_settings(broker: SecureBroker, listener: str = "SASL_SSL", mechanism: str = "SCRAM-SHA-512",
                      extra: dict[str, Any] | None = None) -> dict[str, Any]:
    settings: dict[str, Any] = {
        "bootstrap.servers": broker.address(listener), "security.protocol": listener,
        "max.block.ms": MAX_BLOCK_MS, "linger.ms": 5,
    }
    if "SSL" in listener:
        settings["ssl.ca.location"] = str(broker.certs.ca_cert)
    if listener.startswith("SASL_"):
        settings.update({"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD})
    settings.update(extra or {})
    return settings


@pytest.mark.parametrize("credentials", ["username-password", "jaas"])
def test_producer_over_sasl_ssl(secure_broker: SecureBroker, credentials: str,
                                caplog: pytest.LogCaptureFixture) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker, partitions=2)
    settings = producer_settings(secure_broker)
    if credentials == "jaas":
        del settings["sasl.username"], settings["sasl.password"]
        settings["sasl.jaas.config"] = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                        f'username="{USER}" password="{PASSWORD}";')
    table = pa.table({"key": [b"b1", b"b2"], "value": [b"batch-1", b"batch-2"]})
    with caplog.at_level(logging.DEBUG):
        with KafkaProducer(settings) as producer:
            first = producer.send(topic, value=b"one", key=b"k1", partition=0).result(timeout=30)
            producer.send(topic, value=b"two", key=b"k2", partition=1).result(timeout=30)
            producer.send_batch(topic, table).result(timeout=30)
            producer.flush(30)
            shown = repr(producer) + str(producer.config) + repr(producer.config)
    assert first.topic == topic and first.partition == 0 and first.offset == 0
    records = read_back_secure(secure_broker, "SASL_SSL", topic, expected=4)
    assert sorted(records) == sorted([(b"k1", b"one"), (b"k2", b"two"), (b"b1", b"batch-1"), (b"b2", b"batch-2")])
    logged = " ".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert PASSWORD not in logged and PASSWORD not in shown


def test_producer_over_mutual_tls(secure_broker: SecureBroker) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    certs = secure_broker.certs
    topic = create_topic_secure(secure_broker)
    settings = producer_settings(secure_broker, "SSL", extra={
        "bootstrap.servers": secure_broker.address("MTLS"), "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key_encrypted), "ssl.key.password": certs.client_key_password})
    with KafkaProducer(settings) as producer:
        producer.send(topic, value=b"mtls", key=b"k").result(timeout=30)
    assert read_back_secure(secure_broker, "MTLS", topic, expected=1, mutual_tls=True) == [(b"k", b"mtls")]


def test_producer_with_a_wrong_password_stops_at_once(secure_broker: SecureBroker) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker)
    max_block_ms = 8_000  # small: while the producer still retries, this test costs max.block.ms
    started = time.monotonic()
    producer = KafkaProducer(producer_settings(secure_broker, extra={"sasl.password": "not-" + PASSWORD,
                                                                 "max.block.ms": max_block_ms}))
    try:
        with pytest.raises(KafkaError) as info:
            producer.send(topic, value=b"never").result(timeout=max_block_ms / 1000)
    finally:
        producer.close(5)
    elapsed = time.monotonic() - started
    error = info.value
    assert isinstance(error, SaslAuthenticationFailedError) or isinstance(error.__cause__,
                                                                          SaslAuthenticationFailedError), repr(error)
    assert elapsed < max_block_ms / 1000 / 4, f"took {elapsed:.1f}s: reconnecting instead of stopping"
    assert PASSWORD not in str(error) and PASSWORD not in repr(error)


# Each misconfiguration the issue lists, through the public producer: the fatal error itself, at once.
# (A TLS client on a plaintext port is not among them: the broker just closes, which looks like a restart and
# stays retriable, as in the Java client -- see net/security_errors.py.)
MISCONFIGURED: list[tuple[str, str, dict[str, Any], type[KafkaError]]] = [
    ("unknown-user", "SASL_SSL", {"sasl.username": "nobody"}, SaslAuthenticationFailedError),
    ("untrusted-ca", "SSL", {"ssl.ca.location": "untrusted"}, UntrustedCertificateError),
    ("hostname-mismatch", "WRONGHOST", {}, HostnameMismatchError),
    ("plaintext-on-tls", "SSL", {"security.protocol": "PLAINTEXT", "ssl.ca.location": None},
     SecurityProtocolMismatchError),
    ("sasl-plaintext-on-sasl-ssl", "SASL_SSL", {"security.protocol": "SASL_PLAINTEXT", "ssl.ca.location": None},
     SecurityProtocolMismatchError),
    ("mtls-without-client-certificate", "MTLS", {}, TlsHandshakeError),
]


@pytest.mark.parametrize(("listener", "changes", "expected"), [case[1:] for case in MISCONFIGURED],
                         ids=[case[0] for case in MISCONFIGURED])
def test_producer_stops_at_once_on_a_misconfiguration(secure_broker: SecureBroker, listener: str,
                                                      changes: dict[str, Any], expected: type[KafkaError]) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    protocol = "SSL" if listener in ("WRONGHOST", "MTLS") else listener
    settings = {**producer_settings(secure_broker, protocol), "bootstrap.servers": secure_broker.address(listener)}
    settings.update(changes)  # None removes a setting (the producer's config treats None as unset)
    if settings.get("ssl.ca.location") == "untrusted":
        settings["ssl.ca.location"] = str(secure_broker.certs.untrusted_ca_cert)  # a CA that signed nothing here
    started = time.monotonic()
    with KafkaProducer(settings) as producer:
        with pytest.raises(expected) as info:
            producer.send("never-created", value=b"never")
        with pytest.raises(expected):
            producer.flush(5)
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000 / 4
    assert PASSWORD not in str(info.value) and PASSWORD not in repr(info.value)


def test_transactional_producer_with_a_wrong_password_fails_init_transactions_at_once(
        secure_broker: SecureBroker) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    wrong = "not-" + PASSWORD
    settings = producer_settings(secure_broker, extra={"sasl.password": wrong, "transactional.id": "tx-wrong-pw"})
    started = time.monotonic()
    with KafkaProducer(settings) as producer:
        with pytest.raises(SaslAuthenticationFailedError) as info:
            producer.init_transactions()
        with pytest.raises(SaslAuthenticationFailedError):
            producer.init_transactions()  # called again: the same answer, no new attempt
    assert time.monotonic() - started < MAX_BLOCK_MS / 1000 / 4
    assert wrong not in str(info.value) and PASSWORD not in repr(info.value)


def test_producer_from_a_config_holding_secret_objects(secure_broker: SecureBroker) -> None:
    # ProducerConfig.to_dict() keeps passwords as Secret: what the Spark sink ships to its tasks.
    from spark_kafka_sink.producer.config import ProducerConfig
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker)
    options = ProducerConfig.from_dict(producer_settings(secure_broker, extra={"max.block.ms": 5_000})).to_dict()
    assert any(type(v).__name__ == "Secret" for v in options.values())
    with KafkaProducer(options) as producer:
        producer.send(topic, value=b"secret-objects", key=b"k").result(timeout=10)
    assert read_back_secure(secure_broker, "SASL_SSL", topic, expected=1) == [(b"k", b"secret-objects")]


TRUSTSTORE_PASSWORD = "ts-Pa55-JKS"


def _java_truststore_settings(broker: SecureBroker, store: Path) -> dict[str, Any]:
    """What a Java client's configuration says: a JKS truststore and its password (no type: JKS is Java's)."""
    settings = producer_settings(broker, "SSL")
    del settings["ssl.ca.location"]
    settings.update({"ssl.truststore.location": str(store), "ssl.truststore.password": TRUSTSTORE_PASSWORD})
    return settings


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_producer_with_a_java_truststore(secure_broker: SecureBroker, tmp_path: Path, kind: str,
                                         caplog: pytest.LogCaptureFixture) -> None:
    """The broker's CA from a keytool-made truststore (JKS, or keytool's default PKCS12): trusted, and it is the
    store's content that counts (one holding another CA fails verification at once)."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    certs = secure_broker.certs
    topic = create_topic_secure(secure_broker)
    store = java_truststore(certs.ca_cert, tmp_path / "client.truststore.jks", kind, TRUSTSTORE_PASSWORD)
    with caplog.at_level(logging.DEBUG):
        with KafkaProducer(_java_truststore_settings(secure_broker, store)) as producer:
            producer.send(topic, value=b"jks", key=b"k").result(timeout=30)
            shown = repr(producer.config) + str(producer.config)
    assert read_back_secure(secure_broker, "SSL", topic, expected=1) == [(b"k", b"jks")]
    logged = " ".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert TRUSTSTORE_PASSWORD not in logged + shown
    other = java_truststore(certs.untrusted_ca_cert, tmp_path / "other.jks", kind, TRUSTSTORE_PASSWORD)
    started = time.monotonic()
    with pytest.raises(UntrustedCertificateError):
        with KafkaProducer(_java_truststore_settings(secure_broker, other)) as producer:
            producer.send(topic, value=b"never", key=b"k").result(timeout=30)
    assert time.monotonic() - started < MAX_BLOCK_MS / 2000


@pytest.mark.parametrize("kind", ["JKS", "PKCS12"])
def test_producer_with_a_java_keystore_over_mutual_tls(secure_broker: SecureBroker, tmp_path: Path, kind: str,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    """The client certificate from a Java keystore, on the listener that requires one (without a certificate the
    broker refuses the handshake: TlsHandshakeError, shown in test_producer_stops_at_once_on_a_misconfiguration)."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    certs = secure_broker.certs
    topic = create_topic_secure(secure_broker)
    keystore = java_keystore(certs.client_cert, certs.client_key, tmp_path / "client.keystore", kind,
                             TRUSTSTORE_PASSWORD, chain=(certs.ca_cert,))
    truststore = java_truststore(certs.ca_cert, tmp_path / "client.truststore", kind, TRUSTSTORE_PASSWORD)
    settings = _java_truststore_settings(secure_broker, truststore)
    settings.update({"bootstrap.servers": secure_broker.address("MTLS"), "ssl.keystore.location": str(keystore),
                     "ssl.keystore.password": TRUSTSTORE_PASSWORD})
    with caplog.at_level(logging.DEBUG):
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"keystore", key=b"k").result(timeout=30)
    assert read_back_secure(secure_broker, "MTLS", topic, expected=1, mutual_tls=True) == [(b"k", b"keystore")]
    assert TRUSTSTORE_PASSWORD not in " ".join(r.getMessage() + repr(r.args) for r in caplog.records)


def test_producer_with_inline_pem_over_mutual_tls(secure_broker: SecureBroker,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """KIP-651's PEM text options (an encrypted key, its chain, the CA), on the listener that requires a client
    certificate: the key material reaches the handshake, and no log line or repr shows it."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    certs = secure_broker.certs
    topic = create_topic_secure(secure_broker)
    key = certs.client_key_encrypted.read_text()
    settings = producer_settings(secure_broker, "SSL", extra={
        "bootstrap.servers": secure_broker.address("MTLS"), "ssl.keystore.type": "PEM", "ssl.keystore.key": key,
        "ssl.keystore.certificate.chain": certs.client_cert.read_text(), "ssl.key.password": certs.client_key_password,
        "ssl.truststore.certificates": certs.ca_cert.read_text()})
    del settings["ssl.ca.location"]
    with caplog.at_level(logging.DEBUG), KafkaProducer(settings) as producer:
        producer.send(topic, value=b"inline-pem", key=b"k").result(timeout=30)
        shown = repr(producer.config) + str(producer.config)
    assert read_back_secure(secure_broker, "MTLS", topic, expected=1, mutual_tls=True) == [(b"k", b"inline-pem")]
    logged = " ".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert "BEGIN" not in logged + shown and certs.client_key_password not in logged + shown


@pytest.mark.spark
def test_spark_write_with_java_keystores(secure_broker: SecureBroker, spark: Any, tmp_path: Path) -> None:
    """A Spark job's kafka.ssl.* options as format("kafka") takes them for mutual TLS: JKS truststore and
    keystore, as Kafka's own documentation makes them."""
    certs = secure_broker.certs
    topic = create_topic_secure(secure_broker, partitions=2)
    truststore = java_truststore(certs.ca_cert, tmp_path / "kafka.client.truststore.jks", "JKS", TRUSTSTORE_PASSWORD)
    keystore = java_keystore(certs.client_cert, certs.client_key, tmp_path / "kafka.client.keystore.jks", "JKS",
                             TRUSTSTORE_PASSWORD, "key-" + TRUSTSTORE_PASSWORD)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string")
    (df.write.format("pykafka-sink")
        .option("kafka.bootstrap.servers", secure_broker.address("MTLS"))
        .option("topic", topic)
        .option("kafka.security.protocol", "SSL")
        .option("kafka.ssl.truststore.location", str(truststore))
        .option("kafka.ssl.truststore.password", TRUSTSTORE_PASSWORD)
        .option("kafka.ssl.truststore.type", "JKS")
        .option("kafka.ssl.keystore.location", str(keystore))
        .option("kafka.ssl.keystore.password", TRUSTSTORE_PASSWORD)
        .option("kafka.ssl.key.password", "key-" + TRUSTSTORE_PASSWORD)
        .option("kafka.ssl.keystore.type", "JKS")
        .option("kafka.max.block.ms", "15000")
        .mode("append").save())
    records = read_back_secure(secure_broker, "MTLS", topic, expected=20, mutual_tls=True)
    assert sorted(records) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(20))


@pytest.mark.spark
def test_spark_write_over_sasl_ssl(secure_broker: SecureBroker, spark: Any) -> None:
    topic = create_topic_secure(secure_broker, partitions=2)
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string")
    (df.write.format("pykafka-sink")
        .option("kafka.bootstrap.servers", secure_broker.address("SASL_SSL"))
        .option("topic", topic)
        .option("kafka.security.protocol", "SASL_SSL")
        .option("kafka.ssl.ca.location", str(secure_broker.certs.ca_cert))
        .option("kafka.sasl.mechanism", "SCRAM-SHA-256")
        .option("kafka.max.block.ms", "15000")
        .option("kafka.sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                          f'username="{USER}" password="{PASSWORD}";')
        .mode("append").save())
    records = read_back_secure(secure_broker, "SASL_SSL", topic, expected=20, mechanism="SCRAM-SHA-256")
    assert sorted(records) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(20))


@pytest.mark.spark
def test_spark_write_with_a_wrong_password_fails_fast_without_echoing_it(secure_broker: SecureBroker,
                                                                         spark: Any) -> None:
    topic = create_topic_secure(secure_broker)
    wrong = "not-the-password-" + PASSWORD[::-1]
    df = spark.createDataFrame([("k", "v")], "key string, value string")
    started = time.monotonic()
    with pytest.raises(Exception) as info:
        (df.write.format("pykafka-sink")
            .option("kafka.bootstrap.servers", secure_broker.address("SASL_SSL"))
            .option("topic", topic)
            .option("kafka.security.protocol", "SASL_SSL")
            .option("kafka.ssl.ca.location", str(secure_broker.certs.ca_cert))
            .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
            .option("kafka.sasl.username", USER)
            .option("kafka.sasl.password", wrong)
            .option("kafka.max.block.ms", "8000")  # small: while the producer still retries, this costs it
            .mode("append").save())
    assert time.monotonic() - started < 4
    text = str(info.value)
    assert "SASL_AUTHENTICATION_FAILED" in text or "SaslAuthenticationFailed" in text, text[:2000]
    assert wrong not in text
