"""Toxiproxy (Shopify's TCP proxy for fault tests, a Go binary) in front of each node's PROXIED listener: the slow
link's latency and bandwidth cap, which the kernel here cannot add (it has no netem qdisc).

``make test-network`` installs the server into ``.tools/bin`` with ``go install`` (from the Go module proxy).
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from spark_kafka_sink.testing.broker import free_port

SERVER = Path(__file__).resolve().parents[2] / ".tools" / "bin" / "toxiproxy-server"


class ProxyError(RuntimeError):
    """Toxiproxy is missing, did not start, or refused a request."""


@dataclass
class Toxiproxy:
    """One toxiproxy server on the host's loopback, started and stopped by the test session."""

    api_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> Toxiproxy:
        if not SERVER.exists():
            raise ProxyError(f"toxiproxy is not installed at {SERVER}: run `make test-network`, which installs it "
                             "with `go install` (Go from go.dev or Debian's golang package)")
        self.process = subprocess.Popen([str(SERVER), "-host", "127.0.0.1", "-port", str(self.api_port)],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._call("GET", "/version")
                return self
            except OSError as exc:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise ProxyError(f"toxiproxy did not answer on 127.0.0.1:{self.api_port}: {exc}") from exc
                time.sleep(0.05)  # polling interval of a readiness check

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"http://127.0.0.1:{self.api_port}{path}", data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                text = response.read()
        except urllib.error.HTTPError as exc:
            raise ProxyError(f"toxiproxy {method} {path}: {exc.code} {exc.read().decode(errors='replace')}") from exc
        return json.loads(text) if text.strip() else None

    def add_proxy(self, name: str, listen_port: int, upstream: str) -> None:
        self._call("POST", "/proxies", {"name": name, "listen": f"127.0.0.1:{listen_port}", "upstream": upstream,
                                        "enabled": True})

    def slow(self, name: str, latency_ms: int, rate_kb_s: int) -> None:
        """Add ``latency_ms`` to every answer and cap both directions at ``rate_kb_s`` KB/s."""
        self._call("POST", f"/proxies/{name}/toxics", {"name": "latency", "type": "latency", "stream": "downstream",
                                                        "attributes": {"latency": latency_ms, "jitter": 0}})
        for stream in ("upstream", "downstream"):
            self._call("POST", f"/proxies/{name}/toxics", {
                "name": f"bandwidth-{stream}", "type": "bandwidth", "stream": stream,
                "attributes": {"rate": rate_kb_s}})

    def heal(self, name: str) -> None:
        """Remove every toxic of proxy ``name``."""
        for toxic in self._call("GET", f"/proxies/{name}/toxics") or []:
            self._call("DELETE", f"/proxies/{name}/toxics/{toxic['name']}")
