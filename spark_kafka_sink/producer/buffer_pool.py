"""``BufferPool``: the producer's bounded memory (buffer.memory), as byte accounting.

Python does not gain from recycling bytearrays the way the JVM does, so the pool only counts bytes: a batch
``allocate``s what it may hold before it is created and ``deallocate``s it once it is complete. When the pool is
short, ``allocate`` blocks for up to max.block.ms, first come first served: waiters queue in a FIFO, and freed
bytes go to the head of the queue only, so a large request is not starved by a stream of small ones (as the Java
client's BufferPool). The head waiter collects bytes as they are freed until it has all it asked for.

Time: the only blocking code in the producer package. ``clock`` (seconds, monotonic) is injectable; the wait itself
uses ``threading.Condition.wait`` with the remaining time.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable

from spark_kafka_sink.errors import BufferExhaustedError, ConfigError, IllegalStateError, ProducerClosedError

__all__ = ["BufferPool"]


class BufferPool:
    """Bounded byte accounting with blocking, FIFO-fair allocation. Thread-safe."""

    def __init__(self, total_bytes: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if total_bytes < 0:
            raise ConfigError(f"buffer.memory={total_bytes} must be >= 0", key="buffer.memory")
        self._total = total_bytes
        self._clock = clock
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._available = total_bytes
        self._waiters: deque[threading.Condition] = deque()  # FIFO; each on _lock, signalled when it is the head
        self._queue_changed = threading.Condition(self._lock)  # for wait_until_queued()
        self._closed = False
        self._blocked_ms_total = 0.0  # time allocations spent waiting (a metric)

    # ------------------------------------------------------------------------------------------ queries

    @property
    def total_memory(self) -> int:
        return self._total

    @property
    def available_memory(self) -> int:
        with self._lock:
            return self._available

    @property
    def queued(self) -> int:
        """Allocations waiting for memory now."""
        with self._lock:
            return len(self._waiters)

    @property
    def blocked_time_ms_total(self) -> float:
        with self._lock:
            return self._blocked_ms_total

    @property
    def is_exhausted(self) -> bool:
        """Someone is waiting for memory: the accumulator then sends batches without waiting for linger.ms."""
        with self._lock:
            return bool(self._waiters)

    def wait_until_queued(self, count: int, timeout_s: float) -> bool:
        """Block until at least ``count`` allocations are waiting (True) or ``timeout_s`` passes (False).
        For tests and diagnostics: lets a test know another thread is blocked without sleeping."""
        with self._queue_changed:
            return self._queue_changed.wait_for(lambda: len(self._waiters) >= count, timeout_s)

    # ------------------------------------------------------------------------------------------ allocate / free

    def can_allocate_now(self, size: int) -> bool:
        """Whether ``allocate(size)`` would take its fast path now: ``size`` bytes free and nobody queued ahead.
        For a caller that is the pool's only allocating thread (the asyncio producer's loop thread): read without
        the lock, as other threads can only free bytes meanwhile, which makes a stale answer False, never True."""
        return not self._waiters and self._available >= size

    def try_allocate(self, size: int) -> bool:
        """Take ``size`` bytes if they are free now and nobody is queued ahead (True); never blocks (False)."""
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        with self._lock:
            if self._closed:
                raise ProducerClosedError("the producer is closed: cannot allocate buffer memory")
            if not self._waiters and self._available >= size:
                self._available -= size
                return True
            return False

    def allocate(self, size: int, max_time_to_block_ms: int) -> None:
        """Take ``size`` bytes, blocking up to ``max_time_to_block_ms`` while the pool is short.

        Raises ConfigError at once if ``size`` exceeds the whole pool, BufferExhaustedError when the time passes,
        ProducerClosedError if the pool is closed meanwhile."""
        if size < 0:
            raise ValueError(f"cannot allocate {size} bytes")
        if size > self._total:
            raise ConfigError(
                f"a batch of {size} bytes can never fit in buffer.memory ({self._total} bytes): raise "
                "buffer.memory, or lower batch.size / send smaller records", key="buffer.memory")
        with self._lock:
            if self._closed:
                raise ProducerClosedError("the producer is closed: cannot allocate buffer memory")
            if not self._waiters and self._available >= size:
                self._available -= size  # the fast path: nobody queued ahead of us
                return
            self._wait_for(size, max_time_to_block_ms)

    def _wait_for(self, size: int, max_time_to_block_ms: int) -> None:
        # Caller holds _lock.
        me = threading.Condition(self._lock)
        self._waiters.append(me)
        self._queue_changed.notify_all()
        started = self._clock()
        deadline = started + max_time_to_block_ms / 1000.0
        accumulated = 0
        try:
            while True:
                if self._waiters[0] is me:  # only the head takes bytes: FIFO fairness
                    got = min(size - accumulated, self._available)
                    self._available -= got
                    accumulated += got
                    if accumulated == size:
                        accumulated = 0  # handed to the caller: nothing to give back below
                        return
                remaining = deadline - self._clock()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"buffer.memory ({self._total} bytes) stayed full for max.block.ms={max_time_to_block_ms}: "
                        "the broker is unreachable or slower than the producer; raise buffer.memory or "
                        "max.block.ms")
                me.wait(remaining)
                if self._closed:
                    raise ProducerClosedError("the producer was closed while waiting for buffer memory")
        finally:
            self._blocked_ms_total += (self._clock() - started) * 1000.0
            self._waiters.remove(me)
            self._available += accumulated  # a failed wait gives back what it collected
            self._queue_changed.notify_all()
            self._signal_head()

    def deallocate(self, size: int) -> None:
        """Give back ``size`` bytes (a completed batch) and wake the head waiter."""
        if size < 0:
            raise ValueError(f"cannot deallocate {size} bytes")
        with self._lock:
            if self._available + size > self._total:
                raise IllegalStateError(
                    f"deallocate {size} bytes with {self._available} of {self._total} already free: "
                    "a batch was released twice")
            self._available += size
            self._signal_head()

    def _signal_head(self) -> None:
        # Caller holds _lock.
        if self._waiters and self._available > 0:
            self._waiters[0].notify()

    def close(self) -> None:
        """Fail every waiting and future allocation with ProducerClosedError. Bytes can still be given back."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()

    def __repr__(self) -> str:
        with self._lock:
            return f"BufferPool(available={self._available}/{self._total}, queued={len(self._waiters)})"
