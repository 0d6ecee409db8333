from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import BufferExhaustedError, DeliveryTimeoutError, ProducerClosedError
from spark_kafka_sink.producer.accumulator import NO_DELAY_LIMIT_MS, RecordAccumulator
from spark_kafka_sink.producer.batch import BatchState, ProducerBatch
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.record_metadata import BatchMetadata, TopicPartition
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch, encode_arrow_batches
from spark_kafka_sink.protocol.record_batch import decode_batch

T0, T1, U0 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)
LEADERS = {T0: 1, T1: 1, U0: 2}
WAIT_S = 10.0


def leader(tp: TopicPartition) -> int | None:
    return LEADERS.get(tp)


def make(**overrides: Any) -> RecordAccumulator:
    options: dict[str, Any] = dict(batch_size=1000, compression="none", linger_ms=10, retry_backoff_ms=100,
                                   retry_backoff_max_ms=1000, delivery_timeout_ms=120_000,
                                   pool=BufferPool(10_000), retry_jitter=0.0)
    options.update(overrides)
    return RecordAccumulator(**options)


def add(acc: RecordAccumulator, tp: TopicPartition = T0, now: int = 0, size: int = 10) -> Future[Any]:
    return acc.append(tp, now, None, b"x" * size, [], now, 0).future


def complete(batch: ProducerBatch, base_offset: int = 0) -> None:
    batch.done(base_offset, -1, None)


def test_appends_share_a_batch_until_full() -> None:
    acc = make()
    first = acc.append(T0, 0, b"k", b"v" * 10, [], 0, 0)
    second = acc.append(T0, 0, None, b"v" * 10, [], 1, 0)
    assert first.new_batch_created and not second.new_batch_created
    assert not first.batch_is_full and not second.batch_is_full
    assert acc.pool.available_memory == 9000  # one batch.size reserved
    results = [acc.append(T0, 0, None, b"v" * 200, [], 2, 0) for _ in range(5)]
    assert results[-1].new_batch_created and results[-1].batch_is_full  # a second batch: the first can go


def test_record_larger_than_batch_size_gets_its_own_memory() -> None:
    acc = make()
    acc.append(T0, 0, None, b"v" * 5000, [], 0, 0)
    assert 10_000 - 5100 < acc.pool.available_memory < 10_000 - 5000


def test_memory_returns_when_batches_complete_and_flush_sees_them() -> None:
    acc = make()
    futures = [add(acc, tp) for tp in (T0, T1, U0)]
    assert acc.has_incomplete() and acc.has_undrained()
    drained = acc.drain(leader, [1, 2], 1_000_000, 20)
    assert {n: [b.tp for b in bs] for n, bs in drained.items()} == {1: [T0, T1], 2: [U0]}
    assert not acc.has_undrained()
    acc.begin_flush()
    assert acc.flush_in_progress
    for offset, batch in enumerate(drained[1] + drained[2]):
        complete(batch, offset * 10)
    assert acc.await_flush_completion(0) and not acc.flush_in_progress
    assert [f.result(0).offset for f in futures] == [0, 10, 20]
    assert acc.pool.available_memory == 10_000 and not acc.has_incomplete()


def test_ready_respects_linger() -> None:
    acc = make(linger_ms=10)
    add(acc, T0, now=100)
    check = acc.ready(leader, 104)
    assert check.ready_nodes == frozenset() and check.next_ready_check_delay_ms == 6
    assert acc.ready(leader, 110).ready_nodes == {1}
    assert make().ready(leader, 0).next_ready_check_delay_ms == NO_DELAY_LIMIT_MS


