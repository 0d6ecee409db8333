"""SASL/OAUTHBEARER: the client message's exact bytes, where tokens come from and for how long, the settings'
errors; then a real broker's OAUTHBEARER listener (Kafka's unsecured validator) taking our producer, read back with
confluent-kafka (librdkafka's own OAUTHBEARER). A Spark write over OAUTHBEARER is in test_oauthbearer_oidc.py."""

from __future__ import annotations

import base64
import json
import logging
import time
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError, SaslAuthenticationFailedError
from spark_kafka_sink.net.oauthbearer import token_source, unsecured_jwt
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.sasl import OAuthBearerClient, SaslVerificationError, oauthbearer_initial_response
from tests.net_settings import security_settings
from tests.security.conftest import OAUTH_MODULE, SecureBroker, create_topic_secure, read_back_secure

UNSECURED_JAAS = f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="alice";'


def claims(token: str) -> dict[str, Any]:
    header, body, signature = token.split(".")
    assert json.loads(base64.urlsafe_b64decode(header + "==")) == {"alg": "none"} and signature == ""
    decoded: dict[str, Any] = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    return decoded


# -- sans-IO -------------------------------------------------------------------------------------------------------

def test_client_message_exact_bytes() -> None:
    """Kafka's OAuthBearerClientInitialResponse layout: gs2 header, auth, extensions, each ended by 0x01, then 0x01."""
    assert oauthbearer_initial_response("abc.def.") == b"n,,\x01auth=Bearer abc.def.\x01\x01"
    assert oauthbearer_initial_response("t0k", {"traceId": "x1", "env": "prod"}) == (
        b"n,,\x01auth=Bearer t0k\x01traceId=x1\x01env=prod\x01\x01")
    client = OAuthBearerClient("t0k")
    assert client.initial_response() == b"n,,\x01auth=Bearer t0k\x01\x01" and not client.complete
    assert client.respond(b"") is None and client.complete
    refused = OAuthBearerClient("t0k")
    with pytest.raises(SaslVerificationError, match='refused the OAUTHBEARER token: {"status":"invalid_token"}'):
        refused.respond(b'{"status":"invalid_token"}')
    assert "t0k" not in repr(refused)


def test_unsecured_login_builds_javas_token() -> None:
    """Java's default login handler: an "alg":"none" JWT of the configured claims, iat and exp from the lifetime."""
    now = 1_700_000_000.0
    tokens = token_source({"unsecuredLoginStringClaim_sub": "alice", "unsecuredLoginNumberClaim_level": "3",
                           "unsecuredLoginListClaim_scope": ",read,write", "unsecuredLoginLifetimeSeconds": "600",
                           "unsecuredLoginExtension_traceId": "abc"}, None, clock=lambda: now)
    assert claims(tokens.token().reveal()) == {"iat": now, "exp": now + 600, "sub": "alice", "level": 3,
                                               "scope": ["read", "write"]}
    assert tokens.extensions == {"traceId": "abc"}
    assert unsecured_jwt({"sub": "a"}) == "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0."


def test_a_token_is_reused_until_80_percent_of_its_lifetime() -> None:
    clock = [1000.0]
    calls: list[float] = []

    def provider() -> tuple[str, float]:
        calls.append(clock[0])
        return f"token-{len(calls)}", clock[0] + 100

    tokens = token_source(None, provider, clock=lambda: clock[0])
    assert tokens.token().reveal() == "token-1"
    clock[0] = 1079.0
    assert tokens.token().reveal() == "token-1" and len(calls) == 1
    clock[0] = 1080.0
    assert tokens.token().reveal() == "token-2" and calls == [1000.0, 1080.0]
    # A bare token: a JWT's own exp claim is its expiry.
    jwt = token_source(None, lambda: unsecured_jwt({"sub": "a", "exp": 2000}), clock=lambda: clock[0])
    assert jwt.token().reveal().startswith("eyJ")


def test_provider_failures_are_named_without_their_text() -> None:
    def broken() -> str:
        raise RuntimeError("client secret s3cr3t rejected")

    with pytest.raises(SaslAuthenticationFailedError, match="raised RuntimeError") as info:
        token_source(None, broken).token()
    assert "s3cr3t" not in str(info.value)
    with pytest.raises(SaslAuthenticationFailedError, match="gave no bearer token"):
        token_source(None, lambda: "has spaces").token()


