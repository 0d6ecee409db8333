"""Spark processes on this machine from the pyspark installation -- a standalone cluster (a master and workers) and
a Spark Connect server -- and the package installed the way a user installs it: a built wheel in a fresh
virtualenv, packed as a zip to ship to a cluster.

    with SparkStandalone(workers=2) as spark_cluster:          # spark://127.0.0.1:<port>, loopback only
        env = pack_venv(build_wheel(dist_dir), work_dir)       # env.zip: python + the wheel + its dependencies
        spark_cluster.submit(job, args, archive=env)           # spark-submit --archives env.zip#env

    venv = make_venv(build_wheel(dist_dir), env_dir, CONNECT_CLIENT_DEPENDENCIES)
    with SparkConnectServer(python=venv / "bin" / "python") as server:   # sc://127.0.0.1:<port>
        subprocess.run([venv / "bin" / "python", client], env=server.client_env())

Why it is built this way:
- The master and workers are the plain JVMs ``spark-class org.apache.spark.deploy.master.Master`` /
  ``...worker.Worker`` that ``sbin/start-master.sh`` would run (pip's pyspark has no sbin/start-*.sh). Ports are free
  ones on 127.0.0.1; each JVM gets a parent-death signal so none outlives the Python process that started it.
- Ready means the master's JSON status page lists every worker ALIVE.
- The packed environment is a plain ``python -m venv`` with the wheel installed (not editable) plus its runtime
  dependencies except pyspark, which the workers take from the Spark installation (``pyspark.zip`` on their
  PYTHONPATH). A venv names its base interpreter by absolute path (``pyvenv.cfg``), so the archive works on machines
  with the same Python at the same path: here, and on a cluster built from one image (as with venv-pack).
- The Connect server is ``spark-submit --class ...SparkConnectServer`` (what ``sbin/start-connect-server.sh`` runs,
  without its daemon wrapper) on a local master; its Python workers run the given interpreter. A client is any
  Python with pyspark and the Connect client's dependencies: here the same venv, with the installation's
  ``pyspark.zip`` on PYTHONPATH (pyspark itself is not in the venv, as on executors).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .broker import _die_with_parent, _stop_process, free_port
from .broker_jars import REPO_ROOT

__all__ = ["SparkStandalone", "SparkConnectServer", "SparkClusterError", "build_wheel", "make_venv", "pack_venv",
           "spark_home", "RUNTIME_DEPENDENCIES", "CONNECT_CLIENT_DEPENDENCIES", "SHORT_LIVED_JVM"]

#: What the executors' Python needs besides pyspark (which the Spark installation provides).
RUNTIME_DEPENDENCIES = ("pyarrow>=15", "numpy>=1.26", "crc32c>=2.4", "lz4>=4.3")
#: What a Spark Connect client needs besides pyspark (pyspark's ``connect`` extra), pandas below 3 as pyspark 4.3
#: recommends. A Connect server's own Python workers need them too to run ``foreachBatch`` functions, which talk
#: back to the server as Connect clients.
CONNECT_CLIENT_DEPENDENCIES = ("pandas>=2.2,<3", "grpcio>=1.76", "grpcio-status>=1.76",
                               "googleapis-common-protos>=1.71", "zstandard>=0.25")


#: Every JVM these clusters start lives for one test module at most: the JIT's first tier alone costs less CPU
#: than the optimizing tier would save them.
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1"


class SparkClusterError(RuntimeError):
    """The cluster did not start, or a job failed; the message carries the tail of the relevant log."""


def _bin(name: str) -> Path:
    path = Path(sys.executable).parent / name
    if not path.exists():
        raise SparkClusterError(f"{path} not found: pyspark is not installed in this environment (make venv)")
    return path


def spark_home() -> Path:
    """The pyspark installation's folder: pip's pyspark is a complete SPARK_HOME (jars, bin, python/lib)."""
    import pyspark

    return Path(pyspark.__file__).parent


def _tail(path: Path, lines: int = 40) -> str:
    if not path.exists():
        return "(no log)"
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def build_wheel(dist_dir: Path, source: Path = REPO_ROOT) -> Path:
    """``pip wheel`` the project (not editable) into ``dist_dir``; returns the wheel's path."""
    dist_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist_dir), str(source)],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SparkClusterError(f"building the wheel failed:\n{proc.stdout}{proc.stderr}")
    wheels = sorted(dist_dir.glob("spark_kafka_sink-*.whl"), key=lambda p: p.stat().st_mtime)
    if not wheels:
        raise SparkClusterError(f"pip wheel wrote no spark_kafka_sink wheel into {dist_dir}")
    return wheels[-1]


def pack_venv(wheel: Path, work_dir: Path, extras: tuple[str, ...] = ()) -> Path:
    """:func:`make_venv` as ``work_dir/env``, packed as ``work_dir/env.zip`` with the venv's contents at the
    archive's root (``--archives env.zip#env`` unpacks it as ``./env``)."""
    env_dir = make_venv(wheel, work_dir / "env", extras)
    archive = work_dir / "env.zip"
    _zip_tree(env_dir, archive)
    return archive


