"""A secured broker for the security tests: TLS, SASL (PLAIN, SCRAM-SHA-256/512), mutual TLS, and the odd
listeners the failure cases need. One broker for the whole session; listeners are cheap, JVMs are not.

Listeners (all on 127.0.0.1, each on its own free port):

==============  ================  ===========================================================================
name            protocol          what for
==============  ================  ===========================================================================
PLAINTEXT       PLAINTEXT         inter-broker, topic creation (the launcher's own)
SSL             SSL               TLS, client certificate *requested* (mutual TLS optional)
SASL_PLAINTEXT  SASL_PLAINTEXT    PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
SASL_SSL        SASL_SSL          the same over TLS
MTLS            SSL               client certificate *required*
WRONGHOST       SSL               presents a certificate for another host name (hostname mismatch)
PLAINONLY       SASL_PLAINTEXT    enables only PLAIN (a SCRAM client gets UNSUPPORTED_SASL_MECHANISM)
OAUTH           SASL_PLAINTEXT    OAUTHBEARER only, Kafka's unsecured validator (unsecured JWTs: "alg":"none")
OIDC            SASL_PLAINTEXT    OAUTHBEARER only, Kafka's OAuthBearerValidatorCallbackHandler: RS256 tokens
                                  verified against the JWKS of the test's identity provider (``idp``, _idp.py)
==============  ================  ===========================================================================

Delegation tokens are enabled (``delegation.token.secret.key``): SCRAM logins with ``tokenauth=true`` work on the
SASL listeners.

ACLs: the broker runs KRaft's ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=true``, so a resource
without ACLs is open to everyone (every test that sets none sees an open broker) and a test denies something by
adding ACLs for it (see :func:`acls`). The PLAINTEXT and CONTROLLER listeners authenticate as ``User:ANONYMOUS``,
a super user: inter-broker and controller traffic, topic creation and the ACL admin calls go there.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from spark_kafka_sink.testing.certs import TestCertificates, make_test_certificates
from tests.security._idp import AUDIENCE, IdentityProvider, start_identity_provider

USER = "alice"
PASSWORD = "alice-secret-7f3a9c"  # distinctive, so tests can search logs and messages for it
PLAIN_ONLY_USER = "bob"
PLAIN_ONLY_PASSWORD = "bob-secret-41d2e8"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
#: The principal of the PLAINTEXT and CONTROLLER listeners (no authentication): a super user of the authorizer.
SUPER_USER = "User:ANONYMOUS"
LISTENERS = ("SSL", "SASL_PLAINTEXT", "SASL_SSL", "MTLS", "WRONGHOST", "PLAINONLY", "OAUTH", "OIDC")
#: How long each failure case took to fail (seconds), shown in the terminal summary.
FAILURE_TIMINGS: dict[str, float] = {}
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if FAILURE_TIMINGS:
        terminalreporter.section("security failure cases: time to fail")
        for name, seconds in sorted(FAILURE_TIMINGS.items()):
            terminalreporter.write_line(f"{name:36} {seconds * 1000:7.0f} ms")


def broker_properties(certs: TestCertificates, jwks_url: str, issuer: str) -> dict[str, str]:
    """server.properties additions for the listeners above (the launcher adds the listeners themselves)."""
    props = {
        "listener.security.protocol.map": ",".join([
            "CONTROLLER:PLAINTEXT", "PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT",
            "SASL_SSL:SASL_SSL", "MTLS:SSL", "WRONGHOST:SSL", "PLAINONLY:SASL_PLAINTEXT", "OAUTH:SASL_PLAINTEXT",
            "OIDC:SASL_PLAINTEXT",
        ]),
        # PEM key store: PKCS#8 key + certificate chain in one file, no key password.
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs.server_keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs.ca_cert),
        "ssl.client.auth": "requested",
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.wronghost.ssl.keystore.location": str(certs.wrong_host_keystore),
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
        "listener.name.plainonly.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.plainonly.plain.sasl.jaas.config":
            f'{_PLAIN_MODULE} required user_{PLAIN_ONLY_USER}="{PLAIN_ONLY_PASSWORD}";',
        "listener.name.oauth.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oauth.oauthbearer.sasl.jaas.config":
            f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="admin";',
        "listener.name.oidc.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.oidc.oauthbearer.sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "listener.name.oidc.oauthbearer.sasl.server.callback.handler.class":
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        "sasl.oauthbearer.jwks.endpoint.url": jwks_url,
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        # The tokens' "iss" claim must match (Kafka 4.4's validator refuses to start without an issuer to check).
        "sasl.oauthbearer.expected.issuer": issuer,
        # Delegation tokens (KIP-48): the key the controller signs their HMACs with.
        "delegation.token.secret.key": "pykafka-sink-test-token-key",
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "super.users": SUPER_USER,
    }
    for listener in ("sasl_plaintext", "sasl_ssl"):
        for mechanism in SCRAM_MECHANISMS:
            props[f"listener.name.{listener}.{mechanism.lower()}.sasl.jaas.config"] = f"{_SCRAM_MODULE} required;"
        props[f"listener.name.{listener}.plain.sasl.jaas.config"] = (
            f'{_PLAIN_MODULE} required user_{USER}="{PASSWORD}";')
    return props


@dataclass(frozen=True)
class SecureBroker:
    """The running secured broker and the material to reach it."""

    cluster: KafkaCluster
    certs: TestCertificates

    def address(self, listener: str) -> str:
        return self.cluster.listener_bootstrap(listener)

    def host_port(self, listener: str) -> tuple[str, int]:
        host, _, port = self.address(listener).rpartition(":")
        return host, int(port)

    @property
    def plaintext_bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def log_text(self) -> str:
        node = next(iter(self.cluster.nodes.values()))
        return "\n".join(p.read_text(errors="replace") for p in (node.data_dir / "logs").glob("*.log"))


@pytest.fixture(scope="session")
def certs() -> Iterator[TestCertificates]:
    material = make_test_certificates()
    try:
        yield material
    finally:
        material.cleanup()


@pytest.fixture(scope="session")
def idp() -> Iterator[IdentityProvider]:
    provider, stop = start_identity_provider()
    try:
        yield provider
    finally:
        stop()


@pytest.fixture(scope="session")
def secure_broker(certs: TestCertificates, idp: IdentityProvider) -> Iterator[SecureBroker]:
    fetch_jars()
    jwks = f"{idp.url}/jwks"
    cluster = KafkaCluster(
        size=1,
        listeners=LISTENERS,
        properties=broker_properties(certs, jwks, idp.url),
        scram_users=[(mechanism, USER, PASSWORD) for mechanism in SCRAM_MECHANISMS],
        jvm_options=[f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks}"],  # Kafka 4's URL allow-list
    ).start()
    try:
        yield SecureBroker(cluster, certs)
    finally:
        cluster.stop()


def librdkafka_settings(broker: SecureBroker, listener: str, mechanism: str = "SCRAM-SHA-512",
                        mutual_tls: bool = False, **extra: Any) -> dict[str, Any]:
    """confluent-kafka (librdkafka) settings for ``listener``: the independent client's view of the same security."""
    protocol = {"MTLS": "SSL", "WRONGHOST": "SSL", "PLAINONLY": "SASL_PLAINTEXT",
                "OAUTH": "SASL_PLAINTEXT"}.get(listener, listener)
    conf: dict[str, Any] = {"bootstrap.servers": broker.address(listener), "security.protocol": protocol}
    if listener == "OAUTH":  # librdkafka's own unsecured JWT, accepted by the listener's unsecured validator
        mechanism = "OAUTHBEARER"
        conf.update({"sasl.mechanism": mechanism, "enable.sasl.oauthbearer.unsecure.jwt": True,
                     "sasl.oauthbearer.config": "principal=reader"})
    if "SSL" in protocol:
        conf["ssl.ca.location"] = str(broker.certs.ca_cert)
        conf["ssl.endpoint.identification.algorithm"] = "https"
    if mutual_tls:
        conf["ssl.certificate.location"] = str(broker.certs.client_cert)
        conf["ssl.key.location"] = str(broker.certs.client_key)
    if protocol.startswith("SASL_") and mechanism != "OAUTHBEARER":
        conf.update({"sasl.mechanism": mechanism, "sasl.username": USER, "sasl.password": PASSWORD})
    conf.update(extra)
    return conf