def test_ready_when_full_flushing_closing_or_exhausted() -> None:
    acc = make(linger_ms=1000)
    for _ in range(5):
        add(acc, T0, size=300)
    add(acc, U0)
    assert acc.ready(leader, 0).ready_nodes == {1}  # T0 has a full batch; U0 lingers
    acc.begin_flush()
    assert acc.ready(leader, 0).ready_nodes == {1, 2}
    acc.await_flush_completion(0)

    acc = make(linger_ms=1000)
    add(acc, U0)
    acc.close()
    assert acc.ready(leader, 0).ready_nodes == {2}

    pool = BufferPool(1000)
    acc = make(linger_ms=1000, pool=pool)
    add(acc, U0)
    errors: list[BaseException] = []

    def blocked_append() -> None:
        try:
            acc.append(T0, 0, None, b"x", [], 0, 60_000)  # needs a second batch's memory: waits in the pool
        except ProducerClosedError as exc:
            errors.append(exc)

    blocked = threading.Thread(target=blocked_append)
    blocked.start()
    assert pool.wait_until_queued(1, WAIT_S)
    assert acc.ready(leader, 0).ready_nodes == {2}  # someone waits for memory: send without lingering
    acc.close()  # wakes the waiter
    blocked.join(WAIT_S)
    assert len(errors) == 1


def test_unknown_leader_reported() -> None:
    acc = make(linger_ms=0)
    add(acc, TopicPartition("nowhere", 0))
    check = acc.ready(leader, 0)
    assert check.unknown_leader_topics == {"nowhere"} and not check.ready_nodes


def test_drain_one_batch_per_partition_and_max_request_size() -> None:
    acc = make()
    for _ in range(8):
        add(acc, T0, size=300)  # three batches for T0
    add(acc, T1, size=300)
    one = acc.drain(leader, [1], 10, 0)[1]  # smaller than any batch: still one batch
    assert len(one) == 1
    rest = acc.drain(leader, [1], 1_000_000, 0)[1]
    assert sorted(b.tp.partition for b in rest) == [0, 1]  # one per partition per request
    assert all(b.state is BatchState.IN_FLIGHT for b in one + rest)
    assert all(decode_batch(b.payload()).records for b in one + rest)


def test_drain_rotates_start_partition_per_node() -> None:
    acc = make()
    for _ in range(3):
        for tp in (T0, T1):
            for _ in range(4):
                add(acc, tp, size=300)  # several full batches each
    order = [acc.drain(leader, [1], 1, 0)[1][0].tp.partition for _ in range(4)]
    assert order == [0, 1, 0, 1]


def test_muted_partitions_and_before_drain_are_skipped() -> None:
    acc = make()
    add(acc, T0)
    add(acc, T1)
    acc.mute(T0)
    assert [b.tp for b in acc.drain(leader, [1], 10_000, 0)[1]] == [T1]
    assert acc.ready(leader, 100).ready_nodes == frozenset()  # only muted T0 left
    acc.unmute(T0)
    assert acc.drain(leader, [1], 10_000, 0, before_drain=lambda b: False)[1] == []

    def stamp(batch: ProducerBatch) -> bool:
        batch.set_producer_state(9, 0, 0, False)
        return True

    (batch,) = acc.drain(leader, [1], 10_000, 0, before_drain=stamp)[1]
    assert decode_batch(batch.payload()).producer_id == 9


def test_reenqueue_goes_first_and_backs_off_exponentially() -> None:
    acc = make(linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=250)
    add(acc, T0)
    (batch,) = acc.drain(leader, [1], 10_000, 0)[1]
    add(acc, T0, now=5)  # a newer batch queued meanwhile
    acc.reenqueue(batch, 10)
    assert batch.state is BatchState.RETRYING and batch.attempts == 1
    check = acc.ready(leader, 50)
    assert not check.ready_nodes and check.next_ready_check_delay_ms == 60  # backoff 100 from t=10
    assert acc.drain(leader, [1], 10_000, 50)[1] == []  # the retry blocks the partition: order holds
    assert acc.ready(leader, 110).ready_nodes == {1}
    assert acc.drain(leader, [1], 10_000, 110)[1] == [batch]
    acc.reenqueue(batch, 200)
    assert batch.retry_at_ms == 400  # 200 ms: doubled
    acc.drain(leader, [1], 10_000, 400)
    acc.reenqueue(batch, 500)
    assert batch.retry_at_ms == 750  # capped at retry.backoff.max.ms


