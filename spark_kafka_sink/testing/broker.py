"""A real Apache Kafka broker (KRaft; ZooKeeper mode before 3.7) started from Maven Central jars: one node, or three
for failover tests.

Used by the test session (tests/conftest.py), by ``make kafka-up`` / ``make kafka-down`` and by the benchmarks.

Why it is built this way:
- No Docker here, so the broker is the plain JVM process that ``bin/kafka-server-start.sh`` would run, from the jars
  that ``conf/kafka/pom.xml`` copies into ``.kafka/lib`` (git-ignored).
- No JVM may outlive the Python process that started it, even one killed with SIGKILL: each child JVM is started
  with ``PR_SET_PDEATHSIG`` so the kernel kills it when its parent dies. Broker data lives in a temporary folder
  named after the owning pid; an interrupted run's folder is removed at its own teardown (Ctrl-C runs it), and any
  folder whose owner is gone is swept at the next start.
- "Ready" means a Metadata request answers and lists every live node, not merely that the port is open.

Any Kafka release from 3.7 on runs the same way (KRaft with static ``controller.quorum.voters``, so storage is
formatted without ``--standalone``); what differs per release is kept in :meth:`KafkaCluster._version_properties`
and :meth:`KafkaCluster._format`. Releases 2.8 to 3.6 run in ZooKeeper mode, as most clusters of those releases
do (KRaft was early access in 2.8 and production-ready from 3.3, KIP-833): a ZooKeeper server (from the jars the
release depends on) in a JVM of its own, then brokers that register in it, configured from
``conf/kafka/server-zookeeper.properties.template``. A 4.x cluster can be formatted with a chosen
``transaction.version`` (KIP-890: 1 keeps the classic transaction protocol, 2 is the 4.x default).

Java and the jars come from :mod:`~spark_kafka_sink.testing.broker_jars`; the Metadata request that decides
"ready" is :func:`~spark_kafka_sink.testing.broker_probe.metadata_broker_ids`.
"""

from __future__ import annotations

import ctypes
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import uuid
from base64 import urlsafe_b64encode
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from spark_kafka_sink.testing.broker_jars import (
    CONF_DIR,
    ToolMissingError,
    broker_lib,
    release,
    require_java,
    selected_kafka_version,
    selected_transaction_version,
)
from spark_kafka_sink.testing.broker_probe import metadata_broker_ids

__all__ = [
    "KafkaCluster",
    "NodeNetwork",
    "BrokerStartError",
    "free_port",
    "pid_alive",
    "sweep_stale_dirs",
]

TMP_PREFIX = "sks-kafka-"
_FIRST_KRAFT = (3, 7)  # older releases run in ZooKeeper mode
_OLDEST = (2, 8)
_START_ATTEMPTS = 3  # a start whose node found a port taken is tried again on new ports (see start)


class BrokerStartError(RuntimeError):
    """The broker did not become ready; the message carries the tail of its log."""


def _new_cluster_id() -> str:
    """A KRaft cluster id: base64url of 16 random bytes, no padding, as ``StorageTool random-uuid`` prints.

    One starting with '-' would be read by StorageTool as an option, so such ids are drawn again.
    """
    while True:
        cluster_id = urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


_HANDED_OUT: set[int] = set()  # ports free_port returned in this process


def free_port() -> int:
    """A free loopback port, never one this process handed out before: the kernel may give a port again as soon as
    the probing socket closes (two listeners of one test broker once got the same port)."""
    while True:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _HANDED_OUT:
            _HANDED_OUT.add(port)
            return port


