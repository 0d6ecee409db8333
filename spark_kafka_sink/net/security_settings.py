"""The security settings of a connection (``security.protocol``, ``ssl.*``, ``sasl.*``), validated once, and the
``ssl.SSLContext`` built from them. :mod:`spark_kafka_sink.net.security` turns them into handshakes.

Values arrive as strings (Spark options, dicts) or, for the secret keys, as :class:`~spark_kafka_sink.secret.Secret`
(what :class:`~spark_kafka_sink.net.config.NetConfig` and the producer's config hold). Passwords stay ``Secret``
objects here too: ``reveal()`` runs only where a value is used -- the SASL exchange, the key password callback,
and parsing ``sasl.jaas.config`` (whose password is wrapped again at once). Every
:class:`~spark_kafka_sink.errors.ConfigError` names its key and never quotes a secret.
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.client_keystore import KEYSTORE_TYPES, load_inline_pem, load_keystore
from spark_kafka_sink.net.config import NetConfig, require_readable_file, to_int
from spark_kafka_sink.net.kerberos import KerberosLogin, kerberos_login
from spark_kafka_sink.net.oauthbearer import (
    JAVA_OAUTH_LOGIN_HANDLERS,
    LOGIN_SETTINGS,
    OAUTH_SETTINGS,
    OAuthBearerTokens,
    token_provider,
    token_source,
)
from spark_kafka_sink.net.truststore import TRUSTSTORE_TYPES, load_trusted
from spark_kafka_sink.protocol.jaas import jaas_credentials, jaas_oauthbearer_options
from spark_kafka_sink.protocol.sasl import GSSAPI, OAUTHBEARER, SUPPORTED_MECHANISMS
from spark_kafka_sink.secret import Secret

__all__ = ["SecuritySettings", "settings_for", "tls_versions"]

_Getter = Callable[..., "str | None"]  # get(key, default=None): an option's text, stripped
_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _secret(value: Any) -> Secret | None:
    """The setting as a Secret without revealing it; None for empty text (unset, as the producer's config has it)."""
    if isinstance(value, Secret):
        return value
    text = str(value)
    return Secret(text) if text else None


@dataclass(frozen=True)
class SecuritySettings:
    """The security settings, validated. Build with :meth:`from_options` or :meth:`from_net_config`."""

    protocol: str = "PLAINTEXT"
    ca_location: str | None = None
    ca_option: str = "ssl.ca.location"  # the option that named ca_location (ssl.truststore.location too): for errors
    truststore_type: str | None = None  # PEM, JKS, JCEKS or PKCS12; None: by the file's content (net/truststore.py)
    truststore_password: Secret | None = None  # a keystore's: its integrity (PKCS12: encryption) key
    certificate_location: str | None = None
    key_location: str | None = None
    key_password: Secret | None = None
    # A Java keystore (or PEM file) of the client's key and certificate chain instead: net/client_keystore.py.
    keystore_location: str | None = None
    keystore_type: str | None = None  # JKS, PKCS12, PEM; None: by the file's content
    keystore_password: Secret | None = None
    # Or PEM text (KIP-651): ssl.truststore.certificates; ssl.keystore.key with ssl.keystore.certificate.chain.
    truststore_certificates: Secret | None = None
    keystore_key: Secret | None = None
    keystore_certificate_chain: Secret | None = None
    check_hostname: bool = True
    # The oldest and newest TLS version offered (ssl.enabled.protocols, capped by ssl.protocol): see tls_versions.
    tls_versions: tuple[ssl.TLSVersion, ssl.TLSVersion] = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)
    sasl_mechanism: str = "PLAIN"
    sasl_username: str | None = None
    sasl_password: Secret | None = None
    sasl_token_auth: bool = False  # SCRAM with a delegation token (sasl.jaas.config's tokenauth=true)
    oauth_tokens: OAuthBearerTokens | None = None  # sasl.mechanism=OAUTHBEARER: where its tokens come from
    kerberos: KerberosLogin | None = None  # sasl.mechanism=GSSAPI: the credentials and the broker's service name

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    # -- building ----------------------------------------------------------------------------------------------
    @classmethod
    def from_net_config(cls, config: NetConfig) -> SecuritySettings:
        return settings_for(config.security_protocol, config.security_options)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> SecuritySettings:
        """From Java-named settings (``security.protocol``, ``ssl.*``, ``sasl.*``; other keys are ignored).
        Values are strings, or :class:`Secret` for secret keys; :class:`ConfigError` names the bad key."""
        opts = {k.strip().lower(): v for k, v in options.items() if v is not None}

        def get(key: str, default: str | None = None) -> str | None:
            if key not in opts:
                return default
            if isinstance(opts[key], Secret):  # str() would give the mask, never the value
                raise ConfigError(f"{key} is not a secret setting: give its value as text", key=key)
            return str(opts[key]).strip()

        protocol = (get("security.protocol") or "PLAINTEXT").upper()
        if protocol not in _PROTOCOLS:
            raise ConfigError(f"security.protocol must be one of {', '.join(_PROTOCOLS)}, got {protocol!r}",
                              key="security.protocol")
        kwargs: dict[str, Any] = {"protocol": protocol}
        if protocol in ("SSL", "SASL_SSL"):
            kwargs.update(_tls_options(get, opts))
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
        context.minimum_version, context.maximum_version = self.tls_versions  # never older than TLS 1.2
        context.check_hostname = self.check_hostname
        context.verify_mode = ssl.CERT_REQUIRED  # never turned off: only the host name check is optional
        if self.truststore_certificates is not None:
            try:
                context.load_verify_locations(cadata=self.truststore_certificates.reveal())
            except (ssl.SSLError, ValueError):
                raise ConfigError("ssl.truststore.certificates holds no PEM certificate (BEGIN CERTIFICATE)",
                                  key="ssl.truststore.certificates") from None
        elif self.ca_location:
            require_readable_file(self.ca_location, self.ca_option)
            load_trusted(context, self.ca_location, self.ca_option, self.truststore_type, self.truststore_password)
        else:
            context.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.keystore_key is not None and self.keystore_certificate_chain is not None:
            load_inline_pem(context, self.keystore_key, self.keystore_certificate_chain, self.key_password)
        elif self.keystore_location:
            require_readable_file(self.keystore_location, "ssl.keystore.location")
            load_keystore(context, self.keystore_location, self.keystore_type, self.keystore_password,
                          self.key_password)
        elif self.certificate_location:
            self._load_client_certificate(context)
        return context

    def _load_client_certificate(self, context: ssl.SSLContext) -> None:
        cert = self.certificate_location or ""
        key_file = self.key_location
        require_readable_file(cert, "ssl.certificate.location")
        if key_file:
            require_readable_file(key_file, "ssl.key.location")
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


