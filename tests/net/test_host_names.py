"""Host names from addresses, as Java derives them for Kerberos (net/host_names.py), with the resolver scripted:
a name stays, an address becomes its reverse lookup's name, and client.dns.lookup=
resolve_canonical_bootstrap_servers_only turns each bootstrap host into its addresses' names."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.host_names import canonical_bootstrap_servers, name_of_address
from spark_kafka_sink.producer.config import ProducerConfig

NAMES = {"10.0.0.7": "broker7.example.com", "10.0.0.8": "broker8.example.com"}
ALIASES = {"kafka.example.com": ["10.0.0.7", "10.0.0.8", "10.0.0.7"], "b9.example.com": ["10.0.0.9"]}


@pytest.fixture
def lookups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []

    def reverse(address: str) -> tuple[str, list[str], list[str]]:
        seen.append(address)
        if address in NAMES:
            return NAMES[address], [], [address]
        raise socket.herror(1, "Unknown host")

    def resolve(host: str, port: int, *args: Any, **kwargs: Any) -> list[Any]:
        if host not in ALIASES:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ALIASES[host]]

    monkeypatch.setattr(socket, "gethostbyaddr", reverse)
    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    return seen


def test_a_name_stays_an_address_becomes_its_name(lookups: list[str]) -> None:
    """As Java's InetAddress.getHostName(): no lookup for a name; an address without a name stays an address."""
    assert name_of_address("Broker1.Example.COM") == "Broker1.Example.COM" and lookups == []
    assert name_of_address("10.0.0.7") == "broker7.example.com"
    assert name_of_address("10.0.0.9") == "10.0.0.9"
    assert name_of_address("::1") == "::1" and lookups == ["10.0.0.7", "10.0.0.9", "::1"]


def test_canonical_bootstrap_servers(lookups: list[str], caplog: pytest.LogCaptureFixture) -> None:
    """An alias becomes one entry per address (each once), by name where it has one; a host that does not resolve
    is left out with a warning; none resolving is a ConfigError."""
    with caplog.at_level(logging.WARNING, logger="spark_kafka_sink.net.host_names"):
        servers = canonical_bootstrap_servers([("kafka.example.com", 9092), ("gone.example.com", 9092),
                                               ("b9.example.com", 9093)])
    assert servers == (("broker7.example.com", 9092), ("broker8.example.com", 9092), ("10.0.0.9", 9093))
    assert "gone.example.com does not resolve" in caplog.text
    with pytest.raises(ConfigError, match="no host of bootstrap.servers resolves") as info:
        canonical_bootstrap_servers([("gone.example.com", 9092)])
    assert info.value.key == "bootstrap.servers"


def test_net_config_takes_the_mode() -> None:
    config = ProducerConfig.from_dict({"bootstrap.servers": "a:1",
                                       "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}).net_config()
    assert config.client_dns_lookup == "resolve_canonical_bootstrap_servers_only"
    expected = "client.dns.lookup='default' is invalid: expected use_all_dns_ips or resolve_canonical"
    with pytest.raises(ConfigError, match=expected) as info:
        ProducerConfig.from_dict({"bootstrap.servers": "a:1", "client.dns.lookup": "default"}).net_config()
    assert info.value.key == "client.dns.lookup"
