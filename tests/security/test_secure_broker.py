"""Our connections against a real secured broker: every protocol and mechanism authenticates, produces and is read
back by an independent client (confluent-kafka / librdkafka); every misconfiguration fails fast, once, with a
distinct fatal error that says what to change."""

from __future__ import annotations

import logging
import re
import time
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    HostnameMismatchError,
    IllegalSaslStateError,
    KafkaError,
    SaslAuthenticationFailedError,
    SecurityProtocolMismatchError,
    TlsHandshakeError,
    UnsupportedSaslMechanismError,
    UntrustedCertificateError,
)
from tests.security._client import connect, metadata, produce
from tests.security.conftest import (
    FAILURE_TIMINGS,
    PASSWORD,
    PLAIN_ONLY_PASSWORD,
    PLAIN_ONLY_USER,
    USER,
    SecureBroker,
    create_topic_secure,
    read_back_secure,
)

pytestmark = pytest.mark.broker

REQUEST_TIMEOUT_MS = 10_000


def our_settings(broker: SecureBroker, listener: str, mechanism: str | None = None,
                 mutual_tls: str | None = None, **extra: Any) -> dict[str, Any]:
    """Our client's settings for ``listener`` (``mutual_tls``: "plain" or "encrypted" client key)."""
    certs = broker.certs
    protocol = {"MTLS": "SSL", "WRONGHOST": "SSL", "PLAINONLY": "SASL_PLAINTEXT"}.get(listener, listener)
    props: dict[str, Any] = {"security.protocol": protocol, "request.timeout.ms": REQUEST_TIMEOUT_MS}
    if "SSL" in protocol:
        props["ssl.ca.location"] = str(certs.ca_cert)
    if mutual_tls == "plain":
        props.update({"ssl.certificate.location": str(certs.client_cert), "ssl.key.location": str(certs.client_key)})
    elif mutual_tls == "encrypted":
        props.update({"ssl.certificate.location": str(certs.client_cert),
                      "ssl.key.location": str(certs.client_key_encrypted),
                      "ssl.key.password": certs.client_key_password})
    if protocol.startswith("SASL_"):
        props.update({"sasl.mechanism": mechanism or "PLAIN", "sasl.username": USER, "sasl.password": PASSWORD})
    props.update(extra)
    return props


# -- every protocol and mechanism works end to end ------------------------------------------------------------------

SUCCESS: list[tuple[str, dict[str, Any]]] = [
    ("SSL", {}),
    ("SSL", {"java_truststore": True}),
    ("SASL_PLAINTEXT", {"mechanism": "PLAIN"}),
    ("SASL_PLAINTEXT", {"mechanism": "SCRAM-SHA-256"}),
    ("SASL_PLAINTEXT", {"mechanism": "SCRAM-SHA-512"}),
    ("SASL_SSL", {"mechanism": "PLAIN"}),
    ("SASL_SSL", {"mechanism": "SCRAM-SHA-256"}),
    ("SASL_SSL", {"mechanism": "SCRAM-SHA-512"}),
    ("SASL_SSL", {"mechanism": "SCRAM-SHA-512", "jaas": True}),
    ("SSL", {"mutual_tls": "plain"}),  # certificate requested: presented and accepted
    ("MTLS", {"mutual_tls": "plain"}),  # certificate required
    ("MTLS", {"mutual_tls": "encrypted"}),  # ... from an encrypted key with ssl.key.password
    ("WRONGHOST", {"no_hostname_check": True}),  # chain verified, host name check explicitly off
]


def _case_id(case: tuple[str, dict[str, Any]]) -> str:
    listener, opts = case
    return "-".join([listener, *(str(v) if k in ("mechanism", "mutual_tls") else k for k, v in opts.items())])


