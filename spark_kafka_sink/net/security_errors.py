"""How raw TLS and security-protocol failures map onto the package's errors.

SASL failures keep the broker's own classes (:class:`~spark_kafka_sink.errors.SaslAuthenticationFailedError`,
``UnsupportedSaslMechanismError``, ``IllegalSaslStateError``: all ``fatal``). TLS failures have no broker error
code: they map onto :class:`~spark_kafka_sink.errors.SecuritySetupError` and its subclasses (declared in
:mod:`spark_kafka_sink.errors`, the one hierarchy; import them from there):
:class:`~spark_kafka_sink.errors.UntrustedCertificateError`, ``HostnameMismatchError``, ``TlsHandshakeError``,
``SecurityProtocolMismatchError``.

Each is ``fatal`` (the producer stops instead of reconnecting forever) and ``retriable = False``. A connection
that merely closed during the handshake stays a retriable ``KafkaConnectionError`` (as in the Java client): a
broker restarting looks the same. Messages say which option to change; none carries a secret.
"""

from __future__ import annotations

import ssl

from spark_kafka_sink.errors import (
    HostnameMismatchError,
    KafkaConnectionError,
    KafkaError,
    SecurityProtocolMismatchError,
    SecuritySetupError,
    TlsHandshakeError,
    UntrustedCertificateError,
)

__all__ = [
    "tls_handshake_error",
    "tls_io_error",
    "plaintext_reply_error",
    "looks_like_tls_record",
]

# OpenSSL certificate verify codes, X509_V_ERR_* (include/openssl/x509_vfy.h): ``SSLCertVerificationError.verify_code``.
_X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT = 2
_X509_V_ERR_CERT_NOT_YET_VALID = 9
_X509_V_ERR_CERT_HAS_EXPIRED = 10
_X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT = 18
_X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN = 19
_X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY = 20
_X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE = 21
_X509_V_ERR_HOSTNAME_MISMATCH = 62
_X509_V_ERR_IP_ADDRESS_MISMATCH = 64

# The verify codes that mean "no trusted CA signed this".
_UNTRUSTED_CODES = frozenset({
    _X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT,
    _X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT,
    _X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN,
    _X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY,
    _X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE,
})
_EXPIRED_CODES = frozenset({_X509_V_ERR_CERT_NOT_YET_VALID, _X509_V_ERR_CERT_HAS_EXPIRED})
_MISMATCH_CODES = frozenset({_X509_V_ERR_HOSTNAME_MISMATCH, _X509_V_ERR_IP_ADDRESS_MISMATCH})

# A TLS record starts with its content type, then the protocol version's major and minor bytes (RFC 8446 5.1).
_TLS_ALERT = 0x15  # content type alert (21)
_TLS_HANDSHAKE = 0x16  # content type handshake (22)
_TLS_MAJOR_VERSION = 0x03  # SSL 3.0 and every TLS version: 3.x
_TLS_MAX_MINOR_VERSION = 0x04  # TLS 1.3 is 3.4

# Alerts a TLS server sends when it refuses our client certificate (or the lack of one).
_CLIENT_CERT_ALERTS = ("CERTIFICATE_REQUIRED", "BAD_CERTIFICATE", "UNKNOWN_CA", "CERTIFICATE_UNKNOWN",
                       "UNSUPPORTED_CERTIFICATE", "CERTIFICATE_REVOKED", "CERTIFICATE_EXPIRED", "ACCESS_DENIED")
_CA_OPTIONS = "ssl.ca.location (or ssl.truststore.location)"


def looks_like_tls_record(head: bytes | bytearray | memoryview) -> bool:
    """True if ``head`` starts like a TLS record: content type alert (21) or handshake (22), version 3.x."""
    data = bytes(head[:3])
    return (len(data) >= 3 and data[0] in (_TLS_ALERT, _TLS_HANDSHAKE) and data[1] == _TLS_MAJOR_VERSION
            and data[2] <= _TLS_MAX_MINOR_VERSION)


