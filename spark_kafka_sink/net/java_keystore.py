"""The certificates a Java truststore (JKS or JCEKS) trusts, read as the Java client reads them. Pure: bytes in.

    keystore_kind(first_bytes) -> "JKS" | "JCEKS" | None
    trusted_certificates(data, password) -> TrustedCertificates(kind, certificates)   # DER X.509 certificates
    read_keystore(data, password) -> Keystore(kind, anchors, keys)    # also the key entries, still protected
    recover_key(key_entry, key_password) -> PKCS#8 DER                 # a JKS key entry's private key

The Java client reads ``ssl.truststore.location`` as a JKS keystore unless ``ssl.truststore.type`` says otherwise,
so a Java or Spark configuration usually names a ``.jks`` file that ``keytool -importcert`` made. Its layout
(``sun.security.provider.JavaKeyStore``; JCEKS adds only a magic number and a sealed secret-key entry):

    magic u32 (FEEDFEED JKS, CECECECE JCEKS) | version u32 (2) | entry count u32 | entries | SHA-1 digest (20)
    entry: tag u32 | alias (u16 length + modified UTF-8) | creation time u64 | then by tag:
      2 trusted certificate: certificate
      1 private key: protected key (u32 length + bytes) | chain length u32 | certificates
    certificate: type (u16 length + UTF-8) | u32 length | DER bytes

(Version 1, which Java wrote before 1.3, has no certificate types; it is refused.)

The digest is SHA-1 over the password as UTF-16BE, the bytes "Mighty Aphrodite", then everything before it. With a
password it is checked: a wrong password or a changed file fails (KeystorePasswordError), as ``KeyStore.load`` does.
Without one it is not (Java loads a truststore without a password the same way). Trusted: every trusted-certificate
entry and the first certificate of every private-key entry's chain, as Java's trust manager builds its anchors from
a keystore. A key is decrypted only when asked (``recover_key``, for a client certificate). A JCEKS secret-key entry
(a serialized Java object) cannot be skipped: ValueError. Malformed input raises ValueError naming what is wrong;
messages never hold the password.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import NamedTuple

from spark_kafka_sink.secret import Secret

__all__ = ["JKS_MAGIC", "JCEKS_MAGIC", "KeyEntry", "Keystore", "KeystorePasswordError", "TrustedCertificates",
           "keystore_kind", "read_keystore", "recover_key", "trusted_certificates"]

JKS_MAGIC = b"\xfe\xed\xfe\xed"
JCEKS_MAGIC = b"\xce\xce\xce\xce"
_KINDS = {JKS_MAGIC: "JKS", JCEKS_MAGIC: "JCEKS"}
_PRIVATE_KEY, _TRUSTED_CERTIFICATE, _SECRET_KEY = 1, 2, 3
_DIGEST_SALT = b"Mighty Aphrodite"
_SUN_KEY_PROTECTOR = bytes.fromhex("2b060104012a02110101")  # OID 1.3.6.1.4.1.42.2.17.1.1 (JKS key protection)
_DIGEST_SIZE = 20  # SHA-1
_U16, _U32 = struct.Struct(">H"), struct.Struct(">I")


class KeystorePasswordError(ValueError):
    """The password does not match the keystore (its integrity check failed)."""


class KeyEntry(NamedTuple):
    kind: str  # of the keystore: "JKS" or "JCEKS"
    alias: str
    protected_key: bytes  # an EncryptedPrivateKeyInfo (DER): see recover_key
    chain: list[bytes]  # DER X.509, the key's own certificate first


class Keystore(NamedTuple):
    kind: str
    anchors: list[bytes]  # what a trust manager takes: certificate entries, each key entry's own certificate
    keys: list[KeyEntry]


class TrustedCertificates(NamedTuple):
    kind: str  # "JKS" or "JCEKS"
    certificates: list[bytes]  # DER X.509, in the file's order


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int, what: str) -> bytes:
        if n > len(self.data) - self.pos:
            raise ValueError(f"the keystore ends inside {what} (truncated or not a Java keystore)")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def u16(self, what: str) -> int:
        value: int = _U16.unpack(self.take(2, what))[0]
        return value

    def u32(self, what: str) -> int:
        value: int = _U32.unpack(self.take(4, what))[0]
        return value

    def text(self, what: str) -> str:
        return self.take(self.u16(what), what).decode("utf-8", "replace")


def keystore_kind(first_bytes: bytes) -> str | None:
    """"JKS" or "JCEKS" when a file starts with these bytes (its first four), else None."""
    return _KINDS.get(bytes(first_bytes[:4]))


def read_keystore(data: bytes, password: Secret | None) -> Keystore:
    """Every certificate and key entry of a JKS/JCEKS keystore's bytes (see the module docstring)."""
    kind = keystore_kind(data)
    if kind is None:
        raise ValueError("not a JKS or JCEKS keystore (its first bytes are not FEEDFEED or CECECECE)")
    if len(data) < 12 + _DIGEST_SIZE:
        raise ValueError(f"the {kind} keystore is truncated")
    body, digest = data[:-_DIGEST_SIZE], data[-_DIGEST_SIZE:]
    if password is not None:
        expected = hashlib.sha1(password.reveal().encode("utf-16-be") + _DIGEST_SALT + body,
                                usedforsecurity=False).digest()
        if not hmac.compare_digest(expected, digest):
            raise KeystorePasswordError(f"the password does not match the {kind} keystore (its integrity check "
                                        "failed: a wrong password, or a changed file)")
    reader = _Reader(body)
    reader.take(4, "the magic number")
    version = reader.u32("the version")
    if version != 2:
        raise ValueError(f"{kind} keystore version {version} is not read (version 2 is: Java 1.3 and later)")
    anchors: list[bytes] = []
    keys: list[KeyEntry] = []

    def certificate(what: str) -> bytes | None:
        cert_type = reader.text(what)
        der = reader.take(reader.u32(what), what)
        return der if cert_type == "X.509" else None  # Java's trust manager takes X.509 certificates only

    for index in range(reader.u32("the entry count")):
        what = f"entry {index + 1}"
        tag = reader.u32(what)
        alias = reader.text(what)
        reader.take(8, what)  # creation time
        if tag == _TRUSTED_CERTIFICATE:
            der = certificate(what)
            if der is not None:
                anchors.append(der)
        elif tag == _PRIVATE_KEY:
            protected = reader.take(reader.u32(what), what)
            chain = [certificate(what) for _ in range(reader.u32(what))]
            if chain and chain[0] is not None:
                anchors.append(chain[0])
            keys.append(KeyEntry(kind, alias, protected, [c for c in chain if c is not None]))
        elif tag == _SECRET_KEY:
            raise ValueError(f"{what} of the {kind} keystore is a secret key, which a TLS keystore does not hold: "
                             "use one of certificates and private keys only")
        else:
            raise ValueError(f"{what} of the {kind} keystore has an unknown tag {tag}")
    if reader.pos != len(body):
        raise ValueError(f"the {kind} keystore has {len(body) - reader.pos} bytes after its entries")
    return Keystore(kind, anchors, keys)