@pytest.mark.parametrize("case", SUCCESS, ids=[_case_id(c) for c in SUCCESS])
def test_authenticates_produces_and_reads_back(secure_broker: SecureBroker, case: tuple[str, dict[str, Any]]) -> None:
    listener, opts = case
    props = our_settings(secure_broker, listener, opts.get("mechanism"), opts.get("mutual_tls"))
    if opts.get("java_truststore"):
        props["ssl.truststore.location"] = props.pop("ssl.ca.location")
        props["ssl.truststore.type"] = "PEM"
    if opts.get("jaas"):
        del props["sasl.username"], props["sasl.password"]
        props["sasl.jaas.config"] = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
                                     f'username="{USER}" password="{PASSWORD}";')
    readback_extra: dict[str, Any] = {}
    if opts.get("no_hostname_check"):
        props["ssl.endpoint.identification.algorithm"] = ""
        readback_extra["ssl.endpoint.identification.algorithm"] = "none"
    topic = create_topic_secure(secure_broker)
    values = [f"{_case_id(case)}-{i}".encode() for i in range(3)]
    with connect(secure_broker.address(listener), **props) as attempt:
        assert attempt.ready, attempt.error
        body = metadata(attempt.conn, topic)
        # The broker answers with its addresses on the listener we came in through.
        assert [(b["host"], b["port"]) for b in body["brokers"]] == [secure_broker.host_port(listener)]
        assert produce(attempt.conn, topic, values) == 0
    records = read_back_secure(secure_broker, listener, topic, expected=3,
                               mechanism=opts.get("mechanism", "PLAIN"),
                               mutual_tls=opts.get("mutual_tls") is not None, **readback_extra)
    assert records == [(b"k", v) for v in values]


# -- each misconfiguration fails fast, once, with its own fatal error -----------------------------------------------

