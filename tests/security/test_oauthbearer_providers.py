"""sasl.oauthbearer.token.provider takes confluent-kafka's ``oauth_cb`` as users already have it: called with the
``sasl.oauthbearer.config`` string (or with nothing when it takes no argument), returning ``(token, expiry)`` or
``(token, expiry, principal, extensions)``. The cloud callbacks below are written as each vendor documents them for
confluent-kafka:

* AWS MSK IAM (aws-msk-iam-sasl-signer-python's README): ``MSKAuthTokenProvider.generate_auth_token(region)``,
  expiry in ms divided by 1000. The signer runs here for real, offline, with fake static credentials;
* Azure Event Hubs (its confluent-kafka sample): ``functools.partial(oauth_cb, cred, namespace)`` returning
  ``cred.get_token(scope)``'s ``token`` and ``expires_on``. azure-identity's credentials all ask Entra ID over the
  network, so the credential here is a stand-in with azure-core's ``get_token`` shape (a named tuple of the two);
* Google Managed Kafka (its confluent-kafka sample): a ``TokenProvider`` whose ``confluent_token()`` wraps
  ``google.auth.default()``'s credentials into its JWT-shaped token, called by ``make_token(args)``. google-auth
  runs here for real with a fake service account's credentials holding a token (no refresh, so no network).

The broker legs run against the secured broker's OAUTH listener (Kafka's unsecured validator), so the token the
vendor's library would make is replaced by an unsecured JWT at the library's own function; the callback itself is
the documented one. The SASL client message is read off the wire by a relay (tests/security/_wire.py) and split by
hand; records are read back with confluent-kafka."""

from __future__ import annotations

import base64
import datetime
import functools
import json
import time
import urllib.parse
from typing import Any, NamedTuple

import pytest

from spark_kafka_sink.errors import ConfigError, SaslAuthenticationFailedError
from spark_kafka_sink.net.oauthbearer import token_source, unsecured_jwt
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.sasl import oauthbearer_initial_response
from tests.security._wire import relay
from tests.security.conftest import OAUTH_MODULE, SecureBroker, create_topic_secure, read_back_secure

REGION = "eu-west-1"


# -- the vendors' callbacks, as documented ---------------------------------------------------------------------------

def aws_oauth_cb(oauth_config: Any) -> tuple[str, float]:
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    auth_token, expiry_ms = MSKAuthTokenProvider.generate_auth_token(REGION)
    # Note that this library expects oauth_cb to return expiry time in seconds since epoch, while the token
    # generator returns expiry in ms
    return auth_token, expiry_ms / 1000


class AccessToken(NamedTuple):
    """azure.core.credentials.AccessToken's shape."""

    token: str
    expires_on: int


