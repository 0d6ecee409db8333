"""The certificates a Java truststore (JKS or JCEKS) trusts, read as the Java client reads them. Pure: bytes in.

    keystore_kind(first_bytes) -> "JKS" | "JCEKS" | None
    trusted_certificates(data, password) -> TrustedCertificates(kind, certificates)   # DER X.509 certificates

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
a keystore. Key bytes are skipped, never decrypted. A JCEKS secret-key entry (a serialized Java object) cannot be
skipped: ValueError. Malformed input raises ValueError naming what is wrong; messages never hold the password.
"""

from __future__ import annotations

import hashlib
import hmac
import struct
from typing import NamedTuple

from spark_kafka_sink.secret import Secret

__all__ = ["JKS_MAGIC", "JCEKS_MAGIC", "KeystorePasswordError", "TrustedCertificates", "keystore_kind",
           "trusted_certificates"]

JKS_MAGIC = b"\xfe\xed\xfe\xed"
JCEKS_MAGIC = b"\xce\xce\xce\xce"
_KINDS = {JKS_MAGIC: "JKS", JCEKS_MAGIC: "JCEKS"}
_PRIVATE_KEY, _TRUSTED_CERTIFICATE, _SECRET_KEY = 1, 2, 3
_DIGEST_SALT = b"Mighty Aphrodite"
_DIGEST_SIZE = 20  # SHA-1
_U16, _U32 = struct.Struct(">H"), struct.Struct(">I")


class KeystorePasswordError(ValueError):
    """The password does not match the keystore (its integrity check failed)."""


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


def trusted_certificates(data: bytes, password: Secret | None) -> TrustedCertificates:
    """The DER certificates a JKS/JCEKS truststore's bytes hold for trust (see the module docstring)."""
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
            raise KeystorePasswordError(f"the password does not match the {kind} keystore (its integrity check failed: "
                             "a wrong password, or a changed file)")
    reader = _Reader(body)
    reader.take(4, "the magic number")
    version = reader.u32("the version")
    if version != 2:
        raise ValueError(f"{kind} keystore version {version} is not read (version 2 is: Java 1.3 and later)")
    certificates: list[bytes] = []

    def certificate(what: str) -> bytes | None:
        cert_type = reader.text(what)
        der = reader.take(reader.u32(what), what)
        return der if cert_type == "X.509" else None  # Java's trust manager takes X.509 certificates only

    for index in range(reader.u32("the entry count")):
        what = f"entry {index + 1}"
        tag = reader.u32(what)
        reader.text(what)  # alias
        reader.take(8, what)  # creation time
        if tag == _TRUSTED_CERTIFICATE:
            der = certificate(what)
            if der is not None:
                certificates.append(der)
        elif tag == _PRIVATE_KEY:
            reader.take(reader.u32(what), what)  # the protected key: never decrypted
            chain = [certificate(what) for _ in range(reader.u32(what))]
            if chain and chain[0] is not None:
                certificates.append(chain[0])
        elif tag == _SECRET_KEY:
            raise ValueError(f"{what} of the {kind} keystore is a secret key, which a truststore does not hold: "
                             "use a truststore of certificates only")
        else:
            raise ValueError(f"{what} of the {kind} keystore has an unknown tag {tag}")
    if reader.pos != len(body):
        raise ValueError(f"the {kind} keystore has {len(body) - reader.pos} bytes after its entries")
    return TrustedCertificates(kind, certificates)
