"""exactly_once survives the driver: the bundled jobs run with spark-submit, the driver process group is killed with
SIGKILL at each point of the commit, then the same job runs again. Read back at read_committed with librdkafka.
Marked ``cluster`` with the other real-process fault tests (``make test-cluster``): ~5 minutes of spark-submit runs,
against the session's single broker.

The kill points are reached through a commit hook the tests install in the job's processes (``commit_pause/``'s
``sitecustomize``, given ``DRIVER_CRASH_PAUSE_AT=<point>:<file>``): the driver's commit stops there, creates the file
and waits; the test then kills the driver for real, or lets it go on. The same hooks hold a write while another
uses its transactionalIdPrefix, and stall the Python writer of a task's failed first attempt
(``LATE_ATTEMPT_HOLD``) so that it goes on after Spark's retry of the task: the late attempts' tests.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from spark_kafka_sink.testing.spark_cluster import SHORT_LIVED_JVM
from tests.conftest import ConsumedRecord, wait_for
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.broker]

JOBS = REPO_ROOT / "jobs"
SPARK_SUBMIT = Path(sys.executable).parent / "spark-submit"
PAUSE_HOOK_DIR = Path(__file__).parent / "commit_pause"  # its sitecustomize registers the pause hook
PAUSE_ENV = "DRIVER_CRASH_PAUSE_AT"
HOLD_ENV = "LATE_ATTEMPT_HOLD"
HOLD_AFTER_FLUSH_ENV = "HOLD_AFTER_FLUSH"
LATE_ATTEMPT_JOB = Path(__file__).with_name("late_attempt_job.py")
ROWS = 3000
LATE_ROWS = 400  # late_attempt_job's rows per partition


def launch(job: str | Path, args: list[str], tmp_path: Path, pause: str | None = None,
           hold: str | None = None, master: str = "local[2]",
           hold_after_flush: Path | None = None) -> tuple[subprocess.Popen[str], Path]:
    """spark-submit ``job`` (a name in jobs/, or a path) in its own process group; with ``pause``, its commit stops
    at that point; ``hold`` (``<partition>:<folder>``) stalls that partition's first attempt; ``hold_after_flush``
    stops every task after its flush (commit_pause/)."""
    marker = tmp_path / f"paused-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    for name in (PAUSE_ENV, HOLD_ENV, HOLD_AFTER_FLUSH_ENV):
        env.pop(name, None)
    if pause is not None:
        env[PAUSE_ENV] = f"{pause}:{marker}"
    if hold is not None:
        env[HOLD_ENV] = hold
    if hold_after_flush is not None:
        env[HOLD_AFTER_FLUSH_ENV] = str(hold_after_flush)
    if pause is not None or hold is not None or hold_after_flush is not None:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(PAUSE_HOOK_DIR), env.get("PYTHONPATH")) if p)
    script = job if isinstance(job, Path) else JOBS / job
    cmd = [str(SPARK_SUBMIT), "--master", master, "--conf", "spark.ui.enabled=false",
           "--conf", f"spark.driver.extraJavaOptions={SHORT_LIVED_JVM}", str(script), *args]
    log = open(tmp_path / f"{script.name}-{uuid.uuid4().hex[:6]}.log", "w")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(cmd, cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    log.close()
    return proc, marker


def kill_when_paused(proc: subprocess.Popen[str], marker: Path, timeout: float = 240.0) -> int:
    """Wait until the driver's commit reached its pause point, then SIGKILL the whole driver process group.
    Returns the writeId (streaming: the micro-batch) whose commit was paused."""
    try:
        wait_for("the job to reach its pause point", lambda: marker.exists() or proc.poll() is not None, timeout)
        assert marker.exists(), f"the job ended (status {proc.returncode}) before reaching its pause point"
        # The marker exists: its two words are being written.
        wait_for("the pause marker's two words", lambda: len(marker.read_text().split()) >= 2, timeout=30,
                 interval=0.01)
        paused_pid, write_id = (int(word) for word in marker.read_text().split())
    finally:  # paused or not, the job ends here: none of it outlives this test
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
    # The paused commit runs in a Python worker outside the JVM: it dies with its daemon once the JVM is gone.
    wait_for(f"the paused commit worker {paused_pid} to end with the driver", lambda: not _alive(paused_pid), 60)
    return write_id


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def finish(proc: subprocess.Popen[str], timeout: float = 300.0) -> None:
    assert proc.wait(timeout) == 0, f"the job failed with status {proc.returncode}"


def assert_nothing_open(bootstrap: str, topic: str) -> None:
    """No transaction left open: read_committed can read to the end (the last stable offset is the high watermark).
    Checked as soon as the job ended: its final graceful query.stop() aborts what it interrupted (nothing fenced
    here)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"lso-{uuid.uuid4().hex}",
                         "isolation.level": "read_committed"})
    try:
        for partition, high in end_offsets(bootstrap, topic).items():
            stable = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
            assert stable == high, f"partition {partition}: last stable offset {stable} < high watermark {high}"
    finally:
        consumer.close()


