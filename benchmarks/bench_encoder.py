"""Encoder alone: Arrow rows -> Kafka RecordBatch v2 bytes, no network, the encoding thread pinned to one core.

Contenders, on the same records (keys, values, one timestamp per run, no headers) and the same batch size:
- ``kafka-python builder`` (baseline): ``kafka.record.default_records.DefaultRecordBatchBuilder``, one
  ``append`` per record and ``build()`` when it reports full, from Python lists of ``bytes`` built up front.
- ``arrow_encoder 10k-row batches``: ``spark_kafka_sink.protocol.arrow_encoder.encode_arrow_batches`` called on
  10,000-row slices, the size Spark hands a Python writer (``spark.sql.execution.arrow.maxRecordsPerBatch``).
- ``arrow_encoder 1M-row batches``: the same on 1,000,000-row slices, to show per-call overhead.
Both produce complete, CRC'd, compressed batches; the byte totals are kept in the JSON (``extras``).
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from benchmarks.context import Context, pinned_to_one_core
from benchmarks.harness import Comparison, Contender, Sample, run_comparison
from benchmarks.workload import Workload, arrow_table, python_chunks

__all__ = ["run", "CODEC_IDS"]

CODEC_IDS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
SPARK_ARROW_BATCH = 10_000
BASELINE = "kafka-python builder"


def _kafka_python(w: Workload, chunks: list[tuple[list[bytes], list[bytes]]], ts: int) -> Contender:
    try:
        from kafka.record.default_records import DefaultRecordBatchBuilder  # type: ignore[import-untyped]
    except ImportError:
        return Contender(BASELINE, lambda: Sample(),
                         unavailable="kafka-python missing: pip install -r benchmarks/requirements.txt")

    codec = CODEC_IDS[w.codec]

    def run() -> Sample:
        out_bytes = batches = rows = 0
        start = time.perf_counter()
        builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, w.batch_size)
        delta = 0
        for keys, values in chunks:
            for key, value in zip(keys, values, strict=False):
                if builder.append(delta, ts, key, value, []) is None:
                    out_bytes += len(builder.build())
                    batches += 1
                    builder = DefaultRecordBatchBuilder(2, codec, False, -1, -1, -1, w.batch_size)
                    delta = 0
                    builder.append(delta, ts, key, value, [])
                delta += 1
                rows += 1
        if delta:
            out_bytes += len(builder.build())
            batches += 1
        seconds = time.perf_counter() - start
        return Sample(rows, seconds, extra={"bytes_out": out_bytes, "batches": batches})

    return Contender(BASELINE, run)


def _arrow_encoder(w: Workload, table: pa.Table, ts: int, slice_rows: int) -> Callable[[], Sample]:
    from spark_kafka_sink.protocol.arrow_encoder import encode_arrow_batches

    key = table.column("key").combine_chunks()
    value = table.column("value").combine_chunks()
    stamps = np.full(table.num_rows, ts, dtype=np.int64)

    def run() -> Sample:
        out_bytes = batches = 0
        n = table.num_rows
        start = time.perf_counter()
        for lo in range(0, n, slice_rows):
            hi = min(n, lo + slice_rows)
            encoded = encode_arrow_batches(value.slice(lo, hi - lo), key=key.slice(lo, hi - lo),
                                           timestamp_ms=stamps[lo:hi], max_batch_bytes=w.batch_size,
                                           compression=w.codec)
            batches += len(encoded)
            out_bytes += sum(len(b.data) for b in encoded)
        seconds = time.perf_counter() - start
        return Sample(n, seconds, extra={"bytes_out": out_bytes, "batches": batches})

    return run


def compare(ctx: Context, w: Workload, title: str) -> Comparison:
    ctx.log(f"  {title}: generating {w.rows:,} records ...")
    table = arrow_table(w)
    chunks = python_chunks(table)
    ts = int(time.time() * 1000)
    contenders = [
        _kafka_python(w, chunks, ts),
        Contender("arrow_encoder 10k-row batches", _arrow_encoder(w, table, ts, SPARK_ARROW_BATCH)),
        Contender("arrow_encoder 1M-row batches", _arrow_encoder(w, table, ts, 1_000_000)),
    ]
    with pinned_to_one_core() as cpu:
        comp = run_comparison("encoder", title, "records/s", contenders, ctx.rounds,
                              params={**w.describe(), "pinned_cpu": cpu}, log=ctx.log)
    del chunks, table
    return comp


def run(ctx: Context, base: Workload, sweep: list[tuple[str, Workload]]) -> list[Comparison]:
    """The main workload, then each sweep point (value size and codec)."""
    comps = [compare(ctx, base, f"encoder {base.value_size} B {base.codec}")]
    for label, w in sweep:
        comps.append(compare(ctx, w, f"encoder {label}"))
    return comps

