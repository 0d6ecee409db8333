"""The producer cache without a broker: keys, and what a lease decides (a fake producer stands in)."""

from __future__ import annotations

import threading
import time
from typing import Any

from spark_kafka_sink.secret import Secret
from spark_kafka_sink.spark.producer_cache import ProducerCache, config_key


class FakeProducer:
    def __init__(self, config: Any) -> None:
        self.config = dict(config)
        self.usable = True

    def close(self, timeout_s: float | None = None, *, abort_open_transaction: bool = True) -> None:
        assert not abort_open_transaction or timeout_s == 0, "a kept producer's transaction is the driver's to end"
        self.usable = False

    def switch_transactional_id(self, transactional_id: str) -> None:
        self.config["transactional.id"] = transactional_id


def test_the_key_covers_secrets_without_showing_them() -> None:
    base = {"bootstrap.servers": "h:1", "sasl.username": "u"}
    one = config_key({**base, "sasl.password": Secret("pw-one")})
    two = config_key({**base, "sasl.password": Secret("pw-two")})
    assert one != two and "pw-one" not in one and len(one) == 64
    assert config_key(dict(reversed(list(base.items())))) == config_key(base)  # order does not matter


def test_idle_producers_expire_on_the_clock_and_a_closed_cache_keeps_nothing() -> None:
    now = [100.0]
    cache = ProducerCache(FakeProducer, clock=lambda: now[0])
    # Only this test's expire() calls look: the reaper thread's first look could come after the clock moved on a
    # busy machine and expire the producer first (it has a test of its own below).
    cache._start_reaper = lambda wakes_at: None  # type: ignore[method-assign]  # noqa: SLF001
    lease = cache.lease({"a": 1}, 10)
    cache.give_back(lease, healthy=True)
    now[0] = 109.9
    assert cache.expire() == 0 and cache.idle_count() == 1
    now[0] = 110.0
    assert cache.expire() == 1 and not lease.producer.usable
    kept = cache.lease({"a": 1}, 10)
    cache.close()
    cache.give_back(kept, healthy=True)  # after the worker began to exit: closed, not kept
    assert not kept.producer.usable and cache.idle_count() == 0


def test_one_reaper_thread_serves_task_after_task() -> None:
    # Other caches of this process (the worker_cache earlier tests used) have reapers of the same name: not ours.
    others = {t for t in threading.enumerate() if t.name == "pykafka-sink-producer-cache"}
    cache = ProducerCache(FakeProducer)
    try:
        def reapers() -> list[threading.Thread]:
            return [t for t in threading.enumerate() if t.name == "pykafka-sink-producer-cache" and t not in others]

        def task() -> None:  # takes the idle producer, runs a while (the reaper may look), gives it back
            lease = cache.lease({"a": 1}, 60)
            time.sleep(0.002)  # the task's own work, not a wait for a condition
            cache.give_back(lease, healthy=True)

        task()
        first = reapers()[0]
        for _ in range(99):
            task()
        assert reapers() == [first]  # neither restarted nor woken to exit while producers came and went
        assert (cache.created, cache.reused) == (1, 99)
    finally:
        cache.close()
    assert not reapers()
