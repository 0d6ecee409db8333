"""Where SASL/OAUTHBEARER tokens come from, and how long one is used.

    tokens = token_source(jaas_options, provider)     # from sasl.jaas.config and sasl.oauthbearer.token.provider
    tokens.token()                                    # the current token (Secret), fetched again when it is old
    tokens.extensions                                 # SASL extensions (KIP-342) for the client message

Two sources, as the Java client and confluent-kafka have them:

* ``sasl.oauthbearer.token.provider``: a Python callable (or the dotted path of one, importable on the executors)
  that returns the token, or ``(token, expiry)`` with the expiry in epoch seconds (confluent-kafka's ``oauth_cb``
  contract). That is how a cloud's own token library plugs in (AWS MSK IAM's signer, Azure identity, Google auth);
* otherwise Java's default login handler (``OAuthBearerUnsecuredLoginCallbackHandler``): an unsecured JWT
  (``"alg":"none"``) built from the ``OAuthBearerLoginModule`` options ``unsecuredLoginStringClaim_<name>``
  (``sub`` required, the principal), ``unsecuredLoginNumberClaim_<name>``, ``unsecuredLoginListClaim_<name>``
  (its first character separates the items), ``unsecuredLoginPrincipalClaimName`` (default ``sub``),
  ``unsecuredLoginLifetimeSeconds`` (default 3600) and ``unsecuredLoginExtension_<name>`` (a SASL extension).
  For development and tests: brokers accept it only with their unsecured validator.

A token is used by every new connection until 80% of its lifetime has passed (Java's
``sasl.login.refresh.window.factor``), then fetched again; one without a known expiry, for an hour. A JWT's own
``exp`` claim is its expiry when the provider gives none. Tokens are :class:`~spark_kafka_sink.secret.Secret`
values: never logged, never in an error or a ``repr``.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_kafka_sink.errors import ConfigError, SaslAuthenticationFailedError
from spark_kafka_sink.python_objects import resolve_object
from spark_kafka_sink.secret import Secret

__all__ = ["OAuthBearerTokens", "token_provider", "token_source", "unsecured_jwt"]

_REFRESH_FACTOR = 0.8  # Java's sasl.login.refresh.window.factor
_UNKNOWN_LIFETIME_S = 3600.0
_PREFIX = "unsecuredLogin"
_RESERVED_CLAIMS = ("iat", "exp")
# Kafka's OAuthBearerClientInitialResponse: extension keys are letters; values printable ASCII without 0x01.
_EXTENSION_KEY = re.compile(r"^[A-Za-z]+$")
_EXTENSION_VALUE = re.compile(r"^[\x21-\x7E \t\r\n]+$")
# A bearer token's characters (RFC 6750 b64token), which Kafka's broker checks.
_TOKEN = re.compile(r"^[-_~+/.A-Za-z0-9]+=*$")
_KEY = "sasl.jaas.config"


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

    def __init__(self, fetch: Callable[[], tuple[str, float | None]], extensions: Mapping[str, str],
                 source: str, clock: Callable[[], float] = time.time) -> None:
        self._fetch = fetch
        self.extensions = dict(extensions)
        self.source = source  # what gives the tokens, for messages
        self._clock = clock
        self._lock = threading.Lock()
        self._token: Secret | None = None
        self._refresh_at = 0.0

    def token(self) -> Secret:
        """The token to authenticate a new connection with; fetched again once 80% of its lifetime has passed."""
        with self._lock:
            now = self._clock()
            if self._token is None or now >= self._refresh_at:
                value, expiry = self._fetch()
                if not isinstance(value, str) or not _TOKEN.match(value):
                    raise SaslAuthenticationFailedError(f"{self.source} gave no bearer token (a string of "
                                                        "letters, digits and -._~+/ is expected)")
                expiry = expiry if expiry is not None else _jwt_expiry(value)
                lifetime = (expiry - now) if expiry is not None else _UNKNOWN_LIFETIME_S
                self._token, self._refresh_at = Secret(value), now + _REFRESH_FACTOR * max(0.0, lifetime)
            return self._token

    def __repr__(self) -> str:
        return f"OAuthBearerTokens({self.source})"


def _provider_fetch(provider: Callable[[], Any]) -> Callable[[], tuple[str, float | None]]:
    name = getattr(provider, "__qualname__", type(provider).__name__)

    def fetch() -> tuple[str, float | None]:
        try:
            result = provider()
        except Exception as exc:  # the provider's own failure: its type only (its message may hold a secret)
            raise SaslAuthenticationFailedError(f"sasl.oauthbearer.token.provider {name} raised "
                                                f"{type(exc).__name__}") from None
        if isinstance(result, tuple) and len(result) == 2:
            token, expiry = result
            return token, None if expiry is None else float(expiry)
        return result, None

    return fetch


def _unsecured_fetch(options: Mapping[str, str], clock: Callable[[], float]) -> Callable[[], tuple[str, float]]:
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
    def fetch() -> tuple[str, float]:
        now = clock()
        return unsecured_jwt({"iat": now, "exp": now + lifetime, **claims}), now + lifetime

    return fetch


def token_provider(value: Any) -> Callable[[], Any] | None:
    """``sasl.oauthbearer.token.provider`` as given: a callable, the dotted path of one (a class is instantiated),
    or unset (None or "")."""
    if value is None or value == "":
        return None
    target = resolve_object("sasl.oauthbearer.token.provider", value)
    if not callable(target):
        raise ConfigError("sasl.oauthbearer.token.provider must be a callable returning a token (or token, expiry "
                          "in epoch seconds), or the dotted path of one", key="sasl.oauthbearer.token.provider")
    provider: Callable[[], Any] = target
    return provider


def token_source(jaas_options: Mapping[str, str] | None, provider: Callable[[], Any] | None,
                 clock: Callable[[], float] = time.time) -> OAuthBearerTokens:
    """The tokens of a configuration: ``provider`` if given, else unsecured ones from the login module options."""
    options = dict(jaas_options or {})
    prefix = f"{_PREFIX}Extension_" if provider is None else "extension_"
    extensions = {k[len(prefix):]: v for k, v in options.items() if k.startswith(prefix)}
    for key, value in extensions.items():
        if key == "auth" or not _EXTENSION_KEY.match(key) or not _EXTENSION_VALUE.match(value):
            raise ConfigError(f"{_KEY}: the SASL extension {prefix}{key} needs a name of letters (not 'auth') and "
                              "a printable value", key=_KEY)
    if provider is not None:
        return OAuthBearerTokens(_provider_fetch(provider), extensions, "sasl.oauthbearer.token.provider", clock)
    return OAuthBearerTokens(_unsecured_fetch(options, clock), extensions, "the unsecured login (sasl.jaas.config)",
                             clock)
