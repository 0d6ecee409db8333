"""Security settings and the SSLContext built from them: safe defaults, and errors that name the key (no broker)."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.net.security import SaslAuthentication, TlsHandshake, handshakes_for, handshakes_of
from spark_kafka_sink.net.security_settings import SecuritySettings
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.secret import Secret
from spark_kafka_sink.testing.broker_jars import require_java
from spark_kafka_sink.testing.certs import TestCertificates, java_keystore, java_truststore
from tests.net_settings import security_settings

PASSWORD = "s3cret-Pa55-XYZZY"


def settings(**options: object) -> SecuritySettings:
    return security_settings({k.replace("_", "."): v for k, v in options.items()})


def test_plaintext_has_no_handshakes() -> None:
    assert handshakes_of(security_settings({}), "h") == []
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092"}).net_config()
    assert handshakes_for("127.0.0.1", 9092, config) == []


def test_verification_is_on_by_default(certs: TestCertificates) -> None:
    s = settings(security_protocol="SSL", ssl_ca_location=str(certs.ca_cert))
    context = s.ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname
    assert context.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert s.ssl_context() is context  # built once per settings object
    steps = handshakes_of(s, "127.0.0.1")
    assert [type(h) for h in steps] == [TlsHandshake]


def test_system_cas_without_a_ca_file() -> None:
    context = settings(security_protocol="SSL").ssl_context()
    assert context.verify_mode is ssl.CERT_REQUIRED and context.check_hostname


def test_empty_endpoint_identification_disables_only_the_hostname_check(certs: TestCertificates) -> None:
    context = security_settings({
        "security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
        "ssl.endpoint.identification.algorithm": "",
    }).ssl_context()
    assert not context.check_hostname
    assert context.verify_mode is ssl.CERT_REQUIRED  # the chain is still verified


def test_ssl_check_hostname_overrides(certs: TestCertificates) -> None:
    s = security_settings({"security.protocol": "SSL", "ssl.check.hostname": "false"})
    assert not s.check_hostname
    with pytest.raises(ConfigError) as info:
        security_settings({"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "ldap"})
    assert info.value.key == "ssl.endpoint.identification.algorithm"


def test_java_truststore_location_with_pem_type(certs: TestCertificates) -> None:
    s = security_settings({"security.protocol": "SSL", "ssl.truststore.location": str(certs.ca_cert),
                                       "ssl.truststore.type": "PEM"})
    assert s.ca_location == str(certs.ca_cert)
    s.ssl_context()


@pytest.mark.parametrize("store_type", ["BCFKS", "DKS"])
def test_other_truststore_types_name_the_ones_read(store_type: str) -> None:
    with pytest.raises(ConfigError, match="expected one of PEM, JKS, JCEKS, PKCS12 ") as info:
        security_settings({"security.protocol": "SSL", "ssl.truststore.location": "/x/truststore.bcfks",
                                       "ssl.truststore.type": store_type})
    assert info.value.key == "ssl.truststore.type"


def test_a_der_certificate_is_named_with_how_to_convert_it(tmp_path: Path, certs: TestCertificates) -> None:
    der = tmp_path / "ca.der"
    subprocess.run(["openssl", "x509", "-in", str(certs.ca_cert), "-outform", "der", "-out", str(der)],
                   check=True, capture_output=True)
    with pytest.raises(ConfigError) as info:
        security_settings({"security.protocol": "SSL", "ssl.truststore.location": str(der)}
                          ).ssl_context()
    assert info.value.key == "ssl.truststore.location"
    assert str(info.value).startswith(f"ssl.truststore.location: {der} holds no PEM CA certificate")
    assert "binary DER" in str(info.value) and "openssl x509 -inform der" in str(info.value)


def _pkcs12(ca_pem: Path, path: Path, tool: str, password: str) -> Path:
    """The CA in a PKCS12 truststore, made as users make one: keytool's default type, or openssl."""
    if tool == "keytool":
        return java_truststore(ca_pem, path, "PKCS12", password)
    subprocess.run(["openssl", "pkcs12", "-export", "-nokeys", "-in", str(ca_pem), "-out", str(path),
                    "-passout", f"pass:{password}"], check=True, capture_output=True)
    return path


