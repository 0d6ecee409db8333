"""acks=0 and acks=1 through KafkaProducer against the real broker (idempotence turns itself off, as in Java),
read back with confluent-kafka: every record once, in order per partition."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.producer.record_metadata import NO_OFFSET
from tests.conftest import ConsumedRecord, wait_for

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


def end_offsets(bootstrap: str, topic: str) -> int:
    """The sum of the topic's partitions' high watermarks (confluent-kafka)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "acks-watermarks"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return sum(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions)
    finally:
        consumer.close()


def leaders_serve(bootstrap: str, topic: str) -> bool:
    """Every partition's leader answers ListOffsets. A new topic's metadata names its leaders a moment before
    those brokers act as leaders; a produce request reaching one then is refused, and with acks=0 the broker
    just closes the connection, so its records are lost unseen (as with any Kafka client)."""
    from confluent_kafka import KafkaException

    try:
        end_offsets(bootstrap, topic)
    except KafkaException:
        return False
    return True


@pytest.mark.parametrize("acks", ["0", "1"])
def test_acks_0_and_1_write_every_record_once(bootstrap: str, topic_factory: Callable[..., str],
                                              readback: Readback, acks: str) -> None:
    topic = topic_factory(partitions=3)
    wait_for("every partition's leader to serve it", lambda: leaders_serve(bootstrap, topic), timeout=30)
    started = time.monotonic()
    with KafkaProducer({"bootstrap.servers": bootstrap, "acks": acks, "max.block.ms": 30_000}) as producer:
        assert not producer.config.enable_idempotence  # needs acks=all: off, as Java does when not asked for
        singles = [producer.send(topic, b"s-%05d" % i, key=b"k%d" % (i % 10)) for i in range(500)]
        bulk = producer.send_batch(topic, pa.table({
            "key": pa.array([b"k%d" % (i % 10) for i in range(1_000)], pa.binary()),
            "value": pa.array([b"b-%05d" % i for i in range(1_000)], pa.binary())}))
        producer.flush(60)
        metadata = [f.result(timeout=30) for f in singles]
        result = bulk.result(timeout=30)
    took = time.monotonic() - started
    if acks == "0":  # flush returned once the bytes left; the broker may still be appending them
        wait_for("the broker to have appended all 1,500 records", lambda: end_offsets(bootstrap, topic) >= 1_500,
                 timeout=30)
    records = readback(topic)
    values = [r.value or b"" for r in records]
    expected = Counter([b"s-%05d" % i for i in range(500)] + [b"b-%05d" % i for i in range(1_000)])
    got = Counter(values)
    print(f"acks={acks}: {len(records)} records read, {sum((expected - got).values())} lost, "
          f"{sum((got - expected).values())} duplicated, written in {took:.2f} s")
    assert got == expected
    for partition in range(3):
        for prefix in (b"s-", b"b-"):
            mine = [v for r, v in zip(records, values, strict=True) if r.partition == partition and
                    v.startswith(prefix)]
            assert mine == sorted(mine)
    assert result.records == 1_000
    if acks == "0":  # no answer: nothing tells the offsets
        assert {md.offset for md in metadata} == {NO_OFFSET}
        assert {s.first_offset for s in result.partitions.values()} == {NO_OFFSET}
    else:
        by_offset = {(r.partition, r.offset): v for r, v in zip(records, values, strict=True)}
        assert all(by_offset[(md.partition, md.offset)] == b"s-%05d" % i for i, md in enumerate(metadata))
