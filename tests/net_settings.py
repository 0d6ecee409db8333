"""NetConfig and SecuritySettings for tests, built as the package builds them: from the one parsed ProducerConfig
(house style 6)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_kafka_sink.net.config import NetConfig, format_address
from spark_kafka_sink.net.security_settings import SecuritySettings
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.config_options import OPTIONS

_JAVA_NAMES = {spec.attribute: spec.name for spec in OPTIONS}


def net_config(*servers: tuple[str, int] | str, **settings: Any) -> NetConfig:
    """``net_config(("127.0.0.1", 9092), request_timeout_ms=500)``: the servers as (host, port) or host:port text;
    the settings by their ProducerConfig attribute (a Java name in snake_case), parsed and checked as a user's."""
    options = {_JAVA_NAMES[attribute]: value for attribute, value in settings.items()}
    bootstrap = ",".join(s if isinstance(s, str) else format_address(*s) for s in servers)
    return ProducerConfig.from_dict({"bootstrap.servers": bootstrap, **options}).net_config()


def security_settings(options: Mapping[str, Any]) -> SecuritySettings:
    """The security settings of Java-named ``options`` (``security.protocol``, ``ssl.*``, ``sasl.*``), derived as
    the package derives them: from the parsed ProducerConfig, whose errors name the bad key."""
    return ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", **options}).security_settings()
