"""Write rate limits: ``max.records.per.second`` and ``max.bytes.per.second``, enforced a batch at a time.

A :class:`BatchRateLimits` is a token bucket without a burst allowance (an empty bucket, paid into at the rate),
kept as the time up to which the limit is spent (``_next_s``): a batch of ``cost`` records or bytes moves it on by
``cost / rate`` from the later of now and its last value, and is queued only once that time has come. So from the
first reservation to the queueing of any batch, what was queued is never more than the rate times the time between
them -- the cap holds over any stretch, not only on average, and N records take at least N / rate. A batch is never
cut for the limit: one larger than a second's worth waits longer. Time the caller spends elsewhere is not saved up
for a burst later: a slow input never makes the write exceed the cap when it speeds up.

The byte limit counts the record batches as sent (after compression): what the broker appends to its log and counts
in its byte-rate metrics. Waiting for the limit is not part of max.block.ms (which bounds waits for metadata and
buffer memory).

Threads: ``acquire`` may be called from any thread (``_lock`` guards ``_next_s``); it sleeps on the caller's thread,
never on the sender's.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["BatchRateLimits"]


class BatchRateLimits:
    """The records and bytes limits of one producer (0: no limit); a batch waits until both let it go."""

    def __init__(self, records_per_second: int, bytes_per_second: int, *,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        if records_per_second < 0 or bytes_per_second < 0:
            raise ValueError("rate limits are >= 0 (0: no limit)")
        self.records_per_second = records_per_second
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._next_s: float | None = None  # guarded by _lock: when the next batch may go (None: at once)

    @property
    def active(self) -> bool:
        return self.records_per_second > 0 or self.bytes_per_second > 0

    def reserve(self, records: int, size: int) -> float:
        """Take a batch of ``records`` records and ``size`` bytes; returns the seconds the caller must wait before
        it queues it (0: none). One time for both limits: the batch goes when the slower one lets it."""
        spend = max(records / self.records_per_second if self.records_per_second else 0.0,
                    size / self.bytes_per_second if self.bytes_per_second else 0.0)
        with self._lock:
            now = self._clock()
            # The batch is paid for before it goes: it waits until the limit has covered it, so a write of N
            # records takes at least N / rate even when it is a single batch.
            start = now if self._next_s is None else max(now, self._next_s)
            self._next_s = start + spend
            return self._next_s - now

    def acquire(self, records: int, size: int) -> None:
        """Wait until a batch of ``records`` records and ``size`` bytes is within both limits."""
        wait = self.reserve(records, size)
        if wait > 0:
            self._sleep(wait)
