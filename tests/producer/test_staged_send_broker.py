"""The per-record ``send`` path's edges against a real broker: records are staged per partition as columns and
encoded only when their batch is due. Everything is read back with confluent-kafka."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

import pytest

from spark_kafka_sink import KafkaProducer, RecordMetadata
from spark_kafka_sink.errors import BufferExhaustedError
from spark_kafka_sink.producer.record_stage import VECTORIZED_MIN_ROWS
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import ConsumedRecord, create_topic, pause_process

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
_LINGER_FOREVER = {"linger.ms": 600_000}  # nothing is sent until a batch fills, a flush or a commit


def test_a_record_larger_than_a_batch_goes_in_a_batch_of_its_own_between_its_neighbours(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1)
    values = [b"small-0", b"L" * 50_000, b"small-1", b"small-2"]
    with KafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 1024, **_LINGER_FOREVER}) as p:
        futures = [p.send(topic, v, partition=0) for v in values]
        p.flush(30)
        offsets = [f.result(0).offset for f in futures]
    assert offsets == sorted(offsets) and len(set(offsets)) == 4
    assert [r.value for r in readback(topic)] == values


def test_max_block_ms_reached_while_staging_raises_buffer_exhausted_naming_the_settings() -> None:
    # A private broker, paused (SIGSTOP) so that nothing sent is answered: buffer.memory fills and stays full.
    fetch_jars()
    with KafkaCluster(size=1) as cluster:
        (pid,) = cluster.pids()
        topic = create_topic(cluster.bootstrap_servers, "staged", partitions=1)
        config = {"bootstrap.servers": cluster.bootstrap_servers, "batch.size": 16384, "buffer.memory": 65536,
                  "max.block.ms": 1000, **_LINGER_FOREVER}
        p = KafkaProducer(config)
        staged: list[Future[RecordMetadata]] = []
        try:
            p.partitions_for(topic)
            pause_process(pid)
            with pytest.raises(BufferExhaustedError) as raised:
                for _ in range(10_000):  # 1 MB: far more than buffer.memory
                    staged.append(p.send(topic, b"v" * 100, partition=0))
            started = time.monotonic()
            with pytest.raises(BufferExhaustedError):
                p.send(topic, b"v" * 100, partition=0)
            assert time.monotonic() - started >= 0.9  # it waited max.block.ms for memory, then gave up
            assert "buffer.memory" in str(raised.value) and "max.block.ms" in str(raised.value)
            assert 0 < len(staged) < 10_000
        finally:
            p.close(0)
            os.kill(pid, signal.SIGCONT)
    assert all(f.done() and f.exception() is not None for f in staged)  # close(0) failed what it held


def test_a_commit_sends_the_staged_records_first_and_they_are_visible_in_order(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": bootstrap, "transactional.id": f"staged-{topic}", "batch.size": 1 << 20,
              **_LINGER_FOREVER}
    with KafkaProducer(config) as p:
        p.init_transactions(30)
        p.begin_transaction()
        # Partition 0 gets enough records for the vectorized build, partition 1 fewer: both build paths.
        rows = 2 * VECTORIZED_MIN_ROWS
        futures = [p.send(topic, b"%d" % i, partition=0 if i % 4 else 1) for i in range(rows)]
        assert not any(f.done() for f in futures)  # staged, not encoded: linger.ms has not passed
        p.commit_transaction(60)
        assert all(f.done() and f.exception() is None for f in futures)
    records = readback(topic, "read_committed")
    for partition, expected in ((0, [i for i in range(rows) if i % 4]), (1, list(range(0, rows, 4)))):
        got = [int(r.value or b"") for r in sorted(records, key=lambda r: r.offset) if r.partition == partition]
        assert got == expected


def test_a_callback_that_raises_is_logged_and_its_batch_mates_still_get_theirs(
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

    with caplog.at_level(logging.ERROR), KafkaProducer({"bootstrap.servers": bootstrap, **_LINGER_FOREVER}) as p:
        futures = [p.send(topic, b"%d" % i, partition=0, callback=callback(i)) for i in range(10)]
        p.flush(30)
        after = p.send(topic, b"after", partition=0)
        p.flush(30)
        assert after.result(0).offset == futures[-1].result(0).offset + 1  # the producer went on
    assert seen == [f.result(0).offset for f in futures]  # every callback ran, in order, once
    assert any("producer callback raised" in r.getMessage() and r.exc_info for r in caplog.records)
    assert len(readback(topic)) == 11


def test_a_flush_from_another_thread_sends_and_completes_what_this_thread_staged(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    with KafkaProducer({"bootstrap.servers": bootstrap, **_LINGER_FOREVER}) as p:
        futures = [p.send(topic, b"%d" % i) for i in range(1000)]
        assert not any(f.done() for f in futures)
        flusher = threading.Thread(target=p.flush, args=(30,))
        flusher.start()
        flusher.join(60)
        assert not flusher.is_alive()
        assert all(f.done() and f.exception() is None for f in futures)  # flush returned after all completed
    assert sorted(int(r.value or b"") for r in readback(topic)) == list(range(1000))


def test_records_of_many_threads_keep_each_threads_order_in_every_partition(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    threads, per_thread = 8, 1500
    futures: dict[int, list[Future[RecordMetadata]]] = {}
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 5, "batch.size": 4096}) as p:
        start = threading.Barrier(threads)

        def sender(t: int) -> None:
            start.wait()
            futures[t] = [p.send(topic, b"%d-%d" % (t, i), key=b"thread-%d" % t) for i in range(per_thread)]

        workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        p.flush(60)
    for t in range(threads):
        offsets = [f.result(0).offset for f in futures[t]]
        assert offsets == sorted(offsets) and len({f.result(0).partition for f in futures[t]}) == 1
    by_thread: dict[int, list[int]] = {t: [] for t in range(threads)}
    for record in sorted(readback(topic), key=lambda r: (r.partition, r.offset)):
        t, i = (int(x) for x in (record.value or b"").split(b"-"))
        by_thread[t].append(i)
    assert all(seq == list(range(per_thread)) for seq in by_thread.values())