@pytest.mark.parametrize("point", ["after-plan", "after-first-commit", "after-commits", "after-complete"])
def test_batch_job_driver_killed_while_committing_then_run_again(
        point: str, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "3",
            "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix=crash-{uuid.uuid4().hex[:8]}",
            "--option", "writeId=11"]
    proc, marker = launch("batch_to_kafka.py", args, tmp_path, pause=point)
    kill_when_paused(proc, marker)
    finish(launch("batch_to_kafka.py", args, tmp_path)[0])
    orders = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic))
    assert orders == Counter(range(ROWS))  # every row exactly once
    assert_nothing_open(bootstrap, topic)


def test_streaming_driver_killed_after_kafka_commit_before_spark_commit_log(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        tmp_path: Path) -> None:
    topic = topic_factory(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--checkpoint", str(checkpoint),
            "--rows-per-second", "500", "--trigger-seconds", "1"]
    proc, marker = launch("stream_to_kafka.py", args, tmp_path, pause="after-complete")
    # Killed once the first micro-batch with rows is committed in Kafka and before Spark's commit log has it.
    kill_when_paused(proc, marker)
    finish(launch("stream_to_kafka.py", [*args, "--seconds", "12"], tmp_path)[0])
    ticks = Counter(json.loads(r.value or b"{}")["value"] for r in readback(topic))
    assert ticks and set(ticks.values()) == {1}, [v for v, n in ticks.items() if n > 1][:10]
    assert sorted(ticks) == list(range(len(ticks)))  # a gap-free prefix of the rate source: nothing lost
    assert_nothing_open(bootstrap, topic)


def test_foreach_batch_driver_killed_then_restarted(bootstrap: str, topic_factory: Callable[..., str],
                                                   readback: Callable[..., list[ConsumedRecord]],
                                                   tmp_path: Path) -> None:
    topic = topic_factory(partitions=2)
    checkpoint = tmp_path / "checkpoint"
    prefix = f"fb-{uuid.uuid4().hex[:8]}"
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--checkpoint", str(checkpoint),
            "--transactional-id-prefix", prefix, "--rows-per-second", "200", "--trigger-seconds", "1"]
    proc, marker = launch("foreach_batch_to_kafka.py", args, tmp_path, pause="after-commits")
    killed = kill_when_paused(proc, marker)
    finish(launch("foreach_batch_to_kafka.py", [*args, "--seconds", "10"], tmp_path)[0])
    totals = Counter((v["batch_id"], v["bucket"]) for v in (json.loads(r.value or b"{}") for r in readback(topic)))
    assert totals and set(totals.values()) == {1}, [k for k, n in totals.items() if n > 1][:10]
    # No batch lost or doubled: the killed one (the first with rows: the rate source's first batches can be empty)
    # is there once, followed by every later one.
    batches = sorted({batch for batch, _ in totals})
    assert batches[0] == killed and batches == list(range(batches[0], batches[-1] + 1)), (killed, batches)
    assert_nothing_open(bootstrap, topic)


def wait_until_nothing_open(bootstrap: str, topic: str, timeout: float = 120.0) -> None:
    def nothing_open() -> bool:
        try:
            assert_nothing_open(bootstrap, topic)
        except AssertionError:
            return False
        return True

    # Polled every 0.5 s: the broker's abort check runs every few seconds.
    wait_for(f"the broker to abort {topic}'s open transactions", nothing_open, timeout, interval=0.5)


