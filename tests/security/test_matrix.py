"""Every security setup the issue names, through both public entry points: ``KafkaProducer`` and the Spark sink.

Each case writes, then reads back with confluent-kafka (librdkafka) over the same listener and security settings:
SSL, SASL_PLAINTEXT and SASL_SSL with PLAIN / SCRAM-SHA-256 / SCRAM-SHA-512, and mutual TLS.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink.producer import KafkaProducer
from tests.security.conftest import PASSWORD, USER, SecureBroker, create_topic_secure, read_back_secure

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

# (case id, listener, sasl mechanism or None, mutual TLS)
CASES = [
    ("ssl", "SSL", None, False),
    ("sasl_plaintext-plain", "SASL_PLAINTEXT", "PLAIN", False),
    ("sasl_plaintext-scram256", "SASL_PLAINTEXT", "SCRAM-SHA-256", False),
    ("sasl_plaintext-scram512", "SASL_PLAINTEXT", "SCRAM-SHA-512", False),
    ("sasl_ssl-plain", "SASL_SSL", "PLAIN", False),
    ("sasl_ssl-scram256", "SASL_SSL", "SCRAM-SHA-256", False),
    ("sasl_ssl-scram512", "SASL_SSL", "SCRAM-SHA-512", False),
    ("mutual_tls", "MTLS", None, True),
]


def security_settings(broker: SecureBroker, listener: str, mechanism: str | None, mutual_tls: bool) -> dict[str, str]:
    """Java-named producer settings for one case (the Spark sink takes the same with a ``kafka.`` prefix)."""
    protocol = "SSL" if listener == "MTLS" else listener
    settings = {"bootstrap.servers": broker.address(listener), "security.protocol": protocol}
    if "SSL" in protocol:
        settings["ssl.ca.location"] = str(broker.certs.ca_cert)
    if mutual_tls:
        settings["ssl.certificate.location"] = str(broker.certs.client_cert)
        settings["ssl.key.location"] = str(broker.certs.client_key)
    if mechanism is not None:
        settings.update({"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD})
    return settings


def _read_back(broker: SecureBroker, listener: str, mechanism: str | None, mutual_tls: bool, topic: str,
               expected: int) -> list[tuple[bytes | None, bytes | None]]:
    security: dict[str, Any] = {"mutual_tls": mutual_tls}
    if mechanism is not None:
        security["mechanism"] = mechanism
    return sorted(read_back_secure(broker, listener, topic, expected=expected, **security))


@pytest.mark.parametrize(("listener", "mechanism", "mutual_tls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_producer(secure_broker: SecureBroker, listener: str, mechanism: str | None, mutual_tls: bool) -> None:
    topic = create_topic_secure(secure_broker, partitions=2)
    settings: dict[str, Any] = {**security_settings(secure_broker, listener, mechanism, mutual_tls),
                                "max.block.ms": 20_000}
    with KafkaProducer(settings) as producer:
        producer.send(topic, value=b"single", key=b"k0").result(timeout=30)
        producer.send_batch(topic, pa.table({"key": [b"k1", b"k2"], "value": [b"v1", b"v2"]})).result(timeout=30)
    assert _read_back(secure_broker, listener, mechanism, mutual_tls, topic, 3) == [
        (b"k0", b"single"), (b"k1", b"v1"), (b"k2", b"v2")]


@pytest.mark.spark
@pytest.mark.parametrize(("listener", "mechanism", "mutual_tls"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_spark_sink(secure_broker: SecureBroker, spark: Any, listener: str, mechanism: str | None,
                    mutual_tls: bool) -> None:
    topic = create_topic_secure(secure_broker, partitions=2)
    rows = [(f"k{i}", f"v{i}") for i in range(10)]
    writer = spark.createDataFrame(rows, "key string, value string").write.format("pykafka-sink")
    for name, value in security_settings(secure_broker, listener, mechanism, mutual_tls).items():
        writer = writer.option(f"kafka.{name}", value)
    writer.option("topic", topic).option("kafka.max.block.ms", "20000").mode("append").save()
    assert _read_back(secure_broker, listener, mechanism, mutual_tls, topic, 10) == sorted(
        (k.encode(), v.encode()) for k, v in rows)
