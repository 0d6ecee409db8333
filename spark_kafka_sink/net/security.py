"""security.protocol made real: an ``ssl.SSLContext`` from the ssl.* settings, and the TLS and SASL handshakes
that run on each new connection (see the seam in :mod:`spark_kafka_sink.net.handshake`)::

    NetworkClient(config, handshakes=handshakes_for)      # the HandshakeFactory: (host, port, config) -> [...]
    settings = SecuritySettings.from_net_config(config)   # validate early: ConfigError names the key

=================  ==================================================================
security.protocol  handshakes of each connection
=================  ==================================================================
PLAINTEXT          none
SSL                TLS
SASL_PLAINTEXT     SASL (SaslHandshake v1, then SaslAuthenticate v2 carrying tokens)
SASL_SSL           TLS, then SASL
=================  ==================================================================

TLS: certificate verification is always on (CERT_REQUIRED), against ``ssl.ca.location`` /
``ssl.truststore.location`` (PEM) or, when neither is set, the system CAs. The host name is checked unless
``ssl.endpoint.identification.algorithm`` is empty (Java's switch; ``ssl.check.hostname`` overrides it); the host
is the broker host we connect to, so ``127.0.0.1`` works with an IP SAN. ``ssl.certificate.location`` +
``ssl.key.location`` (+ ``ssl.key.password``) give a client certificate for mutual TLS.

SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (:mod:`spark_kafka_sink.protocol.sasl`), credentials from
``sasl.username`` / ``sasl.password`` or the Java ``sasl.jaas.config``. Kafka 4.x brokers serve SaslHandshake v0-1
and SaslAuthenticate v0-2, so the versions are fixed rather than negotiated (the Java client does the same
before it has seen ApiVersions).

Failures that retrying cannot fix are ``fatal`` (see :mod:`spark_kafka_sink.net.security_errors`). Secrets (SASL
password, key password) are held in :class:`Hidden` and never reach a log record, a repr or an error message.
"""

from __future__ import annotations

import enum
import functools
import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_sink.errors import BrokerError, ConfigError, IllegalSaslStateError, raise_for_code
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.handshake import Handshake, HandshakeContext, HandshakeStatus
from spark_kafka_sink.net.security_errors import tls_handshake_error
from spark_kafka_sink.protocol.jaas import jaas_credentials
from spark_kafka_sink.protocol.messages import SASL_AUTHENTICATE, SASL_HANDSHAKE
from spark_kafka_sink.protocol.sasl import SUPPORTED_MECHANISMS, SaslClient, sasl_client

__all__ = ["Hidden", "SecuritySettings", "TlsHandshake", "SaslAuthentication", "handshakes_for",
           "SASL_HANDSHAKE_VERSION", "SASL_AUTHENTICATE_VERSION"]

log = logging.getLogger(__name__)
_Getter = Callable[..., "str | None"]  # get(key, default=None): an option's text, stripped

SASL_HANDSHAKE_VERSION = 1  # v1: the mechanism's tokens travel in SaslAuthenticate requests (not raw frames)
SASL_AUTHENTICATE_VERSION = 2
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NOT_PEM = ("convert it to PEM and point ssl.truststore.location (or ssl.ca.location) at the PEM file: "
            "keytool -exportcert -rfc -keystore <truststore> -alias <ca alias> -file ca.pem  (JKS), or "
            "openssl pkcs12 -in <truststore.p12> -nokeys -out ca.pem  (PKCS12)")


