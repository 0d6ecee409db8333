"""A schema registry that checks HTTP basic credentials, for the tests of the client's ``basic.auth.*`` settings:
nginx as a reverse proxy with ``auth_basic`` in front of the test registry (:class:`~.registry.TestRegistry`)::

    with BasicAuthProxy(registry.port, {"alice": "s3cret"}) as proxy:
        proxy.url        # http://127.0.0.1:<port>/apis/ccompat/v7: 401 without the right user:password

Why nginx: Apicurio Registry 2.x checks credentials only through an OIDC server (Keycloak; its "basic auth" trades
a client id and secret for a token there), and its build has no Quarkus extension for embedded users. nginx is the
most used reverse proxy with basic authentication, Debian packages it, and it answers a bad or missing password
with 401 as a registry's own basic authentication does. Debian's package is unpacked (``apt-get download`` and
``dpkg-deb -x``, no install scripts, no system service) into the jar cache on first use; its ``-p`` prefix, config,
logs and temporary folders live in this proxy's own folder.

nginx runs as one process (``master_process off``): the kernel kills it with the process that started it
(``PR_SET_PDEATHSIG``), which worker processes of a master would outlive; and it keeps the user who started it
(a master started as root hands requests to workers running as "nobody").
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from spark_kafka_sink.testing.broker import _die_with_parent, _stop_process, free_port
from spark_kafka_sink.testing.broker_jars import ToolMissingError, kafka_home

__all__ = ["BasicAuthProxy", "nginx_binary"]

_APT_INSTALL_HINT = "install it (Debian/Ubuntu: apt-get install nginx-light) or run on a Debian-based host"


def nginx_binary() -> Path:
    """nginx from Debian's package, unpacked into ``<kafka_home>/nginx`` on first use (or the system's, if any)."""
    dest = kafka_home() / "nginx"
    binary = dest / "usr" / "sbin" / "nginx"
    if binary.is_file():
        return binary
    system = shutil.which("nginx")
    if system is not None:
        return Path(system)
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise ToolMissingError(f"the basic-auth registry tests need nginx and apt-get is not here: {_APT_INSTALL_HINT}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="nginx-", dir=dest.parent))
    try:
        download = ["apt-get", "download", "-q", "nginx"]
        proc = subprocess.run(download, cwd=staging, capture_output=True, text=True)
        if proc.returncode != 0 and os.geteuid() == 0:  # a fresh machine's package lists may be missing
            subprocess.run(["apt-get", "update", "-q"], capture_output=True, text=True)
            proc = subprocess.run(download, cwd=staging, capture_output=True, text=True)
        debs = sorted(staging.glob("nginx_*.deb"))
        if proc.returncode != 0 or not debs:
            raise ToolMissingError(f"apt-get could not download Debian's nginx package ({proc.stderr.strip()[-500:]}):"
                                   f" {_APT_INSTALL_HINT}")
        root = staging / "root"
        subprocess.run(["dpkg-deb", "-x", str(debs[0]), str(root)], check=True, capture_output=True)
        try:
            root.rename(dest)  # atomic: a half-unpacked folder is never mistaken for a complete one
        except OSError:
            if not binary.is_file():  # (else another process unpacked it first)
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return binary


@dataclass
class BasicAuthProxy:
    """nginx on ``port``, passing requests that carry one of ``users``' user:password to the registry on
    ``upstream_port`` (loopback), answering 401 to the rest; started by :meth:`start`."""

    upstream_port: int
    users: dict[str, str]
    port: int = field(default_factory=free_port)
    work_dir: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="sks-auth-proxy-")))
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        """The registry's Confluent-compatible API through the proxy."""
        return f"http://127.0.0.1:{self.port}/apis/ccompat/v7"

    @property
    def log_file(self) -> Path:
        return self.work_dir / "error.log"

    def start(self, timeout: float = 30.0) -> BasicAuthProxy:
        nginx = nginx_binary()
        users = self.work_dir / "users"
        # {PLAIN}: nginx's scheme for a password kept as it is (test credentials; nothing else reads the file).
        users.write_text("".join(f"{user}:{{PLAIN}}{password}\n" for user, password in self.users.items()))
        users.chmod(0o600)
        config = self.work_dir / "nginx.conf"
        config.write_text(self._config(users))
        self.process = subprocess.Popen(
            [str(nginx), "-p", str(self.work_dir), "-c", str(config), "-e", str(self.log_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self.process.poll() is not None or time.monotonic() > deadline:
                tail = self.log_file.read_text(errors="replace")[-3000:] if self.log_file.exists() else ""
                self.stop()
                raise RuntimeError(f"nginx (the basic-auth proxy) did not start:\n{tail}")
            time.sleep(0.1)
        return self

    def _config(self, users: Path) -> str:
        work = self.work_dir
        temp_paths = "\n".join(f"  {kind}_temp_path {work / kind};" for kind in
                               ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
        return f"""daemon off;
master_process off;
pid {work / "nginx.pid"};
error_log {self.log_file} info;
events {{ worker_connections 256; }}
http {{
  access_log off;
{temp_paths}
  server {{
    listen 127.0.0.1:{self.port};
    auth_basic "schema registry";
    auth_basic_user_file {users};
    location / {{
      proxy_pass http://127.0.0.1:{self.upstream_port};
      proxy_set_header Authorization "";
    }}
  }}
}}
"""

    def _answers(self) -> bool:
        """Up: it asks for credentials (401) on the registry's API."""
        try:
            with urllib.request.urlopen(f"{self.url}/subjects", timeout=2):
                return False  # answered without credentials: not the proxy
        except urllib.error.HTTPError as e:
            e.close()
            return e.code == 401
        except (urllib.error.URLError, OSError):
            return False

    def stop(self, keep_files: bool = False) -> None:
        if self.process is not None:
            _stop_process(self.process, 10.0)
            self.process = None
        if not keep_files:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def __enter__(self) -> BasicAuthProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
