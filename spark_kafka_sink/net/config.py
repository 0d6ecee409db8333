"""NetConfig: the network layer's settings, one frozen object built once (Java config names in the dict).

    NetConfig(bootstrap_servers=(("127.0.0.1", 9092),), client_id="spark-kafka-sink", ...)
    NetConfig.from_properties({"bootstrap.servers": "a:9092,b:9092", "request.timeout.ms": 30000, ...})

``from_properties`` reads only the keys listed in :data:`NET_CONFIG_KEYS` and ignores every other key: the
producer's own config object validates the full key set (and suggests names for typos); this module validates
the values of the keys it uses and names the key in each :class:`~spark_kafka_sink.errors.ConfigError`.

Security settings (``security.protocol``, ``ssl.*``, ``sasl.*``) are carried through in ``security_options``;
``net/security.py`` interprets them and builds the connection handshakes. Secret values (``sasl.password``,
``sasl.jaas.config``, ``ssl.key.password`` ... see :func:`~spark_kafka_sink.secret.is_secret_name`) stay
:class:`~spark_kafka_sink.secret.Secret` objects -- or become one if they arrive as text -- so the config's
``repr`` shows ``Secret('***')`` and only the SASL / TLS code that uses a value reveals it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.secret import Secret, is_secret_name

__all__ = ["NetConfig", "NET_CONFIG_KEYS", "SecurityValue", "parse_bootstrap_servers", "format_address", "to_int",
           "to_bool", "require_readable_file"]

#: The value of one ``ssl.*`` / ``sasl.*`` setting: text, or a Secret for the keys that hold one.
SecurityValue = str | Secret

# Java key -> NetConfig attribute, for the integer (milliseconds / counts / bytes) settings.
_INT_KEYS: dict[str, str] = {
    "request.timeout.ms": "request_timeout_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "socket.connection.setup.timeout.max.ms": "socket_connection_setup_timeout_max_ms",
    "connections.max.idle.ms": "connections_max_idle_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "metadata.max.idle.ms": "metadata_max_idle_ms",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "send.buffer.bytes": "send_buffer_bytes",
    "receive.buffer.bytes": "receive_buffer_bytes",
    "metadata.recovery.rebootstrap.trigger.ms": "metadata_recovery_rebootstrap_trigger_ms",
}
SECURITY_PREFIXES = ("ssl.", "sasl.")

#: Every key :meth:`NetConfig.from_properties` reads (plus any ``ssl.*`` / ``sasl.*`` key).
NET_CONFIG_KEYS: frozenset[str] = frozenset(
    {"bootstrap.servers", "client.id", "security.protocol", "allow.auto.create.topics", "metadata.recovery.strategy",
     "client.dns.lookup", *_INT_KEYS}
)
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_DNS_LOOKUPS = ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")


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


@dataclass(frozen=True)
class NetConfig:
    """Settings of connections, the network client and the metadata cache. Defaults are the Java client's."""

    bootstrap_servers: tuple[tuple[str, int], ...]
    client_id: str = "spark-kafka-sink"
    request_timeout_ms: int = 30_000  # a request without an answer by then fails (retriable) and the link closes
    socket_connection_setup_timeout_ms: int = 10_000  # TCP connect + TLS/SASL handshake + ApiVersions
    socket_connection_setup_timeout_max_ms: int = 30_000  # the setup timeout doubles per failed setup up to this
    connections_max_idle_ms: int = 540_000  # close a connection without traffic for this long; -1 = never
    reconnect_backoff_ms: int = 50  # first wait before reconnecting to a node that failed
    reconnect_backoff_max_ms: int = 1_000  # the wait doubles per failure up to this
    retry_backoff_ms: int = 100  # minimum gap between two metadata refreshes
    metadata_max_age_ms: int = 300_000  # refresh metadata at least this often
    metadata_max_idle_ms: int = 300_000  # a topic not sent to for this long leaves the refreshed set
    allow_auto_create_topics: bool = True  # the Metadata request's allow_auto_topic_creation
    max_in_flight_requests_per_connection: int = 5
    send_buffer_bytes: int = 131_072  # SO_SNDBUF; -1 = OS default
    receive_buffer_bytes: int = 32_768  # SO_RCVBUF; -1 = OS default
    # KIP-899 / KIP-1102 (Java 4.0's defaults): with "rebootstrap", when no broker of the last metadata can be
    # reached (every one backing off), or none answered a metadata request for the trigger, connect to
    # bootstrap.servers again (re-resolved); "none": keep trying the brokers last known.
    metadata_recovery_strategy: str = "rebootstrap"
    metadata_recovery_rebootstrap_trigger_ms: int = 300_000
    # "resolve_canonical_bootstrap_servers_only": the bootstrap hosts by the canonical names of their addresses,
    # resolved when the network client is made (net/host_names.py); Kerberos setups reached through an alias.
    client_dns_lookup: str = "use_all_dns_ips"
    security_protocol: str = "PLAINTEXT"
    security_options: tuple[tuple[str, SecurityValue], ...] = ()  # ssl.* / sasl.* settings, for net/security.py
    client_software_name: str = "spark-kafka-sink"  # ApiVersions v3+; must match [a-zA-Z0-9](...)
    client_software_version: str = "0.1.0"

    def __post_init__(self) -> None:
        # Also for a hand-built NetConfig: a secret given as text is wrapped, so no repr can show it.
        object.__setattr__(self, "security_options", _security_options(self.security_options))
        if not self.bootstrap_servers:
            raise ConfigError("bootstrap.servers is empty: give at least one host:port", key="bootstrap.servers")
        for key, attr in _INT_KEYS.items():
            value = getattr(self, attr)
            low = -1 if attr.endswith("buffer_bytes") or attr == "connections_max_idle_ms" else (
                1 if attr.startswith("max_in_flight") else 0)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ConfigError(f"{key} must be an integer >= {low}, got {value!r}", key=key)
        for key in ("request.timeout.ms", "socket.connection.setup.timeout.ms"):
            if getattr(self, _INT_KEYS[key]) == 0:  # a zero deadline would fail every request at once
                raise ConfigError(f"{key} must be positive, got 0", key=key)
        if not isinstance(self.allow_auto_create_topics, bool):
            raise ConfigError(f"allow.auto.create.topics must be true or false, got {self.allow_auto_create_topics!r}",
                              key="allow.auto.create.topics")
        if self.metadata_recovery_strategy not in ("none", "rebootstrap"):
            raise ConfigError(f"metadata.recovery.strategy must be none or rebootstrap, got "
                              f"{self.metadata_recovery_strategy!r}", key="metadata.recovery.strategy")
        if self.client_dns_lookup not in _DNS_LOOKUPS:
            raise ConfigError(f"client.dns.lookup must be one of {', '.join(_DNS_LOOKUPS)}, got "
                              f"{self.client_dns_lookup!r}", key="client.dns.lookup")
        if self.security_protocol not in _SECURITY_PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(_SECURITY_PROTOCOLS)}, "
                              f"got {self.security_protocol!r}", key="security.protocol")

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

    @classmethod
    def from_properties(cls, props: Mapping[str, Any]) -> NetConfig:
        """Build from Java-named settings; keys this layer does not use are ignored (see module docstring)."""
        if "bootstrap.servers" not in props:
            raise ConfigError("bootstrap.servers is required (e.g. 127.0.0.1:9092)", key="bootstrap.servers")
        kwargs: dict[str, Any] = {"bootstrap_servers": parse_bootstrap_servers(props["bootstrap.servers"])}
        if "client.id" in props:
            kwargs["client_id"] = str(props["client.id"])
        if "security.protocol" in props:
            kwargs["security_protocol"] = str(props["security.protocol"]).upper()
        for key, attr in _INT_KEYS.items():
            if key in props:
                kwargs[attr] = to_int(key, props[key])
        if "client.dns.lookup" in props:
            kwargs["client_dns_lookup"] = str(props["client.dns.lookup"]).strip().lower()
        if "metadata.recovery.strategy" in props:
            kwargs["metadata_recovery_strategy"] = str(props["metadata.recovery.strategy"]).strip().lower()
        if "allow.auto.create.topics" in props:
            kwargs["allow_auto_create_topics"] = to_bool("allow.auto.create.topics", props["allow.auto.create.topics"])
        kwargs["security_options"] = tuple((k, v) for k, v in props.items() if k.startswith(SECURITY_PREFIXES))
        return cls(**kwargs)


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
