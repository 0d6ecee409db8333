"""Producers against one local broker: same records, same topic layout, acks=all, the workload's codec.

Contenders (every run writes a fresh topic of ``partitions`` partitions; the timer covers the first send to the
last acknowledgement; afterwards, outside the timer, the topic's end offsets must add up to the row count):
- ``confluent-kafka produce loop`` (baseline): ``Producer.produce(topic, value, key)`` per record, ``poll(0)`` when
  librdkafka's queue is full, then ``flush()``. No delivery callback (the fastest loop; delivery is checked by the
  offsets afterwards).
- ``kafka-python``: ``KafkaProducer.send(topic, value=, key=)`` per record, then ``flush()``.
- ``Java ProducerPerformance``: Kafka's own tool (``org.apache.kafka.tools.ProducerPerformance``) in a JVM started
  from ``.kafka/lib``; its own summary line gives records/s. It has no key option: its records carry null keys and
  ``key_size + value_size`` random uppercase bytes, so the bytes per record match.
- ``send_batch``: ``spark_kafka_sink.KafkaProducer.send_batch(topic, table)`` per 10,000-row Arrow batch (what
  the Spark sink is handed), then ``flush()``.
- ``send``: the same producer's per-record ``send(topic, value, key=)``, then ``flush()``.
Common producer settings: acks=all, compression.type=<codec>, linger.ms=5, batch.size=16384 (the Java client's
defaults for the last two); per-record contenders get Python ``bytes`` built before the timer starts.

``producer one large table`` (issue 16): the same rows as one ``send_batch`` call vs 10,000-row calls, the records
a new user tried (16 B keys / 100 B values, no codec, batch.size 256 KiB) and the run's buffer.memory (default 32 MB,
far smaller than the table: it must stream through the buffer, encoding the next slice while earlier ones are on
the wire). 2,000,000 records (248 MB), at least 5 rounds: the user's 300,000 records (39 MB) took 0.15-0.7 s a round,
and the broker's pace alone (its CPU per MB varied 5x between rounds, either contender) spread those rounds 0.3-1.3x.
The baseline is the 10,000-row calls.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from benchmarks.context import Context
from benchmarks.harness import Comparison, Contender, Sample, run_comparison
from benchmarks.targets import (
    CONFLUENT,
    JAVA_PERF,
    KAFKA_PYTHON,
    SEND,
    SEND_BATCH,
    SEND_BATCH_ONE_TABLE,
    SEND_BATCH_SLICES,
    producer_class,
)
from benchmarks.workload import Workload, arrow_table, python_chunks
from spark_kafka_sink.testing.broker_jars import broker_lib, require_java

__all__ = ["run"]

SEND_BATCH_ROWS = 10_000
LARGE_TABLE_ROWS = 2_000_000
LARGE_TABLE_BATCH_SIZE = 256 << 10
_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency")
PEER_HINT = "pip install -r benchmarks/requirements.txt"

Chunks = list[tuple[list[bytes], list[bytes]]]


def _measured(ctx: Context, w: Workload, body: Callable[[str], None]) -> Sample:
    """Create a topic, time ``body(topic)``, check the topic holds every row, delete it."""
    topic = ctx.create_topic(w.partitions)
    try:
        start = time.perf_counter()
        body(topic)
        seconds = time.perf_counter() - start
        landed = ctx.topic_record_count(topic)
    finally:
        ctx.delete_topic(topic)
    if landed != w.rows:
        raise RuntimeError(f"topic holds {landed} records, {w.rows} were sent")
    return Sample(w.rows, seconds, extra={"MB_per_s": round(w.total_bytes / seconds / 1e6, 1)})


def _confluent(ctx: Context, w: Workload, chunks: Chunks) -> Contender:
    try:
        from confluent_kafka import Producer
    except ImportError:
        return Contender(CONFLUENT, lambda: Sample(), unavailable=f"confluent-kafka missing: {PEER_HINT}")

    def body(topic: str) -> None:
        p = Producer({"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
                      "linger.ms": w.linger_ms, "batch.size": w.batch_size})
        produce, poll = p.produce, p.poll
        for keys, values in chunks:
            for key, value in zip(keys, values, strict=False):
                try:
                    produce(topic, value, key)
                except BufferError:  # librdkafka's queue is full: serve delivery reports until it takes it
                    while True:
                        poll(0.05)
                        try:
                            produce(topic, value, key)
                            break
                        except BufferError:
                            continue
        if p.flush(120) != 0:
            raise RuntimeError("confluent-kafka: records still queued after flush(120)")

    return Contender(CONFLUENT, lambda: _measured(ctx, w, body))


def _kafka_python(ctx: Context, w: Workload, chunks: Chunks) -> Contender:
    try:
        from kafka import KafkaProducer as KPProducer  # type: ignore[import-untyped]
    except ImportError:
        return Contender(KAFKA_PYTHON, lambda: Sample(), unavailable=f"kafka-python missing: {PEER_HINT}")

    def body(topic: str) -> None:
        p = KPProducer(bootstrap_servers=ctx.bootstrap, acks="all",
                       compression_type=None if w.codec == "none" else w.codec,
                       linger_ms=w.linger_ms, batch_size=w.batch_size)
        try:
            send = p.send
            for keys, values in chunks:
                for key, value in zip(keys, values, strict=False):
                    send(topic, value=value, key=key)
            p.flush(timeout=300)
        finally:
            p.close(timeout=30)

    return Contender(KAFKA_PYTHON, lambda: _measured(ctx, w, body))


def _java(ctx: Context, w: Workload) -> Contender:
    try:
        java = require_java()
    except Exception as exc:  # ToolMissingError, or no jars
        return Contender(JAVA_PERF, lambda: Sample(), unavailable=str(exc))
    if not any(broker_lib().glob("kafka-tools-*.jar")):
        return Contender(JAVA_PERF, lambda: Sample(), unavailable="kafka-tools jar missing: run `make jars`")

    def run() -> Sample:
        topic = ctx.create_topic(w.partitions)
        try:
            cmd = [java, "-Xmx1g", "-cp", f"{broker_lib()}/*", "org.apache.kafka.tools.ProducerPerformance",
                   "--bootstrap-server", ctx.bootstrap, "--topic", topic, "--num-records", str(w.rows),
                   "--record-size", str(w.record_bytes), "--throughput", "-1", "--command-property",
                   "acks=all", f"compression.type={w.codec}", f"linger.ms={w.linger_ms}",
                   f"batch.size={w.batch_size}"]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
            found = _SUMMARY.findall(out.stdout)
            if out.returncode != 0 or not found:
                raise RuntimeError(f"ProducerPerformance exit {out.returncode}: {(out.stdout + out.stderr)[-600:]}")
            landed = ctx.topic_record_count(topic)
        finally:
            ctx.delete_topic(topic)
        sent, rate, mb, latency = found[-1]
        if landed != w.rows or int(sent) != w.rows:
            raise RuntimeError(f"ProducerPerformance sent {sent}, topic holds {landed}, expected {w.rows}")
        return Sample(w.rows, w.rows / float(rate), extra={"MB_per_s": float(mb), "avg_latency_ms": float(latency)})

    return Contender(JAVA_PERF, run)


def _ours(ctx: Context, w: Workload, table: pa.Table, chunks: Chunks, buffer_memory: int) -> list[Contender]:
    cls = producer_class()
    if cls is None:
        why = "spark_kafka_sink.KafkaProducer is not written yet"
        return [Contender(SEND_BATCH, lambda: Sample(), unavailable=why),
                Contender(SEND, lambda: Sample(), unavailable=why)]
    config: dict[str, Any] = {"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
                              "linger.ms": w.linger_ms, "batch.size": w.batch_size, "buffer.memory": buffer_memory}
    batches = table.to_batches(max_chunksize=SEND_BATCH_ROWS)

    def bulk(topic: str) -> None:
        with cls(config) as p:
            futures = [p.send_batch(topic, batch) for batch in batches]
            p.flush()
            for f in futures:
                f.result(timeout=300)

    def single(topic: str) -> None:
        with cls(config) as p:
            send = p.send
            for keys, values in chunks:
                for key, value in zip(keys, values, strict=False):
                    send(topic, value, key=key)
            p.flush()

    return [Contender(SEND_BATCH, lambda: _measured(ctx, w, bulk)),
            Contender(SEND, lambda: _measured(ctx, w, single))]


def compare(ctx: Context, w: Workload, title: str, buffer_memory_mb: int, with_java: bool = True) -> Comparison:
    ctx.log(f"  {title}: generating {w.rows:,} records ...")
    table = arrow_table(w)
    chunks = python_chunks(table)
    contenders = [_confluent(ctx, w, chunks), _kafka_python(ctx, w, chunks)]
    if with_java:
        contenders.append(_java(ctx, w))
    contenders += _ours(ctx, w, table, chunks, buffer_memory_mb << 20)
    _ = ctx.bootstrap  # start the broker before the first timer
    return run_comparison("producer", title, "records/s", contenders, ctx.rounds, params=w.describe(), log=ctx.log,
                          warmup=not ctx.quick)


def compare_one_table(ctx: Context, w: Workload, buffer_memory_mb: int) -> Comparison:
    """One ``send_batch`` of the whole table vs the same rows in 10,000-row calls (same producer settings)."""
    cls = producer_class()
    title = "producer one large table"
    ctx.log(f"  {title}: generating {w.rows:,} records ...")
    table = arrow_table(w)
    config: dict[str, Any] = {"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
                              "linger.ms": w.linger_ms, "batch.size": w.batch_size,
                              "buffer.memory": buffer_memory_mb << 20}
    batches = table.to_batches(max_chunksize=SEND_BATCH_ROWS)

    def sliced(topic: str) -> None:
        assert cls is not None
        with cls(config) as p:
            futures = [p.send_batch(topic, batch) for batch in batches]
            p.flush()
            for f in futures:
                f.result(timeout=300)

    def whole(topic: str) -> None:
        assert cls is not None
        with cls(config) as p:
            future = p.send_batch(topic, table)
            p.flush()
            future.result(timeout=300)

    why = None if cls is not None else "spark_kafka_sink.KafkaProducer is not written yet"
    contenders = [Contender(SEND_BATCH_SLICES, lambda: _measured(ctx, w, sliced), unavailable=why),
                  Contender(SEND_BATCH_ONE_TABLE, lambda: _measured(ctx, w, whole), unavailable=why)]
    _ = ctx.bootstrap
    return run_comparison("producer", title, "records/s", contenders, ctx.target_rounds(),
                          params={**w.describe(), "buffer_memory_mb": buffer_memory_mb,
                                  "table_mb": round(table.nbytes / 1e6, 1)},
                          log=ctx.log, warmup=not ctx.quick)


def run(ctx: Context, base: Workload, sweep: list[tuple[str, Workload]], buffer_memory_mb: int) -> list[Comparison]:
    comps = [compare(ctx, base, f"producer {base.value_size} B {base.codec}", buffer_memory_mb)]
    for label, w in sweep:
        comps.append(compare(ctx, w, f"producer {label}", buffer_memory_mb))
    large = base.with_(rows=base.rows if ctx.quick else LARGE_TABLE_ROWS, key_size=16, value_size=100, codec="none",
                       batch_size=LARGE_TABLE_BATCH_SIZE)
    comps.append(compare_one_table(ctx, large, buffer_memory_mb))
    return comps
