"""``AsyncKafkaProducer``'s staged sends against a real broker, read back with confluent-kafka: a headerless
``await send(topic, value, key)`` is gathered on the loop with the rest of its burst and queued with it, many
records per call into the engine. These tests send that way (no partition, timestamp or headers) and check what the
record-by-record path guarantees: metadata, Java's key partitioning, order, timestamps, transactions, callbacks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

import pytest

from spark_kafka_sink import AsyncKafkaProducer, RecordMetadata
from spark_kafka_sink.producer import DeliveryFuture
from spark_kafka_sink.protocol.murmur2 import murmur2
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
_T = TypeVar("_T")
_LINGER_FOREVER = {"linger.ms": 600_000}  # nothing is sent until a batch fills, a flush or a commit


def run(coro: Coroutine[Any, Any, _T]) -> _T:
    return asyncio.run(coro, debug=False)


def _key(i: int) -> bytes | None:
    """Runs of keyed and keyless records, interleaved: keyless ones take the sticky partition."""
    return None if (i // 7) % 2 else b"key-%d" % (i % 13)


def test_a_burst_of_staged_sends_keeps_metadata_key_partitions_order_and_send_times(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    rows = 5000
    seen: dict[int, RecordMetadata] = {}

    def callback(i: int) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            assert error is None and metadata is not None
            seen[i] = metadata
        return done

    async def main() -> tuple[list[RecordMetadata], int, int]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}) as p:
            await p.partitions_for(topic)
            before = time.time_ns() // 1_000_000
            # No await in between that yields: one burst, staged and queued STAGE_ROWS at a time.
            deliveries = [await p.send(topic, b"%d" % i, key=_key(i), callback=callback(i) if i % 2 else None)
                          for i in range(rows)]
            after = time.time_ns() // 1_000_000
            return [await d for d in deliveries], before, after

    metadata, before, after = run(main())
    records = {(r.partition, r.offset): r for r in readback(topic)}
    assert len(records) == rows
    for i, md in enumerate(metadata):
        record = records[(md.partition, md.offset)]
        assert (record.key, record.value) == (_key(i), b"%d" % i)
        key = _key(i)
        if key is not None:  # Java's partitioner: murmur2 of the key
            assert md.partition == (murmur2(key) & 0x7FFFFFFF) % 3
        assert before <= record.timestamp_ms <= after  # CreateTime: the time of its send
    assert {i: seen[i] for i in seen} == {i: metadata[i] for i in range(1, rows, 2)}  # every callback, once
    for partition in range(3):  # per partition, the order of the sends
        sent = [i for i, md in enumerate(metadata) if md.partition == partition]
        assert [metadata[i].offset for i in sent] == sorted(metadata[i].offset for i in sent)
    assert len({md.partition for i, md in enumerate(metadata) if _key(i) is None}) > 1  # the sticky one moved


def test_a_staged_record_larger_than_a_batch_goes_between_its_neighbours(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1)
    values = [b"small-0", b"L" * 50_000, b"small-1", b"small-2"]

    async def main() -> list[int]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 1024,
                                       **_LINGER_FOREVER}) as p:
            await p.partitions_for(topic)
            deliveries = [await p.send(topic, v) for v in values]
            await p.flush(30)
            return [(await d).offset for d in deliveries]

    assert run(main()) == [0, 1, 2, 3]
    assert [r.value for r in readback(topic)] == values


def test_a_commit_queues_the_records_still_staged_first(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": bootstrap, "transactional.id": f"staged-{topic}", **_LINGER_FOREVER}

    async def main() -> None:
        async with AsyncKafkaProducer(config) as p:
            await p.init_transactions(30)
            await p.partitions_for(topic)
            p.begin_transaction()
            deliveries = [await p.send(topic, b"%d" % i) for i in range(300)]
            with pytest.raises(asyncio.InvalidStateError, match="still staged"):
                deliveries[-1].concurrent_future  # noqa: B018 -- still on the loop: not queued yet
            await p.commit_transaction(30)
            assert all(d.done() and d.result().offset >= 0 for d in deliveries)

    run(main())
    assert sorted(int(r.value or b"") for r in readback(topic, "read_committed")) == list(range(300))


def test_a_staged_callback_that_raises_is_logged_and_the_others_still_run(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
        caplog: pytest.LogCaptureFixture) -> None:
    topic = topic_factory(partitions=1)
    seen: list[int] = []

    def callback(i: int) -> Callable[[RecordMetadata | None, BaseException | None], None]:
        def done(metadata: RecordMetadata | None, error: BaseException | None) -> None:
            assert error is None and metadata is not None
            seen.append(metadata.offset)
            if i == 3:
                raise RuntimeError("a user callback failed")
        return done

    async def main() -> list[int]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, **_LINGER_FOREVER}) as p:
            await p.partitions_for(topic)
            deliveries = [await p.send(topic, b"%d" % i, callback=callback(i)) for i in range(10)]
            await p.flush(30)
            after = await p.send(topic, b"after")
            await p.flush(30)
            return [*(d.result().offset for d in deliveries), after.result().offset]

    with caplog.at_level(logging.ERROR):
        offsets = run(main())
    assert offsets == list(range(11))  # the producer went on after the callback raised
    assert seen == list(range(10))  # every callback ran, in order, once
    assert any("producer callback raised" in r.getMessage() and r.exc_info for r in caplog.records)
    assert len(readback(topic)) == 11


def test_tasks_staging_at_once_keep_each_tasks_order(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    tasks, per_task = 8, 1500

    async def sender(p: AsyncKafkaProducer, t: int) -> list[DeliveryFuture[RecordMetadata]]:
        sent = []
        for i in range(per_task):
            sent.append(await p.send(topic, b"%d-%d" % (t, i), key=b"task-%d" % t))
            if i % 50 == 0:
                await asyncio.sleep(0)  # let the other tasks send in between (a scheduling step)
        return sent

    async def main() -> list[list[DeliveryFuture[RecordMetadata]]]:
        async with AsyncKafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}) as p:
            await p.partitions_for(topic)
            deliveries = await asyncio.gather(*(sender(p, t) for t in range(tasks)))
            await p.flush(60)
            return deliveries

    deliveries = run(main())
    for t in range(tasks):
        offsets = [d.result().offset for d in deliveries[t]]
        assert offsets == sorted(offsets) and len({d.result().partition for d in deliveries[t]}) == 1
    by_task: dict[int, list[int]] = {t: [] for t in range(tasks)}
    for record in sorted(readback(topic), key=lambda r: (r.partition, r.offset)):
        t, i = (int(x) for x in (record.value or b"").split(b"-"))
        by_task[t].append(i)
    assert all(seq == list(range(per_task)) for seq in by_task.values())
