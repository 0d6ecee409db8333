"""SASL/GSSAPI without a KDC: the RFC 4752 exchange's exact bytes around a scripted Kerberos context, the
settings' errors (each before the gssapi package is needed) and the missing package (the host a service principal
names: tests/net/test_host_names.py). Against a real KDC and broker: tests/kerberos (``make test-kerberos``)."""

from __future__ import annotations

import sys
import types
from collections.abc import Sequence
from pathlib import Path

import pytest

from spark_kafka_sink.errors import ConfigError, IllegalSaslStateError
from spark_kafka_sink.net.kerberos import kerberos_login
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.jaas import KRB5_LOGIN_MODULE
from spark_kafka_sink.protocol.jaas import PLAIN_LOGIN_MODULE as PLAIN_MODULE
from spark_kafka_sink.protocol.sasl import GssapiClient, SaslVerificationError, gssapi_security_layer_reply
from tests.net_settings import security_settings


class ScriptedContext:
    """A Kerberos context that answers from a script: (expected input, output, complete after)."""

    def __init__(self, script: Sequence[tuple[bytes | None, bytes | None, bool]]) -> None:
        self._script = list(script)
        self.complete = False

    def step(self, token: bytes | None) -> bytes | None:
        expected, out, complete = self._script.pop(0)
        assert token == expected
        self.complete = complete
        return out

    def wrap(self, message: bytes) -> bytes:
        return b"W[" + message + b"]"

    def unwrap(self, message: bytes) -> bytes:
        assert message.startswith(b"W[") and message.endswith(b"]")
        return message[2:-1]


def test_exchange_with_mutual_authentication_exact_bytes() -> None:
    """AP-REQ; the broker's AP-REP establishes the context and the client answers empty; then the wrapped offer and
    the wrapped choice (no layer, size 0, the principal); the broker's empty answer ends it."""
    context = ScriptedContext([(None, b"AP-REQ", False), (b"AP-REP", None, True)])
    client = GssapiClient(context, "client@EXAMPLE.COM")
    assert client.initial_response() == b"AP-REQ"
    assert client.respond(b"AP-REP") == b""
    assert client.respond(b"W[\x01\x00\x10\x00]") == b"W[\x01\x00\x00\x00client@EXAMPLE.COM]"
    assert not client.complete
    assert client.respond(b"") is None and client.complete
    with pytest.raises(IllegalSaslStateError):
        client.respond(b"")


def test_exchange_without_mutual_authentication() -> None:
    """The AP-REQ alone establishes the context: the broker answers it empty, the client too, then the offer."""
    context = ScriptedContext([(None, b"AP-REQ", True)])
    client = GssapiClient(context, "etl@EXAMPLE.COM")
    assert client.initial_response() == b"AP-REQ"
    assert client.respond(b"") == b""
    assert client.respond(b"W[\x07\x00\xff\xff]") == b"W[\x01\x00\x00\x00etl@EXAMPLE.COM]"
    assert client.respond(b"") is None and client.complete


def test_security_layer_reply() -> None:
    assert gssapi_security_layer_reply(b"\x01\x00\x00\x00", "") == b"\x01\x00\x00\x00"
    assert gssapi_security_layer_reply(b"\x07\x01\x00\x00", "a@R") == b"\x01\x00\x00\x00a@R"
    with pytest.raises(SaslVerificationError, match=r"only GSSAPI security layers \(mask 0x06.*QOP to auth"):
        gssapi_security_layer_reply(b"\x06\x00\x10\x00", "a@R")
    with pytest.raises(SaslVerificationError, match="3 bytes long, not 4"):
        gssapi_security_layer_reply(b"\x01\x00\x00", "a@R")


def gssapi_options(**extra: str) -> dict[str, str]:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", **extra}


def keytab_jaas(keytab: Path, principal: str = "etl@EXAMPLE.COM", extra: str = "") -> str:
    return f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="{keytab}" principal="{principal}"{extra};'


@pytest.fixture
def keytab(tmp_path: Path) -> Path:
    path = tmp_path / "etl.keytab"
    path.write_bytes(b"\x05\x02")  # a keytab's header; nothing reads it before a connection
    return path