class Hidden:
    """A secret string that never shows itself (``repr`` and ``str`` are ``***``); ``reveal()`` where it is used."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Hidden('***')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Hidden) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Hidden, self._value))


def _text(value: Any) -> str:
    # A value is a str (Spark options, dicts) or a secret wrapper with reveal() (ProducerConfig's Secret).
    reveal = getattr(value, "reveal", None)
    return str(reveal()) if callable(reveal) else str(value)


@dataclass(frozen=True)
class SecuritySettings:
    """The security settings, validated. Build with :meth:`from_options` or :meth:`from_net_config`."""

    protocol: str = "PLAINTEXT"
    ca_location: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: Hidden | None = None
    check_hostname: bool = True
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Hidden | None = None

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    # -- building ----------------------------------------------------------------------------------------------
    @classmethod
    def from_net_config(cls, config: NetConfig) -> SecuritySettings:
        return _settings_for(config.security_protocol, config.security_options)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SecuritySettings:
        """From Java-named settings (``security.protocol``, ``ssl.*``, ``sasl.*``; other keys are ignored).
        Values are strings or secret wrappers with ``reveal()``; :class:`ConfigError` names the bad key."""
        opts = {k.strip().lower(): v for k, v in options.items() if v is not None}

        def get(key: str, default: str | None = None) -> str | None:
            return _text(opts[key]).strip() if key in opts else default

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}",
                              key="security.protocol")
        kwargs: dict[str, Any] = {"protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            kwargs.update(_tls_options(get))
        if protocol.startswith("SASL_"):
            kwargs.update(_sasl_options(get, opts))
        return cls(**kwargs)

    # -- TLS -------------------------------------------------------------------------------------------------
    def ssl_context(self) -> ssl.SSLContext:
        """The client context (built once per settings object): TLS 1.2+, CERT_REQUIRED, hostname check as set."""
        return self._ssl_context

    @functools.cached_property  # writes the instance __dict__ directly, so it works on a frozen dataclass
    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED and check_hostname=True by default
        context.minimum_version = ssl.TLSVersion.TLSv1_2  # what Kafka brokers enable by default
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED  # never turned off: only the host name check is optional
        key = "ssl.ca.location"
        if self.ca_location:
            _readable(self.ca_location, key)
            try:
                context.load_verify_locations(cafile=self.ca_location)
            except ssl.SSLError:
                raise ConfigError(f"{key}: {self.ca_location} holds no PEM CA certificate (BEGIN CERTIFICATE)",
                                  key=key) from None
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.certificate_location:
            self._load_client_certificate(context)
        return context

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        cert = self.certificate_location or ""
        key_file = self.key_location
        _readable(cert, "ssl.certificate.location")
        if key_file:
            _readable(key_file, "ssl.key.location")
        password = self.key_password

        def key_password() -> str:
            # Called by OpenSSL only for an encrypted key. Without this callback OpenSSL would prompt on the
            # terminal and hang a headless job.
            if password is None:
                raise ConfigError("ssl.key.location is encrypted: set ssl.key.password", key="ssl.key.password")
            return password.reveal()

        try:
            context.load_cert_chain(cert, key_file, password=key_password)
        except ssl.SSLError as exc:
            reason = (exc.reason or "").upper()
            if "MISMATCH" in reason:
                raise ConfigError("ssl.key.location is not the private key of ssl.certificate.location",
                                  key="ssl.key.location") from None
            if password is not None and _is_encrypted(key_file or cert):
                raise ConfigError("ssl.key.password does not decrypt ssl.key.location",
                                  key="ssl.key.password") from None
            raise ConfigError(f"ssl.certificate.location / ssl.key.location: not a PEM certificate and private key "
                              f"({exc.reason or 'unreadable'})", key="ssl.certificate.location") from None

    # -- handshakes -------------------------------------------------------------------------------------------
    def handshakes(self, host: str) -> list[Handshake]:
        """The handshakes of one new connection to ``host`` (fresh objects: each holds one exchange's state)."""
        steps: list[Handshake] = []
        if self.uses_tls:
            steps.append(TlsHandshake(self.ssl_context(), host, self.ca_location))
        if self.uses_sasl:
            if self.sasl_username is None or self.sasl_password is None:  # only a hand-built object lacks them
                raise ConfigError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)",
                                  key="sasl.username")
            steps.append(SaslAuthentication(self.sasl_mechanism, self.sasl_username, self.sasl_password))
        return steps


