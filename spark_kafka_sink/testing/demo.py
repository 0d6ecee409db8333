"""``make run``: a local broker, ``spark-submit jobs/batch_to_kafka.py`` against it, an independent read-back.

Steps: start a single-node broker on a free port (its data is deleted at the end), create the topic, run the
bundled job with the venv's ``spark-submit`` (PYSPARK_PYTHON = this interpreter, which has the package), read the
topic back with confluent-kafka (librdkafka: shares no code with this project) at read_committed, print a short
report, stop the broker. Exit status 0 only if every generated row was read back exactly once.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from .broker import KafkaCluster
from .broker_jars import REPO_ROOT

__all__ = ["run_demo", "submit_job", "JobRun"]

JOB = REPO_ROOT / "jobs" / "batch_to_kafka.py"
_TOPIC_PARTITIONS = 3


def _create_topic(bootstrap: str, topic: str) -> None:
    # NewTopic is re-exported by confluent_kafka.admin without being listed in its stubs' __all__.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=_TOPIC_PARTITIONS, replication_factor=1)])[topic].result(60)


def _read_back(bootstrap: str, topic: str, timeout_s: float = 60.0) -> list[tuple[int, bytes | None, bytes | None]]:
    """(partition, key, value) of every committed record, read until each partition's end."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"demo-{uuid.uuid4().hex}",
                         "enable.partition.eof": True, "isolation.level": "read_committed",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(_TOPIC_PARTITIONS)])
        at_end: set[int] = set()
        records: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + timeout_s
        while len(at_end) < _TOPIC_PARTITIONS and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                err = msg.error()
                partition = int(msg.partition() or 0)  # typed optional; set on every consumed message
                if err is not None and err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(partition)
                elif err is not None:
                    raise RuntimeError(f"read-back failed: {err}")
                else:
                    at_end.discard(partition)
                    records.append((partition, msg.key(), msg.value()))
        if len(at_end) < _TOPIC_PARTITIONS:
            raise RuntimeError(f"read-back did not reach the end of {topic} within {timeout_s:.0f}s")
        return records
    finally:
        consumer.close()


def _spark_submit() -> Path:
    candidate = Path(sys.executable).parent / "spark-submit"
    if not candidate.exists():
        raise FileNotFoundError(f"{candidate} not found: pyspark is not installed in this venv (make venv)")
    return candidate


@dataclass(frozen=True)
class JobRun:
    """A bundled job's spark-submit run: its exit status, wall time (JVM start included) and the lines worth showing
    (the job's own and the sink's summary)."""

    returncode: int
    seconds: float
    lines: list[str]


def submit_job(job: Path, args: list[str], rows: int, guarantee: str) -> JobRun:
    """``spark-submit job args --rows rows --guarantee guarantee`` on a local master with this interpreter; prints
    its lines, or the output's tail when it failed."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    cmd = [str(_spark_submit()), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
           "--driver-java-options", "-Dlog4j2.level=warn", str(job), *args,
           "--rows", str(rows), "--guarantee", guarantee]
    print(f"[2/4] spark-submit {job.relative_to(REPO_ROOT)} --rows {rows} --guarantee {guarantee}", flush=True)
    started = time.perf_counter()
    # cwd = the repository: with an editable install, Spark finds pyspark_kafka_sink through its workers' cwd.
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    lines = [line for line in (proc.stdout + proc.stderr).splitlines()
             if f"{job.stem}:" in line or "pykafka-sink " in line]
    if proc.returncode != 0:
        print(proc.stdout[-3000:] + proc.stderr[-6000:], file=sys.stderr)
        print(f"spark-submit failed with exit status {proc.returncode}", file=sys.stderr)
    else:
        for line in lines:
            print(f"      {line.strip()}")
    return JobRun(proc.returncode, seconds, lines)


def run_demo(rows: int = 200_000, guarantee: str = "exactly_once") -> int:
    topic = f"demo-orders-{uuid.uuid4().hex[:8]}"
    print("[1/4] starting a local Kafka broker ...", flush=True)
    cluster = KafkaCluster(size=1).start()
    try:
        bootstrap = cluster.bootstrap_servers
        _create_topic(bootstrap, topic)
        print(f"      broker on {bootstrap}, topic {topic} ({_TOPIC_PARTITIONS} partitions)", flush=True)
        run = submit_job(JOB, ["--bootstrap-servers", bootstrap, "--topic", topic], rows, guarantee)
        if run.returncode != 0:
            return 1

        print("[3/4] reading the topic back with confluent-kafka (read_committed) ...", flush=True)
        records = _read_back(bootstrap, topic)
        return _report(records, rows, run.seconds, guarantee, summary_rate(run.lines))
    finally:
        print("[4/4] stopping the broker", flush=True)
        cluster.stop()


#: The sink's summary line: "pykafka-sink committed N rows, B bytes, <guarantee>, T tasks (P new producers), S s,
#: R rows/s; ...".
_SUMMARY = re.compile(r"pykafka-sink .*committed (\d+) rows, .* tasks[^,]*, ([\d.]+) s, ([\d,]+) rows/s;")


def summary_rate(lines: list[str]) -> str:
    """The write's own rate, from the sink's summary line (first task start to commit, no JVM or planning)."""
    for line in lines:
        match = _SUMMARY.search(line)
        if match:
            rows, seconds, rate = match.groups()
            return f"{rate} rows/s ({rows} rows in {seconds} s, first task start to commit; the sink's summary)"
    return "unknown (the sink's summary line was not in the job's output)"


def _report(records: list[tuple[int, bytes | None, bytes | None]], rows: int, job_seconds: float,
            guarantee: str, write_rate: str) -> int:
    order_ids = Counter(json.loads(value)["order_id"] for _, _, value in records if value is not None)
    per_partition = Counter(p for p, _, _ in records)
    missing = rows - len(set(order_ids) & set(range(rows)))
    duplicates = sum(n - 1 for n in order_ids.values() if n > 1)
    print()
    print(f"  written rows       : {rows} ({guarantee}, spark-submit took {job_seconds:.1f} s incl. JVM start)")
    print(f"  write rate         : {write_rate}")
    print(f"  read back          : {len(records)} records, per partition "
          f"{dict(sorted(per_partition.items()))}")
    print(f"  missing / duplicate: {missing} / {duplicates}")
    if records:
        _, key, value = records[0]
        print(f"  first record       : key={key!r} value={value!r}")
    ok = missing == 0 and duplicates == 0 and len(records) == rows
    print("  result             : " + ("OK: every row exactly once" if ok else "MISMATCH"))
    return 0 if ok else 1
