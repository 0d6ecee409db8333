"""NetConfig: the network layer's settings, typed values derived from the one parsed producer config.

    net_config = ProducerConfig.from_dict({"bootstrap.servers": "a:9092,b:9092", ...}).net_config()

As Java builds its NetworkClient from the one ProducerConfig, this layer never reads the user's options: it has no
parser and no defaults of its own (``ProducerConfig`` and ``config_options`` validate every value and name the bad
key). What lives here are the value parsers the config uses for addresses and files.

Security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) are carried through in ``security_options``;
``net/security.py`` interprets them and builds the connection handshakes. Secret values (``sasl.password``,
``sasl.jaas.config``, ``ssl.key.password`` ... see :func:`~spark_kafka_sink.secret.is_secret_name`) stay
:class:`~spark_kafka_sink.secret.Secret` objects -- or become one if they arrive as text -- so the config's
``repr`` shows ``Secret('***')`` and only the SASL / TLS code that uses a value reveals it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.secret import Secret, is_secret_name

__all__ = ["NetConfig", "SecurityValue", "parse_bootstrap_servers", "format_address", "to_int",
           "to_bool", "require_readable_file"]

#: The value of one ``ssl.*`` / ``sasl.*`` setting: text, or a Secret for the keys that hold one.
SecurityValue = str | Secret

SECURITY_PREFIXES = ("ssl.", "sasl.")


def format_address(host: str, port: int) -> str:
    """``host:port``; IPv6 literals in brackets, as users write them in bootstrap.servers."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9_+.-]*://")


def parse_bootstrap_servers(value: object, key: str = "bootstrap.servers") -> tuple[tuple[str, int], ...]:
    """``"a:9092, b:9093,[::1]:9094"`` (or a list of such strings) -> ``(("a", 9092), ("b", 9093), ("::1", 9094))``."""
    if isinstance(value, str):
        items = value.split(",")
    elif isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        items = [str(v) for v in value]
    else:
        raise ConfigError(f"{key} must be a comma-separated string of host:port, got {value!r}", key=key)
    out: list[tuple[str, int]] = []
    for raw in items:
        # A listener's scheme (PLAINTEXT://, SASL_SSL://...) is ignored, as Java's and librdkafka's parsers do:
        # security.protocol says how to connect.
        item = _SCHEME.sub("", raw.strip())
        if not item:
            continue
        if item.startswith("["):  # [ipv6]:port
            host, sep, port_text = item[1:].partition("]:")
        else:
            host, sep, port_text = item.rpartition(":")
        if (not sep or not host or any(c.isspace() for c in host) or not port_text.isdigit()
                or not 0 < int(port_text) < 65536):
            raise ConfigError(f"{key}: {item!r} is not host:port (e.g. 127.0.0.1:9092)", key=key)
        out.append((host, int(port_text)))
    if not out:
        raise ConfigError(f"{key} is empty: give at least one host:port of a broker", key=key)
    return tuple(out)


@dataclass(frozen=True, kw_only=True)
class NetConfig:
    """Settings of connections, the network client and the metadata cache, as ``ProducerConfig.net_config()``
    derives them (the option each comes from: its name in snake_case; see config_options for what they mean)."""

    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str
    request_timeout_ms: int  # a request without an answer by then fails (retriable) and the link closes
    socket_connection_setup_timeout_ms: int  # TCP connect + TLS/SASL handshake + ApiVersions
    socket_connection_setup_timeout_max_ms: int  # the setup timeout doubles per failed setup up to this
    connections_max_idle_ms: int  # close a connection without traffic for this long; -1 = never
    reconnect_backoff_ms: int  # first wait before reconnecting to a node that failed
    reconnect_backoff_max_ms: int  # the wait doubles per failure up to this
    retry_backoff_ms: int  # minimum gap between two metadata refreshes
    metadata_max_age_ms: int  # refresh metadata at least this often
    metadata_max_idle_ms: int  # a topic not sent to for this long leaves the refreshed set
    allow_auto_create_topics: bool  # the Metadata request's allow_auto_topic_creation
    max_in_flight_requests_per_connection: int
    send_buffer_bytes: int  # SO_SNDBUF; -1 = OS default
    receive_buffer_bytes: int  # SO_RCVBUF; -1 = OS default
    # KIP-899 / KIP-1102: with "rebootstrap", when no broker of the last metadata can be reached (every one backing
    # off), or none answered a metadata request for the trigger, connect to bootstrap.servers again (re-resolved);
    # "none": keep trying the brokers last known.
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int
    # "resolve_canonical_bootstrap_servers_only": the bootstrap hosts by the canonical names of their addresses,
    # resolved when the network client is made (net/host_names.py); Kerberos setups reached through an alias.
    client_dns_lookup: str
    security_protocol: str
    security_options: tuple[tuple[str, SecurityValue], ...]  # ssl.* / sasl.* settings, for net/security.py
    # Not settings: what ApiVersions v3+ reports about this client (the name must match [a-zA-Z0-9](...)).
    client_software_name: str = "spark-kafka-sink"
    client_software_version: str = "0.1.0"

    def __post_init__(self) -> None:
        # A secret given as text is wrapped, so no repr can show it.
        object.__setattr__(self, "security_options", _security_options(self.security_options))

    @property
    def bootstrap_addresses(self) -> list[str]:
        """The bootstrap servers as ``host:port`` strings, in the user's order."""
        return [format_address(h, p) for h, p in self.bootstrap_servers]

    def security_option(self, key: str, default: SecurityValue | None = None) -> SecurityValue | None:
        """The value of one ``ssl.*`` / ``sasl.*`` setting (a :class:`Secret` for secret keys), or ``default``."""
        for k, v in self.security_options:
            if k == key:
                return v
        return default


def _security_options(options: tuple[tuple[str, Any], ...]) -> tuple[tuple[str, SecurityValue], ...]:
    """Sorted (a stable, hashable key for the settings cache in security_settings). A Secret stays a Secret, text
    under a secret key becomes one, None is dropped, anything else becomes text (Spark options are text anyway)."""
    out: list[tuple[str, SecurityValue]] = []
    for key, value in options:
        if value is None:
            continue  # None means "not set", as in the producer's config
        if isinstance(value, Secret):
            out.append((key, value))
        elif is_secret_name(key):
            out.append((key, Secret(str(value))))
        elif callable(value):  # sasl.oauthbearer.token.provider given as a Python callable
            out.append((key, value))
        elif isinstance(value, (list, tuple)):  # ssl.enabled.protocols given as a Python list
            out.append((key, ",".join(str(v) for v in value)))
        else:
            out.append((key, str(value)))
    return tuple(sorted(out, key=lambda item: item[0]))


def to_int(key: str, value: Any) -> int:
    """An integer setting as given: an int, or its text (Spark options are strings); anything else: ConfigError."""
    if isinstance(value, bool):
        raise ConfigError(f"{key} must be an integer, got {value!r}", key=key)
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    raise ConfigError(f"{key} must be an integer, got {value!r}", key=key)


def require_readable_file(path: str, key: str) -> None:
    """A file setting (certificate, keystore, keytab) names a file this process can read; else ConfigError."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}: {path} does not exist or is not a file", key=key)
    try:
        with p.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}", key=key) from None


def to_bool(key: str, value: Any) -> bool:
    """A true/false setting as given: a bool, or its text (any case); anything else: ConfigError."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{key} must be true or false, got {value!r}", key=key)
