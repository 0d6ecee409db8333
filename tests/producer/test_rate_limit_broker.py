"""max.records.per.second on a real broker: a producer's send() held to its cap, as the broker's clock saw it
(message.timestamp.type=LogAppendTime), read back with confluent-kafka; AsyncKafkaProducer waits for it off the
event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pyarrow as pa
import pytest

from spark_kafka_sink import AsyncKafkaProducer, KafkaProducer
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker
_T = TypeVar("_T")


def run_async(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro, debug=False)


def test_send_is_held_to_max_records_per_second(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    n, cap = 60, 40
    topic = topic_factory(1, config={"message.timestamp.type": "LogAppendTime"})
    started = time.monotonic()
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.records.per.second": cap, "linger.ms": 0}) as p:
        for i in range(n):
            p.send(topic, value=b"%d" % i)
        p.flush(60)
    assert time.monotonic() - started >= n / cap
    records = readback(topic)
    assert [r.value for r in records] == [b"%d" % i for i in range(n)]
    # The broker's clock: the records arrived one at a time over ~(n - 1) / cap seconds (unlimited: within ms).
    assert (records[-1].timestamp_ms - records[0].timestamp_ms) / 1000 >= 0.75 * (n - 1) / cap


def test_async_producer_waits_for_its_rate_limit_off_the_event_loop(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(1)
    n, cap = 20, 20
    table = pa.table({"value": [b"b%d" % i for i in range(n)]})

    async def main() -> tuple[float, int]:
        ticks = 0
        sending = True

        async def tick() -> None:
            nonlocal ticks
            while sending:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.ensure_future(tick())
        started = time.monotonic()
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "max.records.per.second": cap,
                                       "batch.size": 0}) as p:
            for i in range(n):
                await p.send(topic, b"s%d" % i)
            await (await p.send_batch(topic, table))  # batch.size 0: one record a batch, each paid for
        elapsed = time.monotonic() - started
        sending = False
        await ticker
        return elapsed, ticks

    elapsed, ticks = run_async(main())
    assert elapsed >= 2 * n / cap
    # The loop went on while the producer waited for the limit (on the loop itself, it would not have ticked).
    assert ticks >= 0.25 * elapsed / 0.01, (ticks, elapsed)
    assert len(readback(topic)) == 2 * n