def test_re_run_after_the_transaction_timeout_rewrites_only_what_the_broker_aborted(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "3",
            "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix=late-{uuid.uuid4().hex[:8]}",
            "--option", "writeId=2"]
    # A short timeout for the killed run only, so the broker aborts its open transactions soon; 10 s, not less: a
    # slow host takes several seconds from a task's first record to the driver's first EndTxn (the commit's Python
    # worker starts then), and a transaction the broker aborted first cannot be the one committed (the pause hook
    # then lets the next EndTxn be the first). The re-run keeps the default, for the same reason.
    proc, marker = launch("batch_to_kafka.py", [*args, "--option", "kafka.transaction.timeout.ms=10000"], tmp_path,
                          pause="after-first-commit")
    kill_when_paused(proc, marker)  # one partition committed, two transactions left open
    wait_until_nothing_open(bootstrap, topic)  # ... until the broker aborted them (transaction.timeout.ms)
    committed_before = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic))
    assert 0 < len(committed_before) < ROWS
    finish(launch("batch_to_kafka.py", args, tmp_path)[0])
    orders = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic))
    assert orders == Counter(range(ROWS))  # the aborted partitions written again, the committed one skipped


def test_a_slow_write_does_not_hold_up_another_prefix(bootstrap: str, topic_factory: Callable[..., str],
                                                      readback: Callable[..., list[ConsumedRecord]],
                                                      tmp_path: Path) -> None:
    """Write A stops with its transactions open on the shared topic and its plan in the commit log; write B (another
    prefix, same topic and commit log) runs its pre-flight, tasks and commit to the end meanwhile."""
    from spark_kafka_sink.producer.transactions import fence_transactional_id

    topic = topic_factory(partitions=3)
    slow_prefix, fast_prefix = f"slow-{uuid.uuid4().hex[:8]}", f"fast-{uuid.uuid4().hex[:8]}"

    def args(prefix: str) -> list[str]:
        return ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "3",
                "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix={prefix}", "--option", "writeId=1"]

    slow, marker = launch("batch_to_kafka.py", args(slow_prefix), tmp_path, pause="after-plan")
    try:
        wait_for("write A to reach its pause point", lambda: marker.exists() or slow.poll() is not None, 240)
        assert marker.exists(), f"write A ended (status {slow.returncode}) before reaching its pause point"
        finish(launch("batch_to_kafka.py", args(fast_prefix), tmp_path)[0])
        assert slow.poll() is None  # A is still paused with its transactions open: B did not wait for it
    finally:
        os.killpg(slow.pid, signal.SIGKILL)
        slow.wait(60)
    # A's open transactions hold read_committed readers back until they end: fence A's ids, as its re-run would.
    for partition in range(3):
        fence_transactional_id({"bootstrap.servers": bootstrap}, f"{slow_prefix}-{partition}", 60)
    orders = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic))
    assert orders == Counter(range(ROWS))  # B's rows, once; none of A's


