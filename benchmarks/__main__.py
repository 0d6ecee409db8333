"""``python -m benchmarks`` (``make bench``): every comparison of the benchmark issue in one process run.

    python -m benchmarks                      # the full run (scale: see README "Benchmarks")
    python -m benchmarks --quick              # tiny scale, for development and the smoke test
    python -m benchmarks --only encoder,producer --rows 2000000 --rounds 5

Prints a table per comparison, the targets met or missed, and writes ``benchmarks/results/<date>.json``,
``<date>.md`` (the README table) and ``<date>.png`` (bars at the median, min..max whiskers).
"""

from __future__ import annotations

import argparse
import datetime as dt
import signal
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.context import Context, results_dir
from benchmarks.harness import Comparison, load_average, select_contenders
from benchmarks.machine import machine_info, uptime_line
from benchmarks.report import format_table, markdown_table, plot, write_json
from benchmarks.targets import missing_components
from benchmarks.targets import targets as all_targets
from benchmarks.workload import Workload
from spark_kafka_sink.testing.broker_jars import REPO_ROOT

GROUPS = ("encoder", "producer", "per-record", "spark", "memory")
SPARK_SETS = ("main", "two", "small", "micro", "json", "avro", "sweep")  # bench_spark.run
VALUE_SIZES = (10, 1000, 10_000)  # plus the base 100 B
CODECS = ("none", "gzip", "snappy", "zstd")  # plus the base lz4


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--quick", action="store_true", help="tiny scale: checks the scripts work, measures nothing")
    p.add_argument("--only", default=",".join(GROUPS), help=f"comma-separated groups of {GROUPS}")
    p.add_argument("--rounds", type=int, help="rounds per comparison (default 3; at least 5 for the main Spark, "
                                              "200-task and one-large-table ones)")
    p.add_argument("--rows", type=int, help="rows of the main encoder and Spark workload (default 10,000,000)")
    p.add_argument("--producer-rows", type=int,
                   help="rows of the main producer workload (default: --rows / 10, see README)")
    p.add_argument("--per-record-rows", type=int, help="rows of each per-record loop comparison (default 100,000)")
    p.add_argument("--sweep-rows", type=int, help="max rows per encoder sweep point (default 1,000,000)")
    p.add_argument("--sweep-mb", type=int, help="max MB per encoder sweep point (default 256)")
    p.add_argument("--producer-sweep-rows", type=int, help="max rows per producer sweep point (default 100,000)")
    p.add_argument("--producer-sweep-mb", type=int, help="max MB per producer sweep point (default 128)")
    p.add_argument("--spark-send", action="store_true",
                   help="add the per-record 'Arrow writer + send' contender to the Spark comparisons (slow)")
    p.add_argument("--sweep", default=None,
                   help="groups that sweep value size and codec (default encoder,producer; 'none' for none)")
    p.add_argument("--memory-gb", type=float, help="volume written by the memory benchmark (default 5)")
    p.add_argument("--batch-size", type=int, default=16384,
                   help="batch.size for every producer and encoder (default 16384, the Java client's default)")
    p.add_argument("--buffer-memory-mb", type=int, default=32, help="producer buffer.memory (default 32 MB)")
    p.add_argument("--bootstrap", help="use this broker instead of starting one")
    p.add_argument("--out", type=Path, help="results directory (default benchmarks/results)")
    p.add_argument("--tag", default="", help="suffix of the result file names")
    p.add_argument("--contenders", default="",
                   help="comma-separated name fragments: run only the contenders whose name contains one (default all)")
    p.add_argument("--spark-sets", default=",".join(SPARK_SETS),
                   help=f"comma-separated Spark workloads of {SPARK_SETS} (default all)")
    a = p.parse_args(argv)
    quick = a.quick
    a.rounds = a.rounds or 3
    a.rows = a.rows or (20_000 if quick else 10_000_000)
    a.producer_rows = a.producer_rows or (a.rows if quick else max(1, a.rows // 10))
    a.per_record_rows = a.per_record_rows or (1_000 if quick else 100_000)
    a.sweep_rows = a.sweep_rows or (5_000 if quick else 1_000_000)
    a.sweep_mb = a.sweep_mb or (4 if quick else 256)
    a.producer_sweep_rows = a.producer_sweep_rows or (5_000 if quick else 100_000)
    # 128 MB: a 1 KB or 10 KB round lasts over a second (at 32 MB they lasted 0.3-0.7 s, and their min..max spanned
    # 2x on both sides: connection set-up and the first batches' linger were a large part of each run).
    a.producer_sweep_mb = a.producer_sweep_mb or (4 if quick else 128)
    a.spark_send = a.spark_send or quick
    a.memory_gb = a.memory_gb or (0.02 if quick else 5.0)
    a.sweep = a.sweep if a.sweep is not None else "encoder,producer"
    a.groups = [g for g in a.only.split(",") if g]
    a.spark_sets = [s for s in a.spark_sets.split(",") if s]
    if [s for s in a.spark_sets if s not in SPARK_SETS]:
        p.error(f"unknown --spark-sets {a.spark_sets}: choose from {SPARK_SETS}")
    bad = [g for g in a.groups if g not in GROUPS]
    if bad:
        p.error(f"unknown group(s) {bad}: choose from {GROUPS}")
    if a.rounds < 1:
        p.error("--rounds must be >= 1")
    a.tag = a.tag or ("quick" if quick else "")
    return a


def result_stem(finished: dt.datetime, groups: list[str], spark_sets: list[str], tag: str) -> str:
    """The result files' name: when the run finished and what it ran (benchmarks/results/README.md), e.g.
    ``2026-11-29-0858-full`` or ``2026-11-25-0431-spark-small-micro``, then the ``--tag`` if any."""
    workload = "full" if set(groups) == set(GROUPS) else "-".join(g for g in GROUPS if g in groups)
    if "spark" in groups and set(spark_sets) != set(SPARK_SETS):
        workload += "-" + "-".join(s for s in SPARK_SETS if s in spark_sets)
    return f"{finished:%Y-%m-%d-%H%M}-{workload}" + (f"-{tag}" if tag else "")


def sweep_points(base: Workload, rows: int, max_bytes: int) -> list[tuple[str, Workload]]:
    points = []
    for size in VALUE_SIZES:
        w = base.with_(value_size=size)
        points.append((f"{size} B {base.codec}", w.with_(rows=max(1, min(rows, max_bytes // w.record_bytes)))))
    for codec in CODECS:
        w = base.with_(codec=codec)
        points.append((f"{base.value_size} B {codec}", w.with_(rows=max(1, min(rows, max_bytes // w.record_bytes)))))
    return points


def _run_group(group: str, ctx: Context, a: argparse.Namespace, sweeps: set[str]) -> list[Comparison]:
    base = Workload(rows=a.rows, batch_size=a.batch_size)
    sweep = sweep_points(base, a.sweep_rows, a.sweep_mb << 20) if group in sweeps else []
    if group == "encoder":
        from benchmarks import bench_avro, bench_encoder
        return bench_encoder.run(ctx, base, sweep) + bench_avro.run(ctx, min(a.rows, 200_000))
    if group == "producer":
        from benchmarks import bench_producer
        pbase = base.with_(rows=a.producer_rows)
        psweep = sweep_points(base, a.producer_sweep_rows, a.producer_sweep_mb << 20) if group in sweeps else []
        return bench_producer.run(ctx, pbase, psweep, a.buffer_memory_mb)
    if group == "per-record":
        from benchmarks import bench_per_record
        return bench_per_record.run(ctx, base.with_(rows=a.per_record_rows))
    if group == "spark":
        from benchmarks import bench_spark
        return bench_spark.run(ctx, base, sweep, with_send=a.spark_send, sets=a.spark_sets)
    from benchmarks import bench_memory
    return bench_memory.run(ctx, base, int(a.memory_gb * (1 << 30)), a.buffer_memory_mb)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    a = parse_args(argv)
    select_contenders(a.contenders.split(","))
    started = time.time()
    signal.signal(signal.SIGTERM, _interrupt)  # unwind like Ctrl-C: the broker, Spark and topics are cleaned up
    ctx = Context(rounds=a.rounds, quick=a.quick, bootstrap_arg=a.bootstrap, spark_memory="1g" if a.quick else "4g")
    machine = machine_info(REPO_ROOT)
    print(f"machine: {machine['cpu_model']}, {machine['cores']} cores, {machine['memory_gb']} GB, "
          f"Python {machine['python']}, {machine['java']}")
    print(f"load at start: {machine['uptime_at_start']}")
    sweeps = {g for g in a.sweep.split(",") if g and g != "none"}
    comps: list[Comparison] = []
    group_seconds: dict[str, float] = {}
    try:
        for group in a.groups:
            print(f"\n### {group}")
            t0 = time.monotonic()
            comps += _run_group(group, ctx, a, sweeps)
            group_seconds[group] = round(time.monotonic() - t0, 1)
    finally:
        ctx.close()
    targets = [t.evaluate(comps) for t in all_targets(a.buffer_memory_mb) if t.group in a.groups]
    print(format_table(comps, targets))
    out_dir = a.out or results_dir()
    stem = result_stem(dt.datetime.now(), a.groups, a.spark_sets, a.tag)
    payload: dict[str, Any] = {
        "date": dt.datetime.now().isoformat(timespec="seconds"),
        "argv": sys.argv[1:] if argv is None else argv,
        "duration_s": round(time.time() - started, 1),
        "group_seconds": group_seconds,
        "scale": {"rounds": a.rounds, "rows": a.rows, "producer_rows": a.producer_rows,
                  "sweep_rows": a.sweep_rows, "sweep_mb": a.sweep_mb, "producer_sweep_rows": a.producer_sweep_rows,
                  "producer_sweep_mb": a.producer_sweep_mb, "sweep_groups": sorted(sweeps),
                  "spark_send": a.spark_send,
                  "memory_gb": a.memory_gb, "buffer_memory_mb": a.buffer_memory_mb, "batch_size": a.batch_size,
                  "quick": a.quick},
        "machine": machine,
        "load_at_end": load_average(),
        "uptime_at_end": uptime_line(),
        "missing": missing_components(),
        "targets": targets,
        "comparisons": [c.to_json() for c in comps],
    }
    write_json(out_dir / f"{stem}.json", payload)
    (out_dir / f"{stem}.md").write_text(markdown_table(comps, targets) + "\n")
    png = plot(comps, out_dir / f"{stem}.png",
               f"spark-kafka-sink benchmarks {payload['date']} - {machine['cpu_model']}, {machine['cores']} cores, "
               f"load {machine['uptime_at_start'].split('load average:')[-1].strip()}")
    plotted = f", {png.name}" if png else " (no matplotlib: no plot)"
    print(f"\nwrote {out_dir / (stem + '.json')}, {stem}.md{plotted}")
    print(f"total {payload['duration_s']:.0f} s; load at end: {payload['uptime_at_end']}")
    failed = [r.name for c in comps for r in c.results if r.error]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
