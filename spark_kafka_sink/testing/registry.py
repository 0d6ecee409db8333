"""A real schema registry for the schema tests: Apicurio Registry (Confluent-compatible API, in-memory storage) in
its own JVM on free loopback ports, from Maven Central (``broker_jars.registry_app``)::

    with TestRegistry() as registry:
        registry.url                   # the Confluent-compatible API: http://127.0.0.1:<port>/apis/ccompat/v7
        registry.stop() / registry.start()                     # a registry that is down, then back (empty again)

    TestRegistry(tls=make_test_certificates())   # HTTPS only, with the certificates' server certificate

Unlike Confluent's registry, Apicurio's default compatibility level is NONE: set the level a test relies on.
"""

from __future__ import annotations

import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from spark_kafka_sink.testing.broker import _die_with_parent, _stop_process, free_port
from spark_kafka_sink.testing.broker_jars import registry_app, require_java
from spark_kafka_sink.testing.certs import TestCertificates

__all__ = ["TestRegistry", "RegistryStartError"]


class RegistryStartError(RuntimeError):
    """The registry did not come up; the message carries its log's tail."""


@dataclass
class TestRegistry:
    """The registry on ``port`` (and its management port), started by :meth:`start`."""

    port: int = field(default_factory=free_port)
    management_port: int = field(default_factory=free_port)
    tls: TestCertificates | None = None  # HTTPS only, with its server certificate and key
    plain_port: int = field(default_factory=free_port)  # with tls: Quarkus's HTTP port, which refuses requests
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sks-registry-")))
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    __test__ = False  # not a pytest test class, despite the name

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "registry.log"

    def start(self, timeout: float = 120.0) -> TestRegistry:
        java = require_java()
        jar = registry_app()
        ports = [f"-Dquarkus.http.port={self.port}"]
        if self.tls is not None:
            ports = [f"-Dquarkus.http.port={self.plain_port}", f"-Dquarkus.http.ssl-port={self.port}",
                     f"-Dquarkus.http.ssl.certificate.files={self.tls.server_cert}",
                     f"-Dquarkus.http.ssl.certificate.key-files={self.tls.server_key}",
                     "-Dquarkus.http.insecure-requests=disabled"]
        with self.log_file.open("w") as out:
            # Every port on loopback: unset, Quarkus binds 0.0.0.0 and its management port 9000.
            self.process = subprocess.Popen(
                [java, "-Xmx160m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
                 "-Dquarkus.http.host=127.0.0.1", *ports,
                 "-Dquarkus.management.host=127.0.0.1", f"-Dquarkus.management.port={self.management_port}",
                 "-jar", str(jar)],
                cwd=jar.parent, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_file.read_text(errors="replace")[-3000:]
                self.stop(keep_files=True)
                raise RegistryStartError(f"the schema registry did not start:\n{tail}")
            time.sleep(0.2)
        return self

    def _answers(self) -> bool:
        try:
            context = None if self.tls is None else ssl.create_default_context(cafile=self.tls.ca_cert)
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2, context=context) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, keep_files: bool = True) -> None:
        if self.process is not None:
            _stop_process(self.process, 10.0)
            self.process = None
        if not keep_files:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> TestRegistry:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop(keep_files=False)