RETRIEVERS = "org.apache.kafka.common.security.oauthbearer."
ENDPOINT = {"sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}


@pytest.mark.parametrize(("options", "key", "text"), [
    ({"sasl.jaas.config": f"{OAUTH_MODULE} required;"}, "sasl.jaas.config", "unsecuredLoginStringClaim_sub"),
    ({}, "sasl.jaas.config", "unsecuredLoginStringClaim_sub"),
    ({"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" '
                          'password="b";'}, "sasl.jaas.config", "needs the login module"),
    ({"sasl.jaas.config": UNSECURED_JAAS, "sasl.username": "alice"}, "sasl.username", "authenticates with a token"),
    ({"sasl.oauthbearer.token.provider": "no_such_module.tokens"}, "sasl.oauthbearer.token.provider", "import"),
    ({"sasl.oauthbearer.token.provider": "json.decoder"}, "sasl.oauthbearer.token.provider", "a callable"),
    ({"sasl.oauthbearer.token.endpoint.url": "ftp://idp.example/token",
      "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="a" clientSecret="b";'},
     "sasl.oauthbearer.token.endpoint.url", r"an http\(s\) URL"),
    ({**ENDPOINT, "sasl.jaas.config": f'{OAUTH_MODULE} required clientId="a";'},
     "sasl.oauthbearer.client.credentials.client.secret", "needs a client id and secret: set "
     "sasl.oauthbearer.client.credentials.client.secret .* or the OAuthBearerLoginModule options clientId and "
     "clientSecret"),
    ({**ENDPOINT, "sasl.oauthbearer.client.credentials.client.secret": "s"},
     "sasl.oauthbearer.client.credentials.client.id", "set sasl.oauthbearer.client.credentials.client.id"),
    ({"sasl.jaas.config": UNSECURED_JAAS, "sasl.oauthbearer.client.credentials.client.id": "a"},
     "sasl.oauthbearer.client.credentials.client.id", "is for the token endpoint login: set "
     "sasl.oauthbearer.token.endpoint.url"),
    ({**ENDPOINT, "sasl.oauthbearer.jwt.retriever.class": RETRIEVERS + "JwtBearerJwtRetriever"},
     "sasl.oauthbearer.jwt.retriever.class", "the jwt-bearer grant is not supported here"),
    ({**ENDPOINT, "sasl.oauthbearer.jwt.retriever.class": RETRIEVERS + "FileJwtRetriever"},
     "sasl.oauthbearer.jwt.retriever.class", "FileJwtRetriever takes file URLs, but "
     "sasl.oauthbearer.token.endpoint.url is a https URL"),
    ({**ENDPOINT, "sasl.oauthbearer.client.credentials.client.id": "a",
      "sasl.oauthbearer.client.credentials.client.secret": "s", "sasl.oauthbearer.header.urlencode": "yes"},
     "sasl.oauthbearer.header.urlencode", "true or false"),
])
def test_settings_errors_name_the_option(options: dict[str, str], key: str, text: str) -> None:
    base = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    for build in (security_settings,
                  lambda o: ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", **o})):
        with pytest.raises(ConfigError, match=text) as info:
            build({**base, **options})
        assert info.value.key == key and "s3cr" not in str(info.value)


def test_other_java_login_handlers_point_to_the_provider() -> None:
    with pytest.raises(ConfigError, match="give sasl.oauthbearer.token.provider") as info:
        ProducerConfig.from_dict({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "OAUTHBEARER", "sasl.jaas.config": UNSECURED_JAAS,
                                  "sasl.login.callback.handler.class": "com.example.MyLoginHandler"})
    assert info.value.key == "sasl.login.callback.handler.class"


def test_kafka_41_settings_fill_the_client_credentials() -> None:
    """Kafka 4.1's settings need no JAAS options; Java's three retrievers are accepted; the secret stays hidden."""
    settings = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                **ENDPOINT, "sasl.oauthbearer.client.credentials.client.id": "writer",
                "sasl.oauthbearer.client.credentials.client.secret": "s3cr3t-41", "sasl.oauthbearer.scope": "kafka"}
    for retriever in ("DefaultJwtRetriever", "ClientCredentialsJwtRetriever"):
        config = ProducerConfig.from_dict({**settings, "sasl.oauthbearer.jwt.retriever.class": RETRIEVERS + retriever})
        assert "s3cr3t-41" not in repr(config)
        assert config.sasl_oauthbearer_client_credentials_client_secret is not None
    file_config = {**settings, "sasl.oauthbearer.token.endpoint.url": "file:///tmp/token",
                   "sasl.oauthbearer.jwt.retriever.class": RETRIEVERS + "FileJwtRetriever"}
    assert security_settings(file_config).oauth_tokens is not None


def test_a_token_file_url_is_read_at_each_refresh(tmp_path: Any) -> None:
    """Java's file: token endpoint: the file's token, read again when the one in hand gets old."""
    path = tmp_path / "token"
    path.write_text(unsecured_jwt({"sub": "a", "exp": 1100}) + "\n")
    clock = [1000.0]
    tokens = token_source(None, None, clock=lambda: clock[0], endpoint=path.as_uri())
    assert claims(tokens.token().reveal())["exp"] == 1100
    path.write_text(unsecured_jwt({"sub": "a", "exp": 1200}))
    clock[0] = 1090.0  # past 80% of the first token's lifetime
    assert claims(tokens.token().reveal())["exp"] == 1200


def test_a_failed_refresh_keeps_a_token_that_is_still_valid() -> None:
    clock = [1000.0]
    answers: list[Any] = [("first", 1100.0), SaslAuthenticationFailedError("endpoint down"), ("second", 1300.0)]

    def provider() -> tuple[str, float]:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer  # type: ignore[no-any-return]

    tokens = token_source(None, provider, clock=lambda: clock[0])
    assert tokens.token().reveal() == "first"
    clock[0] = 1085.0  # refresh due; the provider fails; "first" is valid until 1100
    assert tokens.token().reveal() == "first"
    clock[0] = 1095.0  # asked again 10 s later
    assert tokens.token().reveal() == "second"
    answers.append(SaslAuthenticationFailedError("endpoint down"))
    clock[0] = 1400.0  # expired: nothing left to fall back on
    with pytest.raises(SaslAuthenticationFailedError):
        tokens.token()


def test_a_provider_needs_oauthbearer_and_a_dotted_path_resolves() -> None:
    with pytest.raises(ConfigError, match="set sasl.mechanism=OAUTHBEARER") as info:
        ProducerConfig.from_dict({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.username": "u", "sasl.password": "p",
                                  "sasl.oauthbearer.token.provider": "tests.security.test_oauthbearer.provider"})
    assert info.value.key == "sasl.oauthbearer.token.provider"
    settings = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                                              "sasl.oauthbearer.token.provider":
                                                  "tests.security.test_oauthbearer.provider"})
    assert settings.oauth_tokens is not None and claims(settings.oauth_tokens.token().reveal())["sub"] == "carol"


