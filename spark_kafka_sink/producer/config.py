"""``ProducerConfig``: the one frozen, typed producer configuration, built once with ``from_dict``.

    cfg = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": "10"})
    cfg.linger_ms                      # 10: attributes are the Java names in snake_case
    cfg.sasl_password                  # Secret('***') or None; .reveal() only where it is sent
    cfg.explicitly_set                 # the keys the user gave
    ProducerConfig.from_dict(cfg.to_dict())  # round trip (e.g. after pickling to a Spark executor)

Keys, types, defaults and docs live in ``config_options.OPTIONS``. Cross-field rules follow the Java client 3.x:

* idempotence needs acks=all, retries > 0 and max.in.flight.requests.per.connection <= 5. If the user set
  enable.idempotence=true explicitly, a conflict is a ConfigError naming the setting; if they did not, idempotence
  is turned off (logged at INFO), as Java does.
* transactional.id needs idempotence.
* delivery.timeout.ms >= linger.ms + request.timeout.ms: an error if delivery.timeout.ms was set, otherwise it is
  raised to that sum (Java does the same).
* retry.backoff.max.ms / reconnect.backoff.max.ms below their base backoff: the base wins (as Java).

Decided beyond Java (documented in the option docs): SASL credentials come from sasl.username/sasl.password or
sasl.jaas.config (not both); SASL settings with a non-SASL security.protocol are an error (a forgotten
security.protocol otherwise shows up later as an opaque connection failure).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.config import NetConfig, parse_bootstrap_servers
from spark_kafka_sink.net.kerberos import KerberosLogin, kerberos_login
from spark_kafka_sink.net.oauthbearer import OAuthBearerTokens, TokenEndpointLogin, token_source
from spark_kafka_sink.net.security_settings import SecuritySettings
from spark_kafka_sink.producer.config_options import (
    IGNORED_OPTIONS,
    MAX_INT32,
    OPTIONS,
    OPTIONS_BY_NAME,
    UNSUPPORTED_OPTIONS,
    Secret,
    tls_versions,
)
from spark_kafka_sink.protocol.compression import require_codec
from spark_kafka_sink.protocol.jaas import jaas_credentials, jaas_oauthbearer_options
from spark_kafka_sink.protocol.sasl import GSSAPI, OAUTHBEARER

__all__ = ["ProducerConfig", "Secret", "SaslCredentials"]

_log = logging.getLogger(__name__)

_MAX_IDEMPOTENT_IN_FLIGHT = 5


@dataclass(frozen=True)
class SaslCredentials:
    mechanism: str
    username: str
    password: Secret
    token_auth: bool = False  # a delegation token's id and HMAC (sasl.jaas.config's tokenauth=true)


@dataclass(frozen=True)
class ProducerConfig:
    """Every producer setting, typed. Build with :meth:`from_dict`; one attribute per key of ``OPTIONS``."""

    bootstrap_servers: tuple[str, ...]
    client_id: str
    security_protocol: str
    sasl_mechanism: str
    sasl_username: str | None
    sasl_password: Secret | None
    sasl_jaas_config: Secret | None
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_login_callback_handler_class: str | None
    sasl_login_connect_timeout_ms: int
    sasl_login_read_timeout_ms: int
    sasl_login_retry_backoff_ms: int
    sasl_login_retry_backoff_max_ms: int
    sasl_oauthbearer_token_provider: Callable[..., Any] | None
    sasl_oauthbearer_config: Secret | None
    sasl_oauthbearer_client_credentials_client_id: str | None
    sasl_oauthbearer_client_credentials_client_secret: Secret | None
    sasl_oauthbearer_scope: str | None
    sasl_oauthbearer_header_urlencode: bool
    sasl_oauthbearer_jwt_retriever_class: str | None
    sasl_kerberos_service_name: str | None
    sasl_kerberos_keytab: str | None
    sasl_kerberos_principal: str | None
    ssl_ca_location: str | None
    ssl_truststore_location: str | None
    ssl_truststore_type: str | None
    ssl_truststore_password: Secret | None
    ssl_certificate_location: str | None
    ssl_key_location: str | None
    ssl_key_password: Secret | None
    ssl_keystore_location: str | None
    ssl_keystore_type: str | None
    ssl_keystore_key: Secret | None
    ssl_keystore_certificate_chain: Secret | None
    ssl_truststore_certificates: Secret | None
    ssl_keystore_password: Secret | None
    ssl_endpoint_identification_algorithm: str
    ssl_check_hostname: bool
    ssl_enabled_protocols: str
    ssl_protocol: str
    client_dns_lookup: str
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    metadata_recovery_strategy: str
    metadata_recovery_rebootstrap_trigger_ms: int
    allow_auto_create_topics: bool
    metrics_sample_window_ms: int
    metrics_num_samples: int
    acks: int  # -1 (all), 0 or 1
    enable_idempotence: bool
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    max_in_flight_requests_per_connection: int
    linger_ms: int
    batch_size: int
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    max_records_per_second: int
    max_bytes_per_second: int
    compression_type: str
    compression_level: int | None
    compression_gzip_level: int | None
    compression_lz4_level: int | None
    compression_zstd_level: int | None
    partitioner_class: Callable[[str, bytes | None, int], int] | None
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    transactional_id: str | None
    transaction_timeout_ms: int
    interceptor_classes: tuple[object, ...]
    explicitly_set: frozenset[str] = frozenset()  # Java names the user gave (not None)
    ignored: frozenset[str] = frozenset()  # Java keys the user gave that hold no setting here (IGNORED_OPTIONS)

    # ------------------------------------------------------------------------------------------ building

    @classmethod
    def from_dict(cls, options: Mapping[str, Any]) -> ProducerConfig:
        """Parse and validate the user's options (Java names; values typed or strings). None means "default"."""
        values: dict[str, Any] = {spec.attribute: spec.default for spec in OPTIONS}
        explicit: set[str] = set()
        ignored: set[str] = set()
        seen: dict[str, str] = {}
        for raw_key, raw_value in options.items():
            if not isinstance(raw_key, str):
                raise ConfigError(f"config keys are strings, got {raw_key!r}")
            key = raw_key.strip().lower()  # Spark options arrive lower-cased; Java names are all lower case
            spec = OPTIONS_BY_NAME.get(key)
            if spec is None and key in IGNORED_OPTIONS:
                ignored.add(key)  # (its value is never read, nor logged)
                continue
            if spec is None:
                raise _unknown_key(raw_key)
            if key in seen:
                raise ConfigError(f"{key} is given twice (as {seen[key]!r} and {raw_key!r})", key=key)
            seen[key] = raw_key
            if raw_value is None:
                continue
            values[spec.attribute] = spec.parse(key, raw_value)
            explicit.add(key)
        if not values["bootstrap_servers"]:
            raise ConfigError("bootstrap.servers is required: host:port[,host:port...]", key="bootstrap.servers")
        values["explicitly_set"] = frozenset(explicit)
        values["ignored"] = frozenset(ignored)
        _apply_cross_field_rules(values, explicit)
        for key in sorted(ignored):
            _log.warning("producer config %r is not a setting of this producer (%s): ignored, as the Java producer "
                         "ignores the keys it does not use", key, IGNORED_OPTIONS[key])
        return cls(**values)

    def to_dict(self, *, include_defaults: bool = False) -> dict[str, Any]:
        """Java-named options that rebuild this config with :meth:`from_dict`. Secrets stay :class:`Secret`."""
        out: dict[str, Any] = {}
        for spec in OPTIONS:
            if include_defaults or spec.name in self.explicitly_set:
                out[spec.name] = getattr(self, spec.attribute)
        return out

    def with_overrides(self, overrides: Mapping[str, Any]) -> ProducerConfig:
        """A new config: this one's explicit options updated with ``overrides`` (validated again)."""
        return ProducerConfig.from_dict({**self.to_dict(), **overrides})

    # ------------------------------------------------------------------------------------------ derived

    def net_config(self) -> NetConfig:
        """The network client's settings, derived from this config (as Java builds its NetworkClient from the one
        parsed ProducerConfig): the net layer never reads the user's options itself."""
        return NetConfig(
            bootstrap_servers=parse_bootstrap_servers(",".join(self.bootstrap_servers)),
            client_id=self.client_id,
            request_timeout_ms=self.request_timeout_ms,
            socket_connection_setup_timeout_ms=self.socket_connection_setup_timeout_ms,
            socket_connection_setup_timeout_max_ms=self.socket_connection_setup_timeout_max_ms,
            connections_max_idle_ms=self.connections_max_idle_ms,
            reconnect_backoff_ms=self.reconnect_backoff_ms,
            reconnect_backoff_max_ms=self.reconnect_backoff_max_ms,
            retry_backoff_ms=self.retry_backoff_ms,
            metadata_max_age_ms=self.metadata_max_age_ms,
            metadata_max_idle_ms=self.metadata_max_idle_ms,
            allow_auto_create_topics=self.allow_auto_create_topics,
            max_in_flight_requests_per_connection=self.max_in_flight_requests_per_connection,
            send_buffer_bytes=self.send_buffer_bytes,
            receive_buffer_bytes=self.receive_buffer_bytes,
            metadata_recovery_strategy=self.metadata_recovery_strategy,
            metadata_recovery_rebootstrap_trigger_ms=self.metadata_recovery_rebootstrap_trigger_ms,
            client_dns_lookup=self.client_dns_lookup,
            security=self.security_settings(),
        )

    def security_settings(self) -> SecuritySettings:
        """The connections' security settings, derived from this config (validated by :meth:`from_dict`). One
        object per distinct set of security settings in the process, so one SSLContext, and one OAUTHBEARER token
        shared by the producers of a configuration, as Java's login manager shares a login."""
        return _security_settings(tuple(getattr(self, attribute) for attribute in _SECURITY_ATTRIBUTES))

    def idempotence_conflicts(self) -> list[str]:
        """Why this config's producer is not idempotent, as settings (e.g. ``acks=1 (needs all)``): empty if it
        is. What a caller that needs idempotence (transactions) names to the user."""
        explicit_off = ["enable.idempotence=false"] if (
            not self.enable_idempotence and "enable.idempotence" in self.explicitly_set) else []
        return explicit_off + _idempotence_conflicts(
            {"acks": self.acks, "retries": self.retries,
             "max_in_flight_requests_per_connection": self.max_in_flight_requests_per_connection})

    @property
    def is_transactional(self) -> bool:
        return self.transactional_id is not None

    @property
    def effective_compression_level(self) -> int | None:
        """compression.level if set, else compression.<codec>.level for the chosen codec; None: codec default.

        compression.lz4.level reads as in the Java client: its default, 9, is lz4's fast mode (the Java client's
        ``fastCompressor``), and only another level is LZ4-HC at that level. A configuration copied from Java that
        spells the default out must not compress several times slower here."""
        if self.compression_level is not None:
            return self.compression_level
        per_codec = {
            "gzip": self.compression_gzip_level,
            "lz4": None if self.compression_lz4_level == _JAVA_LZ4_DEFAULT_LEVEL else self.compression_lz4_level,
            "zstd": self.compression_zstd_level,
        }.get(self.compression_type)
        return None if per_codec == -1 else per_codec

    @property
    def uses_ssl(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol.startswith("SASL_")

    @property
    def ssl_cafile(self) -> str | None:
        """The CA file to trust (ssl.ca.location or ssl.truststore.location: PEM, or a JKS/JCEKS truststore);
        None: the system's CAs."""
        return self.ssl_ca_location or self.ssl_truststore_location

    def sasl_credentials(self) -> SaslCredentials | None:
        """Mechanism, user name and password for SASL (from sasl.username/password or sasl.jaas.config)."""
        if not self.uses_sasl or self.sasl_mechanism in (OAUTHBEARER, GSSAPI):  # a token; Kerberos (net/kerberos.py)
            return None
        return _sasl_credentials({attribute: getattr(self, attribute) for attribute in _SECURITY_ATTRIBUTES})


# The attributes the security settings derive from: security.protocol and every ssl.* / sasl.* option.
_SECURITY_ATTRIBUTES = ("security_protocol",
                        *(spec.attribute for spec in OPTIONS if spec.name.startswith(("ssl.", "sasl."))))


@functools.lru_cache(maxsize=16)
def _security_settings(values: tuple[Any, ...]) -> SecuritySettings:
    v = dict(zip(_SECURITY_ATTRIBUTES, values, strict=True))
    protocol, mechanism = v["security_protocol"], v["sasl_mechanism"]
    uses_sasl = protocol.startswith("SASL_")
    username, password, token_auth = None, None, False
    if uses_sasl and mechanism not in (OAUTHBEARER, GSSAPI):
        credentials = _sasl_credentials(v)
        username, password, token_auth = credentials.username, credentials.password, credentials.token_auth
    return SecuritySettings(
        protocol=protocol,
        ca_location=v["ssl_ca_location"] or v["ssl_truststore_location"],
        ca_option="ssl.ca.location" if v["ssl_ca_location"] else "ssl.truststore.location",
        truststore_type=v["ssl_truststore_type"], truststore_password=v["ssl_truststore_password"],
        certificate_location=v["ssl_certificate_location"], key_location=v["ssl_key_location"],
        key_password=v["ssl_key_password"], keystore_location=v["ssl_keystore_location"],
        keystore_type=v["ssl_keystore_type"], keystore_password=v["ssl_keystore_password"],
        truststore_certificates=v["ssl_truststore_certificates"], keystore_key=v["ssl_keystore_key"],
        keystore_certificate_chain=v["ssl_keystore_certificate_chain"], check_hostname=v["ssl_check_hostname"],
        tls_versions=tls_versions(v["ssl_enabled_protocols"], v["ssl_protocol"]),
        sasl_mechanism=mechanism, sasl_username=username, sasl_password=password, sasl_token_auth=token_auth,
        oauth_tokens=_oauth_tokens(v) if uses_sasl and mechanism == OAUTHBEARER else None,
        kerberos=_kerberos(v) if uses_sasl and mechanism == GSSAPI else None,
    )


def _sasl_credentials(v: Mapping[str, Any]) -> SaslCredentials:
    """PLAIN / SCRAM: the user name and password, from sasl.jaas.config or sasl.username / sasl.password."""
    if v["sasl_jaas_config"] is not None:
        credentials = jaas_credentials(v["sasl_jaas_config"].reveal(), v["sasl_mechanism"])
        return SaslCredentials(v["sasl_mechanism"], credentials.username, Secret(credentials.password),
                               credentials.token_auth)
    if v["sasl_username"] is None or v["sasl_password"] is None:  # from_dict refuses this; direct init may not
        raise ConfigError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)", key="sasl.username")
    return SaslCredentials(v["sasl_mechanism"], v["sasl_username"], v["sasl_password"])