def test_two_writes_sharing_a_prefix(bootstrap: str, topic_factory: Callable[..., str],
                                     readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    """Write A stops after its plan, its transactions open; write B runs with the same transactionalIdPrefix (to
    another topic) and ends; then A's commit goes on and fails with an error that names the prefix and says what
    is visible. Read back at read_committed with librdkafka: each write's rows once, nothing left open."""
    topic_a, topic_b = topic_factory(partitions=3), topic_factory(partitions=3)
    prefix = f"shared-{uuid.uuid4().hex[:8]}"

    def args(topic: str, write_id: int) -> list[str]:
        return ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "3",
                "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix={prefix}",
                "--option", f"writeId={write_id}"]

    logs_before = set(tmp_path.glob("*.log"))
    write_a, marker = launch("batch_to_kafka.py", args(topic_a, 1), tmp_path, pause="after-plan")
    (log_a,) = set(tmp_path.glob("*.log")) - logs_before
    try:
        wait_for("write A to reach its pause point", lambda: marker.exists() or write_a.poll() is not None, 240)
        assert marker.exists(), f"write A ended (status {write_a.returncode}) before reaching its pause point"
        write_b = launch("batch_to_kafka.py", args(topic_b, 2), tmp_path)[0]
        status_b = write_b.wait(300)
        marker.with_name(marker.name + ".go").touch()  # A's commit goes on
        status_a = write_a.wait(300)
    finally:
        if write_a.poll() is None:
            os.killpg(write_a.pid, signal.SIGKILL)
            write_a.wait(60)
    out_a = log_a.read_text()
    print(f"\n[shared prefix] A: status {status_a}, B: status {status_b}\n"
          + "\n".join(line for line in out_a.splitlines() if "SharedPrefixError" in line)[:3000])
    assert status_b == 0
    # B's pre-flight took A for a write whose driver died and committed A's transactions; B's producers then fenced
    # A's, so A's own EndTxn failed: A says so, naming the prefix, and that its rows are visible.
    assert status_a != 0
    assert (f"SharedPrefixError: transactionalIdPrefix '{prefix}' is used by another write running at the same "
            "time: while this write (writeId 1) was committing, another write (writeId 2) started") in out_a
    assert f"{ROWS} of this write's {ROWS} rows are visible" in out_a
    orders_a = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic_a))
    orders_b = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic_b))
    print(f"[shared prefix] visible: A {sum(orders_a.values())} rows, B {sum(orders_b.values())} rows")
    assert orders_a == Counter(range(ROWS)) and orders_b == Counter(range(ROWS))  # both once, nothing half done
    assert_nothing_open(bootstrap, topic_a)
    assert_nothing_open(bootstrap, topic_b)


def test_two_writes_sharing_a_prefix_without_write_id(bootstrap: str, topic_factory: Callable[..., str],
                                                     readback: Callable[..., list[ConsumedRecord]],
                                                     tmp_path: Path) -> None:
    """Without writeId nothing is logged: write A's tasks stop after their flush, transactions open; write B runs
    with the same prefix and no writeId; its tasks' InitProducerId aborts A's transactions. A's commit then fails,
    naming the shared prefix among the causes, and none of A's rows are visible; B's are, once."""
    topic_a, topic_b = topic_factory(partitions=2), topic_factory(partitions=2)
    prefix = f"shared-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "hold"
    hold.mkdir()

    def args(topic: str) -> list[str]:
        return ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "2",
                "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix={prefix}"]

    logs_before = set(tmp_path.glob("*.log"))
    write_a = launch("batch_to_kafka.py", args(topic_a), tmp_path, hold_after_flush=hold)[0]
    (log_a,) = set(tmp_path.glob("*.log")) - logs_before
    try:
        wait_for("write A's two tasks to flush", lambda: len(list(hold.glob("flushed-*"))) == 2
                 or write_a.poll() is not None, 240)
        assert write_a.poll() is None, f"write A ended (status {write_a.returncode}) before its tasks flushed"
        finish(launch("batch_to_kafka.py", args(topic_b), tmp_path)[0])
        (hold / "go").touch()
        status_a = write_a.wait(300)
    finally:
        if write_a.poll() is None:
            os.killpg(write_a.pid, signal.SIGKILL)
            write_a.wait(60)
    error = [line for line in log_a.read_text().splitlines() if "TransactionCommitError:" in line]
    print("\n[shared prefix, no writeId] A: status", status_a, "\n" + "\n".join(error)[:3000])
    assert status_a != 0
    assert error and "2 of 2 Kafka transactions could not be committed" in error[-1]
    assert f"another write with transactionalIdPrefix '{prefix}' ran at the same time" in error[-1]
    assert readback(topic_a) == []  # none of A's rows
    orders_b = Counter(json.loads(r.value or b"{}")["order_id"] for r in readback(topic_b))
    assert orders_b == Counter(range(ROWS))
    assert_nothing_open(bootstrap, topic_a)
    assert_nothing_open(bootstrap, topic_b)


