"""The security settings of a connection (``security.protocol``, ``ssl.*``, ``sasl.*``) as typed values, and the
``ssl.SSLContext`` built from them. :mod:`spark_kafka_sink.net.security` turns them into handshakes.

``ProducerConfig.security_settings()`` builds them from the parsed config, which holds every security rule and
names the bad key: nothing here reads an option. Passwords stay :class:`~spark_kafka_sink.secret.Secret` objects:
``reveal()`` runs only where a value is used -- the SASL exchange, the key password callback. What can only be
checked by reading a file (a certificate, a key and its password, a truststore) is checked when the context is
built, and each :class:`~spark_kafka_sink.errors.ConfigError` names its key and never quotes a secret.
"""

from __future__ import annotations

import functools
import ssl
from dataclasses import dataclass
from pathlib import Path

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.client_keystore import load_inline_pem, load_keystore
from spark_kafka_sink.net.config import require_readable_file
from spark_kafka_sink.net.kerberos import KerberosLogin
from spark_kafka_sink.net.oauthbearer import OAuthBearerTokens
from spark_kafka_sink.net.truststore import load_trusted
from spark_kafka_sink.secret import Secret

__all__ = ["SecuritySettings"]


@dataclass(frozen=True, kw_only=True)
class SecuritySettings:
    """The security settings, as ``ProducerConfig.security_settings()`` derives them (validated there)."""

    protocol: str  # security.protocol
    ca_location: str | None
    ca_option: str  # the option that named ca_location (ssl.ca.location or ssl.truststore.location): for errors
    truststore_type: str | None  # PEM, JKS, JCEKS or PKCS12; None: by the file's content (net/truststore.py)
    truststore_password: Secret | None  # a keystore's: its integrity (PKCS12: encryption) key
    certificate_location: str | None
    key_location: str | None
    key_password: Secret | None
    # A Java keystore (or PEM file) of the client's key and certificate chain instead: net/client_keystore.py.
    keystore_location: str | None
    keystore_type: str | None  # JKS, PKCS12, PEM; None: by the file's content
    keystore_password: Secret | None
    # Or PEM text (KIP-651): ssl.truststore.certificates; ssl.keystore.key with ssl.keystore.certificate.chain.
    truststore_certificates: Secret | None
    keystore_key: Secret | None
    keystore_certificate_chain: Secret | None
    check_hostname: bool
    # The oldest and newest TLS version offered (ssl.enabled.protocols, capped by ssl.protocol).
    tls_versions: tuple[ssl.TLSVersion, ssl.TLSVersion]
    sasl_mechanism: str
    sasl_username: str | None
    sasl_password: Secret | None
    sasl_token_auth: bool  # SCRAM with a delegation token (sasl.jaas.config's tokenauth=true)
    oauth_tokens: OAuthBearerTokens | None  # sasl.mechanism=OAUTHBEARER: where its tokens come from
    kerberos: KerberosLogin | None  # sasl.mechanism=GSSAPI: the credentials and the broker's service name

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

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


def _is_encrypted(path: str) -> bool:
    try:
        head = Path(path).read_bytes()
    except OSError:
        return False
    return b"ENCRYPTED" in head
