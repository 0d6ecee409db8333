"""SASL mechanisms, sans-IO: PLAIN (RFC 4616), SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677), OAUTHBEARER
(RFC 7628, with a token from :mod:`spark_kafka_sink.net.oauthbearer`) and GSSAPI (RFC 4752, around a Kerberos
security context from :mod:`spark_kafka_sink.net.kerberos`).

A mechanism is a small client state machine that turns server tokens into client tokens; the network layer carries
the tokens inside SaslAuthenticate requests (after SaslHandshake v1) and never looks inside them::

    client = sasl_client("SCRAM-SHA-256", username, password)
    token = client.initial_response()
    while token is not None:
        server_token = <send token in a SaslAuthenticate request, read the response's auth_bytes>
        token = client.respond(server_token)     # None: the exchange is complete and verified

SCRAM gives mutual authentication: the client refuses to finish unless the server proves it knows the stored key
(``v=`` in server-final), so a man in the middle without the credential is detected.

Secrets: the password is held only until the SCRAM proof is computed, never appears in a ``repr``, a log record or
an exception message. Parsing of ``sasl.jaas.config`` lives in :mod:`spark_kafka_sink.protocol.jaas`.
"""

from __future__ import annotations

import base64
import binascii
import enum
import hashlib
import hmac
import os
from collections.abc import Mapping
from typing import Protocol

from spark_kafka_sink.errors import ConfigError, IllegalSaslStateError, SaslAuthenticationFailedError

__all__ = [
    "GSSAPI",
    "GssContext",
    "GssapiClient",
    "gssapi_security_layer_reply",
    "OAUTHBEARER",
    "OAuthBearerClient",
    "oauthbearer_initial_response",
    "SUPPORTED_MECHANISMS",
    "SCRAM_MIN_ITERATIONS",
    "SaslClient",
    "SaslVerificationError",
    "PlainClient",
    "ScramClient",
    "ScramState",
    "sasl_client",
    "plain_initial_response",
    "saslname",
]

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")  # the user name and password ones
OAUTHBEARER = "OAUTHBEARER"  # a bearer token instead (OAuthBearerClient)
GSSAPI = "GSSAPI"  # Kerberos (GssapiClient)
# RFC 4752 security layers, the first byte of the server's offer and of the client's choice: Kafka runs none (TLS,
# when used, protects the connection), as Java's client with the broker's default QOP "auth".
_NO_SECURITY_LAYER = 0x01
# RFC 7628 key/value separator (Kafka's OAuthBearerClientInitialResponse.SEPARATOR)
_KVSEP = "\x01"
# Kafka's brokers refuse to store SCRAM credentials with fewer iterations; a server offering fewer is either broken
# or trying to make an offline dictionary attack on the exchange cheap.
SCRAM_MIN_ITERATIONS = 4096
_SCRAM_HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# gs2-header "n,," = no channel binding, no authorization identity; c= in client-final is its base64 ("biws").
_GS2_HEADER = b"n,,"


class SaslVerificationError(SaslAuthenticationFailedError):
    """The client itself rejected the server's side of the exchange (bad signature, malformed or unsafe message).

    A :class:`SaslAuthenticationFailedError` (fatal, not retriable), rendered without the "broker says" wording
    because the text is ours, not the broker's.
    """

    def __str__(self) -> str:
        where = f" in {self.context}" if self.context else ""
        return f"SASL authentication failed{where}: {self.message}"


class SaslClient(Protocol):
    """One client side of one SASL exchange."""

    mechanism: str

    def initial_response(self) -> bytes:
        """The first client token (sent in the first SaslAuthenticate request)."""
        ...

    def respond(self, challenge: bytes) -> bytes | None:
        """The next client token for the server's ``challenge``; ``None`` once authentication is complete."""
        ...

    @property
    def complete(self) -> bool:
        """True once the exchange finished successfully."""
        ...


