"""A real Kerberos KDC for the GSSAPI tests: Apache Kerby's SimpleKdcServer (the KDC Kafka's and Hadoop's own
Kerberos tests run) in its own JVM on a free loopback port, from Maven Central jars (``conf/kerberos``)::

    with TestKdc(principals=("kafka/localhost", "client")) as kdc:
        kdc.krb5_conf                  # krb5.conf for MIT Kerberos (KRB5_CONFIG) and Java (java.security.krb5.conf)
        kdc.keytab("client")           # that principal's keytab (a random key)
        kdc.principal("client")        # "client@EXAMPLE.COM"

The krb5.conf is this module's, not Kerby's: TCP only, no DNS lookups of realms or KDCs, and host names used as
given (``dns_canonicalize_hostname = false``, ``rdns = false``), so ``kafka/localhost`` is the broker reached as
``localhost`` or ``127.0.0.1`` whatever the machine's resolver says.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from spark_kafka_sink.testing.broker import _die_with_parent, _stop_process, free_port
from spark_kafka_sink.testing.broker_jars import CONF_DIR, kdc_jars, require_java

__all__ = ["TestKdc", "KdcStartError"]


class KdcStartError(RuntimeError):
    """The KDC did not come up; the message carries its output."""


def _keytab_name(principal: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", principal) + ".keytab"


@dataclass
class TestKdc:
    """The KDC of realm ``realm`` with ``principals`` (each with a keytab), started by :meth:`start`."""

    principals: Sequence[str] = ()
    realm: str = "EXAMPLE.COM"
    port: int = field(default_factory=free_port)
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sks-kdc-")))
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    __test__ = False  # not a pytest test class, despite the name

    @property
    def krb5_conf(self) -> Path:
        return self.work_dir / "krb5.conf"

    def keytab(self, name: str) -> Path:
        return self.work_dir / _keytab_name(name)

    def principal(self, name: str) -> str:
        return f"{name}@{self.realm}"

    def start(self, timeout: float = 60.0) -> "TestKdc":
        java = require_java()
        classpath = ":".join(str(jar) for jar in kdc_jars())
        args = [f"{name}={_keytab_name(name)}" for name in self.principals]
        log = self.work_dir / "kdc.log"
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [java, "-cp", classpath, str(CONF_DIR / "kerberos" / "Kdc.java"), str(self.work_dir), self.realm,
                 str(self.port), *args],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while "READY" not in log.read_text(errors="replace"):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop(keep_files=True)
                raise KdcStartError(f"the test KDC did not start:\n{log.read_text(errors='replace')[-3000:]}")
            time.sleep(0.1)
        self.krb5_conf.write_text(
            "[libdefaults]\n"
            f"    default_realm = {self.realm}\n"
            "    udp_preference_limit = 1\n"
            "    dns_lookup_kdc = false\n"
            "    dns_lookup_realm = false\n"
            "    dns_canonicalize_hostname = false\n"
            "    rdns = false\n"
            "[realms]\n"
            f"    {self.realm} = {{\n"
            f"        kdc = 127.0.0.1:{self.port}\n"
            "    }\n")
        return self

    def stop(self, keep_files: bool = False) -> None:
        if self.process is not None:
            _stop_process(self.process, 5.0)
            self.process = None
        if not keep_files:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> "TestKdc":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