def test_reenqueue_keeps_sequence_order() -> None:
    acc = make(linger_ms=0)
    seq = iter(range(0, 100, 1))

    def stamp(batch: ProducerBatch) -> bool:
        if not batch.has_sequence:  # a retry keeps its sequence
            batch.set_producer_state(1, 0, next(seq), False)
        return True

    batches = []
    for _ in range(3):
        add(acc, T0)
        batches += acc.drain(leader, [1], 10_000, 0, before_drain=stamp)[1]
    add(acc, T0)  # unsequenced newcomer stays last
    for b in (batches[2], batches[0], batches[1]):  # answers arrive out of order
        acc.reenqueue(b, 0)
    drained = []
    for _ in range(4):
        drained += acc.drain(leader, [1], 10_000, 1000, before_drain=stamp)[1]
    assert [b.base_sequence for b in drained] == [0, 1, 2, 3]


def test_expired_batches() -> None:
    acc = make(delivery_timeout_ms=1000)
    f_old = add(acc, T0, now=0)
    add(acc, T1, now=500)
    assert acc.expired_batches(999) == [] and acc.next_batch_expiry_ms == 1000
    (old,) = acc.expired_batches(1000)
    assert old.tp == T0 and acc.next_batch_expiry_ms == 1500
    error = acc.expiry_error(old, 1000)
    assert "delivery.timeout.ms=1000" in str(error) and "t-0" in str(error)
    old.done(-1, -1, error)
    assert isinstance(f_old.exception(0), DeliveryTimeoutError)
    assert acc.pool.available_memory == 9000


def test_flush_waits_for_completion_from_another_thread() -> None:
    acc = make()
    add(acc, T0)
    acc.begin_flush()
    assert acc.await_flush_completion(0) is False  # not done yet; ends this flush
    acc.begin_flush()
    result: list[bool] = []
    waiter = threading.Thread(target=lambda: result.append(acc.await_flush_completion(WAIT_S)))
    waiter.start()
    (batch,) = acc.drain(leader, [1], 10_000, 0)[1]
    complete(batch)
    waiter.join(WAIT_S)
    assert result == [True]


def test_abort_undrained_and_incomplete() -> None:
    acc = make()
    in_flight = add(acc, T0)
    acc.drain(leader, [1], 10_000, 0)
    queued = add(acc, T1)
    err = RuntimeError("transaction aborted")
    assert acc.abort_undrained_batches(err) == 1
    assert queued.exception(0) is err and not in_flight.done()
    assert acc.abort_incomplete_batches(err) == 1
    assert in_flight.exception(0) is err
    assert acc.pool.available_memory == 10_000 and not acc.has_incomplete()


def test_close_refuses_appends() -> None:
    acc = make()
    acc.close()
    with pytest.raises(ProducerClosedError):
        add(acc)
    with pytest.raises(ProducerClosedError):
        acc.append_encoded(T0, encoded_rows(3), 0, 0)
    assert acc.pool.available_memory == 10_000


def test_buffer_exhausted_leaks_nothing() -> None:
    acc = make(pool=BufferPool(1000))
    add(acc, T0)
    with pytest.raises(BufferExhaustedError):
        add(acc, T1)
    assert acc.pool.available_memory == 0 and acc.pool.queued == 0


# ---------------------------------------------------------------------------------------- bulk (Arrow) path


def encoded_rows(rows: int, max_batch_bytes: int = 1 << 20) -> list[EncodedBatch]:
    values = pa.array([b"r%06d" % i for i in range(rows)], pa.binary())
    return encode_arrow_batches(values, timestamp_ms=pa.array([1] * rows, pa.int64()),
                                max_batch_bytes=max_batch_bytes)


