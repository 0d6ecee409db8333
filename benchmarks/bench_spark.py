"""Spark sinks on one cached DataFrame: ``rows`` rows of 16-character string keys and ``value_size``-character
random string values (``randstr``), 12 partitions, written by local[2] Spark to a fresh 12-partition topic per run;
and ``spark 1 KB JSON <codec>``: a tenth of the rows with ~1,000-byte JSON event values (``workload.json_values``).

Contenders (the timer covers ``df.write...save()``; afterwards the topic's end offsets are checked):
- ``Spark format(kafka)`` (baseline): Spark's built-in JVM sink (spark-sql-kafka-0-10 jars from Maven), and
  ``Spark format(kafka) 256 KiB batches``: the same with pykafka-sink's batch.size and linger.ms.
- ``do-nothing Arrow writer``: a Python ``DataSourceArrowWriter`` that only counts rows (benchmarks.spark_writers):
  the ceiling of the Spark -> Python handoff that every Python sink pays.
- ``pykafka-sink at_least_once`` / ``pykafka-sink exactly_once``: this project's sink.
- ``Arrow writer + send_batch``: a bare Python writer around ``KafkaProducer.send_batch`` (no sink adapter, the
  sink's batch.size and linger.ms), for the adapter's cost; ``Arrow writer + send``: the per-record path, several
  times slower than the rest, so only with ``--spark-send`` (and in ``--quick``).
Every Kafka writer gets acks=all and compression.type=<codec>; other settings are each sink's defaults.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from benchmarks.context import Context
from benchmarks.harness import Comparison, Contender, Sample, run_comparison
from benchmarks.targets import (
    NOOP_WRITER,
    SINK_ALO,
    SINK_EOS,
    SINK_EOS_LOGGED,
    SPARK_BUILTIN,
    producer_class,
    sink_available,
)
from benchmarks.workload import Workload
from spark_kafka_sink.testing.broker_jars import spark_connector_jars

__all__ = ["run", "dataframe", "kafka_options", "SINK_FORMAT"]

SINK_FORMAT = "pykafka-sink"
SPARK_BUILTIN_TUNED = "Spark format(kafka) 256 KiB batches"
# pykafka-sink's own defaults for these two (Java's are 16384 and, in kafka-clients 3.9, 0 ms): given to the
# built-in sink as a second contender, so its batch size is not what separates it from ours.
TUNED = {"kafka.batch.size": "262144", "kafka.linger.ms": "5"}
SEND_BATCH_WRITER = "Arrow writer + send_batch"
SINK_ALO_NO_REUSE = "pykafka-sink at_least_once, producerReuse=false"  # a new producer per task, as before
SEND_WRITER = "Arrow writer + send"
JSON_VALUE_SIZE = 1000


def dataframe(ctx: Context, w: Workload) -> Any:
    """The workload as a cached DataFrame with ``key`` and ``value`` strings in ``w.partitions`` partitions
    (``json`` values: the ``bench-json-events`` reader, in the Python workers, before any timer)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    if w.value_kind == "json":
        from benchmarks.spark_writers import register_all

        register_all(ctx.spark)
        df = (ctx.spark.read.format("bench-json-events").option("rows", str(w.rows))
              .option("partitions", str(w.partitions)).option("keySize", str(w.key_size))
              .option("valueSize", str(w.value_size)).load())
    else:
        df = ctx.spark.range(0, w.rows, 1, w.partitions).select(
            F.lpad(F.col("id").cast("string"), w.key_size, "0").alias("key"),
            F.randstr(F.lit(w.value_size), F.lit(7)).alias("value"),
        )
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    count = df.count()
    if count != w.rows:
        raise RuntimeError(f"cached DataFrame has {count} rows, expected {w.rows}")
    return df


