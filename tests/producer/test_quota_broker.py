"""A client quota on a real broker (set with Kafka's own ConfigCommand): the producer waits out the throttle time
the broker answers with before it sends the next request (KIP-219, as Java), instead of sending it into the
connection the broker muted, where it would sit while request.timeout.ms runs. Records read back with
confluent-kafka."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import require_java, tools_lib
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

QUOTA_BYTES_PER_S = 10_000  # the broker measures over ~10 s at first, so ~100 KB sent at once goes over it
RECORD = b"q" * 1000


def _set_producer_quota(kafka: KafkaCluster, client_id: str, bytes_per_s: int) -> None:
    proc = subprocess.run(
        [require_java(), "-cp", f"{tools_lib(kafka.version)}/*", "org.apache.kafka.tools.ConfigCommand",
         "--bootstrap-server", kafka.bootstrap_servers, "--alter", "--add-config",
         f"producer_byte_rate={bytes_per_s}", "--entity-type", "clients", "--entity-name", client_id],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_throttled_producer_sends_nothing_until_the_throttle_time_passed(
        kafka: KafkaCluster, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]
        ) -> None:
    topic = topic_factory(1)
    client_id = f"quota-{uuid.uuid4().hex[:8]}"
    _set_producer_quota(kafka, client_id, QUOTA_BYTES_PER_S)
    # One request at a time: each is sent only after the previous answer, so none may meet a muted connection.
    p = KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers, "client.id": client_id, "linger.ms": 0,
                       "batch.size": 4096, "max.in.flight.requests.per.connection": 1})
    sent = 0
    try:
        # Until the quota throttled us (it applies within ms of ConfigCommand; the metric is NaN before any answer).
        while not p.metrics()["produce-throttle-time-max"] >= 200:
            assert sent < 400, f"no throttle after {sent} KB against a {QUOTA_BYTES_PER_S} B/s quota"
            for _ in range(20):
                p.send(topic, RECORD)
            sent += 20
            p.flush()
        for _ in range(4):  # a request right after a throttled answer
            p.send(topic, RECORD)
        sent += 4
        p.flush()
        metrics = p.metrics()
    finally:
        p.close()
    throttle_max, latency_max = metrics["produce-throttle-time-max"], metrics["request-latency-max"]
    # Sent into the muted connection, a request waits there for the rest of the throttle: its latency would be
    # about the throttle time (measured 2,321 ms against a 2,312 ms throttle before the producer honoured it).
    assert latency_max < throttle_max / 2, (latency_max, throttle_max)
    assert len(readback(topic)) == sent