def plaintext_reply_error(head: bytes | bytearray | memoryview, address: str) -> SecurityProtocolMismatchError | None:
    """For a connection without TLS whose reply starts with ``head``: the error to report if that reply is TLS
    (a TLS listener answers plaintext bytes with an alert record, which reads as a ~350 MB frame size), else None."""
    if not looks_like_tls_record(head):
        return None
    return SecurityProtocolMismatchError(
        f"the listener at {address} speaks TLS: set security.protocol=SSL or SASL_SSL", address=address)


def tls_handshake_error(exc: ssl.SSLError, address: str, host: str, ca_source: str | None) -> KafkaError:
    """Map an ``ssl`` exception raised by ``do_handshake`` to this package's error.

    ``ca_source`` names what the client trusts (a file, or None for the system CAs), to say it in the message.
    """
    trusted = f"the CA file {ca_source}" if ca_source else "the system's default CAs"
    if isinstance(exc, ssl.SSLCertVerificationError):
        code = exc.verify_code
        reason = exc.verify_message or exc.reason or "certificate verify failed"
        if code in _MISMATCH_CODES:
            return HostnameMismatchError(
                f"the certificate of {address} does not match host {host} ({reason}): connect with a host name "
                f"or address the certificate names, or fix the broker certificate; only if you really must, "
                f"disable the check with ssl.endpoint.identification.algorithm= (empty)", address=address)
        if code in _UNTRUSTED_CODES:
            return UntrustedCertificateError(
                f"certificate verify failed: the CA that signed the certificate of {address} is not trusted "
                f"({reason}; this client trusts {trusted}): set {_CA_OPTIONS} to a PEM file (or JKS truststore) "
                f"holding that CA",
                address=address)
        if code in _EXPIRED_CODES:
            return UntrustedCertificateError(
                f"certificate verify failed for {address}: {reason}: renew the broker certificate (or check "
                f"this machine's clock)", address=address)
        return UntrustedCertificateError(f"certificate verify failed for {address}: {reason}", address=address)
    if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        # Also what a broker restart looks like: retriable, with the likely configuration cause as a hint.
        return KafkaConnectionError(
            f"{address} closed the connection during the TLS handshake; if it is a PLAINTEXT or SASL_PLAINTEXT "
            f"listener, set security.protocol accordingly", address=address)
    reason = (exc.reason or str(exc)).upper()
    if reason in ("WRONG_VERSION_NUMBER", "PACKET_LENGTH_TOO_LONG", "RECORD_LAYER_FAILURE", "HTTP_REQUEST"):
        return SecurityProtocolMismatchError(
            f"{address} did not answer the TLS handshake with TLS ({exc.reason}): it is probably a PLAINTEXT or "
            f"SASL_PLAINTEXT listener; set security.protocol=PLAINTEXT or SASL_PLAINTEXT", address=address)
    return tls_io_error(exc, address) or TlsHandshakeError(f"TLS handshake with {address} failed: {exc.reason or exc}",
                                                          address=address)


def tls_io_error(exc: BaseException, address: str) -> SecuritySetupError | None:
    """For an exception from reading or writing a TLS socket: the lasting error it stands for, or None (a
    transient I/O failure). With TLS 1.3 a broker refuses a client certificate *after* the client finished its
    handshake, so the alert arrives with the first read."""
    if not isinstance(exc, ssl.SSLError) or isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return None
    reason = (exc.reason or "").upper()
    if "ALERT" in reason and any(alert in reason for alert in _CLIENT_CERT_ALERTS):
        # Java brokers answer a missing certificate with bad_certificate too, so one advice covers both.
        return TlsHandshakeError(
            f"{address} refused the TLS client authentication ({exc.reason}): the listener requires a client "
            f"certificate (mutual TLS) signed by a CA the broker trusts: set ssl.certificate.location and "
            f"ssl.key.location (and ssl.key.password for an encrypted key)", address=address)
    if "ALERT" in reason:
        return TlsHandshakeError(f"{address} ended the TLS session with an alert ({exc.reason})", address=address)
    return None
