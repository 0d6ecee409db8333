"""An idempotent send survives its broker stopping and restarting: every record exactly once, in order per
partition (read back with confluent-kafka). A dedicated one-node cluster, so the session broker stays up.

A broker stopped cleanly writes a producer-state snapshot holding only the last batch of each producer in each
partition (every Kafka version), so after the restart it recognises a resend of that batch only. With several
batches of a partition appended but unanswered when it stopped, the resend of an earlier one is refused with
OUT_OF_ORDER_SEQUENCE_NUMBER, and the producer (as Java's and librdkafka's do) takes a new epoch and writes it
again. So the clean stop runs with max.in.flight.requests.per.connection=1, where exactly once holds; a SIGKILLed
broker rebuilds the state from its log on restart and keeps the last 5 batches, so the kill runs at the default 5."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from concurrent.futures import Future
from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import create_topic, read_topic

pytestmark = pytest.mark.broker

N = 200_000
CHUNK = 2_000


def _send_all(producer: KafkaProducer, topic: str, futures: list[Future[Any]], errors: list[BaseException],
              progress: list[int]) -> None:
    """Half the chunks through send() one record at a time, half through send_batch(); keys spread the rows."""
    try:
        for start in range(0, N, CHUNK):
            progress[0] = start
            rows = range(start, start + CHUNK)
            if (start // CHUNK) % 2:
                for i in rows:
                    futures.append(producer.send(topic, b"%d" % i, key=b"k%d" % (i % 97)))
            else:
                futures.append(producer.send_batch(topic, pa.table({
                    "value": [b"%d" % i for i in rows], "key": [b"k%d" % (i % 97) for i in rows]})))
    except BaseException as exc:  # reported by the test thread
        errors.append(exc)


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_broker_restart_in_the_middle_of_an_idempotent_send(how: str) -> None:
    with KafkaCluster(size=1) as cluster:
        bootstrap = cluster.bootstrap_servers
        topic = create_topic(bootstrap, "failover", partitions=3)
        producer = KafkaProducer({
            "bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all", "linger.ms": 5,
            "buffer.memory": 1_000_000,  # small: the sending thread blocks while the broker is away
            "max.block.ms": 120_000, "delivery.timeout.ms": 120_000, "request.timeout.ms": 10_000,
            "retry.backoff.ms": 100, "reconnect.backoff.max.ms": 500,
            "max.in.flight.requests.per.connection": 1 if how == "stop" else 5,  # see the module docstring
        })
        futures: list[Future[Any]] = []
        errors: list[BaseException] = []
        progress = [0]  # rows handed to the producer so far (written by the sending thread)
        sender = threading.Thread(target=_send_all, args=(producer, topic, futures, errors, progress), daemon=True)
        try:
            sender.start()
            deadline = time.monotonic() + 60
            while progress[0] < N // 3:  # a third of the rows are in, ...
                assert time.monotonic() < deadline and sender.is_alive(), f"the send stalled: {errors}"
                sender.join(0.01)
            futures[0].result(60)  # ... and the broker acknowledged some
            if how == "stop":
                cluster.stop_node(1)  # controlled shutdown with requests in flight and records queued
            else:
                cluster.kill_node(1)  # SIGKILL: no shutdown, the producer state is rebuilt from the log
            pending_at_stop = sum(1 for f in list(futures) if not f.done())
            cluster.start_node(1)
            sender.join(180)
            assert not sender.is_alive() and not errors, errors
            producer.flush(120)
            failed = [f.exception() for f in futures if f.exception() is not None]
            assert not failed, failed[:3]
        finally:
            producer.close(30)
        assert pending_at_stop > 0 and progress[0] == N - CHUNK  # the broker went away mid-send
        records = read_topic(bootstrap, topic, timeout=120)
    values = [int(r.value or b"") for r in records]
    assert len(values) == N and sorted(values) == list(range(N))  # every record, exactly once
    per_partition: dict[int, list[int]] = defaultdict(list)
    for r in records:  # sorted by (partition, offset)
        per_partition[r.partition].append(int(r.value or b""))
    for partition, seen in per_partition.items():
        assert seen == sorted(seen), f"partition {partition} is out of order"
