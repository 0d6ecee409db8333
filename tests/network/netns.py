"""A network of its own for a 3-node Kafka cluster, made of Linux network namespaces and veth pairs, so that a test
can cut links for real: a link set down drops every packet, with no FIN or RST, as when a host vanishes.

Layout (``P`` is this session's prefix, ``skn<pid>``; ``X`` a /24 no other interface of the host uses)::

    host (tests, Spark)                      namespace Pn<i> (node i's JVM)
      Pc<i> 10.251.X.<4i+1>/30  <-- veth -->  Pd<i> 10.251.X.<4i+2>/30   clients: PLAINTEXT, PROXIED
      bridge Pbr  <-- Pp<i>     <-- veth -->  Pq<i> 10.252.X.<10+i>/24   controller quorum and replication

A cut sets the namespace's end of a link down. Every sender on the link has a permanent neighbour entry for the
far end, so packets are still sent and silently dropped: established connections go quiet and new connects hang
(without it, a failed ARP lookup would report "no route to host" within seconds, which no vanished host does).

Names carry the pid of the session that made them: teardown removes them, and a session started later removes any
whose session is gone (a SIGKILLed run).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field

from spark_kafka_sink.testing.broker import NodeNetwork, pid_alive

_PREFIX_BASE = "skn"
_NAME = re.compile(rf"^{_PREFIX_BASE}(\d+)(?:n|c|p|br)\d*$")


class NetworkSetupError(RuntimeError):
    """The host cannot build the test network (not root, no iproute2, no network namespaces)."""


def ip(*args: str) -> str:
    """Run ``ip ARGS``; raise naming the command and its error."""
    proc = subprocess.run(["ip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise NetworkSetupError(f"`ip {' '.join(args)}` failed: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def require_netns() -> None:
    """Fail (not skip) with what to do when network namespaces are not available."""
    if shutil.which("ip") is None:
        raise NetworkSetupError("the network fault tests need iproute2's `ip` (Debian: apt-get install iproute2)")
    if os.geteuid() != 0:
        raise NetworkSetupError("the network fault tests create network namespaces and veth pairs: run them as root "
                                "(CI runs as root)")
    try:
        ip("netns", "list")
    except NetworkSetupError as exc:
        raise NetworkSetupError(f"network namespaces are not available here ({exc}): the network fault tests need "
                                "a kernel with CONFIG_NET_NS and `ip netns`") from exc


def sweep_stale() -> list[str]:
    """Remove namespaces and interfaces left by test sessions that are gone; return their names."""
    removed = []
    for line in ip("netns", "list").splitlines():
        name = line.split()[0] if line.strip() else ""
        match = _NAME.match(name)
        if match and not pid_alive(int(match.group(1))):
            ip("netns", "delete", name)
            removed.append(name)
    for link in json.loads(ip("-j", "link", "show") or "[]"):
        name = str(link.get("ifname", ""))
        match = _NAME.match(name)
        if match and not pid_alive(int(match.group(1))):
            subprocess.run(["ip", "link", "delete", name], capture_output=True)  # may be gone with its peer
            removed.append(name)
    return removed


def _free_subnet() -> int:
    """An X such that neither 10.251.X.0/24 nor 10.252.X.0/24 is in use on the host."""
    used = ip("-o", "addr", "show") + ip("route", "show")
    start = os.getpid() % 250
    for k in range(250):
        x = 1 + (start + k) % 250
        if f"10.251.{x}." not in used and f"10.252.{x}." not in used:
            return x
    raise NetworkSetupError("no free 10.251.X.0/24 and 10.252.X.0/24 subnet for the test network")


def _mac(netns: str | None, ifname: str) -> str:
    args = ("-n", netns) if netns else ()
    return str(json.loads(ip(*args, "-j", "link", "show", ifname))[0]["address"])


@dataclass
class TestNetwork:
    """The namespaces and links of ``size`` nodes; ``proxy_ports`` (node id -> port) adds a PROXIED listener per
    node, advertised at a proxy on the host's loopback."""

    size: int = 3
    proxy_ports: dict[int, int] = field(default_factory=dict)
    prefix: str = field(default_factory=lambda: f"{_PREFIX_BASE}{os.getpid()}")
    subnet: int = 0
    created: bool = False

    def netns(self, node_id: int) -> str:
        return f"{self.prefix}n{node_id}"

    def client_host(self, node_id: int) -> str:
        return f"10.251.{self.subnet}.{4 * node_id + 2}"

    def peer_host(self, node_id: int) -> str:
        return f"10.252.{self.subnet}.{10 + node_id}"

    def node_networks(self) -> dict[int, NodeNetwork]:
        return {i: NodeNetwork(self.netns(i), self.client_host(i), self.peer_host(i), self.proxy_ports.get(i))
                for i in range(1, self.size + 1)}

    def create(self) -> TestNetwork:
        require_netns()
        sweep_stale()
        self.subnet = _free_subnet()
        self.created = True
        try:
            self._create()
        except BaseException:
            self.destroy()
            raise
        return self

    def _create(self) -> None:
        p, x = self.prefix, self.subnet
        bridge = f"{p}br"
        ip("link", "add", bridge, "type", "bridge")
        ip("link", "set", bridge, "up")
        for i in range(1, self.size + 1):
            ns = self.netns(i)
            ip("netns", "add", ns)
            ip("-n", ns, "link", "set", "lo", "up")
            # The client link: a point-to-point /30 between the host and the namespace.
            ip("link", "add", f"{p}c{i}", "type", "veth", "peer", "name", f"{p}d{i}", "netns", ns)
            ip("addr", "add", f"10.251.{x}.{4 * i + 1}/30", "dev", f"{p}c{i}")
            ip("-n", ns, "addr", "add", f"{self.client_host(i)}/30", "dev", f"{p}d{i}")
            ip("link", "set", f"{p}c{i}", "up")
            ip("-n", ns, "link", "set", f"{p}d{i}", "up")
            ip("neigh", "replace", self.client_host(i), "lladdr", _mac(ns, f"{p}d{i}"), "dev", f"{p}c{i}",
               "nud", "permanent")
            ip("-n", ns, "neigh", "replace", f"10.251.{x}.{4 * i + 1}", "lladdr", _mac(None, f"{p}c{i}"),
               "dev", f"{p}d{i}", "nud", "permanent")
            # The peer link: one port of the bridge that joins every node's peer interface.
            ip("link", "add", f"{p}p{i}", "type", "veth", "peer", "name", f"{p}q{i}", "netns", ns)
            ip("link", "set", f"{p}p{i}", "master", bridge)
            ip("link", "set", f"{p}p{i}", "up")
            ip("-n", ns, "addr", "add", f"{self.peer_host(i)}/24", "dev", f"{p}q{i}")
            ip("-n", ns, "link", "set", f"{p}q{i}", "up")
        for i in range(1, self.size + 1):
            for j in range(1, self.size + 1):
                if i != j:
                    ip("-n", self.netns(i), "neigh", "replace", self.peer_host(j), "lladdr",
                       _mac(self.netns(j), f"{p}q{j}"), "dev", f"{p}q{i}", "nud", "permanent")

    def destroy(self) -> None:
        """Remove every namespace and interface of this prefix (the JVMs in them must have exited)."""
        if not self.created:
            return
        for i in range(1, self.size + 1):
            subprocess.run(["ip", "netns", "delete", self.netns(i)], capture_output=True)
        for name in (f"{self.prefix}br", *(f"{self.prefix}{k}{i}" for k in "cp" for i in range(1, self.size + 1))):
            subprocess.run(["ip", "link", "delete", name], capture_output=True)  # gone already with its namespace
        self.created = False

    # -- faults ------------------------------------------------------------------------------------------------
    def _set(self, node_id: int, kind: str, state: str) -> None:
        ip("-n", self.netns(node_id), "link", "set", f"{self.prefix}{kind}{node_id}", state)

    def cut_client(self, node_id: int) -> None:
        """Node ``node_id`` no longer reaches clients, nor they it: packets dropped, no RST."""
        self._set(node_id, "d", "down")

    def cut_peers(self, node_id: int) -> None:
        """Node ``node_id`` no longer reaches the other nodes (controller quorum, replication), nor they it."""
        self._set(node_id, "q", "down")

    def blackhole(self, node_id: int) -> None:
        """Node ``node_id`` vanishes from every network, as a host that lost power: no FIN, no RST."""
        self.cut_client(node_id)
        self.cut_peers(node_id)

    def heal(self, node_id: int | None = None) -> None:
        """Every link of ``node_id`` (default: of every node) up again; the permanent neighbour entries stay."""
        for i in [node_id] if node_id is not None else range(1, self.size + 1):
            self._set(i, "d", "up")
            self._set(i, "q", "up")

    def links_down(self) -> list[str]:
        """The namespace-side interfaces now down (empty when the network is whole)."""
        down = []
        for i in range(1, self.size + 1):
            for link in json.loads(ip("-n", self.netns(i), "-j", "link", "show") or "[]"):
                name = str(link.get("ifname", ""))
                if name.startswith(self.prefix) and "UP" not in link.get("flags", []):
                    down.append(name)
        return down
