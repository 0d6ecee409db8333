"""Where SASL/OAUTHBEARER tokens come from, and how long one is used.

    tokens = token_source(jaas_options, provider)     # from sasl.jaas.config and sasl.oauthbearer.token.provider
    tokens.current()                                  # the current token (Secret), fetched again when it is old,
                                                      # with its principal and SASL extensions (KIP-342)

Three sources, as the Java client and confluent-kafka have them:

* ``sasl.oauthbearer.token.provider``: a Python callable (or the dotted path of one, importable on the executors),
  confluent-kafka's ``oauth_cb`` contract: called with ``sasl.oauthbearer.config`` (a string, None when unset), or
  with no argument when it takes none, it returns ``(token, expiry)`` with the expiry in epoch seconds, or
  ``(token, expiry, principal, extensions)``, or the token alone. The principal is sent as the SASL authorization
  id (Kafka's broker requires it to be the token's principal); the extensions (a dict) join the ``extension_<name>``
  options, the provider's winning. That is how a cloud's own token library plugs in (AWS MSK IAM's signer, Azure
  identity, Google auth) with the callback written for confluent-kafka;
* ``sasl.oauthbearer.token.endpoint.url``, Java's OIDC login (``OAuthBearerLoginCallbackHandler``): the OAuth
  client-credentials grant at that endpoint with Kafka 4.1's ``sasl.oauthbearer.client.credentials.client.id`` /
  ``.client.secret`` and ``sasl.oauthbearer.scope``, or the ``OAuthBearerLoginModule`` options ``clientId``,
  ``clientSecret`` and ``scope`` (HTTP Basic; form-encoded first with ``sasl.oauthbearer.header.urlencode=true``,
  RFC 6749 2.3.1, off by default as in Java); ``sasl.oauthbearer.jwt.retriever.class`` may name Java's default,
  client-credentials or file retriever (KIP-1139). The answer's ``access_token`` and
  ``expires_in``. ``sasl.login.connect.timeout.ms`` / ``sasl.login.read.timeout.ms`` bound each request (10 s by
  default; urllib takes one timeout, the larger); a network error or a 5xx answer is tried again after
  ``sasl.login.retry.backoff.ms``, doubling, until ``sasl.login.retry.backoff.max.ms`` has passed (100 ms / 10 s,
  Java's); a 4xx fails at once with the endpoint's error code (e.g. ``invalid_client``), never its other text. A
  ``file:`` URL names a file holding the token instead, read at each refresh. ``extension_<name>`` options are SASL
  extensions (as for a provider);
* otherwise Java's default login handler (``OAuthBearerUnsecuredLoginCallbackHandler``): an unsecured JWT
  (``"alg":"none"``) built from the ``OAuthBearerLoginModule`` options ``unsecuredLoginStringClaim_<name>``
  (``sub`` required, the principal), ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>``
  (its first character separates the items), ``unsecuredLoginPrincipalClaimName`` (default ``sub``),
  ``unsecuredLoginLifetimeSeconds`` (default 3600) and ``unsecuredLoginExtension_<name>`` (a SASL extension).
  For development and tests: brokers accept it only with their unsecured validator.

A token is used by every new connection until 80% of its lifetime has passed (Java's
``sasl.login.refresh.window.factor``), then fetched again; one without a known expiry, for an hour. A JWT's own
``exp`` claim is its expiry when the provider gives none. If fetching the next token fails while the current one
is still valid, the current one is kept and the fetch tried again 10 s later (the token in hand, not the fetch, is
what a connection needs); only without a valid token does authentication fail. Tokens are
:class:`~spark_kafka_sink.secret.Secret` values: never logged, never in an error or a ``repr``.
"""

from __future__ import annotations

import base64
import inspect
import json
import logging
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_kafka_sink.errors import ConfigError, SaslAuthenticationFailedError
from spark_kafka_sink.protocol.sasl import SaslVerificationError
from spark_kafka_sink.python_objects import resolve_object
from spark_kafka_sink.secret import Secret

