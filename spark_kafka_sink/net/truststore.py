"""The CA certificates a TLS client trusts, from the file ``ssl.ca.location`` / ``ssl.truststore.location`` names.

    load_trusted(context, location, option, declared_type, password)    # into an ssl.SSLContext

The file is what a Java or a librdkafka configuration names:

* PEM text (``BEGIN CERTIFICATE``), librdkafka's and Java's ``ssl.truststore.type=PEM``;
* a JKS or JCEKS keystore, Java's default truststore type (:mod:`~spark_kafka_sink.net.java_keystore`);
* a PKCS12 truststore, what ``keytool`` makes by default since Java 9. Its certificates are encrypted (AES-256 by
  default), which Python's standard library cannot decrypt: it is read with the optional package ``cryptography``
  (``pip install spark-kafka-sink[pkcs12]``), and without it the error says so and how to convert the file to PEM.
  Every certificate of the file is trusted (``cryptography`` does not expose Java's trusted-certificate attribute).

``declared_type`` is ``ssl.truststore.type`` (PEM, JKS, JCEKS, PKCS12) or None: then the file's first bytes tell,
as they do for Java's JKS and PKCS12 types, which read either kind of keystore. ``password`` is
``ssl.truststore.password``: a keystore's integrity (and a PKCS12 file's encryption) key; Java refuses one for
PEM, and so does this. Every :class:`~spark_kafka_sink.errors.ConfigError` names the option to change and never
holds the password.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.java_keystore import KeystorePasswordError, keystore_kind, trusted_certificates
from spark_kafka_sink.secret import Secret

__all__ = ["TRUSTSTORE_TYPES", "load_trusted", "store_kind"]

#: The values ssl.truststore.type takes (upper case).
TRUSTSTORE_TYPES = ("PEM", "JKS", "JCEKS", "PKCS12")
_TO_PEM = ("or convert it to PEM and point ssl.truststore.location (or ssl.ca.location) at the PEM file: "
           "openssl pkcs12 -in <truststore.p12> -nokeys -out ca.pem")
_DER_TO_PEM = "convert it to PEM: openssl x509 -inform der -in <ca.der> -out ca.pem"


def store_kind(head: bytes) -> str | None:
    """"JKS", "JCEKS" or "PKCS12" by a file's first bytes (at least 8), None for anything else (PEM text, ...).

    PKCS12 is a DER SEQUENCE whose first element is an INTEGER (the PFX version); a DER certificate's is another
    SEQUENCE."""
    kind = keystore_kind(head)
    if kind is not None or head[:1] != b"\x30" or len(head) < 2:
        return kind
    first = 2 + (head[1] & 0x7F if head[1] & 0x80 else 0)  # after the tag and the (short or long form) length
    return "PKCS12" if head[first : first + 1] == b"\x02" else None


def load_trusted(context: ssl.SSLContext, location: str, option: str, declared: str | None,
                 password: Secret | None) -> None:
    """Trust the certificates of ``location`` (a readable file; ``option`` named it): see the module docstring."""
    with Path(location).open("rb") as f:
        kind = store_kind(f.read(16))
    if kind is None and declared not in (None, "PEM"):
        raise ConfigError(f"ssl.truststore.type={declared}, but {location} is not a keystore"
                          f"{_der_hint(location) or ' (it reads as PEM text: set ssl.truststore.type=PEM)'}",
                          key="ssl.truststore.type")
    if kind is not None and declared == "PEM":
        raise ConfigError(f"ssl.truststore.type=PEM, but {location} is a {kind} keystore: set "
                          f"ssl.truststore.type={kind}, or leave it unset", key="ssl.truststore.type")
    if kind is None:
        if password is not None:
            raise ConfigError(f"ssl.truststore.password is set, but {location} is not a keystore: a PEM truststore "
                              "has no password, remove it", key="ssl.truststore.password")
        try:
            context.load_verify_locations(cafile=location)
        except ssl.SSLError:
            raise ConfigError(f"{option}: {location} holds no PEM CA certificate (BEGIN CERTIFICATE)"
                              f"{_der_hint(location)}", key=option) from None
        return
    data = Path(location).read_bytes()
    if kind == "PKCS12":
        certificates = _pkcs12_certificates(data, password, location, option)
    else:
        try:
            certificates = trusted_certificates(data, password).certificates
        except KeystorePasswordError as exc:
            raise ConfigError(f"ssl.truststore.password: {exc} ({location})", key="ssl.truststore.password") from None
        except ValueError as exc:
            raise ConfigError(f"{option}: {location}: {exc}", key=option) from None
    if not certificates:
        raise ConfigError(f"{option}: the {kind} keystore {location} holds no X.509 certificate to trust", key=option)
    try:
        context.load_verify_locations(cadata=b"".join(certificates))
    except ssl.SSLError as exc:
        raise ConfigError(f"{option}: a certificate of the {kind} keystore {location} does not load "
                          f"({exc.reason or 'malformed'})", key=option) from None


def _pkcs12_certificates(data: bytes, password: Secret | None, location: str, option: str) -> list[bytes]:
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, pkcs12
    except ImportError:
        raise ConfigError(f"{option}: {location} is a PKCS12 truststore (keytool's default type since Java 9), "
                          "whose certificates are encrypted: reading it needs the optional package 'cryptography' "
                          f"(pip install spark-kafka-sink[pkcs12]), {_TO_PEM}", key=option) from None
    try:
        store = pkcs12.load_pkcs12(data, None if password is None else password.reveal().encode("utf-8"))
    except ValueError:
        if password is None:
            raise ConfigError(f"{option}: {location} is a PKCS12 truststore with encrypted certificates: set "
                              "ssl.truststore.password", key="ssl.truststore.password") from None
        raise ConfigError(f"ssl.truststore.password does not open the PKCS12 truststore {location} (a wrong "
                          "password, or a damaged file)", key="ssl.truststore.password") from None
    found = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    return [c.certificate.public_bytes(Encoding.DER) for c in found]


def _der_hint(path: str) -> str:
    """What a binary file that is no keystore most often is, and how to convert it; '' for anything else."""
    with Path(path).open("rb") as f:
        head = f.read(1)
    return f": it is binary DER (a DER certificate); {_DER_TO_PEM}" if head == b"\x30" else ""
