"""security.protocol made real: the TLS and SASL handshakes that run on each new connection (see the seam in
:mod:`spark_kafka_sink.net.handshake`), from settings validated once (:mod:`.security_settings`, which also builds
the ``ssl.SSLContext``)::

    NetworkClient(config, handshakes=handshakes_for)      # the HandshakeFactory: (host, port, config) -> [...]
    check_security(config)        # at construction: ConfigError naming the key (bad file, key password, JAAS)

=================  ==================================================================
security.protocol  handshakes of each connection
=================  ==================================================================
PLAINTEXT          none
SSL                TLS
SASL_PLAINTEXT     SASL (SaslHandshake v1, then SaslAuthenticate v2 carrying tokens)
SASL_SSL           TLS, then SASL
=================  ==================================================================

TLS: certificate verification is always on (CERT_REQUIRED), against ``ssl.ca.location`` /
``ssl.truststore.location`` (PEM, or a Java JKS/JCEKS truststore) or, when neither is set, the system CAs. The host
name is checked unless ``ssl.endpoint.identification.algorithm`` is empty (Java's switch; ``ssl.check.hostname``
overrides it); the host is the broker host we connect to, so ``127.0.0.1`` works with an IP SAN.
``ssl.certificate.location`` + ``ssl.key.location`` (+ ``ssl.key.password``) give a client certificate for mutual
TLS.

SASL: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (:mod:`spark_kafka_sink.protocol.sasl`), credentials from
``sasl.username`` / ``sasl.password`` or the Java ``sasl.jaas.config``; OAUTHBEARER with a token
(:mod:`spark_kafka_sink.net.oauthbearer`); GSSAPI with Kerberos credentials (:mod:`spark_kafka_sink.net.kerberos`).
Kafka 4.x brokers serve SaslHandshake v0-1 and SaslAuthenticate v0-2, so the versions are fixed rather than
negotiated (the Java client does the same before it has seen ApiVersions).

Failures that retrying cannot fix are ``fatal`` (see :mod:`spark_kafka_sink.net.security_errors`); the network
client reports them on its metadata and the producer stops with them. Secrets (SASL password, key password) stay
:class:`~spark_kafka_sink.secret.Secret` until the exchange that sends them and never reach a log record, a repr or
an error message; the SASL tokens (PLAIN's carries the password) are never logged.
"""

from __future__ import annotations

import enum
import logging
import ssl
from collections.abc import Mapping
from typing import Any

from spark_kafka_sink.errors import (
    BrokerError,
    ConfigError,
    IllegalSaslStateError,
    UnsupportedSaslMechanismError,
    raise_for_code,
)
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.handshake import Handshake, HandshakeContext, HandshakeStatus, OffThread
from spark_kafka_sink.net.kerberos import KerberosLogin
from spark_kafka_sink.net.oauthbearer import OAuthBearerTokens
from spark_kafka_sink.net.security_errors import tls_handshake_error
from spark_kafka_sink.net.security_settings import SecuritySettings
from spark_kafka_sink.protocol.messages import SASL_AUTHENTICATE, SASL_HANDSHAKE
from spark_kafka_sink.protocol.sasl import GssapiClient, OAuthBearerClient, SaslClient, sasl_client
from spark_kafka_sink.secret import Secret

__all__ = ["TlsHandshake", "SaslAuthentication", "handshakes_for", "handshakes_of",
           "check_security", "SASL_HANDSHAKE_VERSION", "SASL_AUTHENTICATE_VERSION"]

log = logging.getLogger(__name__)

SASL_HANDSHAKE_VERSION = 1  # v1: the mechanism's tokens travel in SaslAuthenticate requests (not raw frames)
SASL_AUTHENTICATE_VERSION = 2


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
    PREPARING = "preparing the first token off the network thread"
    AUTHENTICATE = "awaiting SaslAuthenticate response"
    DONE = "done"