def _failure_cases(broker: SecureBroker) -> dict[str, tuple[str, dict[str, Any], type[KafkaError], str]]:
    ssl_port = broker.address("SSL")
    sasl_ssl = broker.address("SASL_SSL")
    wrong = {"sasl.password": "wrong-password-" + PASSWORD[::-1]}
    return {
        "wrong-password-scram-256": ("SASL_PLAINTEXT",
                                     our_settings(broker, "SASL_PLAINTEXT", "SCRAM-SHA-256", **wrong),
                                     SaslAuthenticationFailedError,
                                     "invalid credentials with SASL mechanism SCRAM-SHA-256"),
        "wrong-password-scram-512-tls": ("SASL_SSL", our_settings(broker, "SASL_SSL", "SCRAM-SHA-512", **wrong),
                                         SaslAuthenticationFailedError, "invalid credentials"),
        "wrong-password-plain": ("SASL_PLAINTEXT", our_settings(broker, "SASL_PLAINTEXT", "PLAIN", **wrong),
                                 SaslAuthenticationFailedError, "Invalid username or password"),
        "unknown-user": ("SASL_PLAINTEXT", our_settings(broker, "SASL_PLAINTEXT", "SCRAM-SHA-256",
                                                        **{"sasl.username": "mallory"}),
                         SaslAuthenticationFailedError, "invalid credentials"),
        "unsupported-mechanism": ("PLAINONLY", our_settings(broker, "PLAINONLY", "SCRAM-SHA-512"),
                                  UnsupportedSaslMechanismError, "does not enable SCRAM-SHA-512; it enables: PLAIN"),
        "untrusted-ca": ("SSL", our_settings(broker, "SSL", **{"ssl.ca.location": str(broker.certs.untrusted_ca_cert)}),
                         UntrustedCertificateError,
                         r"certificate verify failed: the CA .* is not trusted.*ssl\.ca\.location"),
        "hostname-mismatch": ("WRONGHOST", our_settings(broker, "WRONGHOST"), HostnameMismatchError,
                              r"does not match host 127\.0\.0\.1.*ssl\.endpoint\.identification\.algorithm="),
        "plaintext-on-tls": ("SSL", {"security.protocol": "PLAINTEXT"}, SecurityProtocolMismatchError, re.escape(
            f"the listener at {ssl_port} speaks TLS: set security.protocol=SSL or SASL_SSL")),
        "sasl-plaintext-on-sasl-ssl": ("SASL_SSL", our_settings(broker, "SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                       SecurityProtocolMismatchError,
                                       re.escape(f"the listener at {sasl_ssl} speaks TLS")),
        "mtls-without-client-certificate": ("MTLS", our_settings(broker, "MTLS"), TlsHandshakeError,
                                            "requires a client certificate.*ssl.certificate.location"),
        "sasl-on-ssl-listener": ("SSL", our_settings(broker, "SASL_SSL", "SCRAM-SHA-256"), IllegalSaslStateError,
                                 "did not expect SASL"),
    }


FAILURES = ["wrong-password-scram-256", "wrong-password-scram-512-tls", "wrong-password-plain", "unknown-user",
            "unsupported-mechanism", "untrusted-ca", "hostname-mismatch", "plaintext-on-tls",
            "sasl-plaintext-on-sasl-ssl", "mtls-without-client-certificate", "sasl-on-ssl-listener"]


@pytest.mark.parametrize("name", FAILURES)
def test_misconfiguration_fails_fast_with_a_distinct_fatal_error(
        secure_broker: SecureBroker, name: str) -> None:
    listener, props, error_type, message = _failure_cases(secure_broker)[name]
    with connect(secure_broker.address(listener), **props) as attempt:
        assert not attempt.ready
        error = attempt.error
    FAILURE_TIMINGS[name] = attempt.elapsed_s
    assert type(error) is error_type, f"{type(error).__name__}: {error}"
    assert re.search(message, str(error)), str(error)
    assert error.fatal and not error.retriable  # the producer stops instead of reconnecting forever
    assert attempt.elapsed_s < REQUEST_TIMEOUT_MS / 1000 / 2, f"took {attempt.elapsed_s:.1f}s"
    assert PASSWORD not in str(error) and PASSWORD not in repr(error)


def test_failure_errors_are_distinct(secure_broker: SecureBroker) -> None:
    kinds = {error_type for _, _, error_type, _ in _failure_cases(secure_broker).values()}
    assert len(kinds) == 7  # auth failed, unsupported mechanism, untrusted, hostname, TLS mismatch, mTLS, SASL state


def test_plain_user_of_a_plain_only_listener(secure_broker: SecureBroker) -> None:
    props = our_settings(secure_broker, "PLAINONLY", "PLAIN",
                         **{"sasl.username": PLAIN_ONLY_USER, "sasl.password": PLAIN_ONLY_PASSWORD})
    with connect(secure_broker.address("PLAINONLY"), **props) as attempt:
        assert attempt.ready, attempt.error



def test_host_name_checked_against_a_dns_san(secure_broker: SecureBroker) -> None:
    # "localhost" is checked against DNS:localhost (127.0.0.1 against IP:127.0.0.1, above). The socket goes to
    # 127.0.0.1 whatever "localhost" resolves to on this machine (::1 first on some): only TLS sees the name.
    settings = our_settings(secure_broker, "SASL_SSL", "SCRAM-SHA-256")
    with connect(secure_broker.address("SASL_SSL"), tls_host="localhost", **settings) as attempt:
        assert attempt.ready, attempt.error
    with connect(secure_broker.address("SASL_SSL"), tls_host="kafka.example.com", **settings) as attempt:
        assert isinstance(attempt.error, HostnameMismatchError), attempt.error


@pytest.mark.parametrize(("options", "version"), [
    ({}, "TLSv1.3"),
    ({"ssl.protocol": "TLSv1.2"}, "TLSv1.2"),  # Java: keeps TLSv1.3 out even though it is enabled
    ({"ssl.enabled.protocols": "TLSv1.2"}, "TLSv1.2"),
    ({"ssl.enabled.protocols": "TLSv1.1,TLSv1.2,TLSv1.3"}, "TLSv1.3"),
])
def test_tls_version_offered_to_the_broker(secure_broker: SecureBroker, options: dict[str, str], version: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    """ssl.enabled.protocols and ssl.protocol as the Java client reads them, against the broker's TLS listener
    (which enables TLSv1.2 and TLSv1.3): the version the handshake settled on, as the connection logs it."""
    caplog.set_level(logging.DEBUG, logger="spark_kafka_sink.net.security")
    topic = create_topic_secure(secure_broker)
    with connect(secure_broker.address("SSL"), **our_settings(secure_broker, "SSL", **options)) as attempt:
        assert attempt.ready, attempt.error
        assert produce(attempt.conn, topic, [b"tls"]) == 0
    established = [r.getMessage() for r in caplog.records if "TLS with" in r.getMessage()]
    assert len(established) == 1 and f"established: {version}," in established[0], established


def test_tls_on_a_plaintext_port_ends_in_the_max_block_timeout(secure_broker: SecureBroker) -> None:
    """A TLS client on a plaintext listener: the broker closes the connection (it reads the ClientHello as a request
    of absurd size), which looks like a restarting broker, so it is retried -- no fatal error at the first
    connection as for the opposite mistake -- and the send ends at max.block.ms, saying the topic was not found."""
    from spark_kafka_sink import KafkaProducer
    from spark_kafka_sink.errors import KafkaTimeoutError

    settings = {"bootstrap.servers": secure_broker.plaintext_bootstrap, "max.block.ms": 3_000,
                **our_settings(secure_broker, "SSL")}
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="not present in metadata after 3000 ms") as info:
        with KafkaProducer(settings) as producer:
            producer.send("never-created", value=b"v").result(timeout=30)
    elapsed = time.monotonic() - started
    assert not isinstance(info.value, SecurityProtocolMismatchError)
    assert 3.0 <= elapsed < 10, f"took {elapsed:.1f}s"