def _oauth_tokens(v: Mapping[str, Any]) -> OAuthBearerTokens:
    """OAUTHBEARER: the token source of the settings (the sasl.login.* ones included, defaults from OPTIONS)."""
    jaas, provider_config = v["sasl_jaas_config"], v["sasl_oauthbearer_config"]
    login = TokenEndpointLogin(
        client_id=v["sasl_oauthbearer_client_credentials_client_id"],
        client_secret=v["sasl_oauthbearer_client_credentials_client_secret"],
        scope=v["sasl_oauthbearer_scope"], header_urlencode=v["sasl_oauthbearer_header_urlencode"],
        jwt_retriever=v["sasl_oauthbearer_jwt_retriever_class"],
        connect_timeout_ms=v["sasl_login_connect_timeout_ms"], read_timeout_ms=v["sasl_login_read_timeout_ms"],
        retry_backoff_ms=v["sasl_login_retry_backoff_ms"], retry_backoff_max_ms=v["sasl_login_retry_backoff_max_ms"])
    return token_source(None if jaas is None else jaas_oauthbearer_options(jaas.reveal()),
                        v["sasl_oauthbearer_token_provider"], endpoint=v["sasl_oauthbearer_token_endpoint_url"],
                        login=login, provider_config=None if provider_config is None else provider_config.reveal())