__all__ = ["JAVA_OAUTH_LOGIN_HANDLERS", "JAVA_JWT_RETRIEVERS", "BearerToken", "TokenEndpointLogin",
           "OAuthBearerTokens", "token_provider", "token_source", "unsecured_jwt"]

#: sasl.login.callback.handler.class values naming Java's token endpoint login (its 3.1 package, then its own).
JAVA_OAUTH_LOGIN_HANDLERS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
)

#: sasl.oauthbearer.jwt.retriever.class values (Kafka 4.1, KIP-1139) run here, with the URL schemes each takes: the
#: default (by the scheme of sasl.oauthbearer.token.endpoint.url), the client-credentials grant, a token file.
JAVA_JWT_RETRIEVERS: dict[str, tuple[str, ...]] = {
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever": ("http", "https", "file"),
    "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever": ("http", "https"),
    "org.apache.kafka.common.security.oauthbearer.FileJwtRetriever": ("file",),
}
_RETRIEVER_KEY = "sasl.oauthbearer.jwt.retriever.class"

_REFRESH_FACTOR = 0.8  # Java's sasl.login.refresh.window.factor
_UNKNOWN_LIFETIME_S = 3600.0
_RETRY_S = 10.0  # after a failed refresh, while the current token is still valid
log = logging.getLogger(__name__)
_PREFIX = "unsecuredLogin"
_RESERVED_CLAIMS = ("iat", "exp")
# Kafka's OAuthBearerClientInitialResponse: extension keys are letters; values printable ASCII without 0x01.
_EXTENSION_KEY = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE = re.compile(r"^[\x21-\x7E \t\r\n]+$")
# A bearer token's characters (RFC 6750 b64token), which Kafka's broker checks.
_TOKEN = re.compile(r"^[-_~+/.A-Za-z0-9]+=*$")
_KEY = "sasl.jaas.config"
_PROVIDER_KEY = "sasl.oauthbearer.token.provider"


@dataclass(frozen=True)
class BearerToken:
    """A token and what the client message carries beside it."""

    token: Secret
    principal: str | None = None  # the SASL authorization id; None: none sent
    extensions: Mapping[str, str] = field(default_factory=dict)  # SASL extensions (KIP-342)


@dataclass(frozen=True)
class _Fetched:
    """One answer of a token source, before it is checked."""

    value: Any
    expiry: float | None  # epoch seconds; None: unknown
    principal: str | None = None
    extensions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class TokenEndpointLogin:
    """The settings of Java's token endpoint login, as the parsed producer config has them (its defaults included).

    Kafka 4.1's client-credentials settings (KIP-1139) win over the sasl.jaas.config options they replace
    (clientId, clientSecret, scope), as in Java; None: not set."""

    client_id: str | None  # sasl.oauthbearer.client.credentials.client.id
    client_secret: Secret | None  # sasl.oauthbearer.client.credentials.client.secret
    scope: str | None  # sasl.oauthbearer.scope
    header_urlencode: bool  # sasl.oauthbearer.header.urlencode
    jwt_retriever: str | None  # sasl.oauthbearer.jwt.retriever.class
    # The sasl.login.* bounds of the endpoint's HTTP requests (ms).
    connect_timeout_ms: int
    read_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int

    def client_credentials(self) -> dict[str, str]:
        """The Kafka 4.1 settings given, by the sasl.jaas.config option each replaces (the secret revealed)."""
        given = {"clientId": self.client_id, "scope": self.scope,
                 "clientSecret": None if self.client_secret is None else self.client_secret.reveal()}
        return {name: value for name, value in given.items() if value}

    def set_without_endpoint(self) -> str | None:
        """The first setting given that only the token endpoint login takes (for the error without one)."""
        for key, value in (("sasl.oauthbearer.client.credentials.client.id", self.client_id),
                           ("sasl.oauthbearer.client.credentials.client.secret", self.client_secret),
                           ("sasl.oauthbearer.scope", self.scope), (_RETRIEVER_KEY, self.jwt_retriever)):
            if value:
                return key
        return None


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def unsecured_jwt(claims: Mapping[str, Any]) -> str:
    """An unsecured JWS (RFC 7515 with ``"alg":"none"``: header, claims, empty signature)."""
    header = json.dumps({"alg": "none"}, separators=(",", ":")).encode()
    body = json.dumps(dict(claims), separators=(",", ":")).encode()
    return f"{_b64url(header)}.{_b64url(body)}."


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim (epoch seconds) of a JWT, None for anything else."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
        exp = claims.get("exp") if isinstance(claims, dict) else None
    except (ValueError, TypeError):
        return None
    return float(exp) if isinstance(exp, (int, float)) and not isinstance(exp, bool) else None


