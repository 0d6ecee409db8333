"""Per-record producer loops, as Python services produce (a web handler, a consumer that transforms and forwards):
one call per record, against one local broker, acks=all, the workload's codec, linger.ms=5, batch.size=16384.

Contenders (each run writes a fresh topic; the timer covers the first call to the last acknowledgement; afterwards,
outside the timer, the topic's end offsets must add up to the row count; records are Python ``bytes`` built before
the timer starts):
- ``confluent-kafka produce loop`` (baseline): ``produce(topic, value, key[, on_delivery=cb])``, ``poll`` while
  librdkafka's queue is full, then ``flush()`` (which serves the delivery callbacks).
- ``send loop``: this package's ``KafkaProducer.send(topic, value, key=[, callback=cb])``, then ``flush()``.
- ``async send loop``: this package's ``AsyncKafkaProducer``: ``await send(topic, value, key[, callback=cb])`` per
  record in a running event loop, then ``await flush()`` -- the same loop as aiokafka's below.
- ``kafka-python send loop``: ``send(topic, value=, key=)`` (``.add_callback(cb)`` with callbacks), ``flush()``.
- ``aiokafka send loop``: ``await producer.send(topic, value, key)`` per record in a running event loop (the
  returned future's ``add_done_callback(cb)`` with callbacks), then ``await flush()``.
With callbacks every record gets one (a counter); a run whose callbacks did not all fire fails.

Comparisons: 10 B, 100 B and 1 KB values, each with and without 16 B keys and callbacks.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from typing import Any

from benchmarks.bench_producer import PEER_HINT, Chunks, _measured
from benchmarks.context import Context
from benchmarks.harness import Comparison, Contender, Sample, run_comparison
from benchmarks.targets import (
    AIOKAFKA_LOOP,
    ASYNC_SEND_LOOP,
    CONFLUENT,
    KAFKA_PYTHON_LOOP,
    SEND_LOOP,
    per_record_title,
)
from benchmarks.workload import Workload, arrow_table, python_chunks
from spark_kafka_sink import AsyncKafkaProducer, KafkaProducer

__all__ = ["run", "VALUE_SIZES"]

VALUE_SIZES = (10, 100, 1000)


class _Counter:
    """A delivery callback that counts acknowledgements (and fails the run on an error)."""

    def __init__(self) -> None:
        self.count = 0
        self.error: object = None

    def __call__(self, *args: Any) -> None:
        self.count += 1
        for arg in args:
            if isinstance(arg, BaseException) or (arg is not None and type(arg).__name__ == "KafkaError"):
                self.error = arg

    def check(self, expected: int) -> None:
        if self.error is not None or self.count != expected:
            raise RuntimeError(f"callbacks: {self.count} of {expected} fired, error {self.error!r}")


def _records(chunks: Chunks, keys: bool) -> list[tuple[bytes | None, bytes]]:
    pairs = itertools.chain.from_iterable(zip(k, v, strict=True) for k, v in chunks)
    return [(key if keys else None, value) for key, value in pairs]


def _ours(ctx: Context, w: Workload, records: list[tuple[bytes | None, bytes]], callbacks: bool) -> Contender:
    config = {"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
              "linger.ms": w.linger_ms, "batch.size": w.batch_size}

    def body(topic: str) -> None:
        counter = _Counter()
        with KafkaProducer(config) as p:
            send = p.send
            if callbacks:
                for key, value in records:
                    send(topic, value, key, callback=counter)
            else:
                for key, value in records:
                    send(topic, value, key)
            p.flush()
        if callbacks:
            counter.check(len(records))

    return Contender(SEND_LOOP, lambda: _measured(ctx, w, body))


def _ours_async(ctx: Context, w: Workload, records: list[tuple[bytes | None, bytes]],
                callbacks: bool) -> Contender:
    config = {"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
              "linger.ms": w.linger_ms, "batch.size": w.batch_size}

    async def produce(topic: str) -> None:
        counter = _Counter()
        async with AsyncKafkaProducer(config) as p:
            send = p.send
            if callbacks:
                for key, value in records:
                    await send(topic, value, key, callback=counter)
            else:
                for key, value in records:
                    await send(topic, value, key)
            await p.flush()
        if callbacks:
            counter.check(len(records))

    def body(topic: str) -> None:
        asyncio.run(produce(topic))

    return Contender(ASYNC_SEND_LOOP, lambda: _measured(ctx, w, body))


def _confluent(ctx: Context, w: Workload, records: list[tuple[bytes | None, bytes]], callbacks: bool) -> Contender:
    try:
        from confluent_kafka import Producer
    except ImportError:
        return Contender(CONFLUENT, lambda: Sample(), unavailable=f"confluent-kafka missing: {PEER_HINT}")

    def body(topic: str) -> None:
        counter = _Counter()
        p = Producer({"bootstrap.servers": ctx.bootstrap, "acks": "all", "compression.type": w.codec,
                      "linger.ms": w.linger_ms, "batch.size": w.batch_size})
        produce, poll = p.produce, p.poll
        extra: dict[str, Any] = {"on_delivery": counter} if callbacks else {}
        for key, value in records:
            while True:
                try:
                    produce(topic, value, key, **extra)
                    break
                except BufferError:  # librdkafka's queue is full: serve delivery reports until it takes it
                    poll(0.05)
        if p.flush(120) != 0:
            raise RuntimeError("confluent-kafka: records still queued after flush(120)")
        if callbacks:
            counter.check(len(records))

    return Contender(CONFLUENT, lambda: _measured(ctx, w, body))


def _kafka_python(ctx: Context, w: Workload, records: list[tuple[bytes | None, bytes]],
                  callbacks: bool) -> Contender:
    try:
        from kafka import KafkaProducer as KPProducer  # type: ignore[import-untyped]
    except ImportError:
        return Contender(KAFKA_PYTHON_LOOP, lambda: Sample(), unavailable=f"kafka-python missing: {PEER_HINT}")

    def body(topic: str) -> None:
        counter = _Counter()
        p = KPProducer(bootstrap_servers=ctx.bootstrap, acks="all",
                       compression_type=None if w.codec == "none" else w.codec,
                       linger_ms=w.linger_ms, batch_size=w.batch_size)
        try:
            send = p.send
            if callbacks:
                for key, value in records:
                    send(topic, value=value, key=key).add_callback(counter).add_errback(counter)
            else:
                for key, value in records:
                    send(topic, value=value, key=key)
            p.flush(timeout=300)
        finally:
            p.close(timeout=30)
        if callbacks:
            counter.check(len(records))

    return Contender(KAFKA_PYTHON_LOOP, lambda: _measured(ctx, w, body))


def _aiokafka(ctx: Context, w: Workload, records: list[tuple[bytes | None, bytes]], callbacks: bool) -> Contender:
    try:
        from aiokafka import AIOKafkaProducer  # type: ignore[import-untyped, import-not-found, unused-ignore]
    except ImportError:
        return Contender(AIOKAFKA_LOOP, lambda: Sample(), unavailable=f"aiokafka missing: {PEER_HINT}")

    async def produce(topic: str) -> None:
        counter = _Counter()
        p = AIOKafkaProducer(bootstrap_servers=ctx.bootstrap, acks="all",
                             compression_type=None if w.codec == "none" else w.codec,
                             linger_ms=w.linger_ms, max_batch_size=w.batch_size)
        await p.start()
        try:
            send = p.send
            for key, value in records:
                future = await send(topic, value, key)
                if callbacks:
                    future.add_done_callback(counter)
            await p.flush()
        finally:
            await p.stop()
        if callbacks:
            counter.check(len(records))

    def body(topic: str) -> None:
        asyncio.run(produce(topic))

    return Contender(AIOKAFKA_LOOP, lambda: _measured(ctx, w, body))


def compare(ctx: Context, w: Workload, keys: bool, callbacks: bool) -> Comparison:
    title = per_record_title(w.value_size, keys, callbacks)
    ctx.log(f"  {title}: generating {w.rows:,} records ...")
    records = _records(python_chunks(arrow_table(w)), keys)
    builders: list[Callable[..., Contender]] = [_confluent, _ours, _kafka_python, _ours_async, _aiokafka]
    contenders = [build(ctx, w, records, callbacks) for build in builders]
    _ = ctx.bootstrap  # start the broker before the first timer
    return run_comparison("per-record", title, "records/s", contenders, ctx.rounds,
                          params={**w.describe(), "keys": keys, "callbacks": callbacks}, log=ctx.log,
                          warmup=not ctx.quick)


def run(ctx: Context, base: Workload) -> list[Comparison]:
    return [compare(ctx, base.with_(value_size=size), keys, callbacks)
            for size in VALUE_SIZES for keys in (False, True) for callbacks in (False, True)]
