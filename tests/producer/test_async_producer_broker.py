"""``AsyncKafkaProducer`` under a running event loop against a real broker; read back with confluent-kafka.

The back-pressure tests pause a private broker (SIGSTOP) so that nothing sent is answered and buffer.memory fills,
then check that the loop went on running other tasks while a ``send`` waited for memory."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pytest

from spark_kafka_sink import AsyncKafkaProducer, RecordMetadata
from spark_kafka_sink.errors import BufferExhaustedError, TransactionAbortedError
from spark_kafka_sink.producer import DeliveryFuture
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import ConsumedRecord, create_topic, pause_process, read_topic

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
_T = TypeVar("_T")
_LINGER_FOREVER = {"linger.ms": 600_000}  # nothing is sent until a batch fills, a flush or a commit


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro, debug=False)


def test_awaited_sends_a_flush_and_a_close_deliver_every_record_with_its_metadata(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)

    async def main() -> list[RecordMetadata]:
        p = AsyncKafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        deliveries = [await p.send(topic, b"v%d" % i, key=b"k%d" % (i % 7), headers=[("h", b"%d" % i)])
                      for i in range(500)]
        await p.flush(30)
        assert all(d.done() for d in deliveries)  # flush returned once every record was answered
        metadata = [await d for d in deliveries]
        last = await p.send_and_wait(topic, b"last", partition=1)
        await p.close(30)
        return [*metadata, last]

    metadata = run(main())
    records = {(r.partition, r.offset): r for r in readback(topic)}
    assert len(records) == 501
    for i, md in enumerate(metadata[:500]):
        record = records[(md.partition, md.offset)]
        assert (record.key, record.value, record.headers) == (b"k%d" % (i % 7), b"v%d" % i, (("h", b"%d" % i),))
    assert records[(1, metadata[-1].offset)].value == b"last"


def test_send_batch_queues_a_table_and_its_result_counts_every_record(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    table = pa.table({"key": [b"k%d" % (i % 11) for i in range(5000)], "value": [b"v%d" % i for i in range(5000)]})

    async def main() -> int:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap}) as p:
            result = await (await p.send_batch(topic, table))
            return result.records

    assert run(main()) == 5000
    assert sorted(r.value or b"" for r in readback(topic)) == sorted(v.as_py() for v in table["value"])


def test_a_table_larger_than_buffer_memory_streams_through_and_later_sends_follow_it(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1)
    rows = 5000  # ~600 KB of records against 64 KiB of buffer.memory: queued as memory frees, off the loop
    table = pa.table({"value": [b"%05d-" % i + b"v" * 100 for i in range(rows)]})

    async def main() -> tuple[int, RecordMetadata]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 16384,
                                       "buffer.memory": 65536}) as p:
            queued = await p.send_batch(topic, table)
            after = await p.send(topic, b"after", partition=0)
            return (await queued).records, await after

    records, after = run(main())
    assert records == rows and after.offset == rows
    assert [r.value for r in readback(topic)] == [v.as_py() for v in table["value"]] + [b"after"]


def test_tasks_sending_at_once_under_memory_pressure_keep_each_tasks_order(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    tasks, per_task = 6, 1500  # ~1 MB of records through 64 KiB of buffer.memory: sends keep waiting for memory

    async def sender(p: AsyncKafkaProducer, t: int) -> list[DeliveryFuture[RecordMetadata]]:
        return [await p.send(topic, b"%d-%d-" % (t, i) + _VALUE, partition=t % 2) for i in range(per_task)]

    async def main() -> tuple[list[list[DeliveryFuture[RecordMetadata]]], float]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 4096, "buffer.memory": 65536,
                                       "linger.ms": 5}) as p:
            await p.partitions_for(topic)
            deliveries = await asyncio.gather(*(sender(p, t) for t in range(tasks)))
            await p.flush(60)
            return deliveries, p.metrics()["bufferpool-wait-time-ns-total"]

    deliveries, waited_ns = run(main())
    assert waited_ns > 0  # sends did wait for memory (off the loop, in buffer.memory's queue)
    records = readback(topic)
    for t in range(tasks):
        mine = [r for r in records if r.value is not None and r.value.startswith(b"%d-" % t)]
        assert [int(r.value.split(b"-")[1]) for r in mine if r.value] == list(range(per_task))  # in send order
        assert [d.result().offset for d in deliveries[t]] == [r.offset for r in mine]


def test_a_committed_transaction_is_read_at_read_committed_and_an_aborted_one_is_not(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": bootstrap, "transactional.id": f"async-{topic}", **_LINGER_FOREVER}

    async def main() -> None:
        async with AsyncKafkaProducer(config) as p:
            await p.init_transactions(30)
            p.begin_transaction()
            for i in range(100):
                await p.send(topic, b"committed-%d" % i)
            await p.send_batch(topic, pa.table({"value": [b"committed-batch-%d" % i for i in range(100)]}))
            await p.commit_transaction(30)  # the staged records are flushed first
            p.begin_transaction()
            aborted = [await p.send(topic, b"aborted-%d" % i) for i in range(100)]
            await p.abort_transaction(30)
            for delivery in aborted:  # dropped unsent: each delivery says so
                with pytest.raises(TransactionAbortedError):
                    await delivery

    run(main())
    committed = sorted(r.value or b"" for r in readback(topic, "read_committed"))
    assert committed == sorted([b"committed-%d" % i for i in range(100)] +
                               [b"committed-batch-%d" % i for i in range(100)])


def test_a_cancelled_await_of_a_delivery_leaves_the_record_queued_and_it_is_sent(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1)

    async def main() -> tuple[RecordMetadata, RecordMetadata]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, **_LINGER_FOREVER}) as p:
            delivery = await p.send(topic, b"kept", partition=0)
            waiter = asyncio.ensure_future(_await(delivery))
            other = asyncio.ensure_future(_await(delivery))  # a second task awaiting the same delivery
            await asyncio.sleep(0)  # let both start waiting (a scheduling step, not a wait for a condition)
            waiter.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiter
            assert not delivery.done()  # linger.ms has not passed: nothing was sent yet
            await p.flush(30)
            return await delivery, await other  # the cancelled wait cancelled neither the record nor the other wait

    again, other = run(main())
    assert again == other and again.offset == 0
    assert [r.value for r in readback(topic)] == [b"kept"]


async def _await(delivery: DeliveryFuture[RecordMetadata]) -> RecordMetadata:
    return await delivery


def test_async_with_closes_the_producer_sending_what_was_queued(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1)

    async def main() -> list[DeliveryFuture[RecordMetadata]]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, **_LINGER_FOREVER}) as p:
            return [await p.send(topic, b"%d" % i) for i in range(50)]

    deliveries = run(main())
    assert [d.result().offset for d in deliveries] == list(range(50))  # done by the close, without a flush
    assert [int(r.value or b"") for r in readback(topic)] == list(range(50))


# ---------------------------------------------------------------------------------- buffer.memory full

@pytest.fixture(scope="module")
def pausable() -> Iterator[KafkaCluster]:
    """A private broker the tests pause (SIGSTOP) and resume."""
    fetch_jars()
    with KafkaCluster(size=1) as cluster:
        yield cluster


_FULL = {"batch.size": 16384, "buffer.memory": 65536, **_LINGER_FOREVER}
_VALUE = b"v" * 100
# A heartbeat task's period, and the longest gap between two of its beats allowed while a send waits for memory.
# A send that blocked the loop would stop the heartbeat for its whole wait: PAUSED_S (or max.block.ms) here, many
# times the bound. The bound leaves the loop's own jitter room on a busy two-core machine (a niced test among other
# processes, the sender thread and the worker waiting for memory competing for the GIL).
_BEAT_S = 0.01
_MAX_GAP_S = 0.25
_PAUSED_S = 1.5


class _Heartbeat:
    def __init__(self) -> None:
        self.beats: list[float] = []

    async def run(self) -> None:
        while True:
            self.beats.append(time.monotonic())
            await asyncio.sleep(_BEAT_S)

    def longest_gap(self, since: float) -> float:
        times = [since, *(t for t in self.beats if t >= since), time.monotonic()]
        return max(b - a for a, b in zip(times, times[1:], strict=False))


def _fill_value(i: int) -> bytes:
    return b"fill-%d-" % i + _VALUE


async def _fill(p: AsyncKafkaProducer, topic: str, partition: int | None = 0) -> list[DeliveryFuture[RecordMetadata]]:
    """Send until a send has to wait for buffer.memory, and cancel that one (it queued nothing): the sends before.
    The cancelled send's value is ``_fill_value(len(returned))``. ``partition=None``: staged sends."""
    queued: list[DeliveryFuture[RecordMetadata]] = []
    while True:
        send = asyncio.ensure_future(p.send(topic, _fill_value(len(queued)), partition=partition))
        await asyncio.sleep(0)  # one loop step: a send with room completes within it
        if not send.done():
            send.cancel()
            with pytest.raises(asyncio.CancelledError):
                await send
            return queued
        queued.append(send.result())