@pytest.mark.parametrize("options, key, message", [
    ({"sasl.jaas.config": "@KEYTAB"}, "sasl.kerberos.service.name", "needs the broker's Kerberos service name"),
    ({"sasl.jaas.config": "@KEYTAB_SERVICE", "sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name",
     "'kafka' and sasl.jaas.config's serviceName='kafka2' differ"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": f'{PLAIN_MODULE} required username="a" password="b";'},
     "sasl.jaas.config", f"needs the login module {KRB5_LOGIN_MODULE}, but the config names {PLAIN_MODULE}"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useKeyTab=true;"},
     "sasl.jaas.config", "useKeyTab=true needs keyTab"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required;"},
     "sasl.jaas.config", "would ask for a password"),
    ({"sasl.kerberos.service.name": "kafka",
      "sasl.jaas.config": f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="@PATH";'},
     "sasl.jaas.config", "a keytab login needs the principal"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useTicketCache=yes;"},
     "sasl.jaas.config", "useTicketCache must be true or false"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": f"{KRB5_LOGIN_MODULE} required useTicketCach=true;"},
     "sasl.jaas.config", "has no option useTicketCach"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.jaas.config": "@KEYTAB", "sasl.kerberos.keytab": "@PATH",
      "sasl.kerberos.principal": "etl"}, "sasl.jaas.config", "not both"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.kerberos.keytab": "@PATH"}, "sasl.kerberos.keytab",
     "needs the principal"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.kerberos.keytab": "/nonexistent/etl.keytab",
      "sasl.kerberos.principal": "etl"}, "sasl.kerberos.keytab", "/nonexistent/etl.keytab does not exist"),
    ({"sasl.kerberos.service.name": "kafka", "sasl.username": "etl", "sasl.password": "x"}, "sasl.username",
     "authenticates with Kerberos"),
])
def test_settings_errors_name_the_key(keytab: Path, options: dict[str, str], key: str, message: str) -> None:
    """Each error comes from the settings alone, before the gssapi package is imported: the same with or without
    it, in the producer's config and in the connection's settings."""
    substitutions = {"@KEYTAB_SERVICE": keytab_jaas(keytab, extra=' serviceName="kafka2"'),
                     "@KEYTAB": keytab_jaas(keytab), "@PATH": str(keytab)}
    resolved = {}
    for name, value in options.items():
        for marker, text in substitutions.items():
            value = value.replace(marker, text)
        resolved[name] = value
    for build in (security_settings, lambda o: ProducerConfig.from_dict({"bootstrap.servers": "b:9092",
                                                                                      **o})):
        with pytest.raises(ConfigError) as info:
            build(gssapi_options(**resolved))
        assert message in str(info.value) and info.value.key == key, str(info.value)


def test_missing_gssapi_package_says_how_to_install(keytab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "gssapi", None)  # import gssapi now raises ImportError
    with pytest.raises(ConfigError, match=r"needs the gssapi package: pip install 'spark-kafka-sink\[gssapi\]' "
                                          r"\(it builds against MIT Kerberos: apt-get install libkrb5-dev") as info:
        ProducerConfig.from_dict({"bootstrap.servers": "b:9092", "sasl.kerberos.service.name": "kafka",
                                  **gssapi_options(**{"sasl.jaas.config": keytab_jaas(keytab)})})
    assert info.value.key == "sasl.mechanism"


def test_valid_settings_keep_the_login(keytab: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        import gssapi  # noqa: F401
    except ImportError:  # `make test` has no gssapi: validating needs only that it imports
        monkeypatch.setitem(sys.modules, "gssapi", types.ModuleType("gssapi"))
    settings = security_settings(gssapi_options(**{
        "sasl.jaas.config": keytab_jaas(keytab, extra=' storeKey=true serviceName="kafka"')}))
    login = settings.kerberos
    assert login is not None and login.service_name == "kafka" and login.principal == "etl@EXAMPLE.COM"
    assert login.keytab == str(keytab) and not login.use_ticket_cache
    assert login.source == f"etl@EXAMPLE.COM (keytab {keytab})"
    librdkafka = kerberos_login(None, "kafka", keytab=str(keytab), principal="etl@EXAMPLE.COM")
    assert librdkafka == login  # the same login either way (the memory cache's name is not compared)
