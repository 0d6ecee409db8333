"""OAUTHBEARER with Java's OIDC login (sasl.oauthbearer.token.endpoint.url, clientId / clientSecret / scope in
sasl.jaas.config) against a broker that validates signed tokens itself: Kafka's OAuthBearerValidatorCallbackHandler
checks each token's RS256 signature against the identity provider's JWKS, its audience and its expiry.

The identity provider is a small OAuth server in this process (tests/security/_idp.py: client-credentials grant,
JWKS), signing with an RSA key made for the session; the secured broker's OIDC listener fetches its JWKS over HTTP,
so a token not signed by it, or for another audience, is refused by Kafka's own code. Records are read back with
confluent-kafka over the broker's PLAINTEXT listener."""

from __future__ import annotations

import time
from typing import Any

import pytest

from spark_kafka_sink.errors import SaslAuthenticationFailedError
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.security._idp import CLIENT_ID, CLIENT_SECRET, RFC_CLIENT_ID, RFC_CLIENT_SECRET, IdentityProvider
from tests.security._wire import relay
from tests.security.conftest import OAUTH_MODULE, SecureBroker

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

JAVA_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"


@pytest.fixture
def oidc_broker(secure_broker: SecureBroker) -> KafkaCluster:
    """The session's secured broker: its OIDC listener verifies tokens against ``idp``'s JWKS (conftest)."""
    return secure_broker.cluster