def make_venv(wheel: Path, env_dir: Path, extras: tuple[str, ...] = ()) -> Path:
    """A fresh venv at ``env_dir`` with ``wheel``, its runtime dependencies (not pyspark) and ``extras``."""
    shutil.rmtree(env_dir, ignore_errors=True)
    base_python = getattr(sys, "_base_executable", sys.executable)
    steps = [
        # --copies: the interpreter is a file, not a symlink into the base installation (an archive keeps it whole)
        [base_python, "-m", "venv", "--copies", str(env_dir)],
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "--no-deps", str(wheel)],
        [str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", *RUNTIME_DEPENDENCIES, *extras],
    ]
    # Without PYTHONPATH: a source checkout on it (with its .egg-info) would make pip skip the wheel as installed.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    for cmd in steps:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            raise SparkClusterError(f"{' '.join(cmd)} failed:\n{proc.stdout}{proc.stderr}")
    return env_dir


def _zip_tree(folder: Path, archive: Path) -> None:
    """Zip ``folder``'s contents (names relative to it), keeping each file's unix mode.

    Zip, not tar: Spark 4 unpacks tar archives with Hadoop's Java untar, which drops the execute bits, so
    ``./env/bin/python`` would not run ("Permission denied"); its unzip restores the modes stored in the archive.
    Stored, not deflated: compressing ~270 MB costs more than it saves on one machine.
    """
    with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as zf:
        for path in sorted(folder.rglob("*")):
            relative = path.relative_to(folder)
            if relative.parts[0] == "lib64" or path.is_symlink() or not path.is_file():
                continue  # lib64 is a symlink to lib; directories are implied by the files' names
            zf.write(path, str(relative))