class OAuthBearerTokens:
    """The current token of one configuration, shared by its connections (thread-safe), and its extensions."""

    def __init__(self, fetch: Callable[[], _Fetched], extensions: Mapping[str, str],
                 source: str, clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self.extensions = dict(extensions)  # the configured ones; a provider's own join them per token
        self.source = source  # what gives the tokens, for messages
        self._clock = clock
        self._lock = threading.Lock()
        self._token: BearerToken | None = None  # guarded by _lock, as are the two times
        self._refresh_at = self._expires_at = 0.0

    def token(self) -> Secret:
        """The current token alone (see :meth:`current`)."""
        return self.current().token

    def current(self) -> BearerToken:
        """The token to authenticate a new connection with, with its principal and extensions; fetched again once
        80% of its lifetime has passed."""
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._refresh_at:
                try:
                    fetched = self._fetch()
                except SaslAuthenticationFailedError as exc:
                    if self._token is None or now >= self._expires_at:
                        raise
                    # The token in hand is still valid: keep it, and ask again a little later.
                    log.warning("OAUTHBEARER: fetching a new token failed (%s); the current one is still valid "
                                "for %.0f s", exc.message, self._expires_at - now)
                    self._refresh_at = min(self._expires_at, now + _RETRY_S)
                    return self._token
                value = fetched.value
                if not isinstance(value, str) or not _TOKEN.match(value):
                    raise SaslVerificationError(f"{self.source} gave no bearer token (a string of letters, "
                                                "digits and -._~+/ is expected)")
                expiry = fetched.expiry if fetched.expiry is not None else _jwt_expiry(value)
                lifetime = (expiry - now) if expiry is not None else _UNKNOWN_LIFETIME_S
                token = BearerToken(Secret(value), fetched.principal, {**self.extensions, **fetched.extensions})
                self._token, self._expires_at = token, now + lifetime
                self._refresh_at = now + _REFRESH_FACTOR * max(0.0, lifetime)
            return self._token

    def __repr__(self) -> str:
        return f"OAuthBearerTokens({self.source})"


def _takes_config(provider: Callable[..., Any]) -> bool:
    """Whether a provider is called as confluent-kafka calls ``oauth_cb`` (with the oauthbearer config string)
    rather than with no argument; a callable taking neither is refused, naming the option."""
    try:
        signature = inspect.signature(provider)
    except (TypeError, ValueError):  # no signature to read (some builtins): confluent-kafka's call
        return True
    for args in (("",), ()):
        try:
            signature.bind(*args)
        except TypeError:
            continue
        return bool(args)
    raise ConfigError(f"{_PROVIDER_KEY}: the callable must take one argument (the sasl.oauthbearer.config "
                      "string, as confluent-kafka's oauth_cb) or none", key=_PROVIDER_KEY)


def _extensions(name: str, given: Any) -> dict[str, str]:
    if given is None:
        return {}
    if not isinstance(given, Mapping):
        raise SaslVerificationError(f"{_PROVIDER_KEY} {name} gave extensions of type {type(given).__name__}: "
                                    "a dict of str to str is expected")
    for key, value in given.items():
        if not isinstance(key, str) or not isinstance(value, str) or key == "auth" \
                or not _EXTENSION_KEY.match(key) or not _EXTENSION_VALUE.match(value):
            raise SaslVerificationError(f"{_PROVIDER_KEY} {name} gave the SASL extension {key!r}: a name of "
                                        "letters (not 'auth') and a printable string value are expected")
    return dict(given)


def _provider_fetch(provider: Callable[..., Any], config: str | None) -> Callable[[], _Fetched]:
    name = getattr(provider, "__qualname__", type(provider).__name__)
    args = (config,) if _takes_config(provider) else ()

    def fetch() -> _Fetched:
        try:
            result = provider(*args)
        except Exception as exc:  # the provider's own failure: its type only (its message may hold a secret)
            raise SaslVerificationError(f"{_PROVIDER_KEY} {name} raised {type(exc).__name__}") from None
        if not isinstance(result, tuple):
            return _Fetched(result, None)
        if len(result) not in (2, 4):
            raise SaslVerificationError(f"{_PROVIDER_KEY} {name} returned a tuple of {len(result)}: expected "
                                        "(token, expiry) or (token, expiry, principal, extensions)")
        expiry = result[1]
        if expiry is not None and (isinstance(expiry, bool) or not isinstance(expiry, (int, float))):
            raise SaslVerificationError(f"{_PROVIDER_KEY} {name} gave an expiry of type {type(expiry).__name__}: "
                                        "epoch seconds (a number) are expected")
        expiry = None if expiry is None else float(expiry)
        if len(result) == 2:
            return _Fetched(result[0], expiry)
        principal = result[2]
        if principal is not None and not isinstance(principal, str):
            raise SaslVerificationError(f"{_PROVIDER_KEY} {name} gave a principal of type "
                                        f"{type(principal).__name__}: a string is expected")
        return _Fetched(result[0], expiry, principal or None, _extensions(name, result[3]))

    return fetch


def _unsecured_fetch(options: Mapping[str, str], clock: Callable[[], float]) -> Callable[[], _Fetched]:
    principal_claim = options.get(f"{_PREFIX}PrincipalClaimName", "").strip() or "sub"
    try:
        lifetime = float(options.get(f"{_PREFIX}LifetimeSeconds", "3600"))
    except ValueError:
        raise ConfigError(f"{_KEY}: {_PREFIX}LifetimeSeconds must be a number of seconds", key=_KEY) from None
    claims: dict[str, Any] = {}
    for option, value in options.items():
        for kind in ("StringClaim_", "NumberClaim_", "ListClaim_"):
            if option.startswith(_PREFIX + kind):
                name = option[len(_PREFIX + kind):]
                if name in _RESERVED_CLAIMS:
                    raise ConfigError(f"{_KEY}: the '{name}' claim cannot be set ({option})", key=_KEY)
                if kind == "NumberClaim_":
                    try:
                        claims[name] = float(value) if "." in value else int(value)
                    except ValueError:
                        raise ConfigError(f"{_KEY}: {option} is not a number", key=_KEY) from None
                elif kind == "ListClaim_":  # Java: the first character is the separator
                    claims[name] = [item for item in value[1:].split(value[:1])] if value else []
                else:
                    claims[name] = value
    if not str(claims.get(principal_claim, "")).strip():
        raise ConfigError(f"{_KEY}: OAUTHBEARER without sasl.oauthbearer.token.provider makes an unsecured token, "
                          f"which needs the principal: add unsecuredLoginStringClaim_{principal_claim}=\"<name>\" "
                          "to the OAuthBearerLoginModule options (or set sasl.oauthbearer.token.provider)", key=_KEY)

    def fetch() -> _Fetched:
        now = clock()
        return _Fetched(unsecured_jwt({"iat": now, "exp": now + lifetime, **claims}), now + lifetime)

    return fetch


def _check_retriever(retriever: str, endpoint: str) -> None:
    schemes = JAVA_JWT_RETRIEVERS.get(retriever)
    if schemes is None:
        grant = " (the jwt-bearer grant is not supported here)" if retriever.endswith("JwtBearerJwtRetriever") else ""
        raise ConfigError(f"{_RETRIEVER_KEY}={retriever!r} cannot run here{grant}: leave it unset (the client "
                          "credentials grant, or a file: URL), or give sasl.oauthbearer.token.provider, a Python "
                          "callable", key=_RETRIEVER_KEY)
    scheme = urllib.parse.urlparse(endpoint).scheme
    if scheme not in schemes:
        raise ConfigError(f"{_RETRIEVER_KEY}={retriever.rpartition('.')[2]} takes {' or '.join(schemes)} URLs, but "
                          f"sasl.oauthbearer.token.endpoint.url is a {scheme or 'relative'} URL", key=_RETRIEVER_KEY)


def _endpoint_fetch(url: str, options: Mapping[str, str],
                    login: TokenEndpointLogin | None) -> Callable[[], _Fetched]:
    """Java's ``OAuthBearerLoginCallbackHandler``: the OAuth client-credentials grant (RFC 6749 4.4) at an http(s)
    token endpoint, or the token in a file (a ``file:`` URL, read again at every refresh). The id and secret go
    into the HTTP Basic header as they are, or form-encoded first with ``login.header_urlencode``
    (``sasl.oauthbearer.header.urlencode``, RFC 6749 2.3.1; off by default, as in Java)."""
    parsed = urllib.parse.urlparse(url)
    if parsed.scheme == "file":
        path = Path(urllib.request.url2pathname(parsed.path))

        def from_file() -> _Fetched:
            try:
                return _Fetched(path.read_text().strip(), None)
            except OSError as exc:
                raise SaslVerificationError(f"the token file {path} cannot be read ({exc.strerror})") from None

        return from_file
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigError(f"sasl.oauthbearer.token.endpoint.url={url!r}: expected an http(s) URL of the token "
                          "endpoint, or a file: URL of a token", key="sasl.oauthbearer.token.endpoint.url")
    if login is None:
        raise TypeError("an http(s) token endpoint needs the parsed login settings (TokenEndpointLogin)")
    client_id, secret = options.get("clientId", ""), options.get("clientSecret", "")
    if not client_id or not secret:
        missing = "sasl.oauthbearer.client.credentials.client.id" if not client_id else \
            "sasl.oauthbearer.client.credentials.client.secret"
        raise ConfigError(f"the token endpoint login needs a client id and secret: set {missing} (Kafka 4.1's "
                          "setting) or the OAuthBearerLoginModule options clientId and clientSecret in "
                          f"{_KEY}", key=missing)
    form = {"grant_type": "client_credentials", **({"scope": options["scope"]} if options.get("scope") else {})}
    if login.header_urlencode:
        client_id, secret = urllib.parse.quote(client_id, safe=""), urllib.parse.quote(secret, safe="")
    basic = base64.b64encode(f"{client_id}:{secret}".encode()).decode("ascii")
    headers = {"Authorization": f"Basic {basic}", "Content-Type": "application/x-www-form-urlencoded",
               "Accept": "application/json"}

    # urllib bounds the connect and each read by one socket timeout: the larger of the two settings.
    timeout_s = max(login.connect_timeout_ms, login.read_timeout_ms) / 1000
    backoff_s, backoff_max_s = login.retry_backoff_ms / 1000, login.retry_backoff_max_ms / 1000

    def from_endpoint() -> _Fetched:
        request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode(), headers=headers,
                                         method="POST")
        # As Java's login retries: waits doubling from sasl.login.retry.backoff.ms, each at most
        # sasl.login.retry.backoff.max.ms, until that much time has passed since the first attempt.
        started, attempts, wait = time.monotonic(), 0, backoff_s
        while True:
            attempts += 1
            try:
                with urllib.request.urlopen(request, timeout=timeout_s) as response:
                    payload = json.loads(response.read())
                break
            except urllib.error.HTTPError as exc:
                if exc.code < 500:  # the credentials or the request: asking again gives the same answer
                    raise SaslVerificationError(f"the token endpoint {url} refused the client credentials: "
                                                f"HTTP {exc.code} {_oauth_error(exc)}") from None
                failure = f"HTTP {exc.code}"
            except (urllib.error.URLError, OSError, ValueError) as exc:
                failure = ("timed out" if isinstance(exc, TimeoutError) else str(exc.reason)
                           if isinstance(exc, urllib.error.URLError) else type(exc).__name__)
            if time.monotonic() + wait - started > backoff_max_s:
                raise SaslVerificationError(f"the token endpoint {url} did not answer with a token in "
                                            f"{attempts} attempts ({failure})")
            time.sleep(wait)  # the backoff between two attempts at the endpoint
            wait = min(2 * wait, backoff_max_s)
        token = payload.get("access_token") if isinstance(payload, dict) else None
        if not isinstance(token, str):
            raise SaslVerificationError(f"the token endpoint {url} answered without an access_token")
        expires_in = payload.get("expires_in")
        valid = isinstance(expires_in, (int, float)) and not isinstance(expires_in, bool)
        return _Fetched(token, time.time() + float(expires_in) if valid else None)

    return from_endpoint