class StandInAzureCredential:
    """A TokenCredential (azure-core's protocol: ``get_token(*scopes) -> AccessToken``) answering offline."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.scopes: list[tuple[str, ...]] = []

    def get_token(self, *scopes: str, **kwargs: Any) -> AccessToken:
        self.scopes.append(scopes)
        return AccessToken(self.token, int(time.time()) + 3600)


def azure_oauth_cb(cred: Any, namespace_fqdn: str, config: Any) -> tuple[str, int]:
    # confluent_kafka requires an oauth callback function to return (str, float) with the values of
    # (<access token>, <expiration date in seconds from epoch>)
    access_token = cred.get_token("https://%s/.default" % namespace_fqdn)
    return access_token.token, access_token.expires_on


class GoogleTokenProvider:
    """Google Managed Service for Apache Kafka's sample token provider for confluent-kafka."""

    def __init__(self, **config: Any) -> None:
        import google.auth

        self.credentials, _project = google.auth.default()
        self.HEADER = json.dumps(dict(typ="JWT", alg="GOOG_OAUTH2_TOKEN"))

    def valid_credentials(self) -> Any:
        if not self.credentials.valid:
            import google.auth.transport.requests

            self.credentials.refresh(google.auth.transport.requests.Request())
        return self.credentials

    def get_jwt(self, creds: Any) -> str:
        return json.dumps(dict(exp=creds.expiry.replace(tzinfo=datetime.timezone.utc).timestamp(), iss="Google",
                               iat=datetime.datetime.now(datetime.timezone.utc).timestamp(), scope="kafka",
                               sub=creds.service_account_email))

    def b64_encode(self, source: str) -> str:
        return base64.urlsafe_b64encode(source.encode("utf-8")).decode("utf-8").rstrip("=")

    def get_kafka_access_token(self, creds: Any) -> str:
        return ".".join([self.b64_encode(self.HEADER), self.b64_encode(self.get_jwt(creds)),
                         self.b64_encode(creds.token)])

    def confluent_token(self) -> tuple[str, float]:
        creds = self.valid_credentials()
        utc_expiry = creds.expiry.replace(tzinfo=datetime.timezone.utc)
        expiry_seconds = (utc_expiry - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
        return self.get_kafka_access_token(creds), time.time() + expiry_seconds


def google_make_token(args: Any) -> tuple[str, float]:
    """Method to get the Token"""
    t = GoogleTokenProvider()
    token = t.confluent_token()
    return token


# -- the contract, without a broker -----------------------------------------------------------------------------------

def test_a_provider_is_called_as_confluent_kafka_calls_oauth_cb() -> None:
    """One parameter: called with sasl.oauthbearer.config (None when unset); none: called with nothing."""
    seen: list[Any] = []

    def one(config: Any) -> tuple[str, float]:
        seen.append(config)
        return "t1", time.time() + 60

    def none() -> tuple[str, float]:
        seen.append("no argument")
        return "t2", time.time() + 60

    assert token_source(None, one, provider_config="scope=kafka").token().reveal() == "t1"
    assert token_source(None, one).token().reveal() == "t1"
    assert token_source(None, none).token().reveal() == "t2"
    assert seen == ["scope=kafka", None, "no argument"]
    base = {"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER"}
    config = ProducerConfig.from_dict({**base, "sasl.oauthbearer.token.provider": one,
                                       "sasl.oauthbearer.config": "principal=x s3cr3t=1"})
    tokens = config.security_settings().oauth_tokens
    assert tokens is not None and tokens.token().reveal() == "t1"
    assert seen[-1] == "principal=x s3cr3t=1" and "s3cr3t" not in repr(config)


def test_the_four_tuple_gives_the_principal_and_extensions() -> None:
    tokens = token_source({"extension_logicalCluster": "lkc-1", "extension_traceId": "cfg"},
                          lambda config: ("t0k", time.time() + 60, "alice", {"traceId": "cb", "poolId": "p-9"}))
    bearer = tokens.current()
    assert bearer.token.reveal() == "t0k" and bearer.principal == "alice"
    assert bearer.extensions == {"logicalCluster": "lkc-1", "traceId": "cb", "poolId": "p-9"}  # the callback's win
    assert oauthbearer_initial_response("t0k", {"poolId": "p-9"}, "alice") == (
        b"n,a=alice,\x01auth=Bearer t0k\x01poolId=p-9\x01\x01")
    assert token_source(None, lambda c: ("t0k", None, None, None)).current().principal is None


@pytest.mark.parametrize(("provider", "text"), [
    (lambda c: ("t", 1.0, "p"), "returned a tuple of 3: expected"),
    (lambda c: ("t", "soon"), "gave an expiry of type str"),
    (lambda c: ("t", None, 7, {}), "gave a principal of type int"),
    (lambda c: ("t", None, "p", ["x=1"]), "gave extensions of type list"),
    (lambda c: ("t", None, "p", {"auth": "x"}), "gave the SASL extension 'auth'"),
    (lambda c: ("t", None, "a,b", {}), r"principal cannot contain ',' or '='"),
])
def test_a_malformed_answer_is_named(provider: Any, text: str) -> None:
    with pytest.raises(SaslAuthenticationFailedError, match=text):
        bearer = token_source(None, provider).current()
        oauthbearer_initial_response(bearer.token.reveal(), bearer.extensions, bearer.principal)


def test_a_callable_taking_two_arguments_is_refused_when_configured() -> None:
    with pytest.raises(ConfigError, match="must take one argument .* or none") as info:
        ProducerConfig.from_dict({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "OAUTHBEARER",
                                  "sasl.oauthbearer.token.provider": lambda a, b: "t"})
    assert info.value.key == "sasl.oauthbearer.token.provider"
    with pytest.raises(ConfigError, match="argument of sasl.oauthbearer.token.provider") as info:
        ProducerConfig.from_dict({"bootstrap.servers": "h:1", "security.protocol": "SASL_PLAINTEXT",
                                  "sasl.mechanism": "OAUTHBEARER", "sasl.oauthbearer.config": "x",
                                  "sasl.jaas.config": f'{OAUTH_MODULE} required unsecuredLoginStringClaim_sub="a";'})
    assert info.value.key == "sasl.oauthbearer.config"


def test_aws_msk_signer_token_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real signer, offline with fake static credentials: its presigned token is sent as it is, and the expiry
    the callback converted to seconds is the token's."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAFAKE0EXAMPLE0KEY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "fake-secret-for-tests")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    clock, calls = [time.time()], []

    def counted(oauth_config: Any) -> tuple[str, float]:
        calls.append(oauth_config)
        return aws_oauth_cb(oauth_config)

    tokens = token_source(None, counted, clock=lambda: clock[0])
    token = tokens.token().reveal()
    url = urllib.parse.urlparse(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query = urllib.parse.parse_qs(url.query)
    assert url.hostname == f"kafka.{REGION}.amazonaws.com" and query["Action"] == ["kafka-cluster:Connect"]
    assert query["X-Amz-Credential"][0].startswith("AKIAFAKE0EXAMPLE0KEY/")
    # Refreshed at 80% of the signer's lifetime (X-Amz-Expires seconds), which needs the expiry in seconds.
    lifetime = int(query["X-Amz-Expires"][0])
    clock[0] += 0.79 * lifetime
    assert tokens.token().reveal() == token and len(calls) == 1
    clock[0] += 0.02 * lifetime
    tokens.token()
    assert len(calls) == 2


def test_google_auth_token_passes_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """google-auth's service account credentials, offline (a token in hand, so no refresh): the sample's JWT-shaped
    token, carrying the account and the access token, is what is sent."""
    import google.auth
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from google.oauth2 import service_account

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()).decode()
    creds = service_account.Credentials.from_service_account_info({
        "type": "service_account", "client_email": "writer@project.iam.gserviceaccount.com", "private_key": key,
        "token_uri": "https://oauth2.googleapis.com/token", "project_id": "project"})
    creds.token = "ya29.fake-access-token"
    creds.expiry = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None) + datetime.timedelta(hours=1)
    assert creds.valid
    monkeypatch.setattr(google.auth, "default", lambda *a, **k: (creds, "project"))
    bearer = token_source(None, google_make_token).current()
    header, claims, access = bearer.token.reveal().split(".")
    assert json.loads(_decode(header)) == {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
    assert json.loads(_decode(claims))["sub"] == "writer@project.iam.gserviceaccount.com"
    assert _decode(access) == b"ya29.fake-access-token"


# -- against the broker ---------------------------------------------------------------------------------------------

def _decode(part: str) -> bytes:
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))