def _trusts(context: ssl.SSLContext, ca_pem: Path) -> bool:
    return ssl.PEM_cert_to_DER_cert(ca_pem.read_text()) in context.get_ca_certs(binary_form=True)


def _trust_only(options: dict[str, str], certs: TestCertificates) -> None:
    context = security_settings({"security.protocol": "SSL", **options}).ssl_context()
    assert _trusts(context, certs.ca_cert) and len(context.get_ca_certs()) == 1
    assert not _trusts(context, certs.untrusted_ca_cert)


@pytest.mark.parametrize("kind", ["JKS", "JCEKS"])
@pytest.mark.parametrize("declared", [False, True])
@pytest.mark.parametrize("password", [True, False])
def test_a_java_truststore_is_read_as_java_reads_it(kind: str, declared: bool, password: bool,
                                                     tmp_path: Path, certs: TestCertificates) -> None:
    """A Java configuration names a keytool-made truststore and its password; ssl.truststore.type may say JKS
    (Java's default) or be left out. Its certificates are what the context trusts, and nothing else."""
    store = java_truststore(certs.ca_cert, tmp_path / "client.truststore.jks", kind, "changeit")
    options = {"ssl.truststore.location": str(store)}
    if declared:
        options["ssl.truststore.type"] = kind.lower()
    if password:
        options["ssl.truststore.password"] = "changeit"
    _trust_only(options, certs)


@pytest.mark.parametrize("tool", ["keytool", "openssl"])
@pytest.mark.parametrize("declared", [None, "PKCS12", "JKS"])
def test_a_pkcs12_truststore_is_read_with_its_password(tool: str, declared: str | None, tmp_path: Path,
                                                        certs: TestCertificates) -> None:
    """PKCS12, keytool's default type since Java 9 (and Java's JKS type reads it too), with its AES-encrypted
    certificates: read with the optional package cryptography."""
    store = _pkcs12(certs.ca_cert, tmp_path / "client.truststore.p12", tool, "changeit")
    options = {"ssl.truststore.location": str(store), "ssl.truststore.password": "changeit"}
    if declared:
        options["ssl.truststore.type"] = declared
    _trust_only(options, certs)