def _stop_process(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it is still running after ``grace_s``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _die_with_parent() -> None:
    """preexec_fn: the kernel sends SIGKILL to this child when the process that started it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)


def pid_alive(pid: int) -> bool:
    """Whether a process with this pid exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def sweep_stale_dirs(tmp_root: Path | None = None) -> list[Path]:
    """Remove broker folders left by runs whose process is gone (e.g. a SIGKILLed test session)."""
    removed = []
    root = tmp_root or Path(tempfile.gettempdir())
    for path in root.glob(TMP_PREFIX + "*"):
        match = re.match(re.escape(TMP_PREFIX) + r"(\d+)-", path.name)
        if match and not pid_alive(int(match.group(1))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


@dataclass(frozen=True)
class NodeNetwork:
    """Where one node listens when the cluster runs on a network of its own (the network fault tests): its JVM runs
    inside the network namespace ``netns``; clients reach it at ``client_host``, the controller quorum and
    replication at ``peer_host`` (an interface of its own, so either path can be cut alone). With ``proxy_port``,
    a ``PROXIED`` listener on ``client_host`` is advertised as ``127.0.0.1:proxy_port``, where a proxy in front of
    it forwards (clients bootstrapped there keep going through the proxy)."""

    netns: str
    client_host: str
    peer_host: str
    proxy_port: int | None = None


_CLONE_NEWNET = 0x40000000


def _enter_netns(name: str) -> None:
    """Move the calling process into the named network namespace (``ip netns add`` keeps it in /run/netns)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    fd = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        if libc.setns(fd, _CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns into network namespace {name} failed")
    finally:
        os.close(fd)


@dataclass
class _Node:
    node_id: int
    port: int
    controller_port: int
    listener_ports: dict[str, int]
    data_dir: Path
    network: NodeNetwork | None = None
    process: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        """The address clients connect to."""
        return self.network.client_host if self.network else "127.0.0.1"

    @property
    def log_file(self) -> Path:
        return self.data_dir / "logs" / "console.log"

    def log_tail(self, lines: int = 30) -> str:
        texts = []
        for log in (self.log_file, self.data_dir / "logs" / "server.log"):
            if log.exists():
                texts.append(f"--- {log.name}:\n" + "\n".join(log.read_text(errors="replace").splitlines()[-lines:]))
        return "\n".join(texts) or "(no log yet)"


@dataclass
class KafkaCluster:
    """One or three KRaft nodes (each broker and controller) on 127.0.0.1.

    ``listeners`` adds listeners by security protocol name (``SSL``, ``SASL_PLAINTEXT``, ``SASL_SSL``) on free ports;
    ``properties`` are appended to every node's server.properties; ``scram_users`` are
    ``(mechanism, name, password)`` added when storage is formatted. ``version`` is the Kafka release (default:
    ``KAFKA_VERSION`` or 4.4.0); ``transaction_version`` the ``transaction.version`` feature a 4.x cluster is
    formatted with (default: ``KAFKA_TRANSACTION_VERSION`` or the release's own default, 2 on 4.x);
    ``log_config`` another log4j2 file (the benchmarks' ``conf/kafka/log4j2-requests.properties`` also logs every
    request, for request counts); ``jvm_options`` more JVM options (e.g. a ``-D`` system property).
    """

    size: int = 1
    port: int | None = None
    listeners: Sequence[str] = ()
    properties: Mapping[str, str] = field(default_factory=dict)
    scram_users: Iterable[tuple[str, str, str]] = ()
    base_dir: Path | None = None
    detach: bool = False
    heap: str = "768m"
    version: str = field(default_factory=selected_kafka_version)
    transaction_version: int | None = field(default_factory=selected_transaction_version)
    log_config: Path | None = None  # a log4j2 file instead of conf/kafka/log4j2.properties
    jvm_options: Sequence[str] = ()  # more -D... options for every node's JVM
    networks: Mapping[int, NodeNetwork] = field(default_factory=dict)  # node id -> its own network (KRaft only)
    # A test's broker lives for minutes: the JIT's first tier alone (C1) costs far less CPU than compiling hot code
    # again with C2, which a broker that short-lived never earns back. Benchmarks and `make kafka-up` use both tiers.
    short_lived: bool = True
    nodes: dict[int, _Node] = field(default_factory=dict, init=False)
    _owns_base_dir: bool = field(default=False, init=False)
    _zookeeper: subprocess.Popen[bytes] | None = field(default=None, init=False)
    _zookeeper_port: int = field(default=0, init=False)

    @property
    def zookeeper_mode(self) -> bool:
        """Whether this release runs with ZooKeeper (before 3.7) rather than KRaft."""
        return release(self.version) < _FIRST_KRAFT

    # -- lifecycle -------------------------------------------------------------------------------------------
    def start(self, timeout: float = 120.0) -> "KafkaCluster":
        java = require_java()
        if release(self.version) < _OLDEST:
            raise ValueError(f"the launcher runs Kafka 2.8 and newer, not Kafka {self.version}")
        if self.zookeeper_mode and self.scram_users:
            raise ValueError(f"scram_users are added when KRaft storage is formatted: Kafka {self.version} runs in "
                             "ZooKeeper mode here")
        if self.transaction_version is not None and self.major < 4:
            raise ValueError(f"Kafka {self.version} has no transaction.version feature (KIP-890 is 4.0+)")
        if self.networks and self.zookeeper_mode:
            raise ValueError("nodes on networks of their own run in KRaft mode only (Kafka 3.7+)")
        if not any(broker_lib(self.version).glob("kafka_2.13-*.jar")):
            raise ToolMissingError(f"the Kafka {self.version} jars are not in {broker_lib(self.version)}: "
                                   "run `make jars` (Maven) first")
        sweep_stale_dirs()
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                return self._start_once(java, timeout)
            except BrokerStartError as error:
                # free_port probes a port and lets it go; the kernel may hand it to another process's outgoing
                # connection before the node binds it (several suites starting brokers at once). New ports then.
                if "Address already in use" not in str(error) or attempt == _START_ATTEMPTS:
                    raise
                print(f"Kafka {self.version}: a port was taken before a node bound it; starting again on other "
                      f"ports (attempt {attempt + 1} of {_START_ATTEMPTS})", file=sys.stderr)
        raise AssertionError("unreachable")

    def _start_once(self, java: str, timeout: float) -> "KafkaCluster":
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix=f"{TMP_PREFIX}{os.getpid()}-"))
            self._owns_base_dir = True
        self.base_dir.mkdir(parents=True, exist_ok=True)
        for node in self.nodes.values():  # a failed attempt's nodes: their storage was formatted for its cluster id
            shutil.rmtree(node.data_dir, ignore_errors=True)
        self.nodes = {}
        if self.zookeeper_mode:
            self._zookeeper_port = free_port()
        for node_id in range(1, self.size + 1):
            port = self.port if (self.port and self.size == 1) else free_port()
            self.nodes[node_id] = _Node(
                node_id, port, free_port(), {name: free_port() for name in self.listeners},
                self.base_dir / f"node-{node_id}", self.networks.get(node_id),
            )
            network = self.networks.get(node_id)
            if network is not None:
                self.nodes[node_id].listener_ports["REPLICATION"] = free_port()
                if network.proxy_port is not None:
                    self.nodes[node_id].listener_ports["PROXIED"] = free_port()
        cluster_id = _new_cluster_id()
        for node in self.nodes.values():
            self._write_config(node)
            if not self.zookeeper_mode:
                self._format(java, node, cluster_id)
        try:
            if self.zookeeper_mode:
                self._start_zookeeper(java, timeout)
            for node in self.nodes.values():
                self._launch(java, node)
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every node (then ZooKeeper) and delete the data (when the cluster made its own folder)."""
        for node in self.nodes.values():
            self._terminate(node, grace=5.0)
        if self._zookeeper is not None:
            _stop_process(self._zookeeper, 5.0)
            self._zookeeper = None
        if self._owns_base_dir and self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> "KafkaCluster":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def major(self) -> int:
        return release(self.version)[0]

    # -- single nodes ----------------------------------------------------------------------------------------
    def kill_node(self, node_id: int) -> None:
        """SIGKILL one node: no controlled shutdown, as when a machine dies."""
        node = self.nodes[node_id]
        if node.process is not None:
            node.process.kill()
            node.process.wait()
            node.process = None

    def stop_node(self, node_id: int, grace: float = 30.0) -> None:
        """SIGTERM one node and wait for its controlled shutdown."""
        self._terminate(self.nodes[node_id], grace)

    def start_node(self, node_id: int, timeout: float = 120.0) -> None:
        node = self.nodes[node_id]
        deadline = time.monotonic() + timeout
        while True:
            logged = node.log_file.stat().st_size if node.log_file.exists() else 0
            self._launch(require_java(), node)
            try:
                self.wait_ready(max(1.0, deadline - time.monotonic()))
                return
            except BrokerStartError:
                if not self._registered_by_predecessor(node, logged) or time.monotonic() > deadline:
                    raise
            # ZooKeeper mode, after a kill: the dead broker's registration lives until its ZooKeeper session expires
            # (zookeeper.session.timeout.ms), and a broker started before that exits. Start it again, as an
            # operator's restart loop would.
            self._terminate(node, 5.0)

    def _registered_by_predecessor(self, node: _Node, logged: int) -> bool:
        """Whether this launch of ``node`` exited because ZooKeeper still held its killed predecessor's
        registration (``logged``: the size of its console log before the launch)."""
        if not self.zookeeper_mode or node.process is None or node.process.poll() is None:
            return False
        with open(node.log_file, "rb") as log:
            log.seek(logged)
            return b"NodeExistsException" in log.read()

    def move_node(self, node_id: int, port: int | None = None, timeout: float = 120.0) -> int:
        """Restart one node with its PLAINTEXT listener on another port (advertised there too), as when a broker
        is replaced at another address: controlled shutdown, new config, start. Returns the new port."""
        node = self.nodes[node_id]
        self._terminate(node, 30.0)
        node.port = port if port is not None else free_port()
        self._write_config(node)
        self.start_node(node_id, timeout)
        return node.port

    def running_node_ids(self) -> list[int]:
        return [n.node_id for n in self.nodes.values() if n.process is not None and n.process.poll() is None]

    # -- addresses -------------------------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{n.host}:{n.port}" for n in self.nodes.values())

    def bootstrap_of(self, node_ids: Iterable[int]) -> str:
        """Bootstrap servers naming only these nodes (e.g. the survivors of a kill)."""
        return ",".join(f"{self.nodes[i].host}:{self.nodes[i].port}" for i in node_ids)

    def listener_bootstrap(self, listener: str) -> str:
        return ",".join(f"{n.host}:{n.listener_ports[listener]}" for n in self.nodes.values())

    def pids(self) -> list[int]:
        return [n.process.pid for n in self.nodes.values() if n.process is not None]

    @property
    def zookeeper_pid(self) -> int | None:
        """The ZooKeeper server's pid (releases before 3.7), else None."""
        return None if self._zookeeper is None else self._zookeeper.pid

    # -- readiness -------------------------------------------------------------------------------------------
    def wait_ready(self, timeout: float = 120.0) -> None:
        """Until every running node answers Metadata listing all running nodes."""
        deadline = time.monotonic() + timeout
        while True:
            running = self.running_node_ids()
            dead = [n for n in self.nodes.values() if n.process is not None and n.process.poll() is not None]
            if dead:
                raise BrokerStartError(f"Kafka node {dead[0].node_id} exited:\n{dead[0].log_tail()}")
            if self._all_answer(running):
                return
            if time.monotonic() > deadline:
                node = self.nodes[running[0]] if running else next(iter(self.nodes.values()))
                raise BrokerStartError(f"Kafka did not become ready within {timeout:.0f}s:\n{node.log_tail()}")
            time.sleep(0.2)  # polling interval of a readiness check, not a wait standing in for one

    def _all_answer(self, running: list[int]) -> bool:
        for node_id in running:
            try:
                listed = metadata_broker_ids(self.nodes[node_id].host, self.nodes[node_id].port)
            except (OSError, struct.error, ConnectionError):
                return False
            if not set(running) <= set(listed):
                return False
        return True

    # -- internals -------------------------------------------------------------------------------------------
    def _write_config(self, node: _Node) -> None:
        node.data_dir.mkdir(parents=True, exist_ok=True)
        (node.data_dir / "logs").mkdir(exist_ok=True)
        peer = node.network.peer_host if node.network else "127.0.0.1"
        listeners = [f"PLAINTEXT://{node.host}:{node.port}", f"CONTROLLER://{peer}:{node.controller_port}"]
        advertised = [f"PLAINTEXT://{node.host}:{node.port}"]
        for name, port in node.listener_ports.items():
            host = peer if name == "REPLICATION" else node.host
            listeners.append(f"{name}://{host}:{port}")
            advertised.append(f"{name}://127.0.0.1:{node.network.proxy_port}" if name == "PROXIED" and node.network
                              else f"{name}://{host}:{port}")
        voters = ",".join(f"{n.node_id}@{n.network.peer_host if n.network else '127.0.0.1'}:{n.controller_port}"
                          for n in self.nodes.values())
        replication = 3 if self.size >= 3 else 1
        if self.zookeeper_mode:
            listeners = [x for x in listeners if not x.startswith("CONTROLLER:")]
        name = "server-zookeeper.properties.template" if self.zookeeper_mode else "server.properties.template"
        text = (CONF_DIR / "kafka" / name).read_text().format(
            node_id=node.node_id, voters=voters, listeners=",".join(listeners),
            advertised_listeners=",".join(advertised), log_dir=node.data_dir / "data",
            replication=replication, min_isr=2 if replication == 3 else 1,
            zookeeper=f"127.0.0.1:{self._zookeeper_port}",
        )
        properties = {**self._version_properties(replication), **self._network_properties(node), **self.properties}
        extra = "".join(f"{k}={v}\n" for k, v in properties.items())
        (node.data_dir / "server.properties").write_text(text + extra)

    @staticmethod
    def _network_properties(node: _Node) -> dict[str, str]:
        """On a network of its own, replication goes over the peer interface (a listener of its own), so cutting
        the client interface leaves replication running, and the other way round. Later keys win in a Java
        properties file, so these override the template's."""
        if node.network is None:
            return {}
        return {
            "inter.broker.listener.name": "REPLICATION",
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT,"
                                              "PROXIED:PLAINTEXT",
        }

    def _version_properties(self, replication: int) -> dict[str, str]:
        """Settings only some releases know: a 3.x broker warns about (and ignores) 4.x names."""
        if self.major < 4:
            return {}
        # Share groups (KIP-932) keep their state in a topic whose replication must fit the cluster.
        return {
            "share.coordinator.state.topic.replication.factor": str(replication),
            "share.coordinator.state.topic.min.isr": "2" if replication == 3 else "1",
        }

    def _format(self, java: str, node: _Node, cluster_id: str) -> None:
        # A one-shot tool: the JIT's first tier and the serial collector are all it can use.
        cmd = [java, "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
               "-cp", f"{broker_lib(self.version)}/*", "kafka.tools.StorageTool", "format", "-t", cluster_id,
               "-c", str(node.data_dir / "server.properties")]
        if self.transaction_version is not None:
            # KIP-1022 (4.0+): one feature level set at format time; the other features keep the release's defaults.
            cmd += ["--feature", f"transaction.version={self.transaction_version}"]
        for mechanism, name, password in self.scram_users:
            cmd += ["--add-scram", f"{mechanism}=[name={name},password={password}]"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            # The command line holds SCRAM passwords: report the tool's output only.
            raise BrokerStartError(f"formatting node {node.node_id}'s storage failed:\n{proc.stdout}{proc.stderr}")

    def _start_zookeeper(self, java: str, timeout: float) -> None:
        """A standalone ZooKeeper server on a free port (its data and log under the cluster's folder); returns once it
        accepts connections."""
        assert self.base_dir is not None
        data = self.base_dir / "zookeeper"
        (data / "logs").mkdir(parents=True, exist_ok=True)
        # No AdminServer: its Jetty takes port 8080, which a second ZooKeeper (or anything else) may hold.
        cmd = [java, "-Xmx256m", *(["-XX:TieredStopAtLevel=1"] if self.short_lived else []),
               "-Dzookeeper.admin.enableServer=false",
               f"-Dlog4j2.configurationFile={CONF_DIR / 'kafka' / 'log4j2.properties'}",
               f"-Dkafka.logs.dir={data / 'logs'}", "-cp", f"{broker_lib(self.version)}/*",
               "org.apache.zookeeper.server.ZooKeeperServerMain", str(self._zookeeper_port), str(data / "data")]
        with open(data / "logs" / "console.log", "ab") as log:
            self._zookeeper = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                               preexec_fn=None if self.detach else _die_with_parent,
                                               start_new_session=self.detach)
        deadline = time.monotonic() + timeout
        while True:
            if self._zookeeper.poll() is not None:
                text = (data / "logs" / "console.log").read_text(errors="replace")
                raise BrokerStartError("ZooKeeper exited:\n" + "\n".join(text.splitlines()[-30:]))
            try:
                socket.create_connection(("127.0.0.1", self._zookeeper_port), timeout=1.0).close()
                return
            except OSError as exc:
                if time.monotonic() > deadline:
                    raise BrokerStartError(f"ZooKeeper did not listen on {self._zookeeper_port} within "
                                           f"{timeout:.0f}s") from exc
                time.sleep(0.1)  # polling interval of a readiness check

    def _launch(self, java: str, node: _Node) -> None:
        cmd = [
            java, "-Xms256m", f"-Xmx{self.heap}", "-XX:+UseG1GC",
            *(["-XX:TieredStopAtLevel=1"] if self.short_lived else []),
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={self.log_config or CONF_DIR / 'kafka' / 'log4j2.properties'}",
            f"-Dkafka.logs.dir={node.data_dir / 'logs'}",
            *self.jvm_options,
            "-cp", f"{broker_lib(self.version)}/*", "kafka.Kafka", str(node.data_dir / "server.properties"),
        ]
        netns = node.network.netns if node.network else None

        def prepare() -> None:
            if netns is not None:
                _enter_netns(netns)
            if not self.detach:
                _die_with_parent()

        log = open(node.log_file, "ab")
        try:
            node.process = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                preexec_fn=prepare if (netns or not self.detach) else None,
                start_new_session=self.detach,
            )
        finally:
            log.close()

    @staticmethod
    def _terminate(node: _Node, grace: float) -> None:
        if node.process is not None:
            _stop_process(node.process, grace)
        node.process = None