def _write(broker: SecureBroker, provider: Any, records: int = 2, bootstrap: str | None = None,
           extra: dict[str, Any] | None = None) -> str:
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(broker, partitions=2)
    settings = {"bootstrap.servers": bootstrap or broker.address("OAUTH"), "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "OAUTHBEARER", "max.block.ms": 20_000,
                "sasl.oauthbearer.token.provider": provider, **(extra or {})}
    with KafkaProducer(settings) as producer:
        for i in range(records):
            producer.send(topic, value=f"v{i}".encode(), key=b"k", partition=i % 2).result(timeout=30)
    return topic


def _jwt(subject: str) -> str:
    return unsecured_jwt({"sub": subject, "iat": time.time(), "exp": time.time() + 3600})


@pytest.mark.broker
def test_aws_msk_callback_writes(secure_broker: SecureBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    from aws_msk_iam_sasl_signer import MSKAuthTokenProvider

    calls: list[str] = []

    def generate_auth_token(region: str, aws_debug_creds: bool = False) -> tuple[str, int]:
        calls.append(region)
        return _jwt("msk-writer"), int((time.time() + 900) * 1000)

    monkeypatch.setattr(MSKAuthTokenProvider, "generate_auth_token", staticmethod(generate_auth_token))
    topic = _write(secure_broker, aws_oauth_cb)
    assert sorted(read_back_secure(secure_broker, "OAUTH", topic, expected=2)) == [(b"k", b"v0"), (b"k", b"v1")]
    assert calls == [REGION]


@pytest.mark.broker
def test_azure_callback_writes(secure_broker: SecureBroker) -> None:
    cred = StandInAzureCredential(_jwt("eventhubs-writer"))
    namespace = "mynamespace.servicebus.windows.net"
    topic = _write(secure_broker, functools.partial(azure_oauth_cb, cred, namespace))
    assert sorted(read_back_secure(secure_broker, "OAUTH", topic, expected=2)) == [(b"k", b"v0"), (b"k", b"v1")]
    assert cred.scopes == [(f"https://{namespace}/.default",)]


@pytest.mark.broker
def test_the_principal_and_extensions_reach_the_broker(secure_broker: SecureBroker) -> None:
    """A 4-tuple's principal is the authorization id (the broker compares it with the token's own principal: another
    one is refused) and its extensions are in the client message beside the configured ones."""
    host, port = secure_broker.host_port("OAUTH")
    token = _jwt("frank")
    jaas = {"sasl.jaas.config": f'{OAUTH_MODULE} required extension_env="prod";'}
    with relay(host, port) as wire:
        topic = _write(secure_broker, lambda config: (token, time.time() + 3600, "frank", {"traceId": "t-42"}),
                       bootstrap=wire.address, extra=jaas)
        sent = wire.oauthbearer_messages()
    assert sorted(read_back_secure(secure_broker, "OAUTH", topic, expected=2)) == [(b"k", b"v0"), (b"k", b"v1")]
    assert sent and sent[0] == ("n,a=frank,", {"auth": f"Bearer {token}", "env": "prod", "traceId": "t-42"})
    with pytest.raises(SaslAuthenticationFailedError, match=r"authorization id \(mallory\) that is different "
                                                            r"from the token's principal name \(frank\)"):
        _write(secure_broker, lambda config: (_jwt("frank"), time.time() + 3600, "mallory", {}))