def _tls_options(get: _Getter, opts: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    keystore_type = (get("ssl.keystore.type") or "").upper() or None
    if keystore_type not in (None, *KEYSTORE_TYPES):
        raise ConfigError(f"ssl.keystore.type={keystore_type} is not supported ({', '.join(KEYSTORE_TYPES)} are)",
                          key="ssl.keystore.type")
    keystore = get("ssl.keystore.location") or None
    if keystore and (get("ssl.certificate.location") or get("ssl.key.location")):
        raise ConfigError("ssl.keystore.location and ssl.certificate.location / ssl.key.location both name a client "
                          "certificate: set one", key="ssl.keystore.location")
    keystore_password = opts.get("ssl.keystore.password")
    out.update(keystore_location=keystore, keystore_type=keystore_type,
               keystore_password=_secret(keystore_password) if keystore_password is not None else None)
    store_type = (get("ssl.truststore.type") or "").upper() or None
    if store_type not in (None, *TRUSTSTORE_TYPES):
        raise ConfigError(f"ssl.truststore.type={store_type} is not supported ({', '.join(TRUSTSTORE_TYPES)} are)",
                          key="ssl.truststore.type")
    out["truststore_type"] = store_type
    inline = {key: _secret(opts[key]) if opts.get(key) not in (None, "") else None
              for key in ("ssl.truststore.certificates", "ssl.keystore.key", "ssl.keystore.certificate.chain")}
    _check_inline_pem(inline, get, keystore_type, store_type)
    out.update(truststore_certificates=inline["ssl.truststore.certificates"], keystore_key=inline["ssl.keystore.key"],
               keystore_certificate_chain=inline["ssl.keystore.certificate.chain"])
    password = opts.get("ssl.truststore.password")
    out["truststore_password"] = _secret(password) if password is not None else None
    ca, truststore = get("ssl.ca.location") or None, get("ssl.truststore.location") or None
    if ca and truststore and ca != truststore:
        raise ConfigError("ssl.ca.location and ssl.truststore.location name different files: set one",
                          key="ssl.truststore.location")
    out["ca_location"] = ca or truststore
    out["ca_option"] = "ssl.ca.location" if ca else "ssl.truststore.location"
    out["tls_versions"] = tls_versions(get("ssl.enabled.protocols"), get("ssl.protocol"))
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
    out["key_password"] = _secret(opts["ssl.key.password"]) if "ssl.key.password" in opts else None
    return out


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


def _sasl_options(get: _Getter, opts: Mapping[str, Any]) -> dict[str, Any]:
    mechanism = (get("sasl.mechanism") or "PLAIN").upper()
    if mechanism not in (*SUPPORTED_MECHANISMS, OAUTHBEARER, GSSAPI):
        raise ConfigError(f"sasl.mechanism={mechanism} is not supported: use one of "
                          f"{', '.join((*SUPPORTED_MECHANISMS, OAUTHBEARER, GSSAPI))}", key="sasl.mechanism")
    jaas = _secret(opts["sasl.jaas.config"]) if "sasl.jaas.config" in opts else None
    username = get("sasl.username")
    password = _secret(opts["sasl.password"]) if "sasl.password" in opts else None
    provider = opts.get("sasl.oauthbearer.token.provider")
    if mechanism == OAUTHBEARER:
        if username is not None or password is not None:
            raise ConfigError("sasl.mechanism=OAUTHBEARER authenticates with a token: sasl.username and sasl.password "
                              "are for PLAIN and SCRAM (see sasl.oauthbearer.token.provider)", key="sasl.username")
        handler = get("sasl.login.callback.handler.class") or None
        if handler is not None and handler not in JAVA_OAUTH_LOGIN_HANDLERS:
            raise ConfigError(f"sasl.login.callback.handler.class={handler!r} cannot run here: give "
                              "sasl.oauthbearer.token.provider, a Python callable",
                              key="sasl.login.callback.handler.class")
        login = {key: _login_ms(key, get(key)) for key in LOGIN_SETTINGS if get(key) not in (None, "")}
        oauth = {key: opts[key].reveal() if isinstance(opts[key], Secret) else get(key)
                 for key in OAUTH_SETTINGS if opts.get(key) not in (None, "")}
        tokens = token_source(jaas_oauthbearer_options(jaas.reveal()) if jaas is not None else None,
                              token_provider(provider), endpoint=get("sasl.oauthbearer.token.endpoint.url") or None,
                              login=login, oauth=oauth)
        return {"sasl_mechanism": mechanism, "oauth_tokens": tokens}
    if provider not in (None, ""):
        raise ConfigError(f"sasl.oauthbearer.token.provider is set but sasl.mechanism={mechanism}: set "
                          "sasl.mechanism=OAUTHBEARER", key="sasl.oauthbearer.token.provider")
    if mechanism == GSSAPI:
        if username is not None or password is not None:
            raise ConfigError("sasl.mechanism=GSSAPI authenticates with Kerberos: sasl.username and sasl.password are "
                              "for PLAIN and SCRAM (see sasl.jaas.config)", key="sasl.username")
        kerberos = kerberos_login(None if jaas is None else jaas.reveal(), get("sasl.kerberos.service.name") or None,
                                  keytab=get("sasl.kerberos.keytab") or None,
                                  principal=get("sasl.kerberos.principal") or None)
        return {"sasl_mechanism": mechanism, "kerberos": kerberos}
    token_auth = False
    if jaas is not None:
        if username is not None or password is not None:
            raise ConfigError("set either sasl.jaas.config or sasl.username/sasl.password, not both",
                              key="sasl.jaas.config")
        credentials = jaas_credentials(jaas.reveal(), mechanism)
        username, password, token_auth = credentials.username, Secret(credentials.password), credentials.token_auth
    if not username:
        raise ConfigError("SASL needs a user name: set sasl.username (or sasl.jaas.config)", key="sasl.username")
    if password is None:
        raise ConfigError("SASL needs a password: set sasl.password (or sasl.jaas.config)", key="sasl.password")
    return {"sasl_mechanism": mechanism, "sasl_username": username, "sasl_password": password,
            "sasl_token_auth": token_auth}


def _check_inline_pem(inline: Mapping[str, Secret | None], get: _Getter, keystore_type: str | None,
                      truststore_type: str | None) -> None:
    """Java's rules for the PEM text options: with the PEM type (or none), not with a file, key and chain together."""
    if inline["ssl.truststore.certificates"] is not None:
        if get("ssl.truststore.location") or get("ssl.ca.location"):
            raise ConfigError("ssl.truststore.certificates and a truststore file (ssl.truststore.location / "
                              "ssl.ca.location) both name the trusted certificates: set one",
                              key="ssl.truststore.certificates")
        if truststore_type not in (None, "PEM"):
            raise ConfigError(f"ssl.truststore.certificates is PEM text: ssl.truststore.type={truststore_type} does "
                              "not apply (set PEM or leave it unset)", key="ssl.truststore.type")
    key, chain = inline["ssl.keystore.key"], inline["ssl.keystore.certificate.chain"]
    if key is None and chain is None:
        return
    if key is None or chain is None:
        missing = "ssl.keystore.key" if key is None else "ssl.keystore.certificate.chain"
        raise ConfigError(f"ssl.keystore.key and ssl.keystore.certificate.chain go together: {missing} is missing",
                          key=missing)
    if get("ssl.keystore.location") or get("ssl.certificate.location") or get("ssl.key.location"):
        raise ConfigError("ssl.keystore.key and a keystore file (ssl.keystore.location, or ssl.certificate.location "
                          "/ ssl.key.location) both name the client certificate: set one", key="ssl.keystore.key")
    if keystore_type not in (None, "PEM"):
        raise ConfigError(f"ssl.keystore.key is PEM text: ssl.keystore.type={keystore_type} does not apply (set PEM "
                          "or leave it unset)", key="ssl.keystore.type")


def _login_ms(key: str, text: str | None) -> int:
    value = to_int(key, text)
    if value < 0:
        raise ConfigError(f"{key} must be an integer >= 0 (milliseconds), got {text!r}", key=key)
    return value


def _is_encrypted(path: str) -> bool:
    try:
        head = Path(path).read_bytes()
    except OSError:
        return False
    return b"ENCRYPTED" in head

@functools.lru_cache(maxsize=16)
def settings_for(protocol: str, options: tuple[tuple[str, Any], ...]) -> SecuritySettings:
    # One settings object (and so one SSLContext) per distinct configuration, not one per connection.
    return SecuritySettings.from_options({"security.protocol": protocol, **dict(options)})