def test_pkcs12_mistakes_and_a_missing_cryptography_name_the_option(tmp_path: Path, certs: TestCertificates,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    store = _pkcs12(certs.ca_cert, tmp_path / "ts.p12", "keytool", "changeit")

    def error(**options: str) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            security_settings({"security.protocol": "SSL", "ssl.truststore.location": str(store),
                                           **options}).ssl_context()
        assert "changeit" not in str(info.value) and "wrong-pw" not in str(info.value)
        return info.value

    wrong = error(**{"ssl.truststore.password": "wrong-pw"})
    assert wrong.key == "ssl.truststore.password" and "does not open the PKCS12 truststore" in str(wrong)
    missing = error()
    assert missing.key == "ssl.truststore.password" and "encrypted certificates: set" in str(missing)
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.serialization", None)  # not installed
    absent = error(**{"ssl.truststore.password": "changeit"})
    assert absent.key == "ssl.truststore.location"
    assert "pip install spark-kafka-sink[pkcs12]" in str(absent) and "openssl pkcs12" in str(absent)


def test_java_truststore_mistakes_name_the_option(tmp_path: Path, certs: TestCertificates) -> None:
    store = java_truststore(certs.ca_cert, tmp_path / "ts.jks", "JKS", "changeit")
    ssl_on = {"security.protocol": "SSL"}

    def error(**options: str) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            security_settings({**ssl_on, **options}).ssl_context()
        assert "changeit" not in str(info.value) and "wrong-pw" not in str(info.value)
        return info.value

    wrong = error(**{"ssl.truststore.location": str(store), "ssl.truststore.password": "wrong-pw"})
    assert wrong.key == "ssl.truststore.password" and "integrity check failed" in str(wrong)
    as_pem = error(**{"ssl.truststore.location": str(store), "ssl.truststore.type": "PEM"})
    assert as_pem.key == "ssl.truststore.type" and "is a JKS keystore: set ssl.truststore.type=JKS" in str(as_pem)
    pem_as_jks = error(**{"ssl.truststore.location": str(certs.ca_cert), "ssl.truststore.type": "JKS"})
    assert pem_as_jks.key == "ssl.truststore.type" and "is not a keystore" in str(pem_as_jks)
    pem_password = error(**{"ssl.truststore.location": str(certs.ca_cert), "ssl.truststore.password": "changeit"})
    assert pem_password.key == "ssl.truststore.password" and "a PEM truststore has no password" in str(pem_password)


def _client_pem(certs: TestCertificates, folder: Path, encrypted: bool) -> Path:
    """A PEM keystore as Java's ssl.keystore.type=PEM takes it: the private key, then the certificate chain."""
    key = certs.client_key_encrypted if encrypted else certs.client_key
    path = folder / "client-keystore.pem"
    path.write_bytes(key.read_bytes() + certs.client_cert.read_bytes() + certs.ca_cert.read_bytes())
    return path


@pytest.mark.parametrize(("kind", "declared", "key_password"), [
    ("JKS", None, None), ("JKS", "JKS", "key-pw-2"), ("PKCS12", None, None), ("PKCS12", "PKCS12", None),
    ("PEM", "PEM", None), ("PEM", None, "encrypted")])
def test_a_client_keystore_loads(kind: str, declared: str | None, key_password: str | None, tmp_path: Path,
                                 certs: TestCertificates) -> None:
    """ssl.keystore.* as a Java configuration gives them (what the broker sees is shown in test_end_to_end)."""
    options = {"security.protocol": "SSL"}
    if kind == "PEM":
        store = _client_pem(certs, tmp_path, encrypted=key_password is not None)
        if key_password:
            options["ssl.key.password"] = certs.client_key_password
    else:
        store = java_keystore(certs.client_cert, certs.client_key, tmp_path / f"client.{kind.lower()}", kind,
                              "store-pw", key_password, chain=(certs.ca_cert,))
        options["ssl.keystore.password"] = "store-pw"
        if key_password:
            options["ssl.key.password"] = key_password
    options["ssl.keystore.location"] = str(store)
    options["ssl.truststore.location"] = str(certs.ca_cert)
    options["ssl.truststore.type"] = "PEM"
    if declared:
        options["ssl.keystore.type"] = declared
    presented = certificate_presented(security_settings(options).ssl_context(), certs)
    assert presented == ssl.PEM_cert_to_DER_cert(certs.client_cert.read_text())


def certificate_presented(context: ssl.SSLContext, certs: TestCertificates) -> bytes | None:
    """The certificate (DER) a TLS server requiring client certificates receives from ``context`` in a handshake."""
    import socket
    import threading

    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_context.load_cert_chain(certs.server_cert, certs.server_key)
    server_context.load_verify_locations(certs.ca_cert)
    server_context.verify_mode = ssl.CERT_REQUIRED
    seen: list[bytes | None] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        def serve() -> None:
            conn, _ = listener.accept()
            with server_context.wrap_socket(conn, server_side=True) as tls:
                seen.append(tls.getpeercert(binary_form=True))

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        with socket.create_connection(listener.getsockname(), timeout=10) as raw:
            with context.wrap_socket(raw, server_hostname="localhost") as tls:
                tls.recv(1)  # the server's close: the handshake, client certificate included, is over
        server.join(10)
    return seen[0] if seen else None


@pytest.mark.parametrize("encrypted", [False, True])
def test_inline_pem_text_loads(encrypted: bool, certs: TestCertificates) -> None:
    """KIP-651: ssl.truststore.certificates, ssl.keystore.key and ssl.keystore.certificate.chain as PEM text (what
    the broker makes of the key is shown in test_end_to_end)."""
    key = certs.client_key_encrypted if encrypted else certs.client_key
    options = {"security.protocol": "SSL", "ssl.truststore.certificates": certs.ca_cert.read_text(),
               "ssl.keystore.key": key.read_text(), "ssl.keystore.type": "PEM",
               "ssl.keystore.certificate.chain": certs.client_cert.read_text() + certs.ca_cert.read_text()}
    if encrypted:
        options["ssl.key.password"] = certs.client_key_password
    settings = security_settings(options)
    assert "BEGIN" not in repr(settings)
    context = settings.ssl_context()
    assert _trusts(context, certs.ca_cert) and len(context.get_ca_certs()) == 1


def test_inline_pem_mistakes_name_the_option(certs: TestCertificates) -> None:
    key, chain, ca = certs.client_key.read_text(), certs.client_cert.read_text(), certs.ca_cert.read_text()
    cases: list[tuple[dict[str, str], str, str]] = [
        ({"ssl.keystore.key": key}, "ssl.keystore.certificate.chain", "go together"),
        ({"ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain, "ssl.keystore.type": "JKS"},
         "ssl.keystore.type", "PEM text"),
        ({"ssl.keystore.key": key, "ssl.keystore.certificate.chain": chain,
          "ssl.keystore.location": str(certs.client_cert)}, "ssl.keystore.key", "set one"),
        ({"ssl.truststore.certificates": ca, "ssl.ca.location": str(certs.ca_cert)}, "ssl.truststore.certificates",
         "set one"),
        ({"ssl.truststore.certificates": "not a certificate"}, "ssl.truststore.certificates", "no PEM certificate"),
        ({"ssl.keystore.key": certs.client_key_encrypted.read_text(), "ssl.keystore.certificate.chain": chain},
         "ssl.key.password", "encrypted"),
        ({"ssl.keystore.key": certs.client_key_encrypted.read_text(), "ssl.keystore.certificate.chain": chain,
          "ssl.key.password": "wrong-pw"}, "ssl.key.password", "does not decrypt"),
        ({"ssl.keystore.key": certs.untrusted_ca_cert.read_text(), "ssl.keystore.certificate.chain": chain},
         "ssl.keystore.key", "is not PEM text of a private key"),
    ]
    for options, option, text in cases:
        with pytest.raises(ConfigError, match=text) as info:
            security_settings({"security.protocol": "SSL", **options}).ssl_context()
        assert info.value.key == option, (options, info.value)
        material = [line for text in options.values() for line in text.splitlines()[1:2]]  # a base64 line each
        assert not any(m and m in str(info.value) for m in material) and "wrong-pw" not in str(info.value)


def test_client_keystore_mistakes_name_the_option(tmp_path: Path, certs: TestCertificates,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    jks = java_keystore(certs.client_cert, certs.client_key, tmp_path / "c.jks", "JKS", "store-pw", "key-pw-2")
    p12 = java_keystore(certs.client_cert, certs.client_key, tmp_path / "c.p12", "PKCS12", "store-pw")

    def error(store: Path, **options: str) -> ConfigError:
        with pytest.raises(ConfigError) as info:
            security_settings({"security.protocol": "SSL", "ssl.keystore.location": str(store),
                                           **{k.replace("_", "."): v for k, v in options.items()}}).ssl_context()
        assert not any(pw in str(info.value) for pw in ("store-pw", "key-pw-2", "wrong-pw"))
        return info.value

    assert error(jks, ssl_keystore_password="wrong-pw").key == "ssl.keystore.password"  # the store's integrity
    assert error(jks, ssl_keystore_password="store-pw").key == "ssl.keystore.password"  # the key has its own
    assert error(jks, ssl_keystore_password="store-pw", ssl_key_password="wrong-pw").key == "ssl.key.password"
    assert error(jks).key == "ssl.keystore.password"  # no password at all: the key cannot be decrypted
    assert error(p12, ssl_keystore_password="wrong-pw").key == "ssl.keystore.password"
    assert error(jks, ssl_keystore_type="PEM", ssl_keystore_password="store-pw").key == "ssl.keystore.type"
    assert error(certs.client_cert, ssl_keystore_type="JKS").key == "ssl.keystore.type"
    two = java_truststore(certs.ca_cert, tmp_path / "two.jks", "JKS", "store-pw")
    keytool = Path(os.path.realpath(require_java())).parent / "keytool"
    for alias in ("second", "third"):  # the client's key twice more, beside a CA certificate
        subprocess.run([str(keytool), "-importkeystore", "-noprompt", "-srckeystore", str(jks), "-srcstorepass",
                        "store-pw", "-srckeypass", "key-pw-2", "-srcalias", "client", "-destkeystore", str(two),
                        "-deststorepass", "store-pw", "-destkeypass", "key-pw-2", "-destalias", alias],
                       check=True, capture_output=True)
    assert "holds 2 private keys" in str(error(two, ssl_keystore_password="store-pw", ssl_key_password="key-pw-2"))
    with pytest.raises(ConfigError, match="both name a client certificate"):
        security_settings({"security.protocol": "SSL", "ssl.keystore.location": str(jks),
                                       "ssl.certificate.location": str(certs.client_cert)})
    monkeypatch.setitem(sys.modules, "cryptography.hazmat.primitives.serialization", None)  # not installed
    absent = error(p12, ssl_keystore_password="store-pw")
    assert absent.key == "ssl.keystore.location" and "pip install spark-kafka-sink[pkcs12]" in str(absent)


@pytest.mark.parametrize(("key", "what"), [
    ("ssl.ca.location", "does not exist"),
    ("ssl.certificate.location", "does not exist"),
])
def test_missing_files_name_the_key(key: str, what: str, tmp_path: Path, certs: TestCertificates) -> None:
    options = {"security.protocol": "SSL", "ssl.certificate.location": str(certs.client_cert),
               "ssl.key.location": str(certs.client_key), key: str(tmp_path / "missing.pem")}
    with pytest.raises(ConfigError, match=what) as info:
        security_settings(options).ssl_context()
    assert info.value.key == key


def test_ca_file_without_certificates(certs: TestCertificates) -> None:
    with pytest.raises(ConfigError, match="no PEM CA certificate") as info:
        settings(security_protocol="SSL", ssl_ca_location=str(certs.client_key)).ssl_context()
    assert info.value.key == "ssl.ca.location"


def test_client_certificate_plain_and_encrypted(certs: TestCertificates) -> None:
    settings(security_protocol="SSL", ssl_certificate_location=str(certs.client_cert),
             ssl_key_location=str(certs.client_key)).ssl_context()
    s = security_settings({
        "security.protocol": "SSL", "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key_encrypted), "ssl.key.password": certs.client_key_password})
    s.ssl_context()
    assert certs.client_key_password not in repr(s)


def test_encrypted_key_without_password_fails_instead_of_prompting(certs: TestCertificates) -> None:
    # OpenSSL's default would read the passphrase from the terminal: a headless job would hang.
    started = time.monotonic()
    with pytest.raises(ConfigError, match="encrypted: set ssl.key.password") as info:
        security_settings({
            "security.protocol": "SSL", "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key_encrypted)}).ssl_context()
    assert info.value.key == "ssl.key.password"
    assert time.monotonic() - started < 5


def test_wrong_key_password_names_the_key_not_the_password(certs: TestCertificates) -> None:
    with pytest.raises(ConfigError, match="does not decrypt") as info:
        security_settings({
            "security.protocol": "SSL", "ssl.certificate.location": str(certs.client_cert),
            "ssl.key.location": str(certs.client_key_encrypted), "ssl.key.password": PASSWORD}).ssl_context()
    assert info.value.key == "ssl.key.password" and PASSWORD not in str(info.value)


def test_key_of_another_certificate(certs: TestCertificates) -> None:
    with pytest.raises(ConfigError, match="not the private key") as info:
        settings(security_protocol="SSL", ssl_certificate_location=str(certs.client_cert),
                 ssl_key_location=str(certs.server_key)).ssl_context()
    assert info.value.key == "ssl.key.location"


def test_key_without_certificate() -> None:
    with pytest.raises(ConfigError, match="mutual TLS needs both"):
        settings(security_protocol="SSL", ssl_key_location="/x/client.key")


# -- SASL ------------------------------------------------------------------------------------------------------------

def test_sasl_from_username_and_password() -> None:
    s = security_settings({"security.protocol": "SASL_SSL", "sasl.mechanism": "scram-sha-512",
                                       "sasl.username": "alice", "sasl.password": PASSWORD})
    assert s.sasl_mechanism == "SCRAM-SHA-512" and s.sasl_username == "alice"
    steps = handshakes_of(s, "127.0.0.1")
    assert [type(h) for h in steps] == [TlsHandshake, SaslAuthentication]
    assert steps[1].name == "SASL/SCRAM-SHA-512"


def test_sasl_from_jaas_config_and_secret_wrappers() -> None:
    jaas = ('org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="alice" password="{PASSWORD}";')
    s = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                       "sasl.jaas.config": Secret(jaas)})
    assert s.sasl_username == "alice" and s.sasl_password == Secret(PASSWORD) and not s.sasl_token_auth
    token = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                                           "sasl.jaas.config": Secret(jaas.replace(";", ' tokenauth="true";'))})
    assert token.sasl_username == "alice" and token.sasl_token_auth
    s2 = security_settings({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "alice",
                                        "sasl.password": Secret(PASSWORD)})
    assert s2.sasl_password is not None and s2.sasl_password.reveal() == PASSWORD


@pytest.mark.parametrize(("options", "key"), [
    ({"sasl.username": "alice"}, "sasl.password"),
    ({"sasl.password": PASSWORD}, "sasl.username"),
    ({"sasl.mechanism": "SCRAM-SHA-1", "sasl.username": "a", "sasl.password": PASSWORD}, "sasl.mechanism"),
    ({"sasl.mechanism": "OAUTHBEARER", "sasl.username": "a", "sasl.password": PASSWORD}, "sasl.username"),
    ({"sasl.username": "a", "sasl.password": PASSWORD,
      "sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{PASSWORD}";'},
     "sasl.jaas.config"),
    ({"sasl.jaas.config": f'org.apache.kafka.common.security.plain.PlainLoginModule required password="{PASSWORD}";'},
     "sasl.jaas.config"),
])
def test_sasl_errors_name_the_key_and_hide_the_password(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as info:
        security_settings({"security.protocol": "SASL_PLAINTEXT", **options})
    assert info.value.key == key
    assert PASSWORD not in str(info.value) and PASSWORD not in repr(info.value)


def test_bad_settings_fail_the_connection_not_the_io_loop() -> None:
    # The factory runs inside the network client's I/O loop: a ConfigError becomes the connection's error.
    # (The config checks what it can when parsed; a TLS file is read when the first connection needs it.)
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SSL",
                                       "ssl.ca.location": "/no/such/ca.pem"}).net_config()
    steps = handshakes_for("127.0.0.1", 9092, config)
    assert len(steps) == 1
    with pytest.raises(ConfigError, match="ssl.ca.location: /no/such/ca.pem does not exist"):
        steps[0].start(None, 0)  # type: ignore[arg-type]


def test_reprs_hide_secrets(certs: TestCertificates) -> None:
    s = security_settings({
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
        "sasl.password": PASSWORD, "ssl.certificate.location": str(certs.client_cert),
        "ssl.key.location": str(certs.client_key_encrypted), "ssl.key.password": certs.client_key_password})
    shown = repr(s) + str(s) + repr(handshakes_of(s, "127.0.0.1"))
    shown += repr(s.sasl_password) + str(s.key_password)
    assert PASSWORD not in shown and certs.client_key_password not in shown
    assert "alice" in repr(s)


def test_check_security_loads_files_at_construction(certs: TestCertificates) -> None:
    from spark_kafka_sink.net.security import check_security

    good = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SSL",
                                     "ssl.ca.location": str(certs.ca_cert)}).net_config()
    assert check_security(good).uses_tls
    bad = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SSL",
                                    "ssl.certificate.location": str(certs.client_cert),
                                    "ssl.key.location": str(certs.client_key_encrypted),
                                    "ssl.key.password": PASSWORD}).net_config()
    with pytest.raises(ConfigError, match="does not decrypt") as info:
        check_security(bad)
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(("changes", "key", "message"), [
    ({"ssl.key.password": PASSWORD}, "ssl.key.password", "does not decrypt"),
    ({"ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location", "does not exist"),
    ({"ssl.key.location": "/nonexistent/key.pem"}, "ssl.key.location", "does not exist"),
])
def test_producer_construction_checks_the_tls_files(certs: TestCertificates, changes: dict[str, str], key: str,
                                                    message: str) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    options = {"bootstrap.servers": "127.0.0.1:9", "security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
               "ssl.certificate.location": str(certs.client_cert),
               "ssl.key.location": str(certs.client_key_encrypted), "ssl.key.password": certs.client_key_password,
               **changes}
    with pytest.raises(ConfigError, match=message) as info:
        KafkaProducer(options)  # raises before any thread or socket exists (a leak would warn: warnings are errors)
    assert info.value.key == key
    assert PASSWORD not in str(info.value) and certs.client_key_password not in str(info.value)


@pytest.mark.parametrize(("options", "oldest", "newest"), [
    ({}, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3),
    ({"ssl.protocol": "TLSv1.2"}, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
    ({"ssl.protocol": "TLS"}, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3),
    ({"ssl.enabled.protocols": "TLSv1.3"}, ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3),
    ({"ssl.enabled.protocols": "TLSv1.2"}, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
    # An older configuration's list: what it names before TLS 1.2 is left out, never offered.
    ({"ssl.enabled.protocols": "TLSv1, TLSv1.1, TLSv1.2"}, ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_2),
])
def test_tls_versions_offered(options: dict[str, str], oldest: ssl.TLSVersion, newest: ssl.TLSVersion,
                              certs: TestCertificates) -> None:
    context = security_settings({"security.protocol": "SSL", "ssl.ca.location": str(certs.ca_cert),
                                             **options}).ssl_context()
    assert (context.minimum_version, context.maximum_version) == (oldest, newest)


@pytest.mark.parametrize(("options", "key", "says"), [
    ({"ssl.enabled.protocols": "TLSv1,TLSv1.1"}, "ssl.enabled.protocols", "only versions before TLS 1.2"),
    ({"ssl.enabled.protocols": "TLSv1.4"}, "ssl.enabled.protocols", "TLSv1.4 is not one"),
    ({"ssl.protocol": "TLSv1.1"}, "ssl.protocol", "expected TLSv1.3, TLSv1.2 or TLS"),
    ({"ssl.protocol": "TLSv1.2", "ssl.enabled.protocols": "TLSv1.3"}, "ssl.protocol", "leaves none of"),
])
def test_tls_versions_that_cannot_be_offered_name_the_option(options: dict[str, str], key: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as info:
        security_settings({"security.protocol": "SSL", **options})
    assert info.value.key == key
    with pytest.raises(ConfigError, match=says) as info:  # the producer's config says the same, before any socket
        ProducerConfig.from_dict({"bootstrap.servers": "h:9093", **options})
    assert info.value.key == key


def test_without_memfd_create_the_key_goes_through_a_private_file_removed_after(
        tmp_path: Path, certs: TestCertificates, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where os.memfd_create is missing (macOS, BSDs), a keystore's key reaches OpenSSL through a file readable by
    this user only, in a private folder gone once the context is built; the certificate presented is the client's."""
    import tempfile

    store = java_keystore(certs.client_cert, certs.client_key, tmp_path / "client.jks", "JKS", "store-pw", None,
                          chain=(certs.ca_cert,))
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.delattr(os, "memfd_create")
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    seen: list[tuple[str, int, int]] = []
    load = ssl.SSLContext.load_cert_chain

    def watched(self: ssl.SSLContext, certfile: Any, keyfile: Any = None, password: Any = None) -> None:
        path = Path(certfile)
        seen.append((str(path), path.stat().st_mode & 0o777, path.parent.stat().st_mode & 0o777))
        load(self, certfile, keyfile, password)

    monkeypatch.setattr(ssl.SSLContext, "load_cert_chain", watched)
    context = security_settings({"security.protocol": "SSL", "ssl.keystore.location": str(store),
                                 "ssl.keystore.password": "store-pw", "ssl.truststore.location": str(certs.ca_cert),
                                 "ssl.truststore.type": "PEM"}).ssl_context()
    assert len(seen) == 1 and Path(seen[0][0]).is_relative_to(scratch), seen
    assert seen[0][1:] == (0o600, 0o700)
    assert list(scratch.iterdir()) == []  # removed once loaded
    monkeypatch.undo()
    presented = certificate_presented(context, certs)
    assert presented == ssl.PEM_cert_to_DER_cert(certs.client_cert.read_text())