def test_the_loop_keeps_its_cadence_while_a_send_waits_for_buffer_memory_and_a_cancelled_one_queued_nothing(
        pausable: KafkaCluster) -> None:
    (pid,) = pausable.pids()
    topic = create_topic(pausable.bootstrap_servers, "full-cadence", partitions=1)

    async def main() -> tuple[float, int, RecordMetadata]:
        heartbeat = _Heartbeat()
        beating = asyncio.ensure_future(heartbeat.run())
        async with AsyncKafkaProducer({"bootstrap.servers": pausable.bootstrap_servers, "max.block.ms": 60_000,
                                       **_FULL}) as p:
            await p.partitions_for(topic)
            pause_process(pid)
            try:
                queued = await _fill(p, topic)
                waiting = asyncio.ensure_future(p.send(topic, b"after the wait", partition=0))
                since = time.monotonic()
                await asyncio.sleep(_PAUSED_S)  # the broker stays paused this long: the send waits throughout
                assert not waiting.done()
            finally:
                os.kill(pid, signal.SIGCONT)
            delivery = await waiting
            gap = heartbeat.longest_gap(since)
            await p.flush(60)
            beating.cancel()
            return gap, len(queued), await delivery

    gap, queued, last = run(main())
    assert gap < _MAX_GAP_S, f"the loop stalled {gap:.3f} s while a send waited for memory"
    records = read_topic(pausable.bootstrap_servers, topic)
    assert queued * len(_VALUE) >= 65536 // 4  # the sends filled buffer.memory before one had to wait
    assert [r.value for r in records] == [_fill_value(i) for i in range(queued)] + [b"after the wait"]
    assert records[-1].offset == last.offset


