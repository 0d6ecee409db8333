"""The bundled job on a Spark standalone cluster (a master and two workers on this machine), the package shipped
as a user ships it: the project built as a wheel, installed into a fresh virtualenv, packed and passed with
``--archives env.zip#env``. An executor JVM, one of its Python workers, or a whole worker (its JVM and everything
under it) is SIGKILLed mid-write; what the job wrote is read back with confluent-kafka at read_committed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from spark_kafka_sink.testing.spark_cluster import SparkStandalone, build_wheel, pack_venv, spark_home
from tests.cluster.faults import end_offsets, new_topic, read_all
from tests.conftest import wait_for

pytestmark = pytest.mark.cluster

ROWS = 400_000
JOB = REPO_ROOT / "jobs" / "batch_to_kafka.py"


@pytest.fixture(scope="module")
def shipped_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The work folder holding ``env.zip`` (the packed venv) and ``env/`` (the same venv, for the driver)."""
    work = tmp_path_factory.mktemp("ship")
    pack_venv(build_wheel(work / "dist"), work)
    return work


@pytest.fixture(scope="module")
def standalone() -> Iterator[SparkStandalone]:
    cluster = SparkStandalone(workers=2, worker_cores=1, worker_memory="1g").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _processes_under(pids: list[int]) -> list[psutil.Process]:
    found = []
    for pid in pids:
        try:
            found.extend(psutil.Process(pid).children(recursive=True))
        except psutil.NoSuchProcess:
            continue
    return found


def _cmdline(proc: psutil.Process) -> str:
    try:
        return " ".join(proc.cmdline())
    except (psutil.NoSuchProcess, psutil.ZombieProcess):
        return ""


def _executor_jvms(standalone: SparkStandalone) -> list[psutil.Process]:
    return [p for p in _processes_under(standalone.worker_pids()) if "CoarseGrainedExecutorBackend" in _cmdline(p)]


def _python_workers(standalone: SparkStandalone) -> list[psutil.Process]:
    """Python workers forked by an executor's pyspark.daemon (the daemon's children, not the daemon itself)."""
    daemons = [p for p in _processes_under(standalone.worker_pids()) if "pyspark.daemon" in _cmdline(p)]
    return [c for d in daemons for c in _processes_under([d.pid])]


def _interpreters(standalone: SparkStandalone) -> set[str]:
    """The interpreter each executor-side Python process runs, as an absolute path (relative to its cwd)."""
    found = set()
    for proc in _processes_under(standalone.worker_pids()):
        try:
            argv0, cwd = proc.cmdline()[0], proc.cwd()
        except (psutil.NoSuchProcess, psutil.ZombieProcess, IndexError):
            continue
        if "python" in Path(argv0).name:
            found.add(str(Path(cwd, argv0)))
    return found


