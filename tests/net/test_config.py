"""NetConfig: bootstrap parsing; derived from the parsed ProducerConfig, whose errors name the key."""

from __future__ import annotations

from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.config import NetConfig, parse_bootstrap_servers
from spark_kafka_sink.producer.config import ProducerConfig


def test_parse_bootstrap_servers() -> None:
    assert parse_bootstrap_servers(" a:9092, b.example:19092 ,[::1]:9094,") == (
        ("a", 9092), ("b.example", 19092), ("::1", 9094))
    assert parse_bootstrap_servers(["h:1", "i:2"]) == (("h", 1), ("i", 2))
    # A listener's scheme, copied from a broker's listeners or advertised.listeners, is ignored as Java's parser
    # (Utils.getHost) and librdkafka ignore it: security.protocol says how to connect.
    assert parse_bootstrap_servers("PLAINTEXT://a:9092,SASL_SSL://[::1]:9094, sasl_plaintext://b:1") == (
        ("a", 9092), ("::1", 9094), ("b", 1))


@pytest.mark.parametrize("value", ["", "host", "host:", ":9092", "host:port", "host:70000", "a b:1", "PLAINTEXT://",
                                   9092, None])
def test_bad_bootstrap_servers_name_the_key(value: Any) -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers") as info:
        parse_bootstrap_servers(value)
    assert info.value.key == "bootstrap.servers"


def net_config(**options: Any) -> NetConfig:
    return ProducerConfig.from_dict({"bootstrap.servers": "h:1", **options}).net_config()


def test_net_config_is_derived_from_the_parsed_producer_config() -> None:
    config = ProducerConfig.from_dict({
        "bootstrap.servers": "h:1,[::1]:2", "client.id": "me", "request.timeout.ms": "1500",
        "max.in.flight.requests.per.connection": 2, "security.protocol": "sasl_ssl",
        "sasl.mechanism": "PLAIN", "sasl.username": "u", "sasl.password": "p", "ssl.ca.location": "/ca.pem",
        "acks": "all", "linger.ms": 5,
    }).net_config()
    assert config.bootstrap_servers == (("h", 1), ("::1", 2))
    assert config.bootstrap_addresses == ["h:1", "[::1]:2"]
    assert (config.client_id, config.request_timeout_ms, config.max_in_flight_requests_per_connection) == (
        "me", 1500, 2)
    assert (config.security.protocol, config.security.sasl_mechanism) == ("SASL_SSL", "PLAIN")
    assert (config.security.ca_location, config.security.ca_option) == ("/ca.pem", "ssl.ca.location")
    assert config.security.keystore_location is None
    assert net_config().request_timeout_ms == 30_000  # the default, from config_options (none is declared here)


@pytest.mark.parametrize(("key", "value"), [
    ("request.timeout.ms", "soon"),
    ("request.timeout.ms", 0),
    ("socket.connection.setup.timeout.ms", "0"),
    ("reconnect.backoff.ms", -1),
    ("max.in.flight.requests.per.connection", 0),
    ("metadata.max.age.ms", True),
    ("security.protocol", "TLS"),
])
def test_bad_values_name_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as info:
        net_config(**{key: value})
    assert info.value.key == key


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers is required"):
        ProducerConfig.from_dict({}).net_config()


def test_secret_settings_stay_secret_objects() -> None:
    from spark_kafka_sink.secret import Secret

    given = Secret("pw-from-the-producer")
    config = net_config(**{"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": given,
                           "ssl.key.password": "pw-as-text", "sasl.jaas.config": None, "ssl.check.hostname": False})
    assert config.security.sasl_password is given  # the same object: never turned into text
    key_password = config.security.key_password
    assert isinstance(key_password, Secret) and key_password.reveal() == "pw-as-text"
    assert config.security.check_hostname is False  # typed, not text
    for shown in (repr(config), str(config)):
        assert "pw-" not in shown and "Secret('***')" in shown
