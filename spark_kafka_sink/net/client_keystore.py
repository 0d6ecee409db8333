"""The client certificate of mutual TLS from a Java keystore, as a Java or Spark configuration names it.

    load_keystore(context, location, declared_type, store_password, key_password)    # into an ssl.SSLContext

``ssl.keystore.location`` names one of:

* a JKS keystore (Java's default type): its one private-key entry, decrypted with ``ssl.key.password`` or, unset,
  ``ssl.keystore.password`` (what Kafka's Java client does), and that entry's certificate chain. The store's
  integrity is checked with ``ssl.keystore.password`` (:mod:`~spark_kafka_sink.net.java_keystore`);
* a PKCS12 keystore (keytool's default type since Java 9), read with the optional package ``cryptography``
  (``pip install spark-kafka-sink[pkcs12]``): its private key and certificates;
* a PEM file (``ssl.keystore.type=PEM``): the private key and the certificate chain, the key encrypted or not
  (``ssl.key.password``).

Or the key and chain are PEM text in ``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` (Java's KIP-651
options, with ``ssl.keystore.type=PEM``): :func:`load_inline_pem`.

``declared_type`` is ``ssl.keystore.type`` (JKS, PKCS12, PEM) or None: the file's first bytes tell. A keystore with
several private keys is refused (Java would pick one per connection by what the broker asks for; say which by
keeping one). Python's ``ssl`` loads a key only from a file: the key and chain of a JKS or PKCS12 keystore are
handed to it through an in-memory file (``memfd_create``, on Linux); where there is none, through a file only this
user can read, in a private temporary folder removed once the key is loaded. Errors name the option to change, never
a password.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.java_keystore import KeystorePasswordError, read_keystore, recover_key
from spark_kafka_sink.net.truststore import store_kind
from spark_kafka_sink.secret import Secret

__all__ = ["KEYSTORE_TYPES", "load_inline_pem", "load_keystore"]

#: The values ssl.keystore.type takes (upper case).
KEYSTORE_TYPES = ("JKS", "PKCS12", "PEM")
_OPTION = "ssl.keystore.location"


def load_keystore(context: ssl.SSLContext, location: str, declared: str | None, store_password: Secret | None,
                  key_password: Secret | None) -> None:
    """Load the client certificate and key of ``location`` (a readable file): see the module docstring."""
    with Path(location).open("rb") as f:
        kind = store_kind(f.read(16))
    if kind is None and declared in (None, "PEM"):
        _load_pem_keystore(context, location, key_password)
        return
    if kind is None:
        raise ConfigError(f"ssl.keystore.type={declared}, but {location} is not a keystore (for a PEM file of the "
                          "key and certificate chain set ssl.keystore.type=PEM)", key="ssl.keystore.type")
    if declared == "PEM":
        raise ConfigError(f"ssl.keystore.type=PEM, but {location} is a {kind} keystore: set ssl.keystore.type={kind}, "
                          "or leave it unset", key="ssl.keystore.type")
    data = Path(location).read_bytes()
    if kind == "PKCS12":
        pem = _pkcs12_pem(data, location, store_password, key_password)
    else:
        pem = _java_keystore_pem(data, location, store_password, key_password)
    with _private_file(pem) as path:
        try:
            context.load_cert_chain(path)
        except ssl.SSLError as exc:
            raise ConfigError(f"{_OPTION}: the private key and certificate of {location} do not load together "
                              f"({exc.reason or 'malformed'})", key=_OPTION) from None


def _java_keystore_pem(data: bytes, location: str, store_password: Secret | None,
                       key_password: Secret | None) -> bytes:
    try:
        store = read_keystore(data, store_password)
    except KeystorePasswordError as exc:
        raise ConfigError(f"ssl.keystore.password: {exc} ({location})", key="ssl.keystore.password") from None
    except ValueError as exc:
        raise ConfigError(f"{_OPTION}: {location}: {exc}", key=_OPTION) from None
    if len(store.keys) != 1:
        raise ConfigError(f"{_OPTION}: the {store.kind} keystore {location} holds {len(store.keys)} private keys; a "
                          "client keystore holds the client's one (keytool -list shows them, keytool -delete "
                          "removes one)", key=_OPTION)
    entry = store.keys[0]
    password = key_password if key_password is not None else store_password
    if password is None:
        raise ConfigError(f"the private key of {location} is encrypted: set ssl.keystore.password (or "
                          "ssl.key.password)", key="ssl.keystore.password")
    if not entry.chain:
        raise ConfigError(f"{_OPTION}: the private key of {location} has no X.509 certificate", key=_OPTION)
    try:
        key = recover_key(entry, password)
    except KeystorePasswordError as exc:
        option = "ssl.key.password" if key_password is not None else "ssl.keystore.password"
        raise ConfigError(f"{option}: {exc} ({location})", key=option) from None
    except ValueError as exc:
        raise ConfigError(f"{_OPTION}: {location}: {exc}", key=_OPTION) from None
    # The standard library writes PEM for certificates only; a PKCS#8 key is the same base64 under another label.
    pem_key = ssl.DER_cert_to_PEM_cert(key).replace("CERTIFICATE", "PRIVATE KEY")
    return (pem_key + "".join(ssl.DER_cert_to_PEM_cert(c) for c in entry.chain)).encode("ascii")


def _pkcs12_pem(data: bytes, location: str, store_password: Secret | None, key_password: Secret | None) -> bytes:
    try:
        from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, pkcs12
    except ImportError:
        raise ConfigError(f"{_OPTION}: {location} is a PKCS12 keystore (keytool's default type since Java 9): reading "
                          "it needs the optional package 'cryptography' (pip install spark-kafka-sink[pkcs12]), or "
                          "convert it to PEM files for ssl.certificate.location and ssl.key.location: openssl pkcs12 "
                          "-in <keystore.p12> -out client.pem", key=_OPTION) from None
    passwords: list[Secret | None] = [p for p in (store_password, key_password) if p is not None] or [None]
    for password in passwords:
        try:
            key, cert, chain = pkcs12.load_key_and_certificates(
                data, None if password is None else password.reveal().encode("utf-8"))
            break
        except ValueError:
            continue
    else:
        option = "ssl.keystore.password"
        what = "set ssl.keystore.password" if store_password is None else "a wrong password, or a damaged file"
        raise ConfigError(f"{option} does not open the PKCS12 keystore {location} ({what})", key=option)
    if key is None or cert is None:
        raise ConfigError(f"{_OPTION}: the PKCS12 keystore {location} holds no private key with its certificate",
                          key=_OPTION)
    return (key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()) + cert.public_bytes(Encoding.PEM)
            + b"".join(c.public_bytes(Encoding.PEM) for c in chain))


def _load_pem_keystore(context: ssl.SSLContext, location: str, key_password: Secret | None) -> None:
    load_pem_key_and_chain(context, location, key_password, _OPTION, location)


def load_inline_pem(context: ssl.SSLContext, key: Secret, chain: Secret, key_password: Secret | None) -> None:
    """``ssl.keystore.key`` and ``ssl.keystore.certificate.chain`` (PEM text, KIP-651): the key (encrypted with
    ``ssl.key.password``, or not) and its certificate chain, loaded through the same in-memory file."""
    pem = (key.reveal().strip() + "\n" + chain.reveal().strip() + "\n").encode("utf-8")
    with _private_file(pem) as path:
        load_pem_key_and_chain(context, path, key_password, "ssl.keystore.key", "ssl.keystore.key")


def load_pem_key_and_chain(context: ssl.SSLContext, path: str, key_password: Secret | None, option: str,
                           what: str) -> None:
    """A PEM file of a private key and its certificate chain; errors name ``option`` and call it ``what``."""
    def password() -> str:  # asked by OpenSSL only for an encrypted key (without it OpenSSL prompts on the tty)
        if key_password is None:
            raise ConfigError(f"the private key in {what} is encrypted: set ssl.key.password", key="ssl.key.password")
        return key_password.reveal()

    try:
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        if key_password is not None and b"ENCRYPTED" in Path(path).read_bytes():  # OpenSSL only says "PEM lib"
            raise ConfigError(f"ssl.key.password does not decrypt the private key in {what}",
                              key="ssl.key.password") from None
        raise ConfigError(f"{option}: {what} is not PEM text of a private key and its certificate chain "
                          f"({exc.reason or 'unreadable'})", key=option) from None


@contextlib.contextmanager
def _private_file(content: bytes) -> Iterator[str]:
    """A path OpenSSL can open that holds ``content``: an in-memory file of this process where the OS has them."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("pykafka-sink-client-keystore", os.MFD_CLOEXEC)
        try:
            os.write(fd, content)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    folder = tempfile.mkdtemp(prefix="pykafka-sink-")  # mode 0700
    path = os.path.join(folder, "client.pem")
    try:
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
            f.write(content)
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)