def _tls_options(get: _Getter) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key in ("ssl.keystore.location", "ssl.keystore.type", "ssl.keystore.password"):
        if get(key):
            raise ConfigError(f"{key} is not supported: give the client certificate and key as PEM files with "
                              "ssl.certificate.location and ssl.key.location (and ssl.key.password)", key=key)
    store_type = (get("ssl.truststore.type") or "PEM").upper()
    if store_type != "PEM":
        raise ConfigError(f"ssl.truststore.type={store_type} is not supported, only PEM: {_NOT_PEM}",
                          key="ssl.truststore.type")
    ca, truststore = get("ssl.ca.location") or None, get("ssl.truststore.location") or None
    if ca and truststore and ca != truststore:
        raise ConfigError("ssl.ca.location and ssl.truststore.location name different files: set one",
                          key="ssl.truststore.location")
    out["ca_location"] = ca or truststore
    algorithm = (get("ssl.endpoint.identification.algorithm", "https") or "").lower()
    if algorithm not in ("https", ""):
        raise ConfigError(f"ssl.endpoint.identification.algorithm must be https (check the broker host name, the "
                          f"default) or empty (do not), got {algorithm!r}", key="ssl.endpoint.identification.algorithm")
    check = algorithm == "https"
    override = get("ssl.check.hostname")
    if override is not None:
        if override.lower() not in ("true", "false"):
            raise ConfigError(f"ssl.check.hostname must be true or false, got {override!r}", key="ssl.check.hostname")
        check = override.lower() == "true"
    out["check_hostname"] = check
    cert, key_file = get("ssl.certificate.location") or None, get("ssl.key.location") or None
    if key_file and not cert:
        raise ConfigError("ssl.key.location is set without ssl.certificate.location: mutual TLS needs both",
                          key="ssl.certificate.location")
    out.update(certificate_location=cert, key_location=key_file)
    password = get("ssl.key.password")
    out["key_password"] = Hidden(password) if password else None
    return out


def _sasl_options(get: _Getter, opts: Mapping[str, Any]) -> dict[str, Any]:
    mechanism = (get("sasl.mechanism") or "PLAIN").upper()
    if mechanism not in SUPPORTED_MECHANISMS:
        raise ConfigError(f"sasl.mechanism={mechanism} is not supported: use one of {', '.join(SUPPORTED_MECHANISMS)}",
                          key="sasl.mechanism")
    jaas = _text(opts["sasl.jaas.config"]) if "sasl.jaas.config" in opts else None
    username, password = get("sasl.username"), (_text(opts["sasl.password"]) if "sasl.password" in opts else None)
    if jaas is not None:
        if username is not None or password is not None:
            raise ConfigError("set either sasl.jaas.config or sasl.username/sasl.password, not both",
                              key="sasl.jaas.config")
        username, password = jaas_credentials(jaas, mechanism)
    if not username:
        raise ConfigError("SASL needs a user name: set sasl.username (or sasl.jaas.config)", key="sasl.username")
    if password is None:
        raise ConfigError("SASL needs a password: set sasl.password (or sasl.jaas.config)", key="sasl.password")
    return {"sasl_mechanism": mechanism, "sasl_username": username, "sasl_password": Hidden(password)}


def _readable(path: str, key: str) -> None:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{key}: {path} does not exist or is not a file", key=key)
    try:
        with p.open("rb"):
            pass
    except OSError as exc:
        raise ConfigError(f"{key}: cannot read {path}: {exc.strerror}", key=key) from None


def _is_encrypted(path: str) -> bool:
    try:
        head = Path(path).read_bytes()
    except OSError:
        return False
    return b"ENCRYPTED" in head


@functools.lru_cache(maxsize=16)
def _settings_for(protocol: str, options: tuple[tuple[str, Any], ...]) -> SecuritySettings:
    # One settings object (and so one SSLContext) per distinct configuration, not one per connection.
    return SecuritySettings.from_options({"security.protocol": protocol, **dict(options)})


class TlsHandshake:
    """Wrap the connection's socket in TLS and complete the handshake without blocking."""

    name = "TLS"

    def __init__(self, context: ssl.SSLContext, server_hostname: str, ca_source: str | None) -> None:
        self._context = context
        self._hostname = server_hostname
        self._ca_source = ca_source

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        ctx.wrap_socket(lambda sock: self._context.wrap_socket(
            sock, server_hostname=self._hostname, do_handshake_on_connect=False))
        return self.step(ctx, now_ms)

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        sock = ctx.sock
        if not isinstance(sock, ssl.SSLSocket):
            raise ConfigError("TLS handshake on a socket that is not wrapped")  # a bug in the seam's use
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            return HandshakeStatus.WANT_READ
        except ssl.SSLWantWriteError:
            return HandshakeStatus.WANT_WRITE
        except ssl.SSLError as exc:
            raise tls_handshake_error(exc, ctx.address, self._hostname, self._ca_source) from exc
        log.debug("TLS with %s established: %s, %s", ctx.address, sock.version(), (sock.cipher() or ("?",))[0])
        return HandshakeStatus.DONE

    def __repr__(self) -> str:
        return f"TlsHandshake(server_hostname={self._hostname!r})"


