"""max.records.per.second on a real broker: a producer's send() held to its cap, as the broker's clock saw it
(message.timestamp.type=LogAppendTime), read back with confluent-kafka."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from spark_kafka_sink import KafkaProducer
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker


def test_send_is_held_to_max_records_per_second(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    n, cap = 60, 40
    topic = topic_factory(1, config={"message.timestamp.type": "LogAppendTime"})
    started = time.monotonic()
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.records.per.second": cap, "linger.ms": 0}) as p:
        for i in range(n):
            p.send(topic, value=b"%d" % i)
        p.flush(60)
    assert time.monotonic() - started >= n / cap
    records = readback(topic)
    assert [r.value for r in records] == [b"%d" % i for i in range(n)]
    # The broker's clock: the records arrived one at a time over ~(n - 1) / cap seconds (unlimited: within ms).
    assert (records[-1].timestamp_ms - records[0].timestamp_ms) / 1000 >= 0.75 * (n - 1) / cap