class SaslAuthentication:
    """SaslHandshake v1 (pick the mechanism), then SaslAuthenticate requests carrying the mechanism's tokens."""

    def __init__(self, mechanism: str, username: str, password: Secret | None = None,
                 tokens: OAuthBearerTokens | None = None, kerberos: KerberosLogin | None = None, *,
                 token_auth: bool = False) -> None:
        self.mechanism = mechanism
        self.name = f"SASL/{mechanism}"
        self._username = username  # for messages; OAUTHBEARER: what gives its tokens; GSSAPI: who logs in
        self._password = password
        self._token_auth = token_auth  # SCRAM: username and password are a delegation token's id and HMAC
        self._tokens = tokens  # OAUTHBEARER
        self._kerberos = kerberos  # GSSAPI
        self._client: SaslClient | None = None
        self._preparing: OffThread[tuple[SaslClient, bytes]] | None = None
        self._phase = _SaslPhase.HANDSHAKE

    @property
    def waiting_for(self) -> str | None:
        """What the handshake waits for off the network thread (named by a setup timeout), else None."""
        if self._phase is not _SaslPhase.PREPARING:
            return None
        return "the KDC (a Kerberos ticket)" if self._kerberos is not None else "the OAUTHBEARER token"

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        ctx.send_request(SASL_HANDSHAKE, SASL_HANDSHAKE_VERSION, {"mechanism": self.mechanism})
        return HandshakeStatus.WANT_READ

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        if self._phase is _SaslPhase.PREPARING:
            return self._prepared(ctx)
        body = ctx.take_response()
        if body is None:
            return HandshakeStatus.WANT_READ if self._phase is not _SaslPhase.DONE else HandshakeStatus.DONE
        if self._phase is _SaslPhase.HANDSHAKE:
            return self._on_handshake(ctx, body)
        return self._on_authenticate(ctx, body)

    def _on_handshake(self, ctx: HandshakeContext, body: Mapping[str, Any]) -> HandshakeStatus:
        code = int(body["error_code"])
        where = f"SASL handshake with {ctx.address}"
        if code == UnsupportedSaslMechanismError.code:  # say what the listener does enable
            enabled = ", ".join(body.get("mechanisms") or []) or "none"
            raise_for_code(code, f"{ctx.address} does not enable {self.mechanism}; it enables: {enabled}", where)
        if code == IllegalSaslStateError.code:  # on a handshake: the listener is not a SASL listener
            raise_for_code(code, f"{ctx.address} did not expect SASL: is it a SASL listener? check "
                                 f"security.protocol and the port", where)
        raise_for_code(code, None, where)
        if self._tokens is None and self._kerberos is None:
            assert self._password is not None
            self._client = sasl_client(self.mechanism, self._username, self._password.reveal(),
                                       token_auth=self._token_auth)
            return self._authenticate(ctx, self._client.initial_response())
        # An OAUTHBEARER token may come over HTTP from a token endpoint, a Kerberos ticket from the KDC: round trips
        # of seconds when those are slow, which would stall every other connection of this network thread.
        host = ctx.host
        self._preparing = OffThread(lambda: self._first_token(host), name=f"{self.name} {ctx.address}")
        self._phase = _SaslPhase.PREPARING
        return self._prepared(ctx)

    def _first_token(self, host: str) -> tuple[SaslClient, bytes]:
        """The mechanism's client and its first token (runs off the network thread)."""
        client: SaslClient
        if self._tokens is not None:  # the token is fetched (or refreshed) here, for this connection
            bearer = self._tokens.current()
            client = OAuthBearerClient(bearer.token.reveal(), bearer.extensions, bearer.principal)
        else:
            assert self._kerberos is not None
            context, principal = self._kerberos.context(host)
            client = GssapiClient(context, principal)
        return client, client.initial_response()  # GSSAPI: the AP-REQ, which may ask the KDC for a ticket

    def _prepared(self, ctx: HandshakeContext) -> HandshakeStatus:
        preparing = self._preparing
        if preparing is None or not preparing.done():
            return HandshakeStatus.WAIT
        try:
            self._client, first = preparing.result()
        except BrokerError as exc:
            exc.context = f"SASL handshake with {ctx.address}"
            raise
        finally:
            self._preparing = None
        return self._authenticate(ctx, first)

    def _authenticate(self, ctx: HandshakeContext, first: bytes) -> HandshakeStatus:
        self._phase = _SaslPhase.AUTHENTICATE
        ctx.send_request(SASL_AUTHENTICATE, SASL_AUTHENTICATE_VERSION, {"auth_bytes": first})
        return HandshakeStatus.WANT_READ

    def _on_authenticate(self, ctx: HandshakeContext, body: Mapping[str, Any]) -> HandshakeStatus:
        client = self._client
        if self._tokens is not None or self._kerberos is not None:
            who = self._username
        else:  # a token is refused when it expired or was never made (kafka-delegation-tokens --describe lists them)
            who = f"{'delegation token' if self._token_auth else 'user'} {self._username!r}"
        where = f"{self.name} authentication of {who} with {ctx.address}"
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


def handshakes_of(settings: SecuritySettings, host: str) -> list[Handshake]:
    """The handshakes of one new connection to ``host`` (fresh objects: each holds one exchange's state)."""
    steps: list[Handshake] = []
    if settings.uses_tls:
        steps.append(TlsHandshake(settings.ssl_context(), host, settings.ca_location))
    if settings.uses_sasl and settings.oauth_tokens is not None:
        steps.append(SaslAuthentication(settings.sasl_mechanism, settings.oauth_tokens.source,
                                        tokens=settings.oauth_tokens))
    elif settings.uses_sasl and settings.kerberos is not None:
        steps.append(SaslAuthentication(settings.sasl_mechanism, settings.kerberos.source, kerberos=settings.kerberos))
    elif settings.uses_sasl:
        if settings.sasl_username is None or settings.sasl_password is None:  # only a hand-built object lacks them
            raise ConfigError("SASL needs sasl.username and sasl.password (or sasl.jaas.config)", key="sasl.username")
        steps.append(SaslAuthentication(settings.sasl_mechanism, settings.sasl_username, settings.sasl_password,
                                        token_auth=settings.sasl_token_auth))
    return steps


def check_security(config: NetConfig) -> SecuritySettings:
    """Validate the security settings and load the TLS files now (call it when a client is created), so a bad
    path, key or password is a ConfigError at construction rather than a failed connection later."""
    settings = config.security
    if settings.uses_tls:
        settings.ssl_context()
    return settings


def handshakes_for(host: str, port: int, config: NetConfig) -> list[Handshake]:
    """The :data:`~spark_kafka_sink.net.handshake.HandshakeFactory` for ``config.security``."""
    try:
        return handshakes_of(config.security, host)
    except ConfigError as exc:
        return [_FailedSetup(exc)]