@dataclass
class SparkStandalone:
    """A master and ``workers`` workers on 127.0.0.1, each worker offering ``worker_cores`` cores and
    ``worker_memory`` to executors. Logs and work dirs live in a temporary folder, deleted by ``stop``."""

    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    daemon_memory: str = "256m"
    base_dir: Path | None = None
    master_port: int = 0
    master_ui_port: int = 0
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict, init=False)
    _launch_args: dict[str, list[str]] = field(default_factory=dict, init=False)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    def _env(self) -> dict[str, str]:
        assert self.base_dir is not None
        return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_LOCAL_HOSTNAME": "localhost", "SPARK_DAEMON_MEMORY": self.daemon_memory,
                "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM,
                "SPARK_LOG_DIR": str(self.base_dir / "logs"),
                "SPARK_WORKER_DIR": str(self.base_dir / "work")}

    def start(self, timeout: float = 120.0) -> SparkStandalone:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix=f"sks-spark-{os.getpid()}-"))
        (self.base_dir / "logs").mkdir(parents=True, exist_ok=True)
        self.master_port, self.master_ui_port = free_port(), free_port()
        try:
            self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                    "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)])
            for i in range(1, self.workers + 1):
                self._launch(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.worker_cores), "--memory", self.worker_memory,
                    "--work-dir", str(self.base_dir / f"work-{i}")])
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, args: list[str]) -> None:
        assert self.base_dir is not None
        self._launch_args[name] = args
        log = open(self.base_dir / "logs" / f"{name}.log", "ab")
        try:
            self.processes[name] = subprocess.Popen(
                [str(_bin("spark-class")), *args], stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=self._env(), preexec_fn=_die_with_parent)
        finally:
            log.close()

    def status(self) -> dict[str, Any]:
        """The master's JSON status page (workers, applications)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.master_ui_port}/json/", timeout=5) as resp:
            result: dict[str, Any] = json.load(resp)
            return result

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.status().get("workers", []) if w.get("state") == "ALIVE")
        except (OSError, ValueError):  # not listening yet, or the UI answered before it could render the status
            return 0

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while self.alive_workers() < self.workers:
            for name, proc in self.processes.items():
                if proc.poll() is not None:
                    raise SparkClusterError(f"spark {name} exited:\n{self.log_tail(name)}")
            if time.monotonic() > deadline:
                raise SparkClusterError(f"{self.workers} workers not ALIVE within {timeout:.0f}s:\n"
                                        f"{self.log_tail('master')}")
            time.sleep(0.2)  # poll interval of a readiness check

    def log_tail(self, name: str) -> str:
        assert self.base_dir is not None
        return _tail(self.base_dir / "logs" / f"{name}.log")

    def worker_pids(self) -> list[int]:
        return [p.pid for name, p in self.processes.items() if name.startswith("worker") and p.poll() is None]

    def kill_worker(self, name: str) -> list[int]:
        """SIGKILL worker ``name`` ("worker-1" ...) and every process under it (its executor JVMs and their Python
        workers), as when its machine dies; returns the pids killed. ``start_worker`` brings it back."""
        import psutil

        worker = self.processes[name]
        try:
            tree = [psutil.Process(worker.pid), *psutil.Process(worker.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            tree = []
        killed = []
        for proc in tree:
            try:
                proc.send_signal(signal.SIGKILL)
                killed.append(proc.pid)
            except psutil.NoSuchProcess:
                continue
        worker.wait()
        psutil.wait_procs(tree, timeout=10)
        return killed

    def start_worker(self, name: str, timeout: float = 120.0) -> None:
        """Launch worker ``name`` again with its first settings (new ports) and wait until every worker is ALIVE.
        Call it from a thread that outlives the cluster's use: the worker gets that thread's parent-death signal."""
        args = list(self._launch_args[name])
        for flag in ("--port", "--webui-port"):
            args[args.index(flag) + 1] = str(free_port())
        self._launch(name, args)
        self.wait_ready(timeout)

    def worker_states(self) -> dict[str, str]:
        """The master's view of every worker it knows: {worker id: ALIVE / DEAD / ...}."""
        return {w["id"]: w["state"] for w in self.status().get("workers", [])}

    def submit_command(self, job: Path, job_args: list[str], archive: Path, conf: dict[str, str] | None = None,
                       executor_memory: str = "512m") -> list[str]:
        """The spark-submit command line: the job on this cluster, with the packed environment as ``./env``."""
        settings = {
            "spark.executor.memory": executor_memory, "spark.executor.cores": "1", "spark.cores.max": "2",
            "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.extraJavaOptions": SHORT_LIVED_JVM, "spark.executor.extraJavaOptions": SHORT_LIVED_JVM,
            # Executors' Python workers run the shipped environment's interpreter.
            "spark.pyspark.python": "./env/bin/python",
            **(conf or {}),
        }
        cmd = [str(_bin("spark-submit")), "--master", self.master_url, "--archives", f"{archive}#env"]
        for key, value in settings.items():
            cmd += ["--conf", f"{key}={value}"]
        return [*cmd, str(job), *job_args]

    def stop(self) -> None:
        for proc in self.processes.values():
            _stop_process(proc, 10.0)
        self.processes.clear()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class SparkConnectServer:
    """A Spark Connect server on 127.0.0.1 (local master, ``cores`` threads) whose Python workers run ``python``.
    Its log and scratch space live in a temporary folder, deleted by ``stop``."""

    python: Path
    cores: int = 2
    driver_memory: str = "1g"
    port: int = 0
    base_dir: Path | None = None
    process: subprocess.Popen[bytes] | None = field(default=None, init=False)

    @property
    def url(self) -> str:
        return f"sc://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        assert self.base_dir is not None
        return self.base_dir / "connect-server.log"

    def start(self, timeout: float = 120.0) -> SparkConnectServer:
        if self.base_dir is None:
            self.base_dir = Path(tempfile.mkdtemp(prefix=f"sks-connect-{os.getpid()}-"))
        self.port = free_port()
        settings = {"spark.connect.grpc.binding.address": "127.0.0.1",
                    "spark.connect.grpc.binding.port": str(self.port),
                    "spark.ui.enabled": "false", "spark.driver.host": "127.0.0.1",
                    "spark.driver.bindAddress": "127.0.0.1", "spark.pyspark.python": str(self.python),
                    "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
                    "spark.local.dir": str(self.base_dir / "local")}
        cmd = [str(_bin("spark-submit")), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
               "--master", f"local[{self.cores}]", "--driver-memory", self.driver_memory]
        for key, value in settings.items():
            cmd += ["--conf", f"{key}={value}"]
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": str(self.python)}
        env.pop("PYSPARK_DRIVER_PYTHON", None)
        log = open(self.log_path, "ab")
        try:
            self.process = subprocess.Popen([*cmd, "spark-internal"], stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, env=env, preexec_fn=_die_with_parent)
        finally:
            log.close()
        try:
            self._wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.process is not None
            if self.process.poll() is not None:
                raise SparkClusterError(f"the Spark Connect server exited ({self.process.returncode}):\n"
                                        f"{_tail(self.log_path)}")
            if "Spark Connect server started" in self.log_path.read_text(errors="replace"):
                return
            time.sleep(0.2)
        raise SparkClusterError(f"the Spark Connect server did not start within {timeout:.0f} s:\n"
                                f"{_tail(self.log_path)}")

    def client_env(self) -> dict[str, str]:
        """The environment for a client process of the server's venv: pyspark from the installation's zips."""
        lib = spark_home() / "python" / "lib"
        zips = [str(p) for p in sorted(lib.glob("*.zip"))]
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
        return {**env, "PYTHONPATH": os.pathsep.join(zips), "SPARK_CONNECT_URL": self.url}

    def stop(self) -> None:
        if self.process is not None:
            _stop_process(self.process, 20.0)
        self.process = None
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> SparkConnectServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
