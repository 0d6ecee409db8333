"""trigger(continuous=...) in a Spark of its own: pyspark never runs a Python data source's writer on a continuous
input and commits an epoch without the tasks' messages, which the sink's commit refuses. What a user sees: the
driver's log shows the sink's error (saying to use a micro-batch trigger), the query keeps running, and nothing
reaches the topic."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable

import pytest

from tests.conftest import wait_for
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.broker]

SINK_ERROR = "pyspark cannot run a Python data source's writer on a continuous input"

SCRIPT = textwrap.dedent("""
    import os, sys, time
    from pyspark.sql import SparkSession, functions as F

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false").getOrCreate()
    bootstrap, topic, checkpoint = sys.argv[1], sys.argv[2], sys.argv[3]
    rows = (spark.readStream.format("rate").option("rowsPerSecond", 20).option("numPartitions", 1).load()
            .select(F.col("value").cast("string").alias("value")))
    query = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
             .option("topic", topic).option("checkpointLocation", checkpoint)
             .trigger(continuous="1 second").start())
    while True:
        print(f"active={query.isActive}", flush=True)
        time.sleep(0.5)  # the status line's period: the test reads the latest one
""")


def test_a_continuous_query_writes_nothing_and_logs_the_sinks_error(
        bootstrap: str, topic_factory: Callable[..., str], tmp_path: object) -> None:
    topic = topic_factory(partitions=1)
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, bootstrap, topic, f"{tmp_path}/checkpoint"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    errors: list[str] = []
    status: list[str] = []

    def follow(stream: object, into: list[str], keep: Callable[[str], bool]) -> None:
        for line in stream:  # type: ignore[attr-defined]
            if keep(line):
                into.append(line)

    readers = [threading.Thread(target=follow, args=(proc.stderr, errors, lambda line: SINK_ERROR in line),
                                daemon=True),
               threading.Thread(target=follow, args=(proc.stdout, status, lambda line: line.startswith("active=")),
                                daemon=True)]
    for reader in readers:
        reader.start()
    try:
        wait_for("the sink's error in the driver's log", lambda: bool(errors) or proc.poll() is not None,
                 timeout=180)
        assert proc.poll() is None, "the Spark process ended"
        seen = len(status)
        wait_for("a status line after the error", lambda: len(status) > seen, timeout=30)
        assert status[-1].strip() == "active=True"  # Spark logs the failed epoch commit and goes on
        assert "Use a micro-batch trigger" in errors[0]
        assert sum(end_offsets(bootstrap, topic).values()) == 0  # nothing written, not even aborted records
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(60)
        for reader in readers:
            reader.join(30)  # the pipes end with the process
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