@contextmanager
def acls(broker: SecureBroker, bindings: Sequence[Any], timeout: float = 30.0) -> Iterator[None]:
    """Adds ``bindings`` (confluent-kafka ``AclBinding``) for the block, over the PLAINTEXT listener (a super user),
    and removes them after. Returns only once the broker's authorizer has them (DescribeAcls, answered by the
    broker from its own copy, lists every one), so the block never races the controller's metadata."""
    # Re-exported by confluent_kafka.admin without being listed in its stubs' __all__ (as NewTopic, tests/conftest).
    from confluent_kafka.admin import AclBindingFilter, AdminClient  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": broker.plaintext_bootstrap})
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in bindings]

    def wait_until(present: bool) -> None:
        deadline = time.monotonic() + timeout
        while any(bool(admin.describe_acls(f).result(timeout=timeout)) != present for f in filters):
            if time.monotonic() > deadline:
                raise AssertionError(f"the broker's ACLs did not {'show' if present else 'drop'} {bindings} "
                                     f"within {timeout:g} s")
            time.sleep(0.05)  # poll interval of a condition wait

    for future in admin.create_acls(list(bindings)).values():
        future.result(timeout=timeout)
    wait_until(present=True)
    try:
        yield
    finally:
        for future in admin.delete_acls(filters).values():
            future.result(timeout=timeout)
        wait_until(present=False)


def create_topic_secure(broker: SecureBroker, partitions: int = 1) -> str:
    """A fresh topic, created over the PLAINTEXT listener (topic creation is not what these tests check)."""
    from tests.conftest import create_topic

    return create_topic(broker.plaintext_bootstrap, f"sec-{uuid.uuid4().hex[:12]}", partitions)


def read_back_secure(broker: SecureBroker, listener: str, topic: str, expected: int,
                     timeout: float = 30.0, **security: Any) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) of every record in ``topic``, read with confluent-kafka over the secured ``listener``."""
    import time

    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        **librdkafka_settings(broker, listener, **security),
        "group.id": f"sec-readback-{uuid.uuid4().hex}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "auto.offset.reset": "earliest",
    })
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[tuple[bytes | None, bytes | None]] = []
        at_eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(at_eof) < len(partitions) or len(records) < expected:
            if time.monotonic() > deadline:
                raise AssertionError(f"read {len(records)} of {expected} records from {topic} over {listener}")
            for msg in consumer.consume(num_messages=1000, timeout=1.0):
                err = msg.error()
                partition = msg.partition()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                        at_eof.add(partition)
                        continue
                    raise AssertionError(f"read-back error over {listener}: {err}")
                at_eof.discard(partition or 0)
                key, value = msg.key(), msg.value()
                records.append((None if key is None else bytes(key), None if value is None else bytes(value)))
        return records
    finally:
        consumer.close()
