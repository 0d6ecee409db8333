"""A Spark standalone cluster on this machine (a master and workers from the pyspark installation), and the
package shipped to it the way a user ships it: a built wheel installed into a virtualenv packed as a zip.

    with SparkStandalone(workers=2) as spark_cluster:          # spark://127.0.0.1:<port>, loopback only
        env = pack_venv(build_wheel(dist_dir), work_dir)       # env.zip: python + the wheel + its dependencies
        spark_cluster.submit(job, args, archive=env)           # spark-submit --archives env.zip#env

Why it is built this way:
- The master and workers are the plain JVMs ``spark-class org.apache.spark.deploy.master.Master`` /
  ``...worker.Worker`` that ``sbin/start-master.sh`` would run (pip's pyspark has no sbin/start-*.sh). Ports are free
  ones on 127.0.0.1; each JVM gets a parent-death signal so none outlives the Python process that started it.
- Ready means the master's JSON status page lists every worker ALIVE.
- The packed environment is a plain ``python -m venv`` with the wheel installed (not editable) plus its runtime
  dependencies except pyspark, which the workers take from the Spark installation (``pyspark.zip`` on their
  PYTHONPATH). A venv names its base interpreter by absolute path (``pyvenv.cfg``), so the archive works on machines
  with the same Python at the same path: here, and on a cluster built from one image (as with venv-pack).
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

from .broker import _die_with_parent, free_port
from .broker_jars import REPO_ROOT

__all__ = ["SparkStandalone", "SparkClusterError", "build_wheel", "pack_venv", "spark_home", "RUNTIME_DEPENDENCIES"]

#: What the executors' Python needs besides pyspark (which the Spark installation provides).
RUNTIME_DEPENDENCIES = ("pyarrow>=15", "numpy>=1.26", "crc32c>=2.4", "lz4>=4.3")


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
    """A fresh venv with ``wheel`` and its runtime dependencies (not pyspark), packed as ``work_dir/env.zip`` with
    the venv's contents at the archive's root (``--archives env.zip#env`` unpacks it as ``./env``)."""
    env_dir = work_dir / "env"
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
    archive = work_dir / "env.zip"
    _zip_tree(env_dir, archive)
    return archive


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
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        self.processes.clear()
        if self.base_dir is not None:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> SparkStandalone:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