@pytest.mark.parametrize("fault", ["executor JVM", "Python worker"])
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_job_on_standalone_cluster_survives_a_sigkill(kafka: KafkaCluster, standalone: SparkStandalone,
                                                      shipped_env: Path, guarantee: str, fault: str) -> None:
    topic = new_topic(kafka, 3)
    cmd = standalone.submit_command(JOB, ["--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic,
                                          "--rows", str(ROWS), "--partitions", "4", "--guarantee", guarantee],
                                    shipped_env / "env.zip")
    # Client mode: the driver runs ./env/bin/python in the submit folder (the same environment, unpacked), the
    # executors ./env/bin/python in their work folders (the archive). PYSPARK_DRIVER_PYTHON stays unset: Spark
    # gives a data source found by its scan the driver's interpreter path, which the executors would then run.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_HOME=str(spark_home()), PYSPARK_PYTHON="./env/bin/python")
    log = shipped_env / f"submit-{topic}.log"
    with open(log, "wb") as out:
        job = subprocess.Popen(cmd, cwd=shipped_env, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        def started_writing() -> bool:
            if job.poll() is not None:
                raise AssertionError(f"the job ended before writing:\n{log.read_text(errors='replace')[-6000:]}")
            return sum(end_offsets(kafka, topic).values()) > 0

        wait_for("the job's first records", started_writing, timeout=240)
        pick = _executor_jvms if fault == "executor JVM" else _python_workers
        wait_for(f"a running {fault}", lambda: bool(pick(standalone)), timeout=60)
        shipped = _interpreters(standalone)
        victim = pick(standalone)[0]
        victim_line = _cmdline(victim)[:120]
        killed_at = time.monotonic()
        os.kill(victim.pid, signal.SIGKILL)
        job.wait(600)
        finished_s = time.monotonic() - killed_at
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
    output = log.read_text(errors="replace")
    assert job.returncode == 0, output[-6000:]
    records = read_all(kafka, topic)
    seen = Counter(json.loads(r.value or b"{}")["order_id"] for r in records)
    lost = ROWS - len(set(seen) & set(range(ROWS)))
    duplicated = sum(n - 1 for n in seen.values() if n > 1)
    print(f"\n[standalone {guarantee}: {fault} SIGKILLed mid-write] expected {ROWS}, read {len(records)}: lost {lost}, "
          f"duplicated {duplicated}; the job finished {finished_s:.1f} s after the kill ({victim_line})")
    assert "pykafka-sink" in output and "committed" in output
    assert "Lost task" in output, "the kill did not fail a running task"
    assert shipped and all(str(standalone.base_dir) in exe for exe in shipped), (
        f"the executors' Python workers did not run the shipped environment: {shipped}")
    assert lost == 0
    assert set(seen) <= set(range(ROWS))
    if guarantee == "exactly_once":
        assert (len(records), duplicated) == (ROWS, 0)


def test_job_finishes_on_the_other_worker_when_a_worker_is_sigkilled(
        kafka: KafkaCluster, standalone: SparkStandalone, shipped_env: Path) -> None:
    """A worker lost mid-job: worker-1's JVM, its executor JVM and the executor's Python workers all get SIGKILL
    at once, as when the machine dies. The master drops the worker when its connection closes, the driver loses
    the executor and reruns its tasks on the other worker's executor (the retries fence the dead tasks'
    transactions); the job finishes and read_committed shows exactly ROWS. The worker is started again after."""
    topic = new_topic(kafka, 3)
    cmd = standalone.submit_command(JOB, ["--bootstrap-servers", kafka.bootstrap_servers, "--topic", topic,
                                          "--rows", str(ROWS), "--partitions", "4", "--guarantee", "exactly_once"],
                                    shipped_env / "env.zip")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_HOME=str(spark_home()), PYSPARK_PYTHON="./env/bin/python")
    log = shipped_env / f"submit-{topic}.log"
    with open(log, "wb") as out:
        job = subprocess.Popen(cmd, cwd=shipped_env, env=env, stdout=out, stderr=subprocess.STDOUT)
    killed: list[int] = []
    try:
        def started_writing() -> bool:
            if job.poll() is not None:
                raise AssertionError(f"the job ended before writing:\n{log.read_text(errors='replace')[-6000:]}")
            return sum(end_offsets(kafka, topic).values()) > 0

        wait_for("the job's first records", started_writing, timeout=240)
        worker_pid = standalone.processes["worker-1"].pid
        wait_for("a Python worker under worker-1", lambda: bool(_python_workers_of(worker_pid)), timeout=60)
        killed_at = time.monotonic()
        killed = standalone.kill_worker("worker-1")
        dead_s = wait_for("the master to drop worker-1",
                          lambda: list(standalone.worker_states().values()).count("DEAD") == 1, timeout=120)
        job.wait(600)
        finished_s = time.monotonic() - killed_at
    finally:
        if job.poll() is None:
            job.kill()
            job.wait()
        if "worker-1" in standalone.processes and standalone.processes["worker-1"].poll() is not None:
            standalone.start_worker("worker-1")  # from the test's thread: see start_worker
    output = log.read_text(errors="replace")
    assert job.returncode == 0, output[-6000:]
    records = read_all(kafka, topic)
    seen = Counter(json.loads(r.value or b"{}")["order_id"] for r in records)
    lost = ROWS - len(set(seen) & set(range(ROWS)))
    duplicated = sum(n - 1 for n in seen.values() if n > 1)
    # A task on an executor lost with its worker is rerun without counting towards spark.task.maxFailures.
    lost_tasks = output.count("its executor exited for a reason unrelated to the task")
    print(f"\n[standalone exactly_once: worker-1 SIGKILLed with {len(killed)} processes under it] expected {ROWS}, "
          f"read {len(records)}: lost {lost}, duplicated {duplicated}; the master marked it DEAD after "
          f"{dead_s:.1f} s, the job finished {finished_s:.1f} s after the kill on the other worker "
          f"({lost_tasks} lost task(s) rerun)")
    assert len(killed) >= 3, f"expected the worker, its executor and Python workers; killed {killed}"
    assert "pykafka-sink" in output and "committed" in output
    assert "worker lost" in output and lost_tasks >= 1, "the kill did not fail a running task"
    assert (len(records), lost, duplicated) == (ROWS, 0, 0)
    assert set(seen) <= set(range(ROWS))


def _python_workers_of(worker_pid: int) -> list[psutil.Process]:
    """Python workers forked by a pyspark.daemon under the worker ``worker_pid``."""
    daemons = [p for p in _processes_under([worker_pid]) if "pyspark.daemon" in _cmdline(p)]
    return [c for d in daemons for c in _processes_under([d.pid])]
