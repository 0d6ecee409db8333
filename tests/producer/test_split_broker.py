"""A topic whose max.message.bytes (64 KiB) is below batch.size (the sink's 256 KiB): the broker refuses the
batches as MESSAGE_TOO_LARGE and the producer splits and resends them (Java's splitAndReenqueue), with and
without idempotence. Read back with confluent-kafka: every record once, in order per partition."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import MessageTooLargeError
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
ROWS = 3_000
RECORDS = 1_500
PAD = b"x" * 300


@pytest.mark.parametrize("idempotence", [True, False])
def test_batches_above_the_topic_limit_are_split_and_all_arrive_once_in_order(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback, idempotence: bool) -> None:
    topic = topic_factory(partitions=2, config={"max.message.bytes": "65536"})
    options = {"bootstrap.servers": bootstrap, "batch.size": 262_144, "linger.ms": 200,
               "enable.idempotence": idempotence, "acks": "all" if idempotence else "1", "max.block.ms": 30_000,
               # Without idempotence only one request in flight keeps a partition in order (as in Java): a split
               # batch would otherwise be resent after batches that followed it.
               "max.in.flight.requests.per.connection": 5 if idempotence else 1}
    started = time.monotonic()
    with KafkaProducer(options) as producer:
        table = pa.table({"key": pa.array([b"k%d" % (i % 5) for i in range(ROWS)], pa.binary()),
                          "value": pa.array([b"b-%06d-" % i + PAD for i in range(ROWS)], pa.binary())})
        bulk = producer.send_batch(topic, table)
        singles = [producer.send(topic, b"s-%06d-" % i + PAD, key=b"k%d" % (i % 5)) for i in range(RECORDS)]
        producer.flush(60)
        result = bulk.result(timeout=60)
        metadata = [f.result(timeout=60) for f in singles]
    took = time.monotonic() - started
    records = readback(topic)
    values = [r.value or b"" for r in records]  # every record written here has a value
    expected = Counter([b"b-%06d-" % i + PAD for i in range(ROWS)] + [b"s-%06d-" % i + PAD for i in range(RECORDS)])
    got = Counter(values)
    lost, duplicated = expected - got, got - expected
    print(f"idempotence={idempotence}: {len(records)} records read, {sum(lost.values())} lost, "
          f"{sum(duplicated.values())} duplicated; written (with splits) in {took:.2f} s")
    assert not lost and not duplicated
    assert result.records == ROWS
    for partition in {r.partition for r in records}:
        in_log = [v for r, v in zip(records, values, strict=True) if r.partition == partition]
        for prefix in (b"b-", b"s-"):
            mine = [v for v in in_log if v.startswith(prefix)]
            assert mine == sorted(mine), f"partition {partition}: {prefix!r} records out of order"
    by_offset = {(r.partition, r.offset): v for r, v in zip(records, values, strict=True)}
    for i, md in enumerate(metadata):  # each send() future names where its record is
        assert by_offset[(md.partition, md.offset)] == b"s-%06d-" % i + PAD
    for (t, p), stats in result.partitions.items():  # send_batch's offsets cover its rows
        rows = [o for (part, o), v in by_offset.items() if part == p and v.startswith(b"b-")]
        assert t == topic and stats.first_offset == min(rows) and stats.last_offset == max(rows)


def test_a_single_record_above_the_topic_limit_fails_naming_its_size(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=1, config={"max.message.bytes": "65536"})
    with KafkaProducer({"bootstrap.servers": bootstrap, "batch.size": 262_144, "linger.ms": 0,
                        "max.block.ms": 30_000}) as producer:
        big = producer.send(topic, b"y" * 100_000)
        with pytest.raises(MessageTooLargeError) as info:
            big.result(timeout=60)
        after = producer.send(topic, b"fits").result(timeout=60)  # the producer goes on
    message = str(info.value)
    print(f"oversized record: {message}")
    assert "a record of 1000" in message and "max.message.bytes" in message
    assert after.offset >= 0
    assert [r.value for r in readback(topic)] == [b"fits"]
