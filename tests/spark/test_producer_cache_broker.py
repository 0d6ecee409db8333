"""The Python worker's producer cache against the real broker (no Spark): reuse, broken producers, idle close, exit."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psutil
import pyarrow as pa
import pytest

from spark_kafka_sink.producer import KafkaProducer
from spark_kafka_sink.spark.producer_cache import ProducerCache
from tests.conftest import ConsumedRecord, wait_for

pytestmark = pytest.mark.broker


@pytest.fixture
def cache() -> Iterator[ProducerCache[KafkaProducer]]:
    made = ProducerCache(KafkaProducer)
    yield made
    made.close()


def send(producer: Any, topic: str, *values: bytes) -> None:
    producer.send_batch(topic, pa.table({"value": pa.array(values, pa.binary())})).result(30)


def test_a_healthy_producer_serves_the_next_task_of_the_same_config(
        cache: ProducerCache[KafkaProducer], bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=1)
    config = {"bootstrap.servers": bootstrap, "linger.ms": 1}
    first = cache.lease(config, 60)
    send(first.producer, topic, b"a")
    cache.give_back(first, healthy=True)
    second = cache.lease(config, 60)
    assert second.producer is first.producer and first.created and not second.created
    send(second.producer, topic, b"b")  # same producer id, next sequences: the broker accepts them
    cache.give_back(second, healthy=True)
    assert (cache.created, cache.reused) == (1, 1)
    assert [r.value for r in readback(topic)] == [b"a", b"b"]

    other = cache.lease({**config, "linger.ms": 2}, 60)  # another configuration never shares
    assert other.created and other.producer is not first.producer
    cache.give_back(other, healthy=True)


def test_a_failed_task_or_broken_producer_is_never_lent_again(cache: ProducerCache[KafkaProducer],
                                                              bootstrap: str) -> None:
    config = {"bootstrap.servers": bootstrap}
    failed = cache.lease(config, 60)
    cache.give_back(failed, healthy=False)  # the task raised: closed, not kept
    assert not failed.producer.usable and cache.idle_count() == 0

    kept = cache.lease(config, 60)
    assert kept.created and kept.producer is not failed.producer
    cache.give_back(kept, healthy=True)
    kept.producer.close(5)  # broke while idle (a fatal error, a dead sender thread): found out at the next lease
    again = cache.lease(config, 60)
    assert again.created and again.producer is not kept.producer
    cache.give_back(again, healthy=True)


@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_an_idle_producer_is_closed_after_its_timeout_and_one_in_use_never(cache: ProducerCache[KafkaProducer],
                                                                           bootstrap: str, transactional: bool) -> None:
    config: dict[str, Any] = {"bootstrap.servers": bootstrap}
    if transactional:
        config["transactional.id"] = f"idle-{uuid.uuid4().hex}"
    in_use = cache.lease(config, 0.2)
    idle = cache.lease(config, 0.2)
    cache.give_back(idle, healthy=True)
    wait_for("the idle producer to be closed after its timeout", lambda: cache.idle_count() == 0, timeout=30,
             interval=0.02)
    assert not idle.producer.usable
    assert in_use.producer.usable  # lent out: no timeout applies (SPARK-21869)
    cache.give_back(in_use, healthy=True)
    zero = cache.lease(config, 0)  # producerIdleTimeoutMs=0: closed after each task
    cache.give_back(zero, healthy=True)
    assert not zero.producer.usable and cache.idle_count() == 0


def test_closing_the_cache_leaves_no_thread_or_socket(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    port = int(bootstrap.rsplit(":", 1)[1])

    def broker_sockets() -> int:
        return sum(1 for c in psutil.Process().net_connections("tcp") if c.raddr and c.raddr.port == port)

    def threads() -> set[threading.Thread]:
        return {t for t in threading.enumerate()
                if t.name.startswith(("kafka-producer-network-thread", "pykafka-sink-producer-cache"))}

    before = broker_sockets()
    others = threads()  # earlier tests' producers and caches in this process (closed or not): not this cache's
    cache = ProducerCache(KafkaProducer)
    leases = [cache.lease({"bootstrap.servers": bootstrap, "client.id": f"c{i}"}, 60) for i in range(3)]
    for lease in leases:
        assert lease.producer.partitions_for(topic) == [0]  # connected
        cache.give_back(lease, healthy=True)
    # An exactly_once task's producer: its transaction handed over (open), kept for the next task's id.
    for txn_id in ("exit-a", "exit-b"):
        lease = cache.lease({"bootstrap.servers": bootstrap, "transactional.id": f"{txn_id}-{uuid.uuid4().hex}"}, 60)
        lease.producer.init_transactions(30)
        lease.producer.begin_transaction()
        send(lease.producer, topic, b"open")
        lease.producer.flush(30)
        cache.give_back(lease, healthy=True)
    assert (cache.created, cache.reused) == (4, 1)  # the second transactional task took the first one's producer
    assert broker_sockets() > before
    cache.close()  # what the worker's exit runs (atexit)
    assert broker_sockets() == before
    assert not [t.name for t in threads() - others]



def test_a_worker_exiting_with_kept_producers_closes_them_and_exits_cleanly(bootstrap: str,
                                                                           topic_factory: Callable[..., str]) -> None:
    """The worker's own cache (worker_cache, closed by atexit) in a process that ends as a Python worker does."""
    topic = topic_factory(partitions=1)
    script = textwrap.dedent(f"""
        import atexit
        import threading
        import pyarrow as pa
        from spark_kafka_sink.spark.producer_cache import worker_cache

        def after_the_cache_closed():  # registered first: atexit runs it last, after the cache's close
            print("at exit:", sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))

        atexit.register(after_the_cache_closed)
        for config in ({{"bootstrap.servers": {bootstrap!r}}},
                       {{"bootstrap.servers": {bootstrap!r}, "transactional.id": "exit-{uuid.uuid4().hex}"}}):
            lease = worker_cache().lease(config, 600)
            if "transactional.id" in config:
                lease.producer.init_transactions(30)
                lease.producer.begin_transaction()
            lease.producer.send_batch({topic!r}, pa.table({{"value": [b"x"]}})).result(30)
            lease.producer.flush(30)
            worker_cache().give_back(lease, healthy=True)
        print("running:", sorted(t.name.split(" |")[0] for t in threading.enumerate() if t.daemon))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    # Two sender threads and the reaper ran until the worker exited; atexit closed and joined them.
    running = sorted(["kafka-producer-network-thread"] * 2 + ["pykafka-sink-producer-cache"])
    assert proc.stdout.splitlines() == [f"running: {running}", "at exit: []"], proc.stdout
    assert "Traceback" not in proc.stderr and "Exception" not in proc.stderr, proc.stderr