def oauthbearer_initial_response(token: str, extensions: Mapping[str, str] | None = None,
                                 authorization_id: str | None = None) -> bytes:
    """RFC 7628 client message, as Kafka reads it (KIP-255, extensions KIP-342): the gs2 header ``n,,`` (or
    ``n,a=<authorization id>,``, which Kafka's broker requires to be the token's principal), then
    ``auth=Bearer <token>`` and each ``key=value`` extension, each ended by 0x01, and a final 0x01."""
    if authorization_id and ("," in authorization_id or "=" in authorization_id):
        # RFC 5801 would escape them, but Kafka's broker compares the authorization id to the principal unescaped.
        raise SaslVerificationError("an OAUTHBEARER principal cannot contain ',' or '='")
    header = f"n,a={authorization_id}," if authorization_id else "n,,"
    pairs = [f"auth=Bearer {token}", *(f"{k}={v}" for k, v in (extensions or {}).items())]
    return (header + _KVSEP + "".join(p + _KVSEP for p in pairs) + _KVSEP).encode("utf-8")


class OAuthBearerClient:
    """OAUTHBEARER: one client message carrying the token. The broker answers an empty challenge when it accepts
    the token, else a JSON error (RFC 7628 3.2.2, e.g. ``{"status":"invalid_token"}``): that fails here at once,
    with the broker's JSON, rather than after the 0x01 the RFC has the client send to end the exchange."""

    mechanism = OAUTHBEARER

    def __init__(self, token: str, extensions: Mapping[str, str] | None = None,
                 authorization_id: str | None = None) -> None:
        self._message = oauthbearer_initial_response(token, extensions, authorization_id)
        self._complete = False

    def initial_response(self) -> bytes:
        return self._message

    def respond(self, challenge: bytes) -> bytes | None:
        if challenge:
            detail = challenge.decode("utf-8", "replace")
            raise SaslVerificationError(f"the broker refused the OAUTHBEARER token: {detail}")
        self._complete = True
        return None

    @property
    def complete(self) -> bool:
        return self._complete

    def __repr__(self) -> str:
        return f"OAuthBearerClient(complete={self._complete})"  # never the token


class GssContext(Protocol):
    """The Kerberos side of one GSSAPI exchange: an initiating GSS-API security context (net/kerberos.py)."""

    @property
    def complete(self) -> bool:
        """True once the context is established (mutual authentication included when it was asked for)."""
        ...

    def step(self, token: bytes | None) -> bytes | None:
        """Feed the server's token (None at the start); the next token to send, or None."""
        ...

    def wrap(self, message: bytes) -> bytes:
        """``message`` with an integrity check, not encrypted (GSS_Wrap with conf_flag 0)."""
        ...

    def unwrap(self, message: bytes) -> bytes:
        """The payload of a wrapped server message, its integrity checked."""
        ...


def gssapi_security_layer_reply(offer: bytes, authzid: str) -> bytes:
    """RFC 4752 3.1: the client's answer to the server's unwrapped 4-byte offer (a bit mask of the security layers
    it supports, then its largest message size): "no security layer" (0x01), a largest size of 0 (none is
    wrapped after this), then the authorization identity, which Kafka's Java client sets to its own principal."""
    if len(offer) != 4:
        raise SaslVerificationError(f"the GSSAPI security layer offer is {len(offer)} bytes long, not 4")
    if not offer[0] & _NO_SECURITY_LAYER:
        raise SaslVerificationError(f"the broker offers only GSSAPI security layers (mask 0x{offer[0]:02x}: "
                                    "integrity or confidentiality), which Kafka clients do not use: set the "
                                    "listener's SASL QOP to auth (the default)")
    return bytes((_NO_SECURITY_LAYER, 0, 0, 0)) + authzid.encode("utf-8")


class _GssapiState(enum.Enum):
    CONTEXT = "establishing the Kerberos context"
    LAYER = "awaiting the security layer offer"
    CHOSEN = "awaiting the end of the exchange"
    DONE = "complete"


