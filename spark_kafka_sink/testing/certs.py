"""Throw-away TLS material for tests, made with the ``openssl`` command line tool in a temporary folder.

    certs = make_test_certificates()          # or: with make_test_certificates() as certs: ...
    certs.ca_cert                             # trust this (ssl.ca.location / broker truststore)
    certs.server_keystore                     # broker ssl.keystore.location (type PEM)
    certs.client_cert, certs.client_key       # mutual TLS
    certs.cleanup()
    java_truststore(certs.ca_cert, path, "JKS", "changeit")   # the CA in a Java truststore, made by keytool
    java_keystore(certs.client_cert, certs.client_key, path, "JKS", "changeit")   # a client keystore (mutual TLS)


What is made, and why:

* a CA, which the broker and the clients trust;
* the broker certificate, signed by that CA, for ``IP:127.0.0.1`` and ``DNS:localhost`` (clients connect to
  127.0.0.1, and Python checks an IP address against the IP SANs). ``server_keystore`` is the file a Kafka broker
  wants for ``ssl.keystore.type=PEM``: the unencrypted PKCS#8 key, then the certificate chain (leaf, CA);
* a client certificate (``clientAuth``) for mutual TLS, its key both plain and encrypted (PKCS#8, AES-256) with
  ``client_key_password``, to exercise ``ssl.key.password``;
* a second, untrusted CA (nobody trusts it: connecting while trusting only it must fail verification);
* a keystore whose certificate is signed by the trusted CA but names only ``wrong-host.invalid``, for the
  hostname-mismatch case.

Keys are EC P-256: generated in milliseconds, and supported by Java's PEM key store and Python's ``ssl``.
Certificates are valid for two days from now (every process that checks them runs on this machine's clock).
Nothing here is secret beyond the test session; the folder is deleted by :meth:`TestCertificates.cleanup`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

__all__ = ["TestCertificates", "OpenSSLMissingError", "make_test_certificates", "java_keystore", "java_truststore",
           "SERVER_SANS", "WRONG_HOST"]

SERVER_SANS = "IP:127.0.0.1,DNS:localhost"
WRONG_HOST = "wrong-host.invalid"
_DAYS = 2


class OpenSSLMissingError(RuntimeError):
    """The ``openssl`` command line tool is not installed; the message says how to get it."""


@dataclass(frozen=True)
class TestCertificates:
    """Paths of the generated PEM files (see the module docstring for what each one is)."""

    __test__ = False  # a name starting with "Test": keep pytest from collecting it

    directory: Path
    ca_cert: Path
    server_cert: Path
    server_key: Path
    server_keystore: Path
    client_cert: Path
    client_key: Path
    client_key_encrypted: Path
    client_key_password: str = field(repr=False)
    untrusted_ca_cert: Path
    wrong_host_keystore: Path

    def cleanup(self) -> None:
        shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> TestCertificates:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.cleanup()


def _openssl() -> str:
    tool = shutil.which("openssl")
    if tool is None:
        raise OpenSSLMissingError("the openssl command line tool is needed to make test certificates: "
                                  "install it (Debian/Ubuntu: apt-get install openssl)")
    return tool


def _run(args: list[str], cwd: Path) -> None:
    proc = subprocess.run([_openssl(), *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl {args[0]} failed ({proc.returncode}): {proc.stderr.strip()}")


def _new_key(path: Path, cwd: Path) -> None:
    # genpkey writes PKCS#8 ("BEGIN PRIVATE KEY"), the only form Kafka's PEM key store reads.
    _run(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", str(path)], cwd)


def _make_ca(name: str, cwd: Path) -> tuple[Path, Path]:
    key, cert = cwd / f"{name}.key", cwd / f"{name}.pem"
    _new_key(key, cwd)
    _run(["req", "-x509", "-new", "-key", str(key), "-out", str(cert), "-days", str(_DAYS), "-sha256",
          "-subj", f"/CN=spark-kafka-sink test {name}",
          "-addext", "basicConstraints=critical,CA:TRUE",
          "-addext", "keyUsage=critical,keyCertSign,cRLSign",
          "-addext", "subjectKeyIdentifier=hash"], cwd)
    return key, cert


def _issue(name: str, ca_key: Path, ca_cert: Path, extensions: str, cwd: Path) -> tuple[Path, Path]:
    """A key and a certificate signed by the CA; ``extensions`` are x509v3 lines for the leaf."""
    key, csr, cert, ext = cwd / f"{name}.key", cwd / f"{name}.csr", cwd / f"{name}.pem", cwd / f"{name}.ext"
    _new_key(key, cwd)
    _run(["req", "-new", "-key", str(key), "-out", str(csr), "-subj", f"/CN={name}"], cwd)
    ext.write_text("basicConstraints=critical,CA:FALSE\n"
                   "keyUsage=critical,digitalSignature\n"
                   "authorityKeyIdentifier=keyid\n" + extensions)
    # A random serial: two certificates from one CA must never share one (and no serial file to keep).
    _run(["x509", "-req", "-in", str(csr), "-CA", str(ca_cert), "-CAkey", str(ca_key), "-out", str(cert),
          "-days", str(_DAYS), "-sha256", "-set_serial", str(secrets.randbits(63)), "-extfile", str(ext)], cwd)
    csr.unlink()
    ext.unlink()
    return key, cert


def _keystore(path: Path, key: Path, *chain: Path) -> Path:
    """Kafka's PEM key store file: the PKCS#8 key followed by the certificate chain, leaf first."""
    path.write_text("".join(p.read_text() for p in (key, *chain)))
    path.chmod(0o600)
    return path


