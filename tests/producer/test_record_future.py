"""RecordFuture behaves as a concurrent.futures.Future while costing a fraction of its memory."""

from __future__ import annotations

import concurrent.futures as cf
import threading
import tracemalloc
from collections.abc import Callable

import pytest

from spark_kafka_sink.producer.record_future import RecordFuture


def test_result_across_threads_callbacks_and_helpers() -> None:
    future: RecordFuture[int] = RecordFuture()
    seen: list[int] = []
    future.add_done_callback(lambda f: seen.append(f.result()))
    assert not future.cancel() and future.running() and not future.done()
    with pytest.raises(cf.TimeoutError):
        future.result(0.01)
    worker = threading.Thread(target=future.set_result, args=(5,))
    worker.start()
    assert future.result(10) == 5
    worker.join()
    assert seen == [5] and future.done()
    future.add_done_callback(lambda f: seen.append(-1))  # runs at once on a done future
    assert seen == [5, -1]
    failed: RecordFuture[int] = RecordFuture()
    failed.set_exception(ValueError("x"))
    with pytest.raises(ValueError):
        failed.result(0)
    pending: RecordFuture[int] = RecordFuture()
    done, not_done = cf.wait([future, pending], timeout=0.01)
    assert done == {future} and not_done == {pending}
    both: list[cf.Future[int]] = [future, failed]
    assert list(cf.as_completed(both)) in (both, both[::-1])


def test_a_pending_record_future_is_light() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        light: list[RecordFuture[int]] = [RecordFuture() for _ in range(2000)]
        middle = tracemalloc.take_snapshot()
        heavy: list[cf.Future[int]] = [cf.Future() for _ in range(2000)]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    light_each = sum(s.size_diff for s in middle.compare_to(before, "filename")) / len(light)
    heavy_each = sum(s.size_diff for s in after.compare_to(middle, "filename")) / len(heavy)
    assert light_each < 400 < 1000 < heavy_each, (light_each, heavy_each)


def bytes_each(futures: list[RecordFuture[int]], act: Callable[[RecordFuture[int]], object]) -> float:
    """Memory ``act`` allocates per future (and keeps). Only allocations made under this module's frames count:
    other threads of the test process (a pytest-xdist worker's, a garbage collection) allocate meanwhile."""
    mine = [tracemalloc.Filter(True, __file__, all_frames=True)]
    tracemalloc.start(8)
    try:
        before = tracemalloc.take_snapshot().filter_traces(mine)
        for future in futures:
            act(future)
        after = tracemalloc.take_snapshot().filter_traces(mine)
    finally:
        tracemalloc.stop()
    return sum(s.size_diff for s in after.compare_to(before, "filename")) / len(futures)


def complete_and_read(future: RecordFuture[int]) -> None:
    future.add_done_callback(lambda f: None)
    future.set_result(3)
    assert future.done() and future.result() == 3 and future.exception() is None


def fail_and_read(future: RecordFuture[int]) -> None:
    future.set_exception(KeyError("k"))
    assert isinstance(future.exception(), KeyError)


def wait_then_complete(future: RecordFuture[int]) -> None:
    with pytest.raises(cf.TimeoutError):
        future.result(0)  # a waiter: the Condition is built now
    future.set_result(3)


def test_completing_and_reading_without_waiting_makes_no_condition() -> None:
    future: RecordFuture[int] = RecordFuture()
    calls: list[int] = []
    future.add_done_callback(lambda f: calls.append(f.result()))
    future.set_result(3)
    assert future.done() and future.result() == 3 and future.exception() is None and calls == [3]
    failed: RecordFuture[int] = RecordFuture()
    failed.set_exception(KeyError("k"))
    assert isinstance(failed.exception(), KeyError)
    with pytest.raises(cf.InvalidStateError):
        future.set_result(4)
    with pytest.raises(cf.InvalidStateError):
        failed.set_exception(ValueError())
    # The fast path builds no Condition: a future waited on keeps its Condition, RLock and waiter deque (about
    # 1.3 KB) on top of what the fast path keeps. The fast path's own share (the instance dict growing by the
    # result, the callback list) varies a little with how the class's shared dict keys have been used before.
    n = 500
    waited = bytes_each([RecordFuture() for _ in range(n)], wait_then_complete)
    completed = bytes_each([RecordFuture() for _ in range(n)], complete_and_read)
    failed_each = bytes_each([RecordFuture() for _ in range(n)], fail_and_read)
    assert completed < 700 and failed_each < 700 and waited - max(completed, failed_each) > 900, (
        completed, failed_each, waited)


def complete_alternately(futures: list[RecordFuture[int]], start: threading.Barrier) -> None:
    start.wait()
    for n, f in enumerate(futures):
        if n % 2:
            f.set_exception(ValueError(n))
        else:
            f.set_result(n)


def test_waiters_racing_completion_are_always_woken() -> None:
    # A waiter creating the Condition while another thread completes the future must never miss the wake-up.
    for i in range(300):
        futures: list[RecordFuture[int]] = [RecordFuture() for _ in range(4)]
        start = threading.Barrier(2)
        worker = threading.Thread(target=complete_alternately, args=(futures, start))
        worker.start()
        start.wait()
        if i % 2:
            done, not_done = cf.wait(futures, timeout=10)
            assert not not_done and done == set(futures)
        else:
            assert futures[0].result(timeout=10) == 0
            assert isinstance(futures[3].exception(timeout=10), ValueError)
            assert [f.done() for f in futures] == [True] * 4 or worker.is_alive()
        worker.join(10)
        assert [f.done() for f in futures] == [True] * 4