class GssapiClient:
    """SASL/GSSAPI (RFC 4752) as Kafka's broker runs it (Java's GssKrb5Server):

    1. Kerberos tokens until the context is established: the AP-REQ, and with mutual authentication the broker's
       AP-REP back. Once established the client answers with an empty token (the broker's cue for step 2).
    2. The broker sends its wrapped security layer offer; the client answers with its wrapped choice
       (:func:`gssapi_security_layer_reply`), and the broker's empty answer ends the exchange.
    """

    mechanism = GSSAPI

    def __init__(self, context: GssContext, authzid: str) -> None:
        self._context = context
        self._authzid = authzid
        self._state = _GssapiState.CONTEXT

    def initial_response(self) -> bytes:
        if self._state is not _GssapiState.CONTEXT or self._context.complete:
            raise IllegalSaslStateError("the GSSAPI initial response was already sent", context="SASL/GSSAPI")
        token = self._context.step(None)
        if self._context.complete:  # no mutual authentication: the AP-REQ alone establishes the context
            self._state = _GssapiState.LAYER
        return token or b""

    def respond(self, challenge: bytes) -> bytes | None:
        state = self._state
        if state is _GssapiState.CONTEXT:
            token = self._context.step(challenge)
            if self._context.complete:
                self._state = _GssapiState.LAYER
            return token or b""
        if state is _GssapiState.LAYER:
            if not challenge:  # the broker's empty answer to the token that established the context
                return b""
            offer = self._context.unwrap(challenge)
            self._state = _GssapiState.CHOSEN
            return self._context.wrap(gssapi_security_layer_reply(offer, self._authzid))
        if state is _GssapiState.CHOSEN:
            self._state = _GssapiState.DONE
            return None
        raise IllegalSaslStateError("a GSSAPI server token arrived after the exchange ended", context="SASL/GSSAPI")

    @property
    def complete(self) -> bool:
        return self._state is _GssapiState.DONE

    def __repr__(self) -> str:
        return f"GssapiClient(authzid={self._authzid!r}, state={self._state.name})"


def saslname(username: str) -> str:
    """RFC 5802 saslname: ``,`` and ``=`` would break the attribute syntax, so they travel as ``=2C`` / ``=3D``.

    ``=`` is replaced first, so the ``=`` introduced by ``=2C`` is not escaped again.
    """
    return username.replace("=", "=3D").replace(",", "=2C")


def plain_initial_response(username: str, password: str, authzid: str = "") -> bytes:
    """RFC 4616 message: ``[authzid] NUL authcid NUL passwd``, UTF-8. Kafka uses an empty authzid."""
    for what, value in (("username", username), ("password", password), ("authorization id", authzid)):
        if "\x00" in value:
            # A NUL would shift the fields; say which field without echoing any of them.
            raise ConfigError(f"the SASL/PLAIN {what} must not contain a NUL character", key="sasl.jaas.config")
    if not username:
        raise ConfigError("SASL/PLAIN needs a non-empty username: set sasl.username or sasl.jaas.config",
                          key="sasl.username")
    return f"{authzid}\x00{username}\x00{password}".encode()


class PlainClient:
    """SASL/PLAIN: one token with the credentials; the server answers with an empty token or an error."""

    mechanism = "PLAIN"

    def __init__(self, username: str, password: str) -> None:
        self._token: bytes | None = plain_initial_response(username, password)
        self._username = username
        self._sent = False
        self._complete = False

    def initial_response(self) -> bytes:
        if self._sent or self._token is None:
            raise IllegalSaslStateError("the PLAIN initial response was already sent", context="SASL/PLAIN")
        token, self._token = self._token, None  # drop our copy of the password as soon as it is handed over
        self._sent = True
        return token

    def respond(self, challenge: bytes) -> bytes | None:
        if not self._sent or self._complete:
            raise IllegalSaslStateError("unexpected PLAIN server token", context="SASL/PLAIN")
        # The broker answers a good PLAIN token with empty auth bytes; a bad one with an error code instead.
        self._complete = True
        return None

    @property
    def complete(self) -> bool:
        return self._complete

    def __repr__(self) -> str:
        return f"PlainClient(username={self._username!r}, complete={self._complete})"


class ScramState(enum.Enum):
    """Where a SCRAM exchange is. Transitions: INITIAL -> CLIENT_FIRST_SENT -> CLIENT_FINAL_SENT -> COMPLETE,
    and any step -> FAILED."""

    INITIAL = "initial"
    CLIENT_FIRST_SENT = "client-first sent"
    CLIENT_FINAL_SENT = "client-final sent"
    COMPLETE = "complete"
    FAILED = "failed"


_SCRAM_TRANSITIONS: dict[ScramState, frozenset[ScramState]] = {
    ScramState.INITIAL: frozenset({ScramState.CLIENT_FIRST_SENT, ScramState.FAILED}),
    ScramState.CLIENT_FIRST_SENT: frozenset({ScramState.CLIENT_FINAL_SENT, ScramState.FAILED}),
    ScramState.CLIENT_FINAL_SENT: frozenset({ScramState.COMPLETE, ScramState.FAILED}),
    ScramState.COMPLETE: frozenset(),
    ScramState.FAILED: frozenset(),
}