def test_a_late_first_attempt_fences_the_retry_that_finished(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        tmp_path: Path) -> None:
    """Partition 1's first attempt fails upstream of the sink while its Python writer is stalled before its
    InitProducerId; Spark's retry writes the partition and returns its message; the driver records its plan. Then
    the stalled writer goes on: its InitProducerId fences the retry's transaction, and the driver's commit of it
    fails. The job fails saying which partition's rows are visible; the same writeId run again writes the rest."""
    topic = topic_factory(partitions=2)
    prefix = f"late-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "hold"
    hold.mkdir()
    args = [bootstrap, topic, prefix, str(hold)]
    logs_before = set(tmp_path.glob("*.log"))
    job, marker = launch(LATE_ATTEMPT_JOB, args, tmp_path, pause="after-plan", hold=f"1:{hold}", master="local[2,4]")
    (log,) = set(tmp_path.glob("*.log")) - logs_before
    try:
        wait_for("the driver's commit to reach its plan", lambda: marker.exists() or job.poll() is not None, 240)
        assert marker.exists(), f"the job ended (status {job.returncode}) before its commit"
        # The retry's transaction is planned; the first attempt's writer is still stalled, nothing fenced yet.
        assert (hold / "held").exists() and not (hold / "fenced").exists()
        (hold / "go").touch()
        wait_for("the stalled first attempt's InitProducerId", lambda: (hold / "fenced").exists(), 120)
        marker.with_name(marker.name + ".go").touch()  # the commit goes on
        status = job.wait(300)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
    out = log.read_text()
    print("\n[late attempt] status", status, "\n"
          + "\n".join(line for line in out.splitlines() if "TransactionCommitError:" in line)[:3000])
    assert status != 0
    assert "1 of 2 Kafka transactions could not be committed" in out and f"{prefix}-1: ProducerFencedError" in out
    assert "a late attempt of a failed task" in out and "Run the same writeId (1) again" in out
    values = Counter("-".join((r.value or b"").decode().split("-")[:2]) for r in readback(topic))
    assert values == Counter({f"0-{n}": 1 for n in range(LATE_ROWS)})  # partition 0's rows only; none of 1's
    assert_nothing_open(bootstrap, topic)
    finish(launch(LATE_ATTEMPT_JOB, [bootstrap, topic, prefix, "-"], tmp_path,
                  master="local[2,4]")[0])
    values = Counter("-".join((r.value or b"").decode().split("-")[:2]) for r in readback(topic))
    assert values == Counter({f"{p}-{n}": 1 for p in range(2) for n in range(LATE_ROWS)})  # every row once


def test_a_late_first_attempt_fences_the_retry_still_writing(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        tmp_path: Path) -> None:
    """As above, but the stalled first attempt goes on while Spark's retry (attempt 1) is still sending: the
    retry's next send is refused (its producer was fenced), the retry fails, Spark runs attempt 2, and the job
    commits every row once."""
    topic = topic_factory(partitions=2)
    prefix = f"late-{uuid.uuid4().hex[:8]}"
    hold = tmp_path / "hold"
    hold.mkdir()
    (hold / "hold-retry").touch()
    logs_before = set(tmp_path.glob("*.log"))
    job = launch(LATE_ATTEMPT_JOB, [bootstrap, topic, prefix, str(hold)], tmp_path, hold=f"1:{hold}",
                 master="local[2,4]")[0]
    (log,) = set(tmp_path.glob("*.log")) - logs_before
    try:
        wait_for("Spark's retry to be writing", lambda: (hold / "retry-writing").exists() or job.poll() is not None,
                 240)
        assert (hold / "retry-writing").exists(), f"the job ended (status {job.returncode}) before its retry wrote"
        assert (hold / "held").exists() and not (hold / "fenced").exists()
        (hold / "go").touch()  # the first attempt's InitProducerId fences the retry's producer
        status = job.wait(300)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
    # Spark's report of the retry's failure: "Lost task 1.1 ...", then the Python traceback up to its exception.
    report = log.read_text().partition("Lost task 1.1 in stage")[2].partition("SQLSTATE")[0]
    error = [line for line in report.splitlines() if line.startswith("spark_kafka_sink.errors.")]
    print(f"\n[late attempt, retry writing] status {status}\n" + "\n".join(error)[:2000])
    assert status == 0
    assert error and error[-1].startswith("spark_kafka_sink.errors.ProducerFencedError: PRODUCER_FENCED"), report
    values = Counter("-".join((r.value or b"").decode().split("-")[:2]) for r in readback(topic))
    assert values == Counter({f"{p}-{n}": 1 for p in range(2) for n in range(LATE_ROWS)})  # every row once
    assert_nothing_open(bootstrap, topic)
