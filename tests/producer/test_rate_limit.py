"""max.records.per.second / max.bytes.per.second: the token bucket stepped on a fake clock."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.rate_limit import BatchRateLimits


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_each_batch_waits_until_the_slower_limit_paid_for_it() -> None:
    clock = _Clock()
    limits = BatchRateLimits(100, 1000, clock=clock, sleep=clock.sleep)
    limits.acquire(10, 50)  # records bind: 0.1 s
    limits.acquire(10, 500)  # bytes bind: 0.5 s
    clock.now += 2.0  # idle time is not saved up for a burst
    limits.acquire(50, 0)
    assert clock.slept == pytest.approx([0.1, 0.5, 0.5])


def test_no_limit_never_waits() -> None:
    clock = _Clock()
    limits = BatchRateLimits(0, 0, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        limits.acquire(1_000_000, 1 << 30)
    assert not limits.active and clock.slept == []


def test_a_negative_limit_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigError, match="max.bytes.per.second"):
        ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9092", "max.bytes.per.second": -1})
