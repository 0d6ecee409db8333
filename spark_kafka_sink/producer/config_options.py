"""The producer's configuration keys, declared once: name, type, default, validator, doc.

``OPTIONS`` is the single table every other piece reads: ``ProducerConfig.from_dict`` parses with it, the README's
options table is generated from it (``options_markdown()``), and secrets are recognised by
name (``is_secret_name``, re-exported here with ``Secret`` from :mod:`spark_kafka_sink.secret`).

Values may arrive as Python objects or as strings (Spark options are always strings): every parser accepts both.
A parser raises ``ConfigError`` naming the key, the value (never for a secret) and what is allowed.
"""

from __future__ import annotations

import re
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.client_keystore import KEYSTORE_TYPES
from spark_kafka_sink.net.config import format_address, parse_bootstrap_servers
from spark_kafka_sink.net.oauthbearer import JAVA_OAUTH_LOGIN_HANDLERS, token_provider
from spark_kafka_sink.net.truststore import TRUSTSTORE_TYPES
from spark_kafka_sink.producer.java_partitioners import JAVA_PARTITIONERS, java_partitioner
from spark_kafka_sink.python_objects import resolve_object
from spark_kafka_sink.secret import Secret, is_secret_name

__all__ = ["Secret", "OptionSpec", "OPTIONS", "OPTIONS_BY_NAME", "UNSUPPORTED_OPTIONS", "IGNORED_OPTIONS",
           "is_secret_name", "options_markdown", "ignored_options_markdown", "tls_versions", "MAX_INT32",
           "MAX_INT64"]

MAX_INT32 = 2**31 - 1
MAX_INT64 = 2**63 - 1

Parser = Callable[[str, Any], Any]


@dataclass(frozen=True)
class OptionSpec:
    """One configuration key. ``parse(name, raw)`` validates a user value and returns the typed one."""

    name: str  # the Java client's name, e.g. "linger.ms"
    type_name: str  # for docs: "int", "bool", "list", ...
    default: Any  # the typed default (what parse would return); None = not set
    parse: Parser
    doc: str

    @property
    def attribute(self) -> str:
        """The ProducerConfig attribute: the name in snake_case."""
        return self.name.replace(".", "_").replace("-", "_")

    @property
    def secret(self) -> bool:
        return is_secret_name(self.name)


def _shown(name: str, raw: object) -> str:
    return f"{name}=<hidden>" if is_secret_name(name) else f"{name}={raw!r}"


def _invalid(name: str, raw: object, expected: str) -> ConfigError:
    return ConfigError(f"{_shown(name, raw)} is invalid: expected {expected}", key=name)


def _int(lo: int = 0, hi: int = MAX_INT64) -> Parser:
    expected = f"an integer from {lo} to {hi}" if hi < MAX_INT64 else f"an integer >= {lo}"

    def parse(name: str, raw: Any) -> int:
        if isinstance(raw, bool):  # bool is an int in Python; True as a size is a mistake
            raise _invalid(name, raw, expected)
        if isinstance(raw, int):
            value = raw
        elif isinstance(raw, str) and re.fullmatch(r"\s*[-+]?\d+\s*", raw):
            value = int(raw)
        else:
            raise _invalid(name, raw, expected)
        if not lo <= value <= hi:
            raise _invalid(name, raw, expected)
        return value

    return parse


def _optional_int(lo: int, hi: int) -> Parser:
    inner = _int(lo, hi)
    return lambda name, raw: None if raw is None or raw == "" else inner(name, raw)


def _bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise _invalid(name, raw, "true or false")


def _choice(*allowed: str, upper: bool = False) -> Parser:
    def parse(name: str, raw: Any) -> str:
        value = raw.strip() if isinstance(raw, str) else raw
        if isinstance(value, str):
            value = value.upper() if upper else value.lower()
        if value not in allowed:
            raise _invalid(name, raw, "one of " + ", ".join(a or "'' (empty)" for a in allowed))
        return str(value)

    return parse


