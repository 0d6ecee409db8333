"""A broker paused with SIGSTOP (a long GC pause, a frozen VM): requests time out after request.timeout.ms, are
retried, and the records end with a DeliveryTimeoutError naming delivery.timeout.ms and the partitions; once
resumed (SIGCONT) the same producer goes on. A private broker: pausing the session's would stall other tests."""

from __future__ import annotations

import logging
import os
import signal
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future

import pytest

from spark_kafka_sink import KafkaProducer, RecordMetadata
from spark_kafka_sink.errors import DeliveryTimeoutError
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import create_topic, pause_process, read_topic

pytestmark = pytest.mark.broker


@pytest.fixture
def private_broker() -> Iterator[KafkaCluster]:
    fetch_jars()
    cluster = KafkaCluster(size=1).start()
    try:
        yield cluster
    finally:
        for pid in cluster.pids():
            os.kill(pid, signal.SIGCONT)  # never leave a stopped JVM behind, whatever failed
        cluster.stop()


def test_paused_broker_times_out_retries_then_expires_and_the_producer_recovers(
        private_broker: KafkaCluster, caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = private_broker.bootstrap_servers
    topic = create_topic(bootstrap, "paused", partitions=2)
    (pid,) = private_broker.pids()
    options = {"bootstrap.servers": bootstrap, "linger.ms": 0, "request.timeout.ms": 1_500,
               "delivery.timeout.ms": 6_000, "retry.backoff.ms": 100, "max.block.ms": 30_000}
    caplog.set_level(logging.INFO, logger="spark_kafka_sink")
    with KafkaProducer(options) as producer:
        before = [producer.send(topic, b"before-%d" % i, key=b"%d" % i) for i in range(200)]
        acked_before = [f.result(timeout=30) for f in before]
        pause_process(pid)
        paused_at = time.monotonic()
        during: list[Future[RecordMetadata]] = [producer.send(topic, b"during-%d" % i, key=b"%d" % i)
                                                for i in range(200)]
        errors = []
        for future in during:
            with pytest.raises(DeliveryTimeoutError) as info:
                future.result(timeout=60)
            errors.append(info.value)
        expired_after = time.monotonic() - paused_at
        os.kill(pid, signal.SIGCONT)
        resumed_at = time.monotonic()
        after = [producer.send(topic, b"after-%d" % i, key=b"%d" % i) for i in range(200)]
        acked_after = [f.result(timeout=60) for f in after]
        recovered_after = time.monotonic() - resumed_at
    messages = {str(e) for e in errors}
    logs = caplog.text
    print(f"paused: every record failed after {expired_after:.1f} s (delivery.timeout.ms=6000); first message: "
          f"{sorted(messages)[0]}")
    assert all("delivery.timeout.ms=6000" in m for m in messages)
    assert {f"{topic}-0", f"{topic}-1"} <= {part for m in messages for part in (f"{topic}-0", f"{topic}-1")
                                            if part in m}  # both partitions named
    assert "request.timeout.ms" in logs and "will be retried" in logs  # timed out, retried, then expired
    assert 6.0 <= expired_after < 30
    records = read_topic(bootstrap, topic)
    values = Counter(r.value for r in records)
    acked = [b"before-%d" % i for i in range(200)] + [b"after-%d" % i for i in range(200)]
    lost = [v for v in acked if values[v] == 0]
    duplicated = [v for v, n in values.items() if n > 1]
    maybe_written = sum(1 for v in values if v is not None and v.startswith(b"during-"))
    print(f"lost {len(lost)} acknowledged records, {len(duplicated)} duplicated; {maybe_written} of the 200 "
          f"expired records were written after all (the broker read them before it stopped); producer recovered "
          f"{recovered_after:.2f} s after SIGCONT")
    assert not lost and not duplicated
    assert len(acked_before) == len(acked_after) == 200
