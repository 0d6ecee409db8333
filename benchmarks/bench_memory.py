"""Memory: peak RSS of Spark's Python worker while the sink writes a large volume, against buffer.memory.

The DataFrame is generated on the fly (``range`` + ``randstr``, not cached: the volume is larger than memory),
``volume`` bytes of 16-byte keys and ``value_size``-byte values in 12 partitions, written by local[2] Spark.

How the peak is measured: Spark runs with ``spark.python.worker.reuse=false`` here, so every task gets a fresh
worker forked by ``pyspark.daemon`` (no modules or heap left over from another contender's run). A sampler thread
reads the kernel's peak-RSS counter (VmHWM) of every ``pyspark.worker`` process every 50 ms; the kernel keeps the
true peak between reads, so only growth in a worker's last 50 ms before it exits can be missed. (Workers alive
when a run starts get their counter reset with ``echo 5 > /proc/<pid>/clear_refs``.) The value of a run is the
largest single worker's peak, in MB. Contenders:
- ``do-nothing Arrow writer worker`` (baseline): the worker's own cost (interpreter, pyspark, pyarrow, Spark's
  Arrow batches) with a writer that only counts rows.
- ``pykafka-sink worker``: the same DataFrame through ``pykafka-sink`` (at_least_once, buffer.memory set).
- ``pykafka-sink worker above baseline``: per round, the sink's peak minus the do-nothing writer's peak: what the
  sink adds, held against buffer.memory + 48 MB.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.bench_spark import SINK_FORMAT, kafka_options
from benchmarks.context import Context
from benchmarks.harness import Comparison, Contender, ContenderResult, Sample, run_comparison
from benchmarks.targets import MEMORY_SINK, sink_available
from benchmarks.workload import Workload

__all__ = ["run", "WorkerPeaks"]

MEMORY_VALUE_SIZE = 1000
NOOP = "do-nothing Arrow writer worker"
SINK = "pykafka-sink worker"


def _python_descendants() -> list[Any]:
    """Spark's task workers: ``python -m pyspark.daemon pyspark.worker`` and the children it forks.

    Matched on the command line after exec: a child the JVM has forked but not yet exec'd still looks like (and
    has the RSS of) the JVM, and must not count.
    """
    import psutil

    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmd = child.cmdline()
        except psutil.Error:
            continue
        if "pyspark.daemon" in cmd and "pyspark.worker" in cmd:
            found.append(child)
    return found


def _vm_hwm_kb(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def _reset_hwm(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class WorkerPeaks:
    """Samples VmHWM of this process's Python descendants while the ``with`` block runs."""

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peaks_kb: dict[int, int] = {}
        self.reset_ok = True
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="bench-rss-sampler", daemon=True)

    def __enter__(self) -> WorkerPeaks:
        for proc in _python_descendants():
            self.reset_ok &= _reset_hwm(proc.pid)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._sample()

    def _sample(self) -> None:
        for proc in _python_descendants():
            kb = _vm_hwm_kb(proc.pid)
            if kb is not None and kb > self.peaks_kb.get(proc.pid, 0):
                self.peaks_kb[proc.pid] = kb

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    @property
    def max_mb(self) -> float:
        return max(self.peaks_kb.values(), default=0) / 1024


def _dataframe(ctx: Context, w: Workload) -> Any:
    from pyspark.sql import functions as F

    return ctx.spark.range(0, w.rows, 1, w.partitions).select(
        F.lpad(F.col("id").cast("string"), w.key_size, "0").alias("key"),
        F.randstr(F.lit(w.value_size), F.lit(11)).alias("value"),
    )


def _measure(write: Callable[[], None]) -> Sample:
    start = time.perf_counter()
    with WorkerPeaks() as peaks:
        write()
    seconds = time.perf_counter() - start
    per_worker = sorted((round(kb / 1024, 1) for kb in peaks.peaks_kb.values()), reverse=True)
    return Sample(value=round(peaks.max_mb, 1),
                  extra={"seconds": round(seconds, 1), "worker_peaks_mb": per_worker[:6],
                         "hwm_reset": peaks.reset_ok})


def compare(ctx: Context, w: Workload, buffer_memory_mb: int) -> Comparison:
    from benchmarks.spark_writers import register_all

    _ = ctx.bootstrap
    ctx.fresh_spark(worker_reuse=False)
    register_all(ctx.spark)
    df = _dataframe(ctx, w)

    def noop() -> Sample:
        return _measure(lambda: df.write.format("bench-noop-arrow").mode("append")
                        .option("expectedRows", str(w.rows)).save())

    def sink() -> Sample:
        topic = ctx.create_topic(w.partitions)
        try:
            writer = df.write.format(SINK_FORMAT).mode("append")
            options = {**kafka_options(ctx, w, topic), "kafka.buffer.memory": str(buffer_memory_mb << 20)}
            for k, v in options.items():
                writer = writer.option(k, v)
            return _measure(writer.save)
        finally:
            ctx.delete_topic(topic)

    contenders = [Contender(NOOP, noop), Contender(SINK, sink, unavailable=sink_available())]
    comp = run_comparison("memory", "memory", "MB", contenders, ctx.rounds, higher_is_better=False,
                          params={**w.describe(), "volume_bytes": w.total_bytes,
                                  "buffer_memory_mb": buffer_memory_mb}, log=ctx.log)
    base, ours = comp.results[0], comp.results[1]
    delta = ContenderResult(MEMORY_SINK)
    if base.ok and ours.ok:
        # Rounds alternate, so sample i of each contender ran back to back.
        delta.samples = [round(s - b, 1) for s, b in zip(ours.samples, base.samples, strict=False)]
    else:
        delta.skipped = ours.skipped or ours.error or "baseline did not run"
    comp.results.append(delta)
    return comp


def run(ctx: Context, base: Workload, volume_bytes: int, buffer_memory_mb: int) -> list[Comparison]:
    w = base.with_(value_size=MEMORY_VALUE_SIZE)
    w = w.with_(rows=max(w.partitions, volume_bytes // w.record_bytes))
    ctx.log(f"  memory: writing {w.rows:,} rows x {w.record_bytes} B = {w.total_bytes / 2**30:.2f} GiB per run")
    return [compare(ctx, w, buffer_memory_mb)]
