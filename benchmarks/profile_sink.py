"""Profile the pykafka-sink write path without Spark, the way the benchmark README's findings were measured.

    python -m benchmarks.profile_sink --mode sink --rows 2000000            # rows/s of write_partition alone
    py-spy record --gil --threads --format raw -r 200 -o /tmp/sink.raw -- \\
        .venv/bin/python -m benchmarks.profile_sink --mode sink --rows 2000000
    python -m benchmarks.profile_sink --summarize /tmp/sink.raw            # GIL share per thread and function

``--mode sink`` feeds ``spark_kafka_sink.spark.writer.write_partition`` the 10,000-row Arrow batches of string
``key``/``value`` columns that Spark would hand its Python worker; ``--mode send_batch`` calls
``KafkaProducer.send_batch`` on the same batches (binary columns). A local broker is started (or ``--bootstrap``).
``--summarize`` reads py-spy's raw (collapsed) output and prints, for the send phase only, how many GIL-holding
samples each thread took and the project functions they were in: with two Python threads (the caller encoding,
the sender thread doing network bookkeeping) the GIL is the shared resource that bounds throughput.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["main", "summarize"]

_PHASE = ("write_partition", "send_batch", "SenderThread")


def summarize(path: Path, top: int = 25) -> str:
    threads: collections.Counter[str] = collections.Counter()
    leaf: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        if not any(marker in f for f in frames for marker in _PHASE):
            continue
        n = int(count)
        total += n
        thread = frames[0].split(":", 1)[-1].strip() or frames[0]
        threads[thread] += n
        # The deepest frame inside the project (or the leaf, if none): where the GIL time was spent.
        ours = [f for f in frames if "spark_kafka_sink/" in f]
        where = (ours[-1] if ours else frames[-1]).split(" (")[0]
        module = (ours[-1] if ours else frames[-1]).rsplit("/", 1)[-1].split(":")[0]
        leaf[f"{thread[:28]:28s} {where} [{module}]"] += n
    if not total:
        return "no samples in the send phase"
    out = [f"{total} samples in the send phase"]
    out += [f"{n:7d} {n / total:6.1%}  thread {t}" for t, n in threads.most_common()]
    out.append("")
    out += [f"{n:7d} {n / total:6.1%}  {k}" for k, n in leaf.most_common(top)]
    return "\n".join(out)


def _option(setting: str) -> tuple[str, str]:
    key, sep, value = setting.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--set {setting!r}: expected OPTION=VALUE, e.g. kafka.linger.ms=5")
    return key.strip(), value


def _write(mode: str, guarantee: str, options: dict[str, str], topic: str, batches: list[Any]) -> float:
    start = time.perf_counter()
    if mode == "sink":
        from pyspark.sql.types import StringType, StructField, StructType

        from spark_kafka_sink.spark.options import SinkOptions
        from spark_kafka_sink.spark.schema import plan_columns
        from spark_kafka_sink.spark.writer import write_partition

        schema = StructType([StructField("key", StringType()), StructField("value", StringType())])
        parsed = SinkOptions.parse({**options, "deliveryGuarantee": guarantee}, streaming=False)
        write_partition(parsed, plan_columns(schema, topic), iter(batches))
    else:
        from spark_kafka_sink.producer import KafkaProducer

        config = {k[len("kafka."):]: v for k, v in options.items() if k.startswith("kafka.")}
        with KafkaProducer(config) as producer:
            futures = [producer.send_batch(topic, b) for b in batches]
            producer.flush()
            for f in futures:
                f.result()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_sink", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=("sink", "send_batch"), default="sink")
    p.add_argument("--rows", type=int, default=2_000_000)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--value-kind", choices=("random", "json"), default="random",
                   help="random letters, or JSON events (benchmarks.workload.json_values; --value-size 1000)")
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--codec", default="lz4")
    p.add_argument("--guarantee", choices=("at_least_once", "exactly_once"), default="at_least_once",
                   help="deliveryGuarantee of --mode sink (exactly_once: the transaction is left open, as a task does)")
    p.add_argument("--repeat", type=int, default=1, help="measure this many times (fresh topic each)")
    p.add_argument("--bootstrap")
    p.add_argument("--set", action="append", default=[], metavar="OPTION=VALUE",
                   help="another sink option, e.g. kafka.send.buffer.bytes=-1 (repeatable): A/B one setting")
    p.add_argument("--summarize", type=Path, help="print the summary of a py-spy raw file and exit")
    a = p.parse_args(argv)
    if a.summarize:
        print(summarize(a.summarize))
        return 0

    import pyarrow as pa

    from benchmarks.context import Context
    from benchmarks.workload import Workload, arrow_table

    extra = dict(_option(setting) for setting in a.set)
    ctx = Context(rounds=1, quick=False, bootstrap_arg=a.bootstrap)
    try:
        w = Workload(rows=a.rows, value_size=a.value_size, batch_size=a.batch_size, codec=a.codec,
                     value_kind=a.value_kind)
        table = arrow_table(w)
        if a.mode == "sink":  # Spark hands string columns
            table = pa.table({c: table.column(c).cast(pa.string()) for c in ("key", "value")})
        batches = table.to_batches(max_chunksize=10_000)
        for _ in range(a.repeat):
            topic = ctx.create_topic(w.partitions)
            options = {"kafka.bootstrap.servers": ctx.bootstrap, "topic": topic, "kafka.acks": "all",
                       "kafka.compression.type": w.codec, "kafka.linger.ms": str(w.linger_ms),
                       "kafka.batch.size": str(w.batch_size)}
            options.update(extra)
            cpu = os.times()
            seconds = _write(a.mode, a.guarantee, options, topic, batches)
            after = os.times()
            ctx.delete_topic(topic)
            # This process's CPU (both threads, user + kernel): the cost a Spark Python worker would pay.
            us_per_row = ((after.user - cpu.user) + (after.system - cpu.system)) * 1e6 / w.rows
            print(f"{a.mode} {a.guarantee if a.mode == 'sink' else ''}: {w.rows:,} rows in {seconds:.2f} s = "
                  f"{w.rows / seconds:,.0f} rows/s, {us_per_row:.2f} CPU us/row "
                  f"(user {(after.user - cpu.user) * 1e6 / w.rows:.2f}) (batch.size={w.batch_size}, {w.codec})",
                  flush=True)
    finally:
        ctx.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