def provider() -> str:
    """A token provider named by its dotted path (as a Spark option gives it)."""
    return unsecured_jwt({"sub": "carol", "exp": time.time() + 600})


# -- against the broker ----------------------------------------------------------------------------------------------

def _settings(broker: SecureBroker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": broker.address("OAUTH"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "max.block.ms": 20_000, **extra}


@pytest.mark.broker
def test_producer_with_javas_unsecured_login(secure_broker: SecureBroker, caplog: pytest.LogCaptureFixture) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker, partitions=2)
    with caplog.at_level(logging.DEBUG), KafkaProducer(_settings(secure_broker, **{
            "sasl.jaas.config": UNSECURED_JAAS})) as producer:
        producer.send(topic, value=b"one", key=b"k1").result(timeout=30)
        producer.send(topic, value=b"two", key=b"k2").result(timeout=30)
        shown = repr(producer.config) + str(producer.config)
    assert sorted(read_back_secure(secure_broker, "OAUTH", topic, expected=2)) == [(b"k1", b"one"), (b"k2", b"two")]
    logged = " ".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert "eyJhbGciOiJub25lIn0" not in logged + shown  # the start of every unsecured token: none is shown


@pytest.mark.broker
def test_producer_with_a_token_provider_fetches_once_per_lifetime(secure_broker: SecureBroker) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    calls: list[float] = []

    def tokens() -> tuple[str, float]:
        calls.append(time.time())
        return unsecured_jwt({"sub": "dave", "exp": time.time() + 3600}), time.time() + 3600

    topic = create_topic_secure(secure_broker, partitions=3)
    with KafkaProducer(_settings(secure_broker, **{"sasl.oauthbearer.token.provider": tokens})) as producer:
        for p in range(3):
            producer.send(topic, value=f"v{p}".encode(), key=b"k", partition=p).result(timeout=30)
    assert len(read_back_secure(secure_broker, "OAUTH", topic, expected=3)) == 3
    assert len(calls) == 1  # the bootstrap and the leader connections share the token


@pytest.mark.broker
def test_an_expired_token_fails_at_once_with_the_brokers_reason(secure_broker: SecureBroker) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    expired = unsecured_jwt({"sub": "erin", "exp": time.time() - 600})
    started = time.monotonic()
    with pytest.raises(SaslAuthenticationFailedError, match="invalid_token"):
        with KafkaProducer(_settings(secure_broker, **{"sasl.oauthbearer.token.provider": lambda: expired})) as p:
            p.send(create_topic_secure(secure_broker), value=b"never").result(timeout=30)
    assert time.monotonic() - started < 10