def trusted_certificates(data: bytes, password: Secret | None) -> TrustedCertificates:
    """The DER certificates a JKS/JCEKS truststore's bytes hold for trust (see the module docstring)."""
    store = read_keystore(data, password)
    return TrustedCertificates(store.kind, store.anchors)


def recover_key(entry: KeyEntry, password: Secret) -> bytes:
    """The PKCS#8 private key (DER) of a JKS key entry, protected with ``password`` (``ssl.key.password``, which
    Java's keytool sets to the store password unless told otherwise).

    JKS protects keys with Sun's own scheme (``sun.security.provider.KeyProtector``): the entry's
    EncryptedPrivateKeyInfo holds a 20-byte salt, the key XORed with a stream of SHA-1 digests (the first of the
    password, as UTF-16BE, and the salt, each next of the password and the digest before it), and the SHA-1 of the
    password and the plain key, which tells a wrong password (KeystorePasswordError). JCEKS keys (triple DES) are not
    read: ValueError."""
    algorithm, encrypted = _encrypted_private_key_info(entry.protected_key)
    if algorithm != _SUN_KEY_PROTECTOR:
        raise ValueError(f"the private key {entry.alias!r} of the {entry.kind} keystore is protected with an "
                         "algorithm only Java reads (JCEKS keys are triple-DES): use a JKS or PKCS12 keystore, or PEM")
    if len(encrypted) < 2 * _DIGEST_SIZE:
        raise ValueError(f"the private key {entry.alias!r} of the {entry.kind} keystore is truncated")
    salt, sealed, check = encrypted[:_DIGEST_SIZE], encrypted[_DIGEST_SIZE:-_DIGEST_SIZE], encrypted[-_DIGEST_SIZE:]
    secret = password.reveal().encode("utf-16-be")
    stream, block = bytearray(), salt
    while len(stream) < len(sealed):
        block = hashlib.sha1(secret + block, usedforsecurity=False).digest()
        stream += block
    plain = bytes(a ^ b for a, b in zip(sealed, stream, strict=False))
    if not hmac.compare_digest(hashlib.sha1(secret + plain, usedforsecurity=False).digest(), check):
        raise KeystorePasswordError(f"the password does not open the private key {entry.alias!r} of the "
                                    f"{entry.kind} keystore")
    return plain


def _encrypted_private_key_info(der: bytes) -> tuple[bytes, bytes]:
    """(algorithm OID's DER contents, encrypted data) of an EncryptedPrivateKeyInfo:
    SEQUENCE { SEQUENCE { OBJECT IDENTIFIER, parameters }, OCTET STRING }."""
    outer = _tlv(der, 0, 0x30)
    algorithm = _tlv(der, outer[0], 0x30)
    oid = _tlv(der, algorithm[0], 0x06)
    data = _tlv(der, algorithm[1], 0x04)
    return der[oid[0] : oid[1]], der[data[0] : data[1]]


def _tlv(der: bytes, pos: int, tag: int) -> tuple[int, int]:
    """(start, end) of the contents of the DER element of ``tag`` at ``pos``."""
    if pos + 2 > len(der) or der[pos] != tag:
        raise ValueError("a private key entry is not an EncryptedPrivateKeyInfo")
    length, start = der[pos + 1], pos + 2
    if length & 0x80:
        count = length & 0x7F
        length, start = int.from_bytes(der[start : start + count], "big"), start + count
    if start + length > len(der):
        raise ValueError("a private key entry is truncated")
    return start, start + length