class ScramClient:
    """SCRAM-SHA-256 / SCRAM-SHA-512 client (RFC 5802 section 5), without channel binding (``n,,``).

    ``nonce`` is for tests (golden vectors); by default 24 random bytes, base64url (printable, no ``,``).
    ``token_auth``: the user name and password are a delegation token's id and HMAC (KIP-48), announced to the broker
    by the ``tokenauth=true`` extension at the end of client-first, as Java's ScramLoginModule ``tokenauth=true``
    does; the broker then checks them against its tokens instead of its SCRAM users.
    """

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None, *,
                 token_auth: bool = False) -> None:
        if mechanism not in _SCRAM_HASHES:
            raise ConfigError(f"unsupported SCRAM mechanism {mechanism!r}: use SCRAM-SHA-256 or SCRAM-SHA-512",
                              key="sasl.mechanism")
        if not username:
            raise ConfigError(f"{mechanism} needs a non-empty username: set sasl.username or sasl.jaas.config",
                              key="sasl.username")
        self.mechanism = mechanism
        self._hash = _SCRAM_HASHES[mechanism]
        self._username = username
        self._password: str | None = password
        self._nonce = nonce if nonce is not None else _random_nonce()
        if not self._nonce or any(c == "," or not ("\x21" <= c <= "\x7e") for c in self._nonce):
            raise ValueError("a SCRAM nonce is printable ASCII without ','")
        self._state = ScramState.INITIAL
        self._client_first_bare = f"n={saslname(username)},r={self._nonce}" + (",tokenauth=true" if token_auth else "")
        self._expected_server_signature: bytes | None = None

    # -- state ---------------------------------------------------------------------------------------------------
    @property
    def state(self) -> ScramState:
        return self._state

    @property
    def complete(self) -> bool:
        return self._state is ScramState.COMPLETE

    def _move(self, to: ScramState) -> None:
        if to not in _SCRAM_TRANSITIONS[self._state]:
            raise IllegalSaslStateError(f"SCRAM exchange cannot go from {self._state.value} to {to.value}",
                                        context=self.mechanism)
        self._state = to

    def _fail(self, reason: str) -> SaslVerificationError:
        # Forget everything secret: a failed exchange is never resumed.
        self._password = None
        self._expected_server_signature = None
        self._state = ScramState.FAILED
        return SaslVerificationError(reason, context=self.mechanism)

    # -- messages ------------------------------------------------------------------------------------------------
    def initial_response(self) -> bytes:
        """client-first-message: ``n,,n=<saslname>,r=<client nonce>`` (then ``,tokenauth=true`` with a token)."""
        self._move(ScramState.CLIENT_FIRST_SENT)
        return _GS2_HEADER + self._client_first_bare.encode()

    def respond(self, challenge: bytes) -> bytes | None:
        if self._state is ScramState.CLIENT_FIRST_SENT:
            return self._client_final(challenge)
        if self._state is ScramState.CLIENT_FINAL_SENT:
            self._verify_server_final(challenge)
            return None
        raise IllegalSaslStateError(f"unexpected SCRAM server message in state {self._state.value}",
                                    context=self.mechanism)

    def _client_final(self, server_first_bytes: bytes) -> bytes:
        """server-first ``r=<nonce>,s=<salt>,i=<count>`` -> client-final ``c=biws,r=<nonce>,p=<proof>``."""
        server_first = _decode_text(server_first_bytes, "server-first", self._fail)
        attrs = _attributes(server_first, "server-first", self._fail)
        keys = [k for k, _ in attrs]
        if keys and keys[0] == "e":
            raise self._fail(f"the broker rejected the client-first message: {attrs[0][1]}")
        if keys and keys[0] == "m":
            # RFC 5802: an unknown mandatory extension means the client must not continue.
            raise self._fail("the broker requires a SCRAM extension (m=) this client does not support")
        if keys[:3] != ["r", "s", "i"]:
            raise self._fail("malformed server-first message: expected r=, s=, i= attributes")
        nonce, salt_b64, iterations_text = (v for _, v in attrs[:3])
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            # The combined nonce must extend ours: otherwise this answer belongs to another exchange (replay).
            raise self._fail("the server nonce does not extend the client nonce: possible replay or man-in-the-middle")
        if any(c == "," or not ("\x21" <= c <= "\x7e") for c in nonce):
            raise self._fail("malformed server-first message: the nonce is not printable ASCII")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
        except (binascii.Error, ValueError):
            raise self._fail("malformed server-first message: the salt is not base64") from None
        if not salt:
            raise self._fail("malformed server-first message: the salt is empty")
        if not iterations_text.isdigit() or not iterations_text.isascii():
            raise self._fail("malformed server-first message: the iteration count is not a number")
        iterations = int(iterations_text)
        if iterations < SCRAM_MIN_ITERATIONS:
            raise self._fail(f"the broker asked for {iterations} SCRAM iterations, below the safe minimum "
                             f"{SCRAM_MIN_ITERATIONS}: refusing (a weak or malicious server)")
        password = self._password
        if password is None:
            raise self._fail("the SCRAM password is no longer available")
        salted = hashlib.pbkdf2_hmac(self._hash, password.encode(), salt, iterations)
        self._password = None  # the salted password is all that is needed from here on
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        without_proof = f"c={base64.b64encode(_GS2_HEADER).decode()},r={nonce}"
        auth_message = f"{self._client_first_bare},{server_first},{without_proof}".encode()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._expected_server_signature = self._hmac(self._hmac(salted, b"Server Key"), auth_message)
        self._move(ScramState.CLIENT_FINAL_SENT)
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def _verify_server_final(self, server_final_bytes: bytes) -> None:
        """server-final: ``v=<server signature>`` (must match ours) or ``e=<error>``."""
        server_final = _decode_text(server_final_bytes, "server-final", self._fail)
        attrs = _attributes(server_final, "server-final", self._fail)
        if attrs and attrs[0][0] == "e":
            raise self._fail(f"the broker rejected the credentials: {attrs[0][1]}")
        if not attrs or attrs[0][0] != "v":
            raise self._fail("malformed server-final message: expected v= or e=")
        try:
            received = base64.b64decode(attrs[0][1], validate=True)
        except (binascii.Error, ValueError):
            raise self._fail("malformed server-final message: the signature is not base64") from None
        expected = self._expected_server_signature
        if expected is None or not hmac.compare_digest(received, expected):
            raise self._fail("server signature did not verify: possible man-in-the-middle")
        self._expected_server_signature = None
        self._move(ScramState.COMPLETE)

    def _hmac(self, key: bytes, message: bytes) -> bytes:
        return hmac.new(key, message, self._hash).digest()

    def __repr__(self) -> str:
        return f"ScramClient({self.mechanism}, username={self._username!r}, state={self._state.value})"