def test_append_encoded_queues_closed_batches_in_order() -> None:
    acc = make(linger_ms=1000)
    first = add(acc, T0)
    encoded = encoded_rows(200, max_batch_bytes=1000)
    assert len(encoded) > 2
    futures = acc.append_encoded(T0, encoded, 0, 0)
    last = add(acc, T0)
    assert len(futures) == len(encoded)
    assert acc.pool.available_memory == 10_000 - 2000 - sum(len(e.data) for e in encoded)
    assert acc.ready(leader, 0).ready_nodes == {1}  # bulk batches are full: no linger
    sent: list[ProducerBatch] = []
    while acc.has_undrained():
        sent += acc.drain(leader, [1], 1_000_000, 0)[1]
    assert [b.first_row for b in sent[1:-1]] == [e.first_row for e in encoded]
    offset = 0
    for b in sent:
        complete(b, offset)
        offset += b.record_count
    assert first.result(0).offset == 0 and last.result(0).offset == offset - 1
    metas: list[BatchMetadata] = [f.result(0) for f in futures]
    assert metas[0].base_offset == 1 and metas[-1].last_offset == 200
    assert acc.pool.available_memory == 10_000


def test_append_encoded_larger_than_pool_streams_through() -> None:
    encoded = encoded_rows(400, max_batch_bytes=600)
    pool = BufferPool(2 * max(len(e.data) for e in encoded))
    acc = make(pool=pool)
    outcome: list[object] = []
    producer = threading.Thread(target=lambda: outcome.append(acc.append_encoded(T0, encoded, 0, 60_000)))
    producer.start()
    completed = 0
    while producer.is_alive() or acc.has_undrained():
        for batch in acc.drain(leader, [1], 1_000_000, 0)[1]:
            complete(batch, completed)
            completed += batch.record_count
        if producer.is_alive() and not acc.has_undrained():
            pool.wait_until_queued(1, 0.05)  # the appender is blocked on memory, or about to finish
    producer.join(WAIT_S)
    assert completed == 400 and len(outcome[0]) == len(encoded)  # type: ignore[arg-type]
    assert pool.available_memory == pool.total_memory


def test_append_encoded_wakes_the_sender_before_waiting_for_memory() -> None:
    # A sender that sends only when woken (as a real one sleeping up to its poll timeout with nothing queued when it
    # last looked): the memory the appender waits for is held by batches it queued itself, so without a wakeup
    # before the wait it would block until max.block.ms and fail.
    encoded = encoded_rows(400, max_batch_bytes=600)
    pool = BufferPool(2 * max(len(e.data) for e in encoded))
    acc = make(pool=pool)
    woken = threading.Event()
    wakeups: list[int] = []
    done = threading.Event()

    def wakeup() -> None:
        wakeups.append(pool.available_memory)
        woken.set()

    def sender() -> None:
        completed = 0
        while not done.is_set():
            if not woken.wait(WAIT_S):
                return
            woken.clear()
            for batch in acc.drain(leader, [1], 1_000_000, 0)[1]:
                complete(batch, completed)
                completed += batch.record_count

    thread = threading.Thread(target=sender)
    thread.start()
    try:
        futures = acc.append_encoded(T0, encoded, 0, 5_000, wakeup)
    finally:
        done.set()
        woken.set()
        thread.join(WAIT_S)
    assert len(futures) == len(encoded) > 4
    assert wakeups and all(free < max(len(e.data) for e in encoded) for free in wakeups)  # only when short
    while acc.has_undrained():
        for batch in acc.drain(leader, [1], 1_000_000, 0)[1]:
            complete(batch)
    assert pool.available_memory == pool.total_memory


def test_concurrent_appends_lose_nothing() -> None:
    acc = make(pool=BufferPool(10_000_000))
    barrier = threading.Barrier(4)
    futures: list[Future[Any]] = []
    lock = threading.Lock()

    def work() -> None:
        barrier.wait()
        mine = [add(acc, T0, size=50) for _ in range(500)]
        with lock:
            futures.extend(mine)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    offset = 0
    while acc.has_undrained():
        for batch in acc.drain(leader, [1], 1_000_000, 0)[1]:
            complete(batch, offset)
            offset += batch.record_count
    assert offset == 2000
    assert sorted(f.result(0).offset for f in futures) == list(range(2000))


def test_from_config() -> None:
    cfg = ProducerConfig.from_dict({"bootstrap.servers": "h:1", "linger.ms": 7, "buffer.memory": 5000,
                                    "transactional.id": "x"})
    acc = RecordAccumulator.from_config(cfg)
    assert (acc.linger_ms, acc.pool.total_memory, acc.transactional) == (7, 5000, True)