def make_test_certificates(directory: Path | None = None) -> TestCertificates:
    """Make the CA, broker, client, untrusted-CA and wrong-host material in ``directory`` (default: a new
    temporary folder, removed by :meth:`TestCertificates.cleanup`)."""
    cwd = Path(tempfile.mkdtemp(prefix="sks-certs-")) if directory is None else directory
    cwd.mkdir(parents=True, exist_ok=True)
    try:
        ca_key, ca_cert = _make_ca("ca", cwd)
        server_key, server_cert = _issue("broker", ca_key, ca_cert,
                                         f"extendedKeyUsage=serverAuth\nsubjectAltName={SERVER_SANS}\n", cwd)
        client_key, client_cert = _issue("client", ca_key, ca_cert, "extendedKeyUsage=clientAuth\n", cwd)
        password = "client-key-" + secrets.token_hex(8)
        encrypted = cwd / "client-encrypted.key"
        _encrypt_key(client_key, encrypted, password, cwd)
        _untrusted_key, untrusted_ca = _make_ca("untrusted-ca", cwd)
        wrong_key, wrong_cert = _issue("wrong-host", ca_key, ca_cert,
                                       f"extendedKeyUsage=serverAuth\nsubjectAltName=DNS:{WRONG_HOST}\n", cwd)
        return TestCertificates(
            directory=cwd,
            ca_cert=ca_cert,
            server_cert=server_cert,
            server_key=server_key,
            server_keystore=_keystore(cwd / "broker-keystore.pem", server_key, server_cert, ca_cert),
            client_cert=client_cert,
            client_key=client_key,
            client_key_encrypted=encrypted,
            client_key_password=password,
            untrusted_ca_cert=untrusted_ca,
            wrong_host_keystore=_keystore(cwd / "wrong-host-keystore.pem", wrong_key, wrong_cert, ca_cert),
        )
    except BaseException:
        if directory is None:
            shutil.rmtree(cwd, ignore_errors=True)
        raise


def _encrypt_key(key: Path, out: Path, password: str, cwd: Path) -> None:
    # The password goes through stdin, not the command line (where `ps` would show it).
    proc = subprocess.run([_openssl(), "pkcs8", "-topk8", "-in", str(key), "-out", str(out), "-v2", "aes-256-cbc",
                           "-passout", "stdin"], cwd=cwd, input=password + "\n", capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"openssl pkcs8 failed ({proc.returncode}): {proc.stderr.strip()}")


def java_truststore(ca_cert: Path, path: Path, kind: str = "JKS", password: str = "changeit",
                    alias: str = "ca") -> Path:
    """``ca_cert`` (PEM) imported into the Java keystore ``path`` of ``kind`` (JKS, JCEKS or PKCS12) by the JDK's
    own ``keytool``, as users make truststores; a second call adds to the same file (another ``alias``)."""
    from spark_kafka_sink.testing.broker_jars import require_java

    keytool = Path(os.path.realpath(require_java())).parent / "keytool"
    proc = subprocess.run([str(keytool), "-importcert", "-noprompt", "-alias", alias, "-file", str(ca_cert),
                           "-keystore", str(path), "-storetype", kind, "-storepass:env", "STOREPASS"],
                          capture_output=True, text=True, env={**os.environ, "STOREPASS": password})
    if proc.returncode != 0:
        raise RuntimeError(f"keytool -importcert failed ({proc.returncode}): {proc.stdout.strip()} "
                           f"{proc.stderr.strip()}")
    return path


def java_keystore(cert: Path, key: Path, path: Path, kind: str = "JKS", password: str = "changeit",
                  key_password: str | None = None, chain: tuple[Path, ...] = ()) -> Path:
    """A client keystore ``path`` of ``kind`` (PKCS12 or JKS) holding ``key`` (PEM) and ``cert`` (+ ``chain``), as
    users make one: ``openssl pkcs12 -export``, then for JKS ``keytool -importkeystore`` (the key protected with
    ``key_password``, default ``password``)."""
    from spark_kafka_sink.testing.broker_jars import require_java

    p12 = path if kind == "PKCS12" else path.with_name(path.name + ".p12")
    command = [_openssl(), "pkcs12", "-export", "-in", str(cert), "-inkey", str(key), "-out", str(p12), "-name",
               "client", "-passout", "env:STOREPASS"]
    for extra in chain:
        command += ["-certfile", str(extra)]
    env = {**os.environ, "STOREPASS": password, "KEYPASS": key_password or password}
    subprocess.run(command, check=True, capture_output=True, env=env)
    if kind == "PKCS12":
        return path
    keytool = Path(os.path.realpath(require_java())).parent / "keytool"
    proc = subprocess.run([str(keytool), "-importkeystore", "-noprompt", "-srckeystore", str(p12), "-srcstoretype",
                           "PKCS12", "-srcstorepass:env", "STOREPASS", "-destkeystore", str(path), "-deststoretype",
                           kind, "-deststorepass:env", "STOREPASS", "-destkeypass:env", "KEYPASS"],
                          capture_output=True, text=True, env=env)
    p12.unlink()
    if proc.returncode != 0:
        raise RuntimeError(f"keytool -importkeystore failed ({proc.returncode}): {proc.stdout.strip()} "
                           f"{proc.stderr.strip()}")
    return path
