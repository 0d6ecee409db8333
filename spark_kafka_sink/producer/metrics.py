"""Producer metrics with the Java client's names: thread-safe, windowed like Kafka's ``Sensor``/``SampledStat``.

    metrics = ProducerMetrics()
    metrics.record_batches_sent(records=[100, 90], sizes=[8000, 7200], queue_ms=[5, 3], ratios=[0.4, 0.5],
                                now_ms=now)                                 # sender, a request's batches
    metrics.record_request(records=300, latency_ms=12, now_ms=now)          # sender, per produce response
    metrics.record_retry(records, now_ms) / record_error(records, now_ms) / record_throttle(ms, now_ms)
    metrics.add_gauge("buffer-available-bytes", lambda: pool.available_memory)
    metrics.snapshot(now_ms) -> {"record-send-total": ..., "record-send-rate": ..., ...}

Rates, averages and maxima cover the last ``num_samples`` windows of ``window_ms`` (Java: 2 x 30 s); a rate
divides by the time those windows span, at least ``(num_samples - 1) * window_ms`` so that a young producer's
first burst does not read as a huge rate (as Kafka's ``Rate``). Totals are cumulative. Averages and maxima of a
metric with no sample in the window are NaN, as Java reports them.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ProducerMetrics", "WindowedStat", "METRIC_NAMES"]


@dataclass(slots=True)
class _Sample:
    start_ms: int
    count: int = 0
    total: float = 0.0
    maximum: float = -math.inf


class WindowedStat:
    """Count, sum and max of recorded values over a sliding set of time windows. Not locked: its owner locks."""

    def __init__(self, window_ms: int = 30_000, num_samples: int = 2) -> None:
        if window_ms <= 0 or num_samples < 1:
            raise ValueError("window_ms must be > 0 and num_samples >= 1")
        self.window_ms = window_ms
        self.num_samples = num_samples
        self._samples: list[_Sample] = []
        self.lifetime_count = 0
        self.lifetime_total = 0.0

    def record(self, value: float, now_ms: int) -> None:
        sample = self._sample_at(now_ms)
        sample.count += 1
        sample.total += value
        sample.maximum = max(sample.maximum, value)
        self.lifetime_count += 1
        self.lifetime_total += value

    def record_all(self, values: list[int] | list[float], now_ms: int) -> None:
        """``record`` each of ``values`` (non-empty), at the cost of one."""
        sample = self._sample_at(now_ms)
        total = sum(values)
        sample.count += len(values)
        sample.total += total
        sample.maximum = max(sample.maximum, max(values))
        self.lifetime_count += len(values)
        self.lifetime_total += total

    def _sample_at(self, now_ms: int) -> _Sample:
        # No expiry here (reads expire; the list is trimmed to num_samples when a window starts): the sender records
        # a few values per batch, and rebuilding the sample list each time would be most of a record's cost.
        if not self._samples or now_ms >= self._samples[-1].start_ms + self.window_ms:
            self._samples.append(_Sample(now_ms))
            del self._samples[: -self.num_samples]
        return self._samples[-1]

    def _expire(self, now_ms: int) -> None:
        # As Kafka's SampledStat: a sample is obsolete num_samples windows after it started.
        expire_age = self.num_samples * self.window_ms
        self._samples = [s for s in self._samples if now_ms - s.start_ms < expire_age]

    def _live(self, now_ms: int) -> list[_Sample]:
        self._expire(now_ms)
        return self._samples

    def avg(self, now_ms: int) -> float:
        live = self._live(now_ms)
        count = sum(s.count for s in live)
        return sum(s.total for s in live) / count if count else math.nan

    def max(self, now_ms: int) -> float:
        live = [s for s in self._live(now_ms) if s.count]
        return max(s.maximum for s in live) if live else math.nan

    def _elapsed_s(self, live: list[_Sample], now_ms: int) -> float:
        span = now_ms - live[0].start_ms if live else 0
        return max(span, (self.num_samples - 1) * self.window_ms, 1) / 1000.0

    def rate(self, now_ms: int) -> float:
        """Sum of recorded values per second."""
        live = self._live(now_ms)
        return sum(s.total for s in live) / self._elapsed_s(live, now_ms)

    def count_rate(self, now_ms: int) -> float:
        """Recordings per second."""
        live = self._live(now_ms)
        return sum(s.count for s in live) / self._elapsed_s(live, now_ms)


METRIC_NAMES: tuple[str, ...] = (
    "record-send-total", "record-send-rate", "byte-total", "byte-rate", "batch-size-avg", "batch-size-max",
    "records-per-request-avg", "request-total", "request-rate", "request-latency-avg", "request-latency-max",
    "record-retry-total", "record-retry-rate", "record-error-total", "record-error-rate",
    "produce-throttle-time-avg", "produce-throttle-time-max", "record-queue-time-avg", "record-queue-time-max",
    "compression-rate-avg",
)


class ProducerMetrics:
    """The producer's metrics (module docstring). ``_lock`` guards every stat; gauges are read outside it."""

    def __init__(self, window_ms: int = 30_000, num_samples: int = 2) -> None:
        self._lock = threading.Lock()

        def stat() -> WindowedStat:
            return WindowedStat(window_ms, num_samples)

        # Guarded by _lock:
        self._records_sent = stat()  # value: records per sent batch
        self._batch_bytes = stat()  # value: bytes per sent batch
        self._request_records = stat()  # value: records per request
        self._request_latency = stat()  # value: ms from send to response
        self._retries = stat()  # value: records re-enqueued
        self._errors = stat()  # value: records failed
        self._throttle = stat()  # value: throttle_time_ms of a response
        self._queue_time = stat()  # value: ms a sent batch waited from creation to its (last) drain
        self._compression = stat()  # value: a sent batch's bytes / its uncompressed bytes
        self._gauges: dict[str, Callable[[], float]] = {}

    def add_gauge(self, name: str, read: Callable[[], float]) -> None:
        """A value read at snapshot time, e.g. ``buffer-available-bytes`` from the BufferPool."""
        with self._lock:
            self._gauges[name] = read

    def record_batches_sent(self, records: list[int], sizes: list[int], queue_ms: list[int], ratios: list[float],
                            now_ms: int) -> None:
        """The batches of one request: ``records[i]`` records in ``sizes[i]`` bytes each, after ``queue_ms[i]`` ms
        in the accumulator, compressed to ``ratios[i]`` of their uncompressed size (one lock per request)."""
        if not records:
            return
        with self._lock:
            self._records_sent.record_all(records, now_ms)
            self._batch_bytes.record_all(sizes, now_ms)
            self._queue_time.record_all(queue_ms, now_ms)
            self._compression.record_all(ratios, now_ms)

    def record_request(self, records: int, latency_ms: float, now_ms: int) -> None:
        with self._lock:
            self._request_records.record(records, now_ms)
            self._request_latency.record(latency_ms, now_ms)

    def record_retry(self, records: int, now_ms: int) -> None:
        with self._lock:
            self._retries.record(records, now_ms)

    def record_error(self, records: int, now_ms: int) -> None:
        with self._lock:
            self._errors.record(records, now_ms)

    def record_throttle(self, throttle_ms: float, now_ms: int) -> None:
        with self._lock:
            self._throttle.record(throttle_ms, now_ms)

    def snapshot(self, now_ms: int) -> dict[str, float]:
        """Every metric by its Java name (``METRIC_NAMES`` plus the gauges)."""
        with self._lock:
            out: dict[str, float] = {
                "record-send-total": self._records_sent.lifetime_total,
                "record-send-rate": self._records_sent.rate(now_ms),
                "byte-total": self._batch_bytes.lifetime_total,
                "byte-rate": self._batch_bytes.rate(now_ms),
                "batch-size-avg": self._batch_bytes.avg(now_ms),
                "batch-size-max": self._batch_bytes.max(now_ms),
                "records-per-request-avg": self._request_records.avg(now_ms),
                "request-total": float(self._request_latency.lifetime_count),
                "request-rate": self._request_latency.count_rate(now_ms),
                "request-latency-avg": self._request_latency.avg(now_ms),
                "request-latency-max": self._request_latency.max(now_ms),
                "record-retry-total": self._retries.lifetime_total,
                "record-retry-rate": self._retries.rate(now_ms),
                "record-error-total": self._errors.lifetime_total,
                "record-error-rate": self._errors.rate(now_ms),
                "produce-throttle-time-avg": self._throttle.avg(now_ms),
                "produce-throttle-time-max": self._throttle.max(now_ms),
                "record-queue-time-avg": self._queue_time.avg(now_ms),
                "record-queue-time-max": self._queue_time.max(now_ms),
                "compression-rate-avg": self._compression.avg(now_ms),
            }
            gauges = dict(self._gauges)
        for name, read in gauges.items():  # outside the lock: a gauge may take other locks (the pool's)
            out[name] = float(read())
        return out
