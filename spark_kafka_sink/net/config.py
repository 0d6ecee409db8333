"""NetConfig: the network layer's settings, typed values derived from the one parsed producer config.

    net_config = ProducerConfig.from_dict({"bootstrap.servers": "a:9092,b:9092", ...}).net_config()

As Java builds its NetworkClient from the one ProducerConfig, this layer never reads the user's options: it has no
parser and no defaults of its own (``ProducerConfig`` and ``config_options`` validate every value and name the bad
key). What lives here are the value parsers the config uses for addresses and files.

The security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) come typed too, as a
:class:`~spark_kafka_sink.net.security_settings.SecuritySettings` the config derives; ``net/security.py`` builds
the connection handshakes from it. Secret values stay :class:`~spark_kafka_sink.secret.Secret` objects, so the
``repr`` shows ``Secret('***')`` and only the SASL / TLS code that uses a value reveals it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from spark_kafka_sink.errors import ConfigError

if TYPE_CHECKING:  # security_settings reads files with require_readable_file, from here
    from spark_kafka_sink.net.security_settings import SecuritySettings

__all__ = ["NetConfig", "parse_bootstrap_servers", "format_address", "require_readable_file"]


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
    security: SecuritySettings  # security.protocol, ssl.*, sasl.*: for net/security.py
    # Not settings: what ApiVersions v3+ reports about this client (the name must match [a-zA-Z0-9](...)).
    client_software_name: str = "spark-kafka-sink"
    client_software_version: str = "0.1.0"

    @property
    def bootstrap_addresses(self) -> list[str]:
        """The bootstrap servers as ``host:port`` strings, in the user's order."""
        return [format_address(h, p) for h, p in self.bootstrap_servers]


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