def _oauth_error(exc: urllib.error.HTTPError) -> str:
    """The RFC 6749 5.2 error code of a refused request (e.g. invalid_client), never its other text."""
    try:
        error = json.loads(exc.read()).get("error")
    except (ValueError, AttributeError, OSError):
        return ""
    return f"({error})" if isinstance(error, str) and error.replace("_", "").isalnum() else ""


def token_provider(value: Any) -> Callable[..., Any] | None:
    """``sasl.oauthbearer.token.provider`` as given: a callable taking the oauthbearer config string or nothing,
    the dotted path of one (a class is instantiated), or unset (None or "")."""
    if value is None or value == "":
        return None
    target = resolve_object("sasl.oauthbearer.token.provider", value)
    if not callable(target):
        raise ConfigError("sasl.oauthbearer.token.provider must be a callable returning (token, expiry in epoch "
                          "seconds), (token, expiry, principal, extensions) or the token, or the dotted path of one",
                          key="sasl.oauthbearer.token.provider")
    provider: Callable[..., Any] = target
    _takes_config(provider)  # a callable that cannot be called either way fails here, not at the first connection
    return provider


def token_source(jaas_options: Mapping[str, str] | None, provider: Callable[..., Any] | None,
                 clock: Callable[[], float] = time.time, endpoint: str | None = None,
                 login: TokenEndpointLogin | None = None, provider_config: str | None = None) -> OAuthBearerTokens:
    """The tokens of a configuration: ``provider`` if given, else from the token ``endpoint`` URL
    (``sasl.oauthbearer.token.endpoint.url``) with the client id, secret and scope (Kafka 4.1's settings in
    ``login``, else the login module's clientId / clientSecret / scope), else unsecured ones from the login module
    options. ``login``: the parsed config's token endpoint settings (needed for an http(s) endpoint);
    ``provider_config``: ``sasl.oauthbearer.config``, the argument of a provider that takes one."""
    options = dict(jaas_options or {})
    if provider is not None and endpoint:
        raise ConfigError("set either sasl.oauthbearer.token.provider or sasl.oauthbearer.token.endpoint.url",
                          key="sasl.oauthbearer.token.provider")
    misplaced = None if login is None or endpoint else login.set_without_endpoint()
    if misplaced is not None:
        raise ConfigError(f"{misplaced} is for the token endpoint login: set sasl.oauthbearer.token.endpoint.url",
                          key=misplaced)
    if login is not None and login.jwt_retriever:
        _check_retriever(login.jwt_retriever, str(endpoint))
    if login is not None:
        options.update(login.client_credentials())
    prefix = f"{_PREFIX}Extension_" if provider is None and not endpoint else "extension_"
    extensions = {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}
    for key, value in extensions.items():
        if key == "auth" or not _EXTENSION_KEY.match(key) or not _EXTENSION_VALUE.match(value):
            raise ConfigError(f"{_KEY}: the SASL extension {prefix}{key} needs a name of letters (not 'auth') and "
                              "a printable value", key=_KEY)
    if provider is not None:
        return OAuthBearerTokens(_provider_fetch(provider, provider_config), extensions, _PROVIDER_KEY, clock)
    if endpoint:
        return OAuthBearerTokens(_endpoint_fetch(endpoint, options, login), extensions,
                                 "the token endpoint (sasl.oauthbearer.token.endpoint.url)", clock)
    return OAuthBearerTokens(_unsecured_fetch(options, clock), extensions, "the unsecured login (sasl.jaas.config)",
                             clock)