def java_settings(cluster: KafkaCluster, idp: IdentityProvider, secret: str = CLIENT_SECRET,
                  scope: str = "kafka") -> dict[str, Any]:
    """What a Java client's OIDC configuration (Confluent's documented one) says. (The producers of one
    configuration in a process share its token, as Java's login manager shares a login: another ``scope`` makes
    another configuration.)"""
    return {
        "bootstrap.servers": cluster.listener_bootstrap("OIDC"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": JAVA_HANDLER,
        "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="{CLIENT_ID}" clientSecret="{secret}" scope="{scope}";',
        "max.block.ms": 20_000,
    }


def read_back(cluster: KafkaCluster, topic: str, expected: int) -> list[tuple[bytes | None, bytes | None]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": cluster.bootstrap_servers, "group.id": f"oidc-{topic}",
                         "enable.auto.commit": False})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        records: list[tuple[bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 30
        while len(records) < expected and time.monotonic() < deadline:
            records += [(m.key(), m.value()) for m in consumer.consume(100, timeout=1.0) if m.error() is None]
        return records
    finally:
        consumer.close()


def new_topic(cluster: KafkaCluster, partitions: int = 2) -> str:
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    topic = f"oidc-{time.monotonic_ns()}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)
    return topic


def test_producer_with_javas_oidc_login(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """The client-credentials grant (HTTP Basic, grant_type, scope), then a token the broker verifies against the
    provider's key: records land; one token serves all of the producer's connections."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker, partitions=3)
    idp.token_requests.clear()
    with KafkaProducer(java_settings(oidc_broker, idp)) as producer:
        for p in range(3):
            producer.send(topic, value=f"v{p}".encode(), key=b"k", partition=p).result(timeout=30)
    assert sorted(read_back(oidc_broker, topic, 3)) == [(b"k", b"v0"), (b"k", b"v1"), (b"k", b"v2")]
    assert idp.token_requests == [{"grant_type": ["client_credentials"], "scope": ["kafka"]}]


def test_a_token_not_signed_by_the_provider_is_refused(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """The same claims, signed by another key: Kafka's validator refuses it (so the signature is what counts)."""
    from cryptography.hazmat.primitives.asymmetric import rsa

    from spark_kafka_sink.producer.producer import KafkaProducer

    forger = IdentityProvider(idp.server, rsa.generate_private_key(public_exponent=65537, key_size=2048))
    forged = forger.token(CLIENT_ID)
    settings = {k: v for k, v in java_settings(oidc_broker, idp).items()
                if k not in ("sasl.oauthbearer.token.endpoint.url", "sasl.jaas.config",
                             "sasl.login.callback.handler.class")}
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        with KafkaProducer({**settings, "sasl.oauthbearer.token.provider": lambda: forged}) as producer:
            producer.send(new_topic(oidc_broker), value=b"never").result(timeout=30)


def test_a_wrong_client_secret_fails_at_once_without_showing_it(oidc_broker: KafkaCluster,
                                                                 idp: IdentityProvider) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    wrong = "not-" + CLIENT_SECRET
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match=r"refused the client credentials: HTTP 401 "
                                                            r"\(invalid_client\)") as info:
        with KafkaProducer(java_settings(oidc_broker, idp, secret=wrong)) as producer:
            producer.send(new_topic(oidc_broker), value=b"never").result(timeout=30)
    assert time.monotonic() - started < 10
    assert wrong not in str(info.value) and CLIENT_SECRET not in str(info.value)


def test_an_unavailable_token_endpoint_is_asked_again(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """503s from the provider are tried again (a 4xx is not, above), for as long as sasl.login.retry.backoff.max.ms
    allows: two 503s are outlasted with the defaults; with a 500 ms budget, endless 503s fail after a few tries,
    and after two when sasl.login.retry.backoff.ms makes the first wait 300 ms."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker)
    idp.token_requests.clear()
    idp.fail_next[:] = [503, 503]
    with KafkaProducer(java_settings(oidc_broker, idp, scope="kafka-retried")) as producer:
        producer.send(topic, value=b"after-503", key=b"k").result(timeout=30)
    assert len(idp.token_requests) == 3 and read_back(oidc_broker, topic, 1) == [(b"k", b"after-503")]
    idp.token_requests.clear()
    idp.fail_next[:] = [503] * 100
    try:
        with pytest.raises(SaslAuthenticationFailedError, match=r"did not answer with a token in \d attempts"):
            settings = {**java_settings(oidc_broker, idp, scope="kafka-budget"),
                        "sasl.login.retry.backoff.max.ms": 500}
            with KafkaProducer(settings) as producer:
                producer.send(topic, value=b"never").result(timeout=30)
    finally:
        idp.fail_next.clear()
    assert 3 <= len(idp.token_requests) <= 5  # 100, 200 ms waits: ~4 tries in 0.5 s
    # sasl.login.retry.backoff.ms sets the first wait: 300 ms, then 500 (capped) would end past the 500 ms budget.
    idp.token_requests.clear()
    idp.fail_next[:] = [503] * 100
    try:
        with pytest.raises(SaslAuthenticationFailedError, match=r"did not answer with a token in 2 attempts"):
            settings = {**java_settings(oidc_broker, idp, scope="kafka-first-wait"),
                        "sasl.login.retry.backoff.ms": 300, "sasl.login.retry.backoff.max.ms": 500}
            with KafkaProducer(settings) as producer:
                producer.send(topic, value=b"never").result(timeout=30)
    finally:
        idp.fail_next.clear()
    assert len(idp.token_requests) == 2


def test_the_login_timeouts_bound_a_slow_token_endpoint(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """sasl.login.read.timeout.ms: a provider 1 s slow is waited for by default, not with a 300 ms timeout."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker)
    idp.delay_s = 1.0
    try:
        with KafkaProducer(java_settings(oidc_broker, idp, scope="kafka-slow")) as producer:
            producer.send(topic, value=b"slow-but-fine", key=b"k").result(timeout=30)
        started = time.monotonic()
        with pytest.raises(SaslAuthenticationFailedError, match="timed out"):
            settings = {**java_settings(oidc_broker, idp, scope="kafka-impatient"),
                        "sasl.login.read.timeout.ms": 300, "sasl.login.connect.timeout.ms": 300,
                        "sasl.login.retry.backoff.max.ms": 0}
            with KafkaProducer(settings) as producer:
                producer.send(topic, value=b"never").result(timeout=30)
        assert time.monotonic() - started < 5
    finally:
        idp.delay_s = 0.0
    assert read_back(oidc_broker, topic, 1) == [(b"k", b"slow-but-fine")]


@pytest.mark.spark
def test_spark_write_with_javas_oidc_options(oidc_broker: KafkaCluster, idp: IdentityProvider, spark: Any) -> None:
    """The kafka.* options of a format("kafka") job on an OIDC cluster, unchanged."""
    topic = new_topic(oidc_broker)
    writer = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(20)], "key string, value string").write
    for key, value in java_settings(oidc_broker, idp).items():
        writer = writer.option(f"kafka.{key}", str(value))
    writer.format("pykafka-sink").option("topic", topic).mode("append").save()
    assert sorted(read_back(oidc_broker, topic, 20)) == sorted((f"k{i}".encode(), f"v{i}".encode())
                                                                for i in range(20))


def kafka41_settings(cluster: KafkaCluster, idp: IdentityProvider, client_id: str, secret: str,
                     **extra: Any) -> dict[str, Any]:
    """Kafka 4.1's form of the same login (KIP-1139): the credentials and scope as settings, the JAAS entry empty."""
    return {
        "bootstrap.servers": cluster.listener_bootstrap("OIDC"), "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.token.endpoint.url": f"{idp.url}/token",
        "sasl.oauthbearer.jwt.retriever.class":
            "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever",
        "sasl.oauthbearer.client.credentials.client.id": client_id,
        "sasl.oauthbearer.client.credentials.client.secret": secret,
        "sasl.oauthbearer.scope": "kafka-41", "sasl.jaas.config": f"{OAUTH_MODULE} required;",
        "max.block.ms": 20_000, **extra,
    }


def test_kafka_41_client_credentials_settings(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """sasl.oauthbearer.client.credentials.client.id / .client.secret and sasl.oauthbearer.scope: the token
    endpoint gets them, and they win over the JAAS options (a wrong clientSecret there changes nothing), as in Java."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker)
    idp.token_requests.clear()
    settings = kafka41_settings(oidc_broker, idp, CLIENT_ID, CLIENT_SECRET, **{
        "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="{CLIENT_ID}" clientSecret="wrong" scope="old";'})
    with KafkaProducer(settings) as producer:
        producer.send(topic, value=b"kafka-4.1", key=b"k").result(timeout=30)
    assert read_back(oidc_broker, topic, 1) == [(b"k", b"kafka-4.1")]
    assert idp.token_requests == [{"grant_type": ["client_credentials"], "scope": ["kafka-41"]}]


def test_header_urlencode_sends_the_credentials_form_encoded(oidc_broker: KafkaCluster,
                                                              idp: IdentityProvider) -> None:
    """A provider that form-decodes the Basic credentials (RFC 6749 2.3.1) and a secret with '+', '/', '%' and
    '=': sent as they are (Java's default) the provider reads another secret and refuses it; with
    sasl.oauthbearer.header.urlencode=true it accepts them."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker)
    raw = kafka41_settings(oidc_broker, idp, RFC_CLIENT_ID, RFC_CLIENT_SECRET)
    with pytest.raises(SaslAuthenticationFailedError, match=r"HTTP 401 \(invalid_client\)"):
        with KafkaProducer(raw) as producer:
            producer.send(topic, value=b"never").result(timeout=30)
    with KafkaProducer({**raw, "sasl.oauthbearer.header.urlencode": "true"}) as producer:
        producer.send(topic, value=b"encoded", key=b"k").result(timeout=30)
    assert read_back(oidc_broker, topic, 1) == [(b"k", b"encoded")]


def test_extension_options_are_sasl_extensions(oidc_broker: KafkaCluster, idp: IdentityProvider) -> None:
    """Confluent Cloud's logicalCluster / identityPoolId as `extension_<name>` login options: each is a key=value
    pair of the client message as it goes over the wire, beside the endpoint's token, which the broker accepts."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = new_topic(oidc_broker)
    host, _, port = oidc_broker.listener_bootstrap("OIDC").rpartition(":")
    with relay(host, int(port)) as wire:
        settings = {**java_settings(oidc_broker, idp, scope="kafka-extensions"), "bootstrap.servers": wire.address,
                    "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="{CLIENT_ID}" clientSecret="{CLIENT_SECRET}"'
                                        ' scope="kafka-extensions" extension_logicalCluster="lkc-abc123"'
                                        ' extension_identityPoolId="pool-XyZ";'}
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"extended", key=b"k").result(timeout=30)
        sent = wire.oauthbearer_messages()
    assert read_back(oidc_broker, topic, 1) == [(b"k", b"extended")]
    header, pairs = sent[0]
    assert header == "n,," and pairs.pop("auth").startswith("Bearer ey")
    assert pairs == {"logicalCluster": "lkc-abc123", "identityPoolId": "pool-XyZ"}