def kafka_options(ctx: Context, w: Workload, topic: str) -> dict[str, str]:
    """What the benchmark issue fixes (acks=all, the codec); everything else is each sink's own default, as a
    user who swaps the format name gets it."""
    return {"kafka.bootstrap.servers": ctx.bootstrap, "topic": topic, "kafka.acks": "all",
            "kafka.compression.type": w.codec}


def _timed_write(ctx: Context, w: Workload, save: Callable[[str], None], markers_ok: bool = False) -> Sample:
    topic = ctx.create_topic(w.topic_size)
    try:
        cpu_before = ctx.cpu_seconds()
        start = time.perf_counter()
        save(topic)
        seconds = time.perf_counter() - start
        cpu = _cpu_us_per_row(cpu_before, ctx.cpu_seconds(), w.rows)
        landed = ctx.topic_record_count(topic)
    finally:
        ctx.delete_topic(topic)
    # exactly_once: each committed transaction also leaves one commit marker per partition it wrote.
    slack = w.partitions * w.topic_size if markers_ok else 0
    if not w.rows <= landed <= w.rows + slack:
        raise RuntimeError(f"topic holds {landed} offsets after writing {w.rows} rows")
    return Sample(w.rows, seconds, extra={"MB_per_s": round(w.total_bytes / seconds / 1e6, 1),
                                          "ms_per_task": round(seconds * 1000 / w.partitions, 2),
                                          "cpu_us_per_row": cpu})


def _cpu_us_per_row(before: dict[str, float], after: dict[str, float], rows: int) -> dict[str, float]:
    return {k: round((after[k] - before.get(k, 0.0)) * 1e6 / rows, 2) for k in after}


def _writer(ctx: Context, w: Workload, df: Any, fmt: str, extra: dict[str, str] | None = None,
            markers_ok: bool = False, per_run: Callable[[], dict[str, str]] | None = None) -> Callable[[], Sample]:
    def save(topic: str) -> None:
        writer = df.write.format(fmt).mode("append")
        for k, v in {**kafka_options(ctx, w, topic), **(extra or {}), **(per_run() if per_run else {})}.items():
            writer = writer.option(k, v)
        writer.save()

    return lambda: _timed_write(ctx, w, save, markers_ok)


def _noop(ctx: Context, w: Workload, df: Any) -> Callable[[], Sample]:
    def run() -> Sample:
        cpu_before = ctx.cpu_seconds()
        start = time.perf_counter()
        df.write.format("bench-noop-arrow").mode("append").option("expectedRows", str(w.rows)).save()
        seconds = time.perf_counter() - start
        return Sample(w.rows, seconds, extra={"ms_per_task": round(seconds * 1000 / w.partitions, 2),
                                              "cpu_us_per_row": _cpu_us_per_row(cpu_before, ctx.cpu_seconds(),
                                                                                  w.rows)})

    return run


def contenders(ctx: Context, w: Workload, df: Any, with_send: bool) -> list[Contender]:
    from benchmarks.spark_writers import register_all

    register_all(ctx.spark)
    no_jars = None if spark_connector_jars() else "Spark's Kafka connector jars are missing: run `make jars`"
    out = [Contender(SPARK_BUILTIN, _writer(ctx, w, df, "kafka"), unavailable=no_jars),
           Contender(SPARK_BUILTIN_TUNED, _writer(ctx, w, df, "kafka", TUNED), unavailable=no_jars),
           Contender(NOOP_WRITER, _noop(ctx, w, df))]
    why = sink_available()
    for name, guarantee in ((SINK_ALO, "at_least_once"), (SINK_EOS, "exactly_once")):
        out.append(Contender(name, _writer(ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": guarantee},
                                           markers_ok=guarantee == "exactly_once"), unavailable=why))
    # exactly_once recorded in the commit log (what streaming and writeId writes do): a new prefix per run, so the
    # pre-flight reads the log and the commit writes plan, commit and completion records.
    out.append(Contender(SINK_EOS_LOGGED, _writer(
        ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": "exactly_once", "writeId": "1"}, markers_ok=True,
        per_run=lambda: {"transactionalIdPrefix": f"bench-{uuid.uuid4().hex[:12]}"}), unavailable=why))
    no_producer = None if producer_class() is not None else "spark_kafka_sink.KafkaProducer is not written yet"
    out.append(Contender(SEND_BATCH_WRITER, _writer(ctx, w, df, "bench-send-batch", TUNED),
                         unavailable=no_producer))
    if with_send:
        out.append(Contender(SEND_WRITER, _writer(ctx, w, df, "bench-send"), unavailable=no_producer))
    return out


