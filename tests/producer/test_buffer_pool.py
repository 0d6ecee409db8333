from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from spark_kafka_sink.errors import BufferExhaustedError, ConfigError, IllegalStateError, ProducerClosedError
from spark_kafka_sink.producer.buffer_pool import BufferPool

WAIT_S = 10.0  # generous bound for "the other thread got there"; never a stand-in for a condition


class Allocation(threading.Thread):
    """allocate() on its own thread; records the outcome and the order in which allocations finished."""

    def __init__(self, pool: BufferPool, size: int, max_block_ms: int, finished: list[int]) -> None:
        super().__init__(daemon=True)
        self.pool, self.size, self.max_block_ms, self.finished = pool, size, max_block_ms, finished
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.pool.allocate(self.size, self.max_block_ms)
            self.finished.append(self.size)
        except BaseException as exc:  # noqa: BLE001 -- handed to the test thread
            self.error = exc


def test_allocate_and_deallocate_account_bytes() -> None:
    pool = BufferPool(1000)
    pool.allocate(400, 0)
    pool.allocate(600, 0)
    assert pool.available_memory == 0 and pool.queued == 0
    pool.deallocate(400)
    assert pool.available_memory == 400
    pool.deallocate(600)
    assert pool.available_memory == 1000 == pool.total_memory


def test_larger_than_pool_fails_at_once_naming_buffer_memory() -> None:
    pool = BufferPool(100)
    with pytest.raises(ConfigError, match=r"buffer.memory \(100 bytes\)") as info:
        pool.allocate(101, 60_000)
    assert info.value.key == "buffer.memory"
    assert pool.available_memory == 100


def test_zero_max_block_fails_immediately_with_clear_message() -> None:
    pool = BufferPool(100)
    pool.allocate(100, 0)
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(1, 0)
    message = str(info.value)
    assert "buffer.memory (100 bytes)" in message and "max.block.ms=0" in message
    assert "raise buffer.memory or max.block.ms" in message
    assert pool.queued == 0 and pool.available_memory == 0


def test_timeout_uses_injected_clock_and_returns_partial_bytes() -> None:
    now = [0.0]
    step = [0.0]

    def clock() -> float:  # every reading advances by step: time passes only when the pool looks
        now[0] += step[0]
        return now[0]

    pool = BufferPool(100, clock=clock)
    pool.allocate(60, 0)
    step[0] = 5.0  # past the 1 s deadline at the waiter's first look: deterministic, no real wait
    with pytest.raises(BufferExhaustedError, match="max.block.ms=1000"):
        pool.allocate(80, 1000)  # collects the 40 free bytes while waiting, must give them back
    assert pool.available_memory == 40 and pool.queued == 0
    assert pool.blocked_time_ms_total > 0


def test_blocked_allocation_completes_when_memory_is_freed() -> None:
    pool = BufferPool(100)
    pool.allocate(100, 0)
    finished: list[int] = []
    waiter = Allocation(pool, 70, 60_000, finished)
    waiter.start()
    assert pool.wait_until_queued(1, WAIT_S)
    assert pool.is_exhausted
    pool.deallocate(30)  # not enough yet: the waiter collects 30 and keeps waiting
    pool.deallocate(70)
    waiter.join(WAIT_S)
    assert waiter.error is None and finished == [70]
    assert pool.available_memory == 30 and pool.queued == 0


def test_fifo_fairness_large_request_is_not_starved() -> None:
    pool = BufferPool(100)
    pool.allocate(100, 0)
    finished: list[int] = []
    big = Allocation(pool, 90, 60_000, finished)
    big.start()
    assert pool.wait_until_queued(1, WAIT_S)
    small = Allocation(pool, 10, 60_000, finished)
    small.start()
    assert pool.wait_until_queued(2, WAIT_S)
    # 10 bytes would satisfy the small request, but the big one is ahead in the queue.
    with pytest.raises(BufferExhaustedError):
        pool.allocate(10, 0)  # a newcomer does not jump the queue either
    pool.deallocate(10)
    assert pool.queued == 2
    pool.deallocate(90)
    big.join(WAIT_S)
    small.join(WAIT_S)
    assert finished == [90, 10]
    assert pool.available_memory == 0


def test_try_allocate_takes_free_bytes_and_never_blocks_or_jumps_the_queue() -> None:
    pool = BufferPool(100)
    assert pool.try_allocate(60) and pool.available_memory == 40
    assert not pool.try_allocate(41) and pool.available_memory == 40  # short: refused, nothing taken
    finished: list[int] = []
    waiter = Allocation(pool, 50, 60_000, finished)
    waiter.start()
    assert pool.wait_until_queued(1, WAIT_S)
    assert not pool.try_allocate(10)  # 40 free, but a waiter is ahead
    pool.deallocate(60)
    waiter.join(WAIT_S)
    assert finished == [50] and pool.try_allocate(50) and pool.available_memory == 0
    pool.close()
    with pytest.raises(ProducerClosedError):
        pool.try_allocate(0)


def test_can_allocate_now_says_whether_allocate_would_take_its_fast_path_and_takes_nothing() -> None:
    pool = BufferPool(100)
    pool.allocate(60, 0)
    assert pool.can_allocate_now(40) and not pool.can_allocate_now(41)
    finished: list[int] = []
    waiter = Allocation(pool, 50, 60_000, finished)
    waiter.start()
    assert pool.wait_until_queued(1, WAIT_S)
    assert not pool.can_allocate_now(1)  # bytes free, but a waiter is ahead: allocate would queue
    pool.deallocate(60)
    waiter.join(WAIT_S)
    assert finished == [50] and pool.can_allocate_now(50) and pool.available_memory == 50


def test_close_wakes_waiters_with_producer_closed() -> None:
    pool = BufferPool(10)
    pool.allocate(10, 0)
    finished: list[int] = []
    waiter = Allocation(pool, 5, 60_000, finished)
    waiter.start()
    assert pool.wait_until_queued(1, WAIT_S)
    pool.close()
    waiter.join(WAIT_S)
    assert isinstance(waiter.error, ProducerClosedError)
    with pytest.raises(ProducerClosedError):
        pool.allocate(1, 0)
    pool.deallocate(10)  # completing batches still give bytes back after close
    assert pool.available_memory == 10


@pytest.mark.parametrize("call", [lambda p: p.allocate(-1, 0), lambda p: p.deallocate(-1),
                                  lambda p: p.try_allocate(-1)])
def test_negative_sizes_rejected(call: Callable[[BufferPool], None]) -> None:
    with pytest.raises(ValueError):
        call(BufferPool(10))


def test_double_free_detected() -> None:
    pool = BufferPool(10)
    with pytest.raises(IllegalStateError, match="released twice"):
        pool.deallocate(1)


def test_many_threads_conserve_bytes() -> None:
    pool = BufferPool(1000)
    barrier = threading.Barrier(8)

    def churn() -> None:
        barrier.wait()
        for _ in range(500):
            pool.allocate(300, 60_000)
            pool.deallocate(300)

    threads = [threading.Thread(target=churn) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert pool.available_memory == 1000 and pool.queued == 0
