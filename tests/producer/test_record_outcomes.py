"""A record's future is completed with its batch in one step, behaves as a concurrent.futures.Future (waiters,
callbacks, wait / as_completed, from other threads), and follows its record into the part a split put it in."""

from __future__ import annotations

import concurrent.futures as cf
import threading

import pytest

from spark_kafka_sink.errors import NotLeaderOrFollowerError
from spark_kafka_sink.producer.record_metadata import RecordMetadata, TopicPartition
from spark_kafka_sink.producer.record_outcomes import LazyRecordFuture, RecordOutcomes

TP = TopicPartition("t", 2)


def outcomes_of(count: int) -> tuple[RecordOutcomes, list[LazyRecordFuture]]:
    outcomes = RecordOutcomes(TP, [100 + i for i in range(count)])
    return outcomes, [LazyRecordFuture(outcomes, i) for i in range(count)]


def test_completing_the_batch_completes_every_future_with_its_own_offset() -> None:
    outcomes, futures = outcomes_of(3)
    seen: list[int] = []
    futures[1].add_done_callback(lambda f: seen.append(f.result().offset))
    assert not any(f.done() for f in futures) and futures[0].running() and not futures[0].cancel()
    with pytest.raises(cf.TimeoutError):
        futures[0].result(0.01)
    outcomes.complete(40, -1, None)
    assert [f.result(0) for f in futures] == [RecordMetadata("t", 2, 40 + i, 100 + i) for i in range(3)]
    assert seen == [41]  # the callback ran once, at completion
    futures[1].add_done_callback(lambda f: seen.append(-1))  # on a done future: at once
    assert seen == [41, -1]
    with pytest.raises(cf.InvalidStateError):
        outcomes.complete(50, -1, None)
    with pytest.raises(cf.InvalidStateError):
        futures[0].set_result(RecordMetadata("t", 2, 0, 0))


def test_a_failed_batch_fails_every_future_and_wakes_waiters_on_other_threads() -> None:
    outcomes, futures = outcomes_of(4)
    error = NotLeaderOrFollowerError()
    waiting = cf.ThreadPoolExecutor(2)
    try:
        failure = waiting.submit(futures[0].exception, 30)
        result = waiting.submit(futures[3].result, 30)
        pending = cf.wait(futures, timeout=0.01)
        assert not pending.done
        threading.Thread(target=outcomes.complete, args=(-1, -1, error)).start()
        assert failure.result(30) is error
        assert isinstance(result.exception(30), NotLeaderOrFollowerError)
    finally:
        waiting.shutdown()
    assert cf.wait(futures, timeout=10).done == set(futures)
    plain: list[cf.Future[RecordMetadata]] = list(futures)
    assert set(cf.as_completed(plain, timeout=10)) == set(futures)


def test_after_a_split_each_future_completes_with_its_part() -> None:
    outcomes, futures = outcomes_of(5)
    woken: list[int] = []
    for f in futures:
        f.add_done_callback(lambda f: woken.append(f.result().offset))
    first, second = RecordOutcomes(TP, outcomes.timestamps[:2]), RecordOutcomes(TP, outcomes.timestamps[2:])
    outcomes.redirect([first, second], [2, 3])
    second.complete(70, -1, None)
    assert [f.done() for f in futures] == [False, False, True, True, True]
    first.complete(10, 999, None)  # log-append time: the broker's timestamp
    assert [f.result(0) for f in futures] == [RecordMetadata("t", 2, 10, 999), RecordMetadata("t", 2, 11, 999),
                                              *(RecordMetadata("t", 2, 70 + i, 102 + i) for i in range(3))]
    assert sorted(woken) == [10, 11, 70, 71, 72]