def small_task_contenders(ctx: Context, w: Workload, df: Any) -> list[Contender]:
    """Per-task cost: Spark's sink, the do-nothing writer (what any Python data source pays per task) and the sink
    in both guarantees, on many small Spark partitions."""
    from benchmarks.spark_writers import register_all

    register_all(ctx.spark)
    no_jars = None if spark_connector_jars() else "Spark's Kafka connector jars are missing: run `make jars`"
    why = sink_available()
    return [Contender(SPARK_BUILTIN, _writer(ctx, w, df, "kafka"), unavailable=no_jars),
            Contender(NOOP_WRITER, _noop(ctx, w, df)),
            Contender(SINK_ALO, _writer(ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": "at_least_once"}),
                      unavailable=why),
            Contender(SINK_ALO_NO_REUSE, _writer(ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": "at_least_once",
                                                                           "producerReuse": "false"}),
                      unavailable=why),
            Contender(SINK_EOS, _writer(ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": "exactly_once"},
                                        markers_ok=True), unavailable=why)]


def compare_small_tasks(ctx: Context, w: Workload, title: str) -> Comparison:
    ctx.worker_reuse = True
    ctx.log(f"  {title}: caching a {w.rows:,}-row DataFrame in {w.partitions} partitions ...")
    df = dataframe(ctx, w)
    try:
        return run_comparison("spark", title, "rows/s", small_task_contenders(ctx, w, df), ctx.rounds,
                              params={**w.describe(), "spark_master": "local[2]"}, log=ctx.log,
                              warmup=not ctx.quick)
    finally:
        df.unpersist()


def compare(ctx: Context, w: Workload, title: str, with_send: bool) -> Comparison:
    _ = ctx.bootstrap
    ctx.worker_reuse = True  # as Spark's default: workers (and their imports) stay between tasks
    ctx.log(f"  {title}: caching a {w.rows:,}-row DataFrame ...")
    df = dataframe(ctx, w)
    try:
        return run_comparison("spark", title, "rows/s", contenders(ctx, w, df, with_send), ctx.rounds,
                              params={**w.describe(), "spark_master": "local[2]"}, log=ctx.log,
                              warmup=not ctx.quick)
    finally:
        df.unpersist()


def run(ctx: Context, base: Workload, sweep: list[tuple[str, Workload]], with_send: bool) -> list[Comparison]:
    comps = [compare(ctx, base, f"spark {base.value_size} B {base.codec}", with_send)]
    # Small tasks (issue "small tasks"): 200 Spark partitions of 10,000 rows into a 12-partition topic.
    tasks = 200
    small = base.with_(partitions=tasks, topic_partitions=base.partitions,
                       rows=base.rows if ctx.quick else tasks * 10_000)
    comps.append(compare_small_tasks(ctx, small, f"spark {tasks} tasks x {small.rows // tasks:,} rows"))
    # 1 KB JSON events (issue 16): a tenth of the main workload's rows, about as many bytes.
    events = base.with_(rows=max(1, base.rows // 10), value_size=JSON_VALUE_SIZE, value_kind="json")
    comps.append(compare(ctx, events, f"spark 1 KB JSON {base.codec}", with_send))
    for label, w in sweep:
        comps.append(compare(ctx, w, f"spark {label}", with_send))
    return comps