class _SaslPhase(enum.Enum):
    HANDSHAKE = "awaiting SaslHandshake response"
    AUTHENTICATE = "awaiting SaslAuthenticate response"
    DONE = "done"


class SaslAuthentication:
    """SaslHandshake v1 (pick the mechanism), then SaslAuthenticate requests carrying the mechanism's tokens."""

    def __init__(self, mechanism: str, username: str, password: Hidden) -> None:
        self.mechanism = mechanism
        self.name = f"SASL/{mechanism}"
        self._username = username
        self._password = password
        self._client: SaslClient | None = None
        self._phase = _SaslPhase.HANDSHAKE

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        ctx.send_request(SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": self.mechanism})
        return HandshakeStatus.WANT_READ

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        body = ctx.take_response()
        if body is None:
            return HandshakeStatus.WANT_READ if self._phase is not _SaslPhase.DONE else HandshakeStatus.DONE
        if self._phase is _SaslPhase.HANDSHAKE:
            self._on_handshake(ctx, body)
            return HandshakeStatus.WANT_READ
        return self._on_authenticate(ctx, body)

    def _on_handshake(self, ctx: HandshakeContext, body: Mapping[str, Any]) -> None:
        code = int(body["error_code"])
        where = f"SASL handshake with {ctx.address}"
        if code == 33:  # UNSUPPORTED_SASL_MECHANISM: say what the listener does enable
            enabled = ", ".join(body.get("mechanisms") or []) or "none"
            raise_for_code(code, f"{ctx.address} does not enable {self.mechanism}; it enables: {enabled}", where)
        if code == 34:  # ILLEGAL_SASL_STATE on a handshake: the listener is not a SASL listener
            raise_for_code(code, f"{ctx.address} did not expect SASL: is it a SASL listener? check "
                                 f"security.protocol and the port", where)
        raise_for_code(code, None, where)
        self._client = sasl_client(self.mechanism, self._username, self._password.reveal())
        self._phase = _SaslPhase.AUTHENTICATE
        ctx.send_request(SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION,
                         {"auth_bytes": self._client.initial_response()})

    def _on_authenticate(self, ctx: HandshakeContext, body: Mapping[str, Any]) -> HandshakeStatus:
        client = self._client
        where = f"{self.name} authentication of user {self._username!r} with {ctx.address}"
        if client is None or self._phase is not _SaslPhase.AUTHENTICATE:
            raise IllegalSaslStateError(f"a SASL response arrived in phase {self._phase.value}", context=where)
        # The broker's message names the mechanism and says "invalid credentials"; it never holds the password.
        raise_for_code(int(body["error_code"]), body.get("error_message"), where)
        try:
            token = client.respond(bytes(body.get("auth_bytes") or b""))
        except BrokerError as exc:
            exc.context = where  # the mechanism's own failure (e.g. server signature): say where it happened
            raise
        if token is None:
            self._phase = _SaslPhase.DONE
            log.debug("%s: authenticated with %s as %r", self.name, ctx.address, self._username)
            return HandshakeStatus.DONE
        ctx.send_request(SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": token})
        return HandshakeStatus.WANT_READ

    def __repr__(self) -> str:
        return f"SaslAuthentication({self.mechanism}, username={self._username!r}, phase={self._phase.name})"


class _FailedSetup:
    """Stands in for the handshakes when the settings are invalid: the connection fails with the ConfigError
    (not retriable) instead of the error escaping from the network client's I/O loop."""

    name = "security settings"

    def __init__(self, error: ConfigError) -> None:
        self._error = error

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        raise self._error

    step = start


def handshakes_for(host: str, port: int, config: NetConfig) -> list[Handshake]:
    """The :data:`~spark_kafka_sink.net.handshake.HandshakeFactory` for ``config.security_protocol``."""
    try:
        return SecuritySettings.from_net_config(config).handshakes(host)
    except ConfigError as exc:
        return [_FailedSetup(exc)]
