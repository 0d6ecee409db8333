"""Java truststores, made by the JDK's own keytool, read for the certificates Java would trust."""

from __future__ import annotations

import os
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from spark_kafka_sink.net.java_keystore import (
    KeystorePasswordError,
    keystore_kind,
    read_keystore,
    recover_key,
    trusted_certificates,
)
from spark_kafka_sink.secret import Secret
from spark_kafka_sink.testing.broker_jars import require_java
from spark_kafka_sink.testing.certs import TestCertificates, java_truststore, make_test_certificates

PASSWORD = "truststore-pw-7"


@pytest.fixture(scope="module")
def certs() -> Iterator[TestCertificates]:
    with make_test_certificates() as made:
        yield made


def der(pem: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.read_text())


def keytool(*args: str) -> None:
    tool = Path(os.path.realpath(require_java())).parent / "keytool"
    subprocess.run([str(tool), *args, "-storepass:env", "STOREPASS"], check=True, capture_output=True,
                   env={**os.environ, "STOREPASS": PASSWORD})


@pytest.mark.parametrize("kind", ["JKS", "JCEKS"])
def test_trusted_certificate_entries_in_order(kind: str, certs: TestCertificates, tmp_path: Path) -> None:
    store = java_truststore(certs.ca_cert, tmp_path / "ts", kind, PASSWORD, alias="ca")
    java_truststore(certs.untrusted_ca_cert, store, kind, PASSWORD, alias="other")
    data = store.read_bytes()
    assert keystore_kind(data[:4]) == kind
    expected = {der(certs.ca_cert), der(certs.untrusted_ca_cert)}
    read = trusted_certificates(data, Secret(PASSWORD))
    assert read.kind == kind and set(read.certificates) == expected and len(read.certificates) == 2
    # Without a password Java loads the store without checking its integrity; so does this.
    assert set(trusted_certificates(data, None).certificates) == expected


@pytest.mark.parametrize("kind", ["JKS", "JCEKS"])
def test_a_wrong_password_or_a_changed_file_fails_the_integrity_check(kind: str, certs: TestCertificates,
                                                                      tmp_path: Path) -> None:
    data = java_truststore(certs.ca_cert, tmp_path / "ts", kind, PASSWORD).read_bytes()
    with pytest.raises(KeystorePasswordError, match="integrity check failed") as info:
        trusted_certificates(data, Secret("not-" + PASSWORD))
    assert PASSWORD not in str(info.value)
    changed = bytearray(data)
    changed[len(data) // 2] ^= 0x01  # inside the certificate
    with pytest.raises(KeystorePasswordError):
        trusted_certificates(bytes(changed), Secret(PASSWORD))


def test_a_private_key_entry_contributes_the_first_certificate_of_its_chain(certs: TestCertificates,
                                                                            tmp_path: Path) -> None:
    """Java's trust manager takes a key entry's own certificate as an anchor too (a keystore used as truststore)."""
    store = java_truststore(certs.ca_cert, tmp_path / "ks.jks", "JKS", PASSWORD)
    keytool("-genkeypair", "-alias", "me", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=me",
            "-keystore", str(store), "-storetype", "JKS", "-keypass:env", "STOREPASS")
    keytool("-exportcert", "-rfc", "-alias", "me", "-keystore", str(store), "-file", str(tmp_path / "me.pem"))
    read = trusted_certificates(store.read_bytes(), Secret(PASSWORD))
    assert set(read.certificates) == {der(certs.ca_cert), der(tmp_path / "me.pem")}


def test_a_secret_key_entry_is_refused(certs: TestCertificates, tmp_path: Path) -> None:
    store = java_truststore(certs.ca_cert, tmp_path / "ks.jceks", "JCEKS", PASSWORD)
    keytool("-genseckey", "-alias", "aes", "-keyalg", "AES", "-keysize", "128", "-keystore", str(store),
            "-storetype", "JCEKS", "-keypass:env", "STOREPASS")
    with pytest.raises(ValueError, match="secret key, which a TLS keystore does not hold"):
        trusted_certificates(store.read_bytes(), Secret(PASSWORD))


def test_malformed_stores_say_what_is_wrong(certs: TestCertificates, tmp_path: Path) -> None:
    data = java_truststore(certs.ca_cert, tmp_path / "ts.jks", "JKS", PASSWORD).read_bytes()
    with pytest.raises(ValueError, match="not a JKS or JCEKS keystore"):
        trusted_certificates(certs.ca_cert.read_bytes(), None)
    with pytest.raises(ValueError, match="ends inside entry 1"):
        trusted_certificates(data[:60] + data[-20:], None)  # the digest is not checked without a password
    with pytest.raises(ValueError, match="version 1 is not read"):
        trusted_certificates(data[:4] + b"\x00\x00\x00\x01" + data[8:], None)
    with pytest.raises(ValueError, match="bytes after its entries"):
        trusted_certificates(data[:-20] + b"\x00" * 3 + data[-20:], None)
    assert keystore_kind(b"-----BEGIN") is None and keystore_kind(b"\x30\x82") is None


def test_a_jks_private_key_is_recovered_and_a_jceks_one_refused(tmp_path: Path) -> None:
    """JKS keys (Sun's SHA-1 key protector) are decrypted, the wrong password told apart; JCEKS keys (triple DES)
    are refused with a reason. That the key is right is shown by mutual TLS with it (tests/security)."""
    for kind in ("JKS", "JCEKS"):
        store = tmp_path / f"k.{kind}"
        keytool("-genkeypair", "-alias", "me", "-keyalg", "EC", "-groupname", "secp256r1", "-dname", "CN=me",
                "-keystore", str(store), "-storetype", kind, "-keypass:env", "STOREPASS")
        (entry,) = read_keystore(store.read_bytes(), Secret(PASSWORD)).keys
        assert entry.kind == kind and entry.alias == "me" and len(entry.chain) == 1
        if kind == "JCEKS":
            with pytest.raises(ValueError, match="JCEKS keys are triple-DES"):
                recover_key(entry, Secret(PASSWORD))
            continue
        key = recover_key(entry, Secret(PASSWORD))
        assert key[:1] == b"\x30" and b"\x2a\x86\x48\xce\x3d\x02\x01" in key[:40]  # PKCS#8, id-ecPublicKey
        with pytest.raises(KeystorePasswordError, match="does not open the private key 'me'"):
            recover_key(entry, Secret("not-" + PASSWORD))