def _kerberos(v: Mapping[str, Any]) -> KerberosLogin:
    jaas = v["sasl_jaas_config"]
    return kerberos_login(None if jaas is None else jaas.reveal(), v["sasl_kerberos_service_name"],
                          keytab=v["sasl_kerberos_keytab"], principal=v["sasl_kerberos_principal"])


def _unknown_key(key: str) -> ConfigError:
    lowered = key.strip().lower()
    if lowered in UNSUPPORTED_OPTIONS:
        return ConfigError(f"{lowered} is not supported: {UNSUPPORTED_OPTIONS[lowered]}", key=key)
    close = difflib.get_close_matches(lowered, list(OPTIONS_BY_NAME), n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else "; see ProducerConfig / the README options table"
    return ConfigError(f"unknown producer config {key!r}{hint}", key=key)


def _conflict(message: str, key: str) -> ConfigError:
    return ConfigError(message, key=key)


def _apply_cross_field_rules(v: dict[str, Any], explicit: set[str]) -> None:
    _idempotence_rules(v, explicit)
    if v["transactional_id"] is not None and not v["enable_idempotence"]:
        raise _conflict("transactional.id needs idempotence, but enable.idempotence=false", "transactional.id")
    # Capped at the int32 maximum, as Java's (long) sum clamped to Integer.MAX_VALUE: linger.ms=2147483647 (batch
    # until full) with delivery.timeout.ms=2147483647 is valid there.
    floor = min(v["linger_ms"] + v["request_timeout_ms"], MAX_INT32)
    if v["delivery_timeout_ms"] < floor:
        if "delivery.timeout.ms" in explicit:
            raise _conflict(
                f"delivery.timeout.ms={v['delivery_timeout_ms']} must be >= linger.ms + request.timeout.ms "
                f"({v['linger_ms']} + {v['request_timeout_ms']} = {floor})", "delivery.timeout.ms")
        v["delivery_timeout_ms"] = floor
    v["retry_backoff_max_ms"] = max(v["retry_backoff_max_ms"], v["retry_backoff_ms"])
    v["reconnect_backoff_max_ms"] = max(v["reconnect_backoff_max_ms"], v["reconnect_backoff_ms"])
    _tls_rules(v, explicit)
    _sasl_rules(v, explicit)
    _compression_rules(v)
    tls_versions(v["ssl_enabled_protocols"], v["ssl_protocol"])  # e.g. ssl.protocol=TLSv1.2 with only TLSv1.3


# Levels each codec's library accepts (snappy and none have no level: a level given for them is ignored, as in
# librdkafka).
# The Java client's compression.lz4.level default: lz4-java's fast compressor, not LZ4-HC level 9.
_JAVA_LZ4_DEFAULT_LEVEL = 9
_LEVEL_RANGES = {"gzip": (0, 9), "lz4": (0, 17), "zstd": (-131_072, 22)}


def _compression_rules(v: dict[str, Any]) -> None:
    level, codec = v["compression_level"], v["compression_type"]
    # A missing optional codec package failed in the sender thread, batch after batch: sends and close() hung.
    require_codec(codec)
    if level is None or codec not in _LEVEL_RANGES:
        return
    lo, hi = _LEVEL_RANGES[codec]
    if not lo <= level <= hi and not (codec == "gzip" and level == -1):
        raise _conflict(f"compression.level={level} is out of range for compression.type={codec}: use {lo}..{hi} "
                        f"(or leave it unset for the codec's default)", "compression.level")


def _idempotence_conflicts(v: dict[str, Any]) -> list[str]:
    conflicts = []
    if v["acks"] != -1:
        conflicts.append(f"acks={v['acks']} (needs all)")
    if v["retries"] == 0:
        conflicts.append("retries=0 (needs > 0)")
    if v["max_in_flight_requests_per_connection"] > _MAX_IDEMPOTENT_IN_FLIGHT:
        conflicts.append(f"max.in.flight.requests.per.connection={v['max_in_flight_requests_per_connection']} "
                         f"(needs <= {_MAX_IDEMPOTENT_IN_FLIGHT})")
    return conflicts


def _idempotence_rules(v: dict[str, Any], explicit: set[str]) -> None:
    if not v["enable_idempotence"]:
        return
    conflicts = _idempotence_conflicts(v)
    if not conflicts:
        return
    if "enable.idempotence" in explicit or v["transactional_id"] is not None:
        # Java refuses a transactional producer with these settings even when idempotence was left implicit.
        what = "transactional.id" if "enable.idempotence" not in explicit else "enable.idempotence=true"
        raise _conflict(f"{what} conflicts with " + ", ".join(conflicts) + "; change those or "
                        "set enable.idempotence=false (and no transactional.id)", "enable.idempotence")
    _log.info("idempotence disabled because of %s (enable.idempotence was not set)", ", ".join(conflicts))
    v["enable_idempotence"] = False


def _tls_rules(v: dict[str, Any], explicit: set[str]) -> None:
    ca, truststore = v["ssl_ca_location"], v["ssl_truststore_location"]
    if ca and truststore and ca != truststore:
        raise _conflict("ssl.ca.location and ssl.truststore.location name different files; set one",
                        "ssl.truststore.location")
    by_algorithm = v["ssl_endpoint_identification_algorithm"] == "https"
    if "ssl.check.hostname" in explicit and "ssl.endpoint.identification.algorithm" in explicit:
        if v["ssl_check_hostname"] != by_algorithm:
            raise _conflict("ssl.check.hostname and ssl.endpoint.identification.algorithm disagree; set one",
                            "ssl.check.hostname")
    elif "ssl.check.hostname" not in explicit:
        v["ssl_check_hostname"] = by_algorithm
    if v["ssl_keystore_location"] and (v["ssl_certificate_location"] or v["ssl_key_location"]):
        raise _conflict("ssl.keystore.location and ssl.certificate.location / ssl.key.location both name a client "
                        "certificate; set one", "ssl.keystore.location")
    if bool(v["ssl_certificate_location"]) != bool(v["ssl_key_location"]):
        raise _conflict("mutual TLS needs both ssl.certificate.location and ssl.key.location",
                        "ssl.key.location" if v["ssl_certificate_location"] else "ssl.certificate.location")
    if v["security_protocol"] in ("SSL", "SASL_SSL"):  # (checked with TLS only, as they always were)
        _inline_pem_rules(v)


def _inline_pem_rules(v: dict[str, Any]) -> None:
    """Java's rules for the PEM text options: with the PEM type (or none), not with a file, key and chain together."""
    truststore_type, keystore_type = v["ssl_truststore_type"], v["ssl_keystore_type"]
    if v["ssl_truststore_certificates"] is not None:
        if v["ssl_truststore_location"] or v["ssl_ca_location"]:
            raise _conflict("ssl.truststore.certificates and a truststore file (ssl.truststore.location / "
                            "ssl.ca.location) both name the trusted certificates: set one",
                            "ssl.truststore.certificates")
        if truststore_type not in (None, "PEM"):
            raise _conflict(f"ssl.truststore.certificates is PEM text: ssl.truststore.type={truststore_type} does "
                            "not apply (set PEM or leave it unset)", "ssl.truststore.type")
    key, chain = v["ssl_keystore_key"], v["ssl_keystore_certificate_chain"]
    if key is None and chain is None:
        return
    if key is None or chain is None:
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise _conflict(f"ssl.keystore.key and ssl.keystore.certificate.chain go together: {missing} is missing",
                        missing)
    if v["ssl_keystore_location"] or v["ssl_certificate_location"] or v["ssl_key_location"]:
        raise _conflict("ssl.keystore.key and a keystore file (ssl.keystore.location, or ssl.certificate.location "
                        "/ ssl.key.location) both name the client certificate: set one", "ssl.keystore.key")
    if keystore_type not in (None, "PEM"):
        raise _conflict(f"ssl.keystore.key is PEM text: ssl.keystore.type={keystore_type} does not apply (set PEM "
                        "or leave it unset)", "ssl.keystore.type")


def _sasl_rules(v: dict[str, Any], explicit: set[str]) -> None:
    sasl_keys = sorted(k for k in explicit if k.startswith("sasl."))
    if not v["security_protocol"].startswith("SASL_"):
        if sasl_keys:
            raise _conflict(f"{', '.join(sasl_keys)} set but security.protocol={v['security_protocol']}; "
                            "set security.protocol=SASL_SSL or SASL_PLAINTEXT", "security.protocol")
        return
    has_pair = v["sasl_username"] is not None or v["sasl_password"] is not None
    provider = v["sasl_oauthbearer_token_provider"]
    if v["sasl_mechanism"] == OAUTHBEARER:
        if has_pair:
            raise _conflict("sasl.mechanism=OAUTHBEARER authenticates with a token: sasl.username and sasl.password "
                            "are for PLAIN and SCRAM", "sasl.username")
        if v["sasl_oauthbearer_config"] is not None and provider is None:
            raise _conflict("sasl.oauthbearer.config is the argument of sasl.oauthbearer.token.provider: set the "
                            "provider too, or leave it unset", "sasl.oauthbearer.config")
        _oauth_tokens(v)  # fail now
        return
    if provider is not None:
        raise _conflict(f"sasl.oauthbearer.token.provider is set but sasl.mechanism={v['sasl_mechanism']}; set "
                        "sasl.mechanism=OAUTHBEARER", "sasl.oauthbearer.token.provider")
    if v["sasl_mechanism"] == GSSAPI:
        if has_pair:
            raise _conflict("sasl.mechanism=GSSAPI authenticates with Kerberos: sasl.username and sasl.password are "
                            "for PLAIN and SCRAM", "sasl.username")
        _kerberos(v)  # fail now
        return
    if v["sasl_jaas_config"] is not None:
        if has_pair:
            raise _conflict("set either sasl.jaas.config or sasl.username/sasl.password, not both",
                            "sasl.jaas.config")
        # Fail now, not at connect time (the Java grammar and the login module check live in protocol/jaas.py, whose
        # errors never quote the text).
        jaas_credentials(v["sasl_jaas_config"].reveal(), v["sasl_mechanism"])
    elif v["sasl_username"] is None or v["sasl_password"] is None:
        missing = "sasl.username" if v["sasl_username"] is None else "sasl.password"
        raise _conflict(f"security.protocol={v['security_protocol']} needs credentials: {missing} is missing "
                        "(or use sasl.jaas.config)", missing)


def _check_table_matches_dataclass() -> None:
    # The spec table and the dataclass are written separately (so attributes are typed); keep them in step.
    fields = {f.name for f in dataclasses.fields(ProducerConfig)} - {"explicitly_set", "ignored"}
    attributes = {spec.attribute for spec in OPTIONS}
    if fields != attributes:
        raise TypeError(f"ProducerConfig fields and OPTIONS differ: {sorted(fields ^ attributes)}")
    for spec in OPTIONS:
        if spec.secret and spec.type_name != "secret":
            raise TypeError(f"{spec.name} looks secret but is not parsed as a Secret")


_check_table_matches_dataclass()
