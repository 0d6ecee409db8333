"""workerGcFreeze: the first sink task of a Python worker takes the worker's long-lived objects out of the
gc.collect() that Spark's reused workers run after every task (real Spark, its own session: a worker that ran the
sink before cannot be unfrozen). A probe writer reports its worker's frozen-object count; the sink is registered at
runtime as the probe is, since Spark keeps separate Python worker pools for data sources found by its package scan
and ones registered by the session."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ConsumedRecord

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.broker]

SCRIPT = textwrap.dedent("""
    import gc, json, os, sys
    from pyspark.sql import SparkSession, functions as F
    from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage
    from spark_kafka_sink.spark.datasource import KafkaSinkDataSource

    class Probe(DataSource):  # a writer that reports its Python worker: the sink's tasks run in such workers
        @classmethod
        def name(cls):
            return "worker-heap-probe"

        def writer(self, schema, overwrite):
            return ProbeWriter(self.options["report"])

    class ProbeWriter(DataSourceArrowWriter):
        def __init__(self, report):
            self.report = report

        def write(self, iterator):
            for _ in iterator:
                pass
            return ProbeMessage(os.getpid(), gc.get_freeze_count())

        def commit(self, messages):  # (runs in a Python worker of the driver)
            with open(self.report, "w") as f:
                json.dump([messages[0].pid, messages[0].frozen], f)

    class ProbeMessage(WriterCommitMessage):
        def __init__(self, pid, frozen):
            self.pid, self.frozen = pid, frozen

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false")
             .config("spark.python.worker.reuse", "true").getOrCreate())

    spark.dataSource.register(Probe)

    class Sink(KafkaSinkDataSource):  # the sink, registered as the probe is: Spark runs both in one worker pool
        @classmethod
        def name(cls):
            return "pykafka-sink-heap"

    spark.dataSource.register(Sink)
    bootstrap, topic, report = sys.argv[1], sys.argv[2], sys.argv[3]

    def worker_heap():  # (pid, objects frozen) of the Python worker that runs the next write task
        spark.range(0, 1, 1, 1).write.format("worker-heap-probe").option("report", report).mode("append").save()
        with open(report) as f:
            return json.load(f)

    def write(start, **options):
        df = spark.range(start, start + 500, 1, 1).select(F.col("id").cast("string").alias("value"))
        writer = (df.write.format("pykafka-sink-heap").option("kafka.bootstrap.servers", bootstrap)
                  .option("topic", topic))
        for key, value in options.items():
            writer = writer.option(key, value)
        writer.mode("append").save()

    heap = {"before": worker_heap()}
    write(0, workerGcFreeze="false")
    heap["off"] = worker_heap()
    write(500)
    heap["on"] = worker_heap()
    write(1000)
    heap["again"] = worker_heap()
    spark.stop()
    print(json.dumps(heap))
""")


def test_the_first_sink_task_freezes_the_workers_heap_unless_turned_off(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        tmp_path: Path) -> None:
    topic = topic_factory(partitions=2)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, bootstrap, topic, str(tmp_path / "heap.json")],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    pids = {pid for pid, _ in seen.values()}
    assert len(pids) == 1, f"local[1] with worker reuse should run every task in one Python worker: {seen}"
    assert seen["before"][1] == 0 and seen["off"][1] == 0, seen  # workerGcFreeze=false: nothing frozen
    # On: pyspark's, pyarrow's and the sink's modules (tens of thousands of objects), frozen once.
    assert seen["on"][1] > 10_000 and seen["again"][1] == seen["on"][1], seen
    values = sorted(int(r.value or b"-1") for r in readback(topic))
    assert values == list(range(1500))