def _random_nonce() -> str:
    # 24 bytes from the OS CSPRNG, base64url without padding: printable and free of ','.
    return base64.urlsafe_b64encode(os.urandom(24)).decode().rstrip("=")


def _decode_text(data: bytes, what: str, fail: _Fail) -> str:
    try:
        return bytes(data).decode("utf-8")
    except UnicodeDecodeError:
        raise fail(f"malformed {what} message: not UTF-8") from None


class _Fail(Protocol):
    def __call__(self, reason: str) -> SaslVerificationError: ...


def _attributes(message: str, what: str, fail: _Fail) -> list[tuple[str, str]]:
    """``a=x,b=y`` -> [("a", "x"), ("b", "y")]. Attribute names are single letters (RFC 5802 section 5.1)."""
    attrs = []
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=" or not part[0].isalpha():
            raise fail(f"malformed {what} message: expected attr=value pairs")
        attrs.append((part[0], part[2:]))
    return attrs


def sasl_client(mechanism: str, username: str, password: str, *, token_auth: bool = False) -> SaslClient:
    """A fresh client for ``mechanism`` (one of :data:`SUPPORTED_MECHANISMS`, case-insensitive). ``token_auth``:
    a delegation token (SCRAM only; see :class:`ScramClient`)."""
    name = mechanism.strip().upper()
    if name == "PLAIN":
        return PlainClient(username, password)
    if name in _SCRAM_HASHES:
        return ScramClient(name, username, password, token_auth=token_auth)
    raise ConfigError(
        f"sasl.mechanism {mechanism!r} is not supported: use one of {', '.join(SUPPORTED_MECHANISMS)}",
        key="sasl.mechanism",
    )
