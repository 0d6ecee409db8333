"""Spark sinks on one cached DataFrame: ``rows`` rows of 16-character string keys and ``value_size``-character
random string values (``randstr``), 12 partitions, written by local[2] Spark to a fresh 12-partition topic per run;
and ``spark 1 KB JSON <codec>``: a tenth of the rows with ~1,000-byte JSON event values (``workload.json_values``);
and ``spark 1 KB Avro 15 fields <codec>``: a tenth of the rows as registry-framed Avro records, Spark's
``to_avro`` + frame + ``format("kafka")`` against the sink's ``valueFormat=avro`` (``benchmarks.bench_avro``).

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
``spark 100 B lz4, 2 tasks``: the same rows in 2 Spark partitions (one task per core) into the 12-partition topic,
for Spark's sink, the do-nothing writer and the sink in both guarantees.

Small tasks (issue 13), per-task cost: 200 tasks x 10,000 rows and 1,000 tasks x 1,000 rows of the same rows
(Spark's sink, the do-nothing writer, the sink in both guarantees and at_least_once with producerReuse=false), and
streaming-sized micro-batches: ``MICRO_BATCHES`` consecutive writes of a 50-partition, 100-rows-per-partition
DataFrame, as a foreachBatch query would make them (exactly_once with one prefix per run and writeId = batch
number), in micro-batches/s against the do-nothing writer.

Request counts: when the benchmark started the broker, every Kafka contender's run also records the requests the
broker received during the write, by API (``benchmarks.request_count``), per Spark task and as Produce requests
per MB of record data; the reports show them per comparison.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.context import Context
from benchmarks.harness import Comparison, Contender, Sample, run_comparison
from benchmarks.request_count import per_task, produce_per_mb
from benchmarks.targets import (
    MICRO_BATCH_TITLE,
    NOOP_WRITER,
    SINK_ALO,
    SINK_EOS,
    SINK_EOS_LOGGED,
    SPARK_BUILTIN,
    producer_class,
    sink_available,
    small_tasks_title,
    two_tasks_title,
)
from benchmarks.workload import Workload
from spark_kafka_sink.testing.broker_jars import spark_avro_jars, spark_connector_jars

__all__ = ["run", "dataframe", "kafka_options", "SINK_FORMAT"]

SINK_FORMAT = "pykafka-sink"
SPARK_BUILTIN_TUNED = "Spark format(kafka) 256 KiB batches"
# pykafka-sink's own defaults for these two (Java's are 16384 and, in kafka-clients 3.9, 0 ms): given to the
# built-in sink as a second contender, so its batch size is not what separates it from ours.
TUNED = {"kafka.batch.size": "262144", "kafka.linger.ms": "5"}
SEND_BATCH_WRITER = "Arrow writer + send_batch"
# The do-nothing writer that also compresses each row's key and value with lz4 (spark_writers): a floor under the
# client CPU of any Python sink writing lz4 batches.
LZ4_FLOOR = "do-nothing Arrow writer + lz4"
SINK_ALO_NO_REUSE = "pykafka-sink at_least_once, producerReuse=false"  # a new producer per task, as before
SEND_WRITER = "Arrow writer + send"
JSON_VALUE_SIZE = 1000
TWO_TASK_CONTENDERS = (SPARK_BUILTIN, NOOP_WRITER, SINK_ALO, SINK_EOS)


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
    log = ctx.request_log
    try:
        mark = log.mark() if log is not None else 0
        cpu_before = ctx.cpu_seconds()
        start = time.perf_counter()
        save(topic)
        seconds = time.perf_counter() - start
        cpu = _cpu_us_per_row(cpu_before, ctx.cpu_seconds(), w.rows)
        requests = log.counts_since(mark) if log is not None else None
        landed = ctx.topic_record_count(topic)
    finally:
        ctx.delete_topic(topic)
    # exactly_once: each committed transaction also leaves one commit marker per partition it wrote.
    slack = w.partitions * w.topic_size if markers_ok else 0
    if not w.rows <= landed <= w.rows + slack:
        raise RuntimeError(f"topic holds {landed} offsets after writing {w.rows} rows")
    extra: dict[str, Any] = {"MB_per_s": round(w.total_bytes / seconds / 1e6, 1),
                             "ms_per_task": round(seconds * 1000 / w.partitions, 2), "cpu_us_per_row": cpu}
    if requests is not None:
        # The broker's count of the write's requests (the driver's EndTxn included): benchmarks.request_count.
        extra.update(requests=requests, requests_per_task=per_task(requests, w.partitions),
                     produce_per_MB=produce_per_mb(requests, w.total_bytes / 1e6))
    return Sample(w.rows, seconds, extra=extra)


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


def _noop(ctx: Context, w: Workload, df: Any, fmt: str = "bench-noop-arrow") -> Callable[[], Sample]:
    def run() -> Sample:
        cpu_before = ctx.cpu_seconds()
        start = time.perf_counter()
        df.write.format(fmt).mode("append").option("expectedRows", str(w.rows)).save()
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
    if w.codec == "lz4":
        out.append(Contender(LZ4_FLOOR, _noop(ctx, w, df, "bench-lz4-floor")))
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



def compare_small_tasks(ctx: Context, w: Workload, title: str, rounds: int) -> Comparison:
    ctx.fresh_spark(worker_reuse=True)
    ctx.log(f"  {title}: caching a {w.rows:,}-row DataFrame in {w.partitions} partitions ...")
    df = dataframe(ctx, w)
    try:
        return run_comparison("spark", title, "rows/s", small_task_contenders(ctx, w, df), rounds,
                              params={**w.describe(), "spark_master": "local[2]"}, log=ctx.log,
                              warmup=not ctx.quick)
    finally:
        df.unpersist()


def compare(ctx: Context, w: Workload, title: str, with_send: bool,
            only: Sequence[str] | None = None, rounds: int | None = None) -> Comparison:
    """``only``: the names of the contenders to run (default all); ``rounds``: default ``ctx.rounds``."""
    _ = ctx.bootstrap
    ctx.fresh_spark(worker_reuse=True)  # as Spark's default: workers (and their imports) stay between tasks
    ctx.log(f"  {title}: caching a {w.rows:,}-row DataFrame in {w.partitions} partitions ...")
    df = dataframe(ctx, w)
    runners = [c for c in contenders(ctx, w, df, with_send) if only is None or c.name in only]
    try:
        return run_comparison("spark", title, "rows/s", runners, rounds or ctx.rounds,
                              params={**w.describe(), "spark_master": "local[2]"}, log=ctx.log,
                              warmup=not ctx.quick)
    finally:
        df.unpersist()


def compare_avro(ctx: Context, w: Workload, title: str) -> Comparison:
    """Avro values through the registry: Spark's to_avro + frame + format("kafka") against the sink with
    valueFormat=avro (bench_avro's Spark section)."""
    from benchmarks import bench_avro

    ctx.fresh_spark(worker_reuse=True)
    ctx.log(f"  {title}: caching a {w.rows:,}-row DataFrame of Avro records in {w.partitions} partitions ...")
    df = bench_avro.spark_records(ctx.spark, w.rows, w.partitions)
    url = ctx.registry_url
    to_avro_save = bench_avro.spark_to_avro_writer(url, df, bench_avro.value_schema(df))
    no_jars = (None if spark_connector_jars() and spark_avro_jars()
               else "Spark's Kafka connector or spark-avro jars are missing: run `make jars`")
    contenders = [
        Contender(bench_avro.SPARK_TO_AVRO,
                  lambda: _timed_write(ctx, w, lambda topic: to_avro_save(kafka_options(ctx, w, topic))),
                  unavailable=no_jars),
        Contender(SINK_ALO, _writer(ctx, w, df, SINK_FORMAT, {"deliveryGuarantee": "at_least_once",
                                                               "valueFormat": "avro", "schema.registry.url": url}),
                  unavailable=sink_available()),
    ]
    try:
        return run_comparison("spark", title, "rows/s", contenders, ctx.rounds,
                              params={**w.describe(), "spark_master": "local[2]"}, log=ctx.log,
                              warmup=not ctx.quick)
    finally:
        df.unpersist()


MICRO_BATCHES = 10  # micro-batches per measured run (2 with --quick)


def _micro_batch_run(ctx: Context, w: Workload, df: Any, fmt: str | None, extra: dict[str, str] | None = None,
                     exactly_once: bool = False) -> Callable[[], Sample]:
    """``MICRO_BATCHES`` writes of ``df`` in a row, as a foreachBatch query writes its micro-batches: each one a
    Spark job of ``w.partitions`` tasks that the next waits for. ``fmt`` None: the do-nothing writer.
    exactly_once: one ``transactionalIdPrefix`` per run and ``writeId`` = the batch number, what a streaming query
    does (the commit log records each batch; the next batch's transactions reuse the same transactional ids)."""

    n = 2 if ctx.quick else MICRO_BATCHES

    def run() -> Sample:
        topic = ctx.create_topic(w.topic_size) if fmt is not None else None
        log = ctx.request_log if fmt is not None else None
        options = {**(kafka_options(ctx, w, topic) if topic else {}), **(extra or {})}
        if exactly_once:
            options.update(deliveryGuarantee="exactly_once", transactionalIdPrefix=f"bench-{uuid.uuid4().hex[:12]}")
        try:
            mark = log.mark() if log is not None else 0
            start = time.perf_counter()
            for batch in range(n):
                writer = df.write.format(fmt or "bench-noop-arrow").mode("append")
                batch_options = ({**options, "writeId": str(batch)} if exactly_once else options) if fmt else {
                    "expectedRows": str(w.rows)}
                for k, v in batch_options.items():
                    writer = writer.option(k, v)
                writer.save()
            seconds = time.perf_counter() - start
            requests = log.counts_since(mark) if log is not None else None
            landed = ctx.topic_record_count(topic) if topic else n * w.rows
        finally:
            if topic:
                ctx.delete_topic(topic)
        rows = n * w.rows
        slack = n * w.partitions * w.topic_size if exactly_once else 0
        if not rows <= landed <= rows + slack:
            raise RuntimeError(f"topic holds {landed} offsets after writing {rows} rows")
        out: dict[str, Any] = {"ms_per_batch": round(seconds * 1000 / n, 1),
                               "ms_per_task": round(seconds * 1000 / n / w.partitions, 2)}
        if requests is not None:
            out.update(requests=requests, requests_per_task=per_task(requests, n * w.partitions),
                       produce_per_MB=produce_per_mb(requests, rows * w.record_bytes / 1e6))
        return Sample(n, seconds, extra=out)

    return run


def compare_micro_batches(ctx: Context, w: Workload, title: str) -> Comparison:
    """Streaming-sized writes: micro-batches of ``w.partitions`` tasks with few rows each (see _micro_batch_run);
    the unit is micro-batches per second, the baseline the do-nothing writer."""
    from benchmarks.spark_writers import register_all

    ctx.fresh_spark(worker_reuse=True)
    df = dataframe(ctx, w)
    register_all(ctx.spark)
    no_jars = None if spark_connector_jars() else "Spark's Kafka connector jars are missing: run `make jars`"
    why = sink_available()
    contenders = [
        Contender(NOOP_WRITER, _micro_batch_run(ctx, w, df, None)),
        Contender(SPARK_BUILTIN, _micro_batch_run(ctx, w, df, "kafka"), unavailable=no_jars),
        Contender(SINK_ALO, _micro_batch_run(ctx, w, df, SINK_FORMAT), unavailable=why),
        Contender(SINK_EOS_LOGGED, _micro_batch_run(ctx, w, df, SINK_FORMAT, exactly_once=True), unavailable=why),
    ]
    try:
        return run_comparison("spark", title, "micro-batches/s", contenders, ctx.rounds,
                              params={**w.describe(), "spark_master": "local[2]",
                                      "micro_batches": 2 if ctx.quick else MICRO_BATCHES},
                              log=ctx.log, warmup=not ctx.quick)
    finally:
        df.unpersist()


def run(ctx: Context, base: Workload, sweep: list[tuple[str, Workload]], with_send: bool,
        sets: Sequence[str]) -> list[Comparison]:
    """The Spark workloads named in ``sets`` (``__main__.SPARK_SETS``): main (the base workload), two (its rows in 2
    Spark partitions), small (many small tasks), micro (micro-batches), json (1 KB JSON events), avro (~1 KB Avro
    records through the schema registry), sweep (``sweep``)."""
    comps = ([compare(ctx, base, f"spark {base.value_size} B {base.codec}", with_send, rounds=ctx.target_rounds())]
             if "main" in sets else [])
    if "two" in sets:  # the same rows in 2 Spark partitions (one task per core), into the same 12-partition topic
        two = base.with_(partitions=2, topic_partitions=base.partitions)
        comps.append(compare(ctx, two, two_tasks_title(base.value_size, base.codec), with_send=False,
                             only=TWO_TASK_CONTENDERS))
    # Small tasks (issue "small tasks"): 200 Spark partitions of 10,000 rows and 1,000 of 1,000 rows into a
    # 12-partition topic; then streaming-sized micro-batches of 50 tasks x 100 rows.
    for tasks, rows_per_task in ((200, 10_000), (1000, 1_000)) if "small" in sets else ():
        if ctx.quick and tasks > 200:
            continue  # --quick checks the scripts run: one small-task comparison does
        if ctx.quick:
            tasks = 20  # and 20 tasks take every step of it: 200 cost make test-bench's smoke test a minute more
        small = base.with_(partitions=tasks, topic_partitions=base.partitions,
                           rows=tasks * (max(1, base.rows // 1000) if ctx.quick else rows_per_task))
        comps.append(compare_small_tasks(ctx, small, small_tasks_title(tasks, small.rows // tasks),
                                         ctx.target_rounds() if tasks == 200 else ctx.rounds))
    if "micro" in sets:
        micro = base.with_(partitions=50, topic_partitions=base.partitions, rows=50 * 100)
        comps.append(compare_micro_batches(ctx, micro, MICRO_BATCH_TITLE))
    if "json" in sets:  # 1 KB JSON events (issue 16): a tenth of the main workload's rows, about as many bytes.
        events = base.with_(rows=max(1, base.rows // 10), value_size=JSON_VALUE_SIZE, value_kind="json")
        comps.append(compare(ctx, events, f"spark 1 KB JSON {base.codec}", with_send))
    if "avro" in sets:  # ~1 KB records of 15 typed fields as registry-framed Avro: a tenth of the rows, like json
        from benchmarks.bench_avro import AVRO_RECORD_BYTES, spark_title

        records = base.with_(rows=max(1, base.rows // 10), key_size=0, value_size=AVRO_RECORD_BYTES)
        comps.append(compare_avro(ctx, records, spark_title(base.codec)))
    for label, w in sweep if "sweep" in sets else ():
        comps.append(compare(ctx, w, f"spark {label}", with_send))
    return comps