def _store_type(*types: str) -> Parser:
    """ssl.truststore.type / ssl.keystore.type: one of ``types`` (any case); unset or empty: by the file's content."""
    def parse(name: str, raw: Any) -> str | None:
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            return None
        value = raw.strip().upper() if isinstance(raw, str) else raw
        if value not in types:
            raise _invalid(name, raw, "one of " + ", ".join(types) + " (unset: by the file's content)")
        return str(value)

    return parse


def _acks(name: str, raw: Any) -> int:
    """acks: "all" is -1, as in the Java client."""
    value = raw.strip().lower() if isinstance(raw, str) else raw
    mapping: dict[object, int] = {"all": -1, "-1": -1, "0": 0, "1": 1, -1: -1, 0: 0, 1: 1}
    if isinstance(value, bool) or value not in mapping:
        raise _invalid(name, raw, "one of all, -1, 0, 1")
    return mapping[value]


def _string(name: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise _invalid(name, raw, "a string")
    return raw


def _optional_string(name: str, raw: Any) -> str | None:
    return None if raw is None or raw == "" else _string(name, raw)


def _secret(name: str, raw: Any) -> Secret | None:
    if raw is None or isinstance(raw, Secret):
        return raw
    if not isinstance(raw, str):
        raise _invalid(name, raw, "a string")
    return Secret(raw) if raw else None


def _servers(name: str, raw: Any) -> tuple[str, ...]:
    return tuple(format_address(host, port) for host, port in parse_bootstrap_servers(raw, name))


def _partitioner(name: str, raw: Any) -> Callable[[str, bytes | None, int], int] | None:
    if raw is None or raw == "":
        return None
    if isinstance(raw, str) and raw.strip() in JAVA_PARTITIONERS:
        return java_partitioner(raw.strip())
    java_own = ", ".join(n.rpartition(".")[2] for n in JAVA_PARTITIONERS)
    hint = f"; of Java's own partitioners {java_own} are understood by their names"
    target = resolve_object(name, raw, java_hint=hint)
    if not callable(target) and callable(getattr(target, "partition", None)):
        target = target.partition  # an object with a Java-like partition(topic, key_bytes, num_partitions) method
    if not callable(target):
        raise _invalid(name, raw, "a callable (topic, key_bytes, num_partitions) -> partition")
    return target  # type: ignore[no-any-return]


def _login_handler(name: str, raw: Any) -> str | None:
    value = raw.strip() if isinstance(raw, str) else raw
    if value in (None, ""):
        return None
    if value not in JAVA_OAUTH_LOGIN_HANDLERS:
        raise ConfigError(f"{name}={raw!r} cannot run here: of Java's login handlers OAuthBearerLoginCallbackHandler "
                          "is built in (with sasl.oauthbearer.token.endpoint.url); for another token source give "
                          "sasl.oauthbearer.token.provider, a Python callable", key=name)
    return str(value)


def _token_provider(name: str, raw: Any) -> Callable[[], Any] | None:
    return token_provider(raw)


def _objects(name: str, raw: Any) -> tuple[object, ...]:
    if raw is None or raw == "":
        return ()
    if isinstance(raw, str):
        return tuple(resolve_object(name, part) for part in raw.split(",") if part.strip())
    if isinstance(raw, Sequence):
        return tuple(resolve_object(name, item) for item in raw)
    return (resolve_object(name, raw),)


def _dns_lookup(name: str, raw: Any) -> str:
    value = raw.strip().lower() if isinstance(raw, str) else raw
    if value not in ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"):
        raise _invalid(name, raw, "use_all_dns_ips or resolve_canonical_bootstrap_servers_only")
    return value


# Java's protocol names, lower-cased; "TLS" (any version) is the newest.
_TLS_NAMES = {"tlsv1.2": ssl.TLSVersion.TLSv1_2, "tlsv1.3": ssl.TLSVersion.TLSv1_3, "tls": ssl.TLSVersion.TLSv1_3}
_OLD_TLS = frozenset({"tlsv1", "tlsv1.1", "ssl", "sslv2", "sslv3", "sslv2hello"})


def tls_versions(enabled: str | None, protocol: str | None) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    """The oldest and newest TLS version to offer, as the Java client reads ``ssl.enabled.protocols`` (comma
    separated; unset: TLSv1.2,TLSv1.3) and ``ssl.protocol`` (unset: TLSv1.3; TLSv1.2 keeps even an enabled TLSv1.3
    out). Versions before TLS 1.2 are never offered (brokers turn them off by default; they are broken): a list that
    names them with a newer one keeps the newer ones, a list of only old ones is an error. A list with a gap cannot
    be expressed by OpenSSL's version range and does not arise with two versions."""
    names = [n.strip() for n in (enabled or "TLSv1.2,TLSv1.3").split(",") if n.strip()]
    unknown = [n for n in names if n.lower() not in _TLS_NAMES and n.lower() not in _OLD_TLS]
    if unknown or not names:
        raise ConfigError(f"ssl.enabled.protocols={enabled!r}: expected TLS versions such as TLSv1.2,TLSv1.3"
                          + (f" ({', '.join(unknown)} is not one)" if unknown else ""), key="ssl.enabled.protocols")
    offered = sorted({_TLS_NAMES[n.lower()] for n in names if n.lower() in _TLS_NAMES})
    if not offered:
        raise ConfigError(f"ssl.enabled.protocols={enabled!r} names only versions before TLS 1.2, which this client "
                          "never offers: add TLSv1.2 or TLSv1.3", key="ssl.enabled.protocols")
    cap_name = (protocol or "TLSv1.3").strip()
    if cap_name.lower() not in _TLS_NAMES:
        raise ConfigError(f"ssl.protocol={protocol!r}: expected TLSv1.3, TLSv1.2 or TLS (versions before TLS 1.2 "
                          "are never offered)", key="ssl.protocol")
    newest = min(offered[-1], _TLS_NAMES[cap_name.lower()])
    if newest < offered[0]:
        raise ConfigError(f"ssl.protocol={protocol!r} leaves none of ssl.enabled.protocols={enabled!r}: raise "
                          "ssl.protocol or enable an older version", key="ssl.protocol")
    return offered[0], newest


def _tls_list(name: str, raw: Any) -> str:
    """ssl.enabled.protocols: comma-separated text (or a list), checked as the TLS set-up reads it."""
    text = ",".join(str(v) for v in raw) if isinstance(raw, (list, tuple)) else raw
    if not isinstance(text, str):
        raise _invalid(name, raw, "TLS versions such as TLSv1.2,TLSv1.3")
    tls_versions(text, None)
    return ",".join(v.strip() for v in text.split(",") if v.strip())


def _tls_newest(name: str, raw: Any) -> str:
    if not isinstance(raw, str):
        raise _invalid(name, raw, "TLSv1.3, TLSv1.2 or TLS")
    tls_versions(None, raw)
    return raw.strip()


def _opt(name: str, type_name: str, parse: Parser, default: Any, doc: str) -> OptionSpec:
    return OptionSpec(name, type_name, default, parse, doc)


_MS = "int (ms)"
# fmt: off
OPTIONS: tuple[OptionSpec, ...] = (
    # --- connection and identity
    _opt("bootstrap.servers", "list", _servers, (),
         "Brokers to fetch cluster metadata from: host:port,host:port (a listener scheme such as PLAINTEXT:// is "
         "ignored, as in Java). Required."),
    _opt("client.id", "string", _string, "",
         "Name sent with every request (broker logs, quotas). Empty: producer-<n>."),
    _opt("security.protocol", "enum", _choice("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL", upper=True),
         "PLAINTEXT",
         "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL."),
    _opt("sasl.mechanism", "enum",
         _choice("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI", upper=True),
         "PLAIN", "SASL mechanism: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI (Kerberos: the "
         "optional package gssapi)."),
    _opt("sasl.kerberos.service.name", "string", _optional_string, None,
         "GSSAPI: the first part of the brokers' principals (kafka in kafka/host@REALM); or serviceName in "
         "sasl.jaas.config."),
    _opt("sasl.kerberos.keytab", "string", _optional_string, None,
         "GSSAPI, as librdkafka: the keytab to log in with (instead of sasl.jaas.config's Krb5LoginModule "
         "useKeyTab=true keyTab=...); needs sasl.kerberos.principal."),
    _opt("sasl.kerberos.principal", "string", _optional_string, None,
         "GSSAPI, as librdkafka: the principal the keytab logs in as (name@REALM)."),
    _opt("sasl.oauthbearer.token.endpoint.url", "string", _optional_string, None,
         "OAUTHBEARER, as Java's OIDC login: the token endpoint (client-credentials grant with sasl.jaas.config's "
         "clientId, clientSecret, scope) or a file: URL of a token."),
    _opt("sasl.oauthbearer.client.credentials.client.id", "string", _optional_string, None,
         "OAUTHBEARER token endpoint, as Kafka 4.1: the client id (else sasl.jaas.config's clientId)."),
    _opt("sasl.oauthbearer.client.credentials.client.secret", "secret", _secret, None,
         "OAUTHBEARER token endpoint, as Kafka 4.1: the client secret (else sasl.jaas.config's clientSecret); "
         "never logged."),
    _opt("sasl.oauthbearer.scope", "string", _optional_string, None,
         "OAUTHBEARER token endpoint, as Kafka 4.1: the scope asked for (else sasl.jaas.config's scope)."),
    _opt("sasl.oauthbearer.header.urlencode", "bool", _bool, False,
         "OAUTHBEARER token endpoint: form-encode the client id and secret in the Basic header (RFC 6749 2.3.1); "
         "off as in Java."),
    _opt("sasl.oauthbearer.jwt.retriever.class", "string", _optional_string, None,
         "Java's DefaultJwtRetriever, ClientCredentialsJwtRetriever or FileJwtRetriever (Kafka 4.1), or unset; "
         "others cannot run here."),
    _opt("sasl.login.callback.handler.class", "string", _login_handler, None,
         "Java's OAuthBearerLoginCallbackHandler (the token endpoint login, built in) or unset; other Java "
         "handlers cannot run here."),
    _opt("sasl.login.connect.timeout.ms", _MS, _int(0), 10_000,
         "OAUTHBEARER token endpoint: bounds connecting (with sasl.login.read.timeout.ms: urllib takes one timeout, "
         "the larger of the two)."),
    _opt("sasl.login.read.timeout.ms", _MS, _int(0), 10_000, "OAUTHBEARER token endpoint: bounds each read."),
    _opt("sasl.login.retry.backoff.ms", _MS, _int(0), 100,
         "OAUTHBEARER token endpoint: first wait before asking again after a network error or a 5xx answer "
         "(doubling)."),
    _opt("sasl.login.retry.backoff.max.ms", _MS, _int(0), 10_000,
         "OAUTHBEARER token endpoint: the longest wait, and how long to keep asking."),
    _opt("sasl.oauthbearer.token.provider", "callable", _token_provider, None,
         "OAUTHBEARER: a Python callable as confluent-kafka's oauth_cb (called with sasl.oauthbearer.config, or "
         "with nothing if it takes no argument) returning (token, expiry in epoch seconds), (token, expiry, "
         "principal, extensions) or the token, or its dotted path; unset: Java's unsecured login from "
         "sasl.jaas.config (unsecuredLoginStringClaim_sub=...)."),
    _opt("sasl.oauthbearer.config", "secret", _secret, None,
         "OAUTHBEARER: the string passed to sasl.oauthbearer.token.provider (confluent-kafka's argument of "
         "oauth_cb); never logged."),
    _opt("sasl.username", "string", _optional_string, None, "SASL user name (alternative to sasl.jaas.config)."),
    _opt("sasl.password", "secret", _secret, None, "SASL password; never logged."),
    _opt("sasl.jaas.config", "secret", _secret, None,
         "Java JAAS line with username=\"...\" password=\"...\" (PlainLoginModule / ScramLoginModule); never logged."),
    _opt("ssl.ca.location", "string", _optional_string, None,
         "PEM file of CA certificates to trust. Unset: system CAs."),
    _opt("ssl.truststore.location", "string", _optional_string, None,
         "CA certificates to trust: a PEM file (as ssl.ca.location), a Java JKS/JCEKS truststore, or PKCS12 "
         "(needs the optional package cryptography)."),
    _opt("ssl.truststore.type", "enum", _store_type(*TRUSTSTORE_TYPES), None,
         "PEM, JKS, JCEKS or PKCS12; unset: read from the file's first bytes."),
    _opt("ssl.truststore.password", "secret", _secret, None,
         "Password of a keystore truststore: checks a JKS's integrity as Java does (unset: not checked), opens "
         "a PKCS12's encrypted certificates; never logged. A PEM truststore has none."),
    _opt("ssl.certificate.location", "string", _optional_string, None, "PEM client certificate (mutual TLS)."),
    _opt("ssl.key.location", "string", _optional_string, None, "PEM private key of the client certificate."),
    _opt("ssl.key.password", "secret", _secret, None,
         "Password of the private key (ssl.key.location, or in ssl.keystore.location); never logged."),
    _opt("ssl.keystore.location", "string", _optional_string, None,
         "Client certificate and key (mutual TLS) as Java names them: a JKS or PKCS12 keystore (PKCS12 needs the "
         "optional package cryptography), or PEM; instead of ssl.certificate.location and ssl.key.location."),
    _opt("ssl.keystore.type", "enum", _store_type(*KEYSTORE_TYPES), None,
         "JKS, PKCS12 or PEM; unset: read from the file's first bytes."),
    _opt("ssl.keystore.key", "secret", _secret, None,
         "The client's private key as PEM text (PKCS#8; encrypted: ssl.key.password), with "
         "ssl.keystore.certificate.chain; never logged."),
    _opt("ssl.keystore.certificate.chain", "secret", _secret, None,
         "The client certificate chain as PEM text, with ssl.keystore.key."),
    _opt("ssl.truststore.certificates", "secret", _secret, None,
         "CA certificates to trust as PEM text, instead of a truststore file."),
    _opt("ssl.keystore.password", "secret", _secret, None,
         "Password of ssl.keystore.location (and of its key unless ssl.key.password is set); never logged."),
    _opt("ssl.endpoint.identification.algorithm", "string", _choice("https", ""), "https",
         "https: verify the broker's host name against its certificate; empty string: do not."),
    _opt("ssl.check.hostname", "bool", _bool, True,
         "Verify the broker host name (overrides ssl.endpoint.identification.algorithm when set)."),
    _opt("ssl.enabled.protocols", "list", _tls_list, "TLSv1.2,TLSv1.3",
         "TLS versions to offer. Versions before TLSv1.2 are never offered (left out of the list; an error if "
         "nothing else is left)."),
    _opt("ssl.protocol", "string", _tls_newest, "TLSv1.3",
         "The newest TLS version to offer: TLSv1.3 (or TLS), or TLSv1.2 to keep TLSv1.3 out even when enabled."),
    _opt("client.dns.lookup", "enum", _dns_lookup, "use_all_dns_ips",
         "use_all_dns_ips (Java's default): each attempt to connect to a broker takes the next address its name "
         "resolves to; resolve_canonical_bootstrap_servers_only: the bootstrap hosts by their addresses' canonical "
         "names, resolved once (Kerberos through a DNS alias)."),
    # A zero deadline would fail every connection / request at once: these two are positive.
    _opt("socket.connection.setup.timeout.ms", _MS, _int(1), 10_000, "Time to establish one connection."),
    _opt("socket.connection.setup.timeout.max.ms", _MS, _int(0), 30_000,
         "Cap of the setup timeout, which doubles (+-20%) per failed attempt to set up a connection to a broker."),
    _opt("connections.max.idle.ms", _MS, _int(-1), 540_000,
         "Close a connection without traffic for longer than this (-1: never; 0: between requests); the next "
         "request reconnects."),
    _opt("reconnect.backoff.ms", _MS, _int(0), 50, "Wait before reconnecting to a broker."),
    _opt("reconnect.backoff.max.ms", _MS, _int(0), 1_000, "Cap of the exponential reconnect backoff."),
    _opt("send.buffer.bytes", "int", _int(-1, MAX_INT32), 131_072, "SO_SNDBUF (-1: OS default)."),
    _opt("receive.buffer.bytes", "int", _int(-1, MAX_INT32), 32_768, "SO_RCVBUF (-1: OS default)."),
    _opt("metadata.max.age.ms", _MS, _int(0), 300_000, "Refresh metadata at least this often."),
    _opt("metadata.max.idle.ms", _MS, _int(5_000), 300_000,
         "Stop refreshing the metadata of a topic not sent to for this long (the next send fetches it again)."),
    _opt("metadata.recovery.strategy", "enum", _choice("none", "rebootstrap"), "rebootstrap",
         "rebootstrap (Java 4.0's default): when no broker of the last metadata can be reached, or none answered "
         "for metadata.recovery.rebootstrap.trigger.ms, connect to bootstrap.servers again; none: do not."),
    _opt("metadata.recovery.rebootstrap.trigger.ms", _MS, _int(0), 300_000,
         "How long metadata may go unanswered by the known brokers before rebootstrapping."),
    _opt("allow.auto.create.topics", "bool", _bool, True,
         "Let the broker auto-create a missing topic (if it allows); false: sending to it fails after max.block.ms."),
    _opt("metrics.sample.window.ms", _MS, _int(1), 30_000,
         "Window of the metrics' rates, averages and maxima (metrics())."),
    _opt("metrics.num.samples", "int", _int(1, MAX_INT32), 2,
         "How many windows the metrics' rates, averages and maxima cover."),
    # --- delivery
    _opt("acks", "enum", _acks, -1,
         "all (-1): every in-sync replica; 1: the leader; 0: no acknowledgement, so a request the broker refuses"
         " (a partition whose leader is moving, say) loses its records without an error, as in Java."),
    _opt("enable.idempotence", "bool", _bool, True,
         "No duplicates from retries (needs acks=all, retries>0, max.in.flight<=5). Turned off silently if "
         "not set and acks/retries/max.in.flight conflict, as in Java."),
    _opt("retries", "int", _int(0, MAX_INT32), MAX_INT32,
         "Resend attempts on retriable errors (bounded by delivery.timeout.ms)."),
    _opt("retry.backoff.ms", _MS, _int(0), 100, "First wait before resending a failed request (and between "
         "metadata refreshes); a Produce retry bound for a newer leader than its last attempt's goes at once."),
    _opt("retry.backoff.max.ms", _MS, _int(0), 1_000, "Cap of the exponential retry backoff."),
    _opt("delivery.timeout.ms", _MS, _int(0, MAX_INT32), 120_000,
         "Upper bound from send() to acknowledgement or failure; >= linger.ms + request.timeout.ms."),
    _opt("request.timeout.ms", _MS, _int(1, MAX_INT32), 30_000, "Wait this long for a broker's response."),
    _opt("max.in.flight.requests.per.connection", "int", _int(1, MAX_INT32), 5,
         "Unacknowledged requests per broker connection (<= 5 with idempotence)."),
    # --- batching and memory
    _opt("linger.ms", _MS, _int(0, MAX_INT32), 5, "Wait up to this long for more records before sending a batch."),
    _opt("batch.size", "int (bytes)", _int(0, MAX_INT32), 16_384,
         "Target size of one partition's batch. With a codec it counts compressed bytes, estimated as Java does "
         "(per topic, from the batches built so far), so a batch of well-compressing records holds more. 0: one "
         "record a batch (batching off, as in Java)."),
    _opt("buffer.memory", "int (bytes)", _int(0), 33_554_432, "Memory for records waiting to be sent."),
    _opt("max.block.ms", _MS, _int(0), 60_000, "How long send() may block for metadata or buffer memory."),
    _opt("max.request.size", "int (bytes)", _int(1, MAX_INT32), 1_048_576, "Largest produce request (and record)."),
    # --- write rate limits (no Java producer setting: Java leaves rates to broker quotas)
    _opt("max.records.per.second", "int", _int(0), 0,
         "Queue at most this many records a second (0: no limit); send() and send_batch() wait, a batch at a time "
         "(not counted in max.block.ms)."),
    _opt("max.bytes.per.second", "int (bytes)", _int(0), 0,
         "Queue at most this many bytes of record batches (as sent, after compression) a second (0: no limit); "
         "send() and send_batch() wait, a batch at a time (not counted in max.block.ms)."),
    _opt("compression.type", "enum", _choice("none", "gzip", "snappy", "lz4", "zstd"), "none",
         "Codec for record batches: none, gzip, snappy (needs cramjam), lz4, zstd (needs zstandard)."),
    _opt("compression.level", "int", _optional_int(-131_072, 22), None,
         "Level for the chosen codec (librdkafka's name); overrides compression.<codec>.level."),
    _opt("compression.gzip.level", "int", _optional_int(-1, 9), None, "gzip level 1-9 (-1/unset: default 6)."),
    _opt("compression.lz4.level", "int", _optional_int(0, 17), None,
         "lz4 level, as in the Java client: unset or 9 (Java's default) is lz4's fast mode, "
         "any other level LZ4-HC at that level (1 and 2 are fast mode here)."),
    _opt("compression.zstd.level", "int", _optional_int(-131_072, 22), None, "zstd level (unset: 3)."),
    # --- partitioning
    _opt("partitioner.class", "callable", _partitioner, None,
         "Python callable (topic, key_bytes, num_partitions) -> partition, or its dotted path; or Java's "
         "org.apache.kafka.clients.producer.RoundRobinPartitioner (every partition in turn), UniformStickyPartitioner "
         "(as partitioner.ignore.keys=true) or internals.DefaultPartitioner (the built-in). Unset: murmur2/sticky."),
    _opt("partitioner.ignore.keys", "bool", _bool, False, "Sticky-partition keyed records too (ignore keys)."),
    _opt("partitioner.adaptive.partitioning.enable", "bool", _bool, True,
         "Sticky partitions favour brokers with shorter queues."),
    _opt("partitioner.availability.timeout.ms", _MS, _int(0), 0,
         "Leave the partitions of a broker that took no data for this long out of sticky (keyless) choices "
         "(0: never; needs partitioner.adaptive.partitioning.enable)."),
    # --- transactions and extensions
    _opt("transactional.id", "string", _optional_string, None, "Enables transactions; stable across restarts."),
    _opt("transaction.timeout.ms", _MS, _int(1, MAX_INT32), 60_000,
         "Coordinator aborts a transaction open longer (broker cap transaction.max.timeout.ms, 15 min)."),
    _opt("interceptor.classes", "list", _objects, (),
         "ProducerInterceptor objects, or comma-separated dotted paths of classes."),
)
# fmt: on

OPTIONS_BY_NAME: dict[str, OptionSpec] = {spec.name: spec for spec in OPTIONS}

# Java keys users will carry over that this producer does not take, with the reason (better than "unknown key").
UNSUPPORTED_OPTIONS: dict[str, str] = {
    "key.serializer": "this producer sends bytes: serialize keys before send()",
    "value.serializer": "this producer sends bytes: serialize values before send()",
    "ssl.cipher.suites": "the cipher suites are OpenSSL's defaults for the TLS versions offered (set them with "
                         "ssl.enabled.protocols / ssl.protocol); naming suites is not supported",
    "ssl.engine.factory.class": "a Java SSL engine cannot run here: TLS is Python's ssl (OpenSSL)",
    "sasl.login.class": "Java login classes cannot run here: for OAUTHBEARER give sasl.oauthbearer.token.provider",
    "sasl.client.callback.handler.class": "Java callback handlers cannot run here: for OAUTHBEARER give "
                                          "sasl.oauthbearer.token.provider, a Python callable",
}


# Java client keys that hold no setting of this producer: the Java producer takes them too (it logs the keys it does
# not know, such as a consumer's), so a configuration copied from a Java producer or shared with a consumer (Spark
# users pass one option map to readStream and writeStream) carries them. Accepted, ignored, and logged as ignored.
_CONSUMER_KEYS = (
    "group.id", "group.instance.id", "group.protocol", "group.remote.assignor", "session.timeout.ms",
    "heartbeat.interval.ms", "partition.assignment.strategy", "auto.offset.reset", "enable.auto.commit",
    "auto.commit.interval.ms", "client.rack", "fetch.min.bytes", "fetch.max.bytes", "fetch.max.wait.ms",
    "max.partition.fetch.bytes", "max.poll.records", "max.poll.interval.ms", "check.crcs", "key.deserializer",
    "value.deserializer", "default.api.timeout.ms", "exclude.internal.topics", "isolation.level",
    "rebalance.timeout.ms",
)
IGNORED_OPTIONS: dict[str, str] = {
    **{key: "a consumer setting" for key in _CONSUMER_KEYS},
    "metric.reporters": "Java metric reporter classes; this producer's metrics are read with metrics()",
    "metrics.recording.level": "every metric is recorded; read them with metrics()",
    "auto.include.jmx.reporter": "there is no JMX here; read the metrics with metrics()",
    "enable.metrics.push": "the client does not push its metrics to the broker (KIP-714)",
    **{key: "a Java JSSE setting: OpenSSL keeps the keys, verifies the chain (PKIX) and draws the randomness here"
       for key in ("ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation",
                   "ssl.provider", "security.providers")},
    **{key: "Java's Kerberos ticket renewal: MIT Kerberos gets new tickets from a keytab itself, and a ticket cache "
            "is renewed by whoever ran kinit"
       for key in ("sasl.kerberos.kinit.cmd", "sasl.kerberos.min.time.before.relogin",
                   "sasl.kerberos.ticket.renew.jitter", "sasl.kerberos.ticket.renew.window.factor")},
    **{key: "OAUTHBEARER tokens are fetched again at 80% of their lifetime (Java's default refresh window)"
       for key in ("sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
                   "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds")},
    **{key: "an OAUTHBEARER token is not validated by the client: the broker validates it"
       for key in ("sasl.oauthbearer.scope.claim.name", "sasl.oauthbearer.sub.claim.name",
                   "sasl.oauthbearer.clock.skew.seconds", "sasl.oauthbearer.expected.audience",
                   "sasl.oauthbearer.expected.issuer", "sasl.oauthbearer.jwks.endpoint.url",
                   "sasl.oauthbearer.jwks.endpoint.refresh.ms", "sasl.oauthbearer.jwt.validator.class")},
}


def ignored_options_markdown() -> str:
    """The README's list of the Java keys taken and ignored (IGNORED_OPTIONS), grouped by reason."""
    by_reason: dict[str, list[str]] = {}
    for key, reason in IGNORED_OPTIONS.items():
        by_reason.setdefault(reason, []).append(f"`{key}`")
    return "\n".join(f"- {', '.join(keys)}: {reason}." for reason, keys in by_reason.items())


def options_markdown() -> str:
    """The README's options table: name | type | default | description."""
    rows = ["| option | type | default | description |", "|---|---|---|---|"]
    for spec in OPTIONS:
        default = spec.default
        shown = "" if default in (None, (), "") else str(default)
        rows.append(f"| `{spec.name}` | {spec.type_name} | {shown} | {spec.doc} |")
    return "\n".join(rows)