@pytest.mark.parametrize("partition", [0, None], ids=["partition-0", "staged"])
def test_max_block_ms_reached_while_awaiting_memory_raises_buffer_exhausted_and_queues_nothing(
        pausable: KafkaCluster, partition: int | None) -> None:
    """``partition=None``: the sends are staged on the loop (test_async_staged_broker.py), and wait as others."""
    (pid,) = pausable.pids()
    topic = create_topic(pausable.bootstrap_servers, f"full-timeout-{partition}", partitions=1)

    async def main() -> tuple[float, float, int]:
        heartbeat = _Heartbeat()
        beating = asyncio.ensure_future(heartbeat.run())
        async with AsyncKafkaProducer({"bootstrap.servers": pausable.bootstrap_servers, "max.block.ms": 1000,
                                       **_FULL}) as p:
            await p.partitions_for(topic)
            pause_process(pid)
            try:
                queued = await _fill(p, topic, partition)
                since = time.monotonic()
                with pytest.raises(BufferExhaustedError) as raised:
                    await p.send(topic, b"never", partition=partition)
                waited = time.monotonic() - since
                assert "buffer.memory" in str(raised.value) and "max.block.ms" in str(raised.value)  # as send says
                gap = heartbeat.longest_gap(since)
            finally:
                os.kill(pid, signal.SIGCONT)
            await p.flush(60)
            assert all(d.result().offset >= 0 for d in queued)  # every send that returned was sent
            beating.cancel()
            return waited, gap, len(queued)

    waited, gap, queued = run(main())
    assert 0.9 <= waited < 30  # it waited max.block.ms for memory, then gave up
    assert gap < _MAX_GAP_S, f"the loop stalled {gap:.3f} s while a send waited for memory"
    values = [r.value for r in read_topic(pausable.bootstrap_servers, topic)]
    assert values == [_fill_value(i) for i in range(queued)]  # neither the cancelled send nor the failed one


def test_staged_sends_wait_for_memory_without_stalling_the_loop_and_each_returned_one_is_sent(
        pausable: KafkaCluster) -> None:
    """Headerless sends without a partition are staged on the loop (test_async_staged_broker.py): with
    buffer.memory full they wait as other sends do, behind any burst that waits, and the loop keeps its cadence."""
    (pid,) = pausable.pids()
    topic = create_topic(pausable.bootstrap_servers, "staged-full", partitions=1)

    async def main() -> tuple[float, int, list[RecordMetadata]]:
        heartbeat = _Heartbeat()
        beating = asyncio.ensure_future(heartbeat.run())
        async with AsyncKafkaProducer({"bootstrap.servers": pausable.bootstrap_servers, "max.block.ms": 60_000,
                                       **_FULL}) as p:
            await p.partitions_for(topic)
            pause_process(pid)
            try:
                queued = await _fill(p, topic, partition=None)
                burst = asyncio.ensure_future(_burst(p, topic))  # a burst behind the full memory waits too
                since = time.monotonic()
                await asyncio.sleep(_PAUSED_S)  # the broker stays paused this long: the burst waits throughout
                assert not burst.done()
            finally:
                os.kill(pid, signal.SIGCONT)
            deliveries = await burst
            gap = heartbeat.longest_gap(since)
            await p.flush(60)
            beating.cancel()
            return gap, len(queued), [await d for d in deliveries]

    gap, queued, burst = run(main())
    assert gap < _MAX_GAP_S, f"the loop stalled {gap:.3f} s while staged sends waited for memory"
    assert queued * len(_VALUE) >= 65536 // 4  # the sends filled buffer.memory before one had to wait
    records = read_topic(pausable.bootstrap_servers, topic)
    assert [r.value for r in records] == ([_fill_value(i) for i in range(queued)]
                                          + [b"burst-%d" % i for i in range(len(burst))])
    assert [md.offset for md in burst] == [r.offset for r in records[queued:]]


async def _burst(p: AsyncKafkaProducer, topic: str) -> list[DeliveryFuture[RecordMetadata]]:
    return [await p.send(topic, b"burst-%d" % i) for i in range(2000)]
