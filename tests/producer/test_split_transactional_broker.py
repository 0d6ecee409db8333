"""The MESSAGE_TOO_LARGE split inside a transaction: a transactional producer with the sink's batch.size (256 KiB)
against a topic whose max.message.bytes is 64 KiB. The parts of every refused batch go out within the open
transaction (transactional, the producer's id and epoch, the whole batch's sequences), so a commit makes every
record visible exactly once and in order, and an abort makes none of them visible. Read back with confluent-kafka
at read_committed (and read_uncommitted, to see that the aborted records were written, then aborted)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
ROWS = 3_000
SINGLES = 600
PAD = b"x" * 300
PARTITIONS = 2


def _send(producer: KafkaProducer, topic: str, tag: bytes) -> list[bytes]:
    """send_batch ROWS records, then send SINGLES one by one; returns the values in the order they were sent."""
    bulk = [tag + b"b-%06d-" % i + PAD for i in range(ROWS)]
    singles = [tag + b"s-%06d-" % i + PAD for i in range(SINGLES)]
    table = pa.table({"key": pa.array([b"k%d" % (i % 5) for i in range(ROWS)], pa.binary()),
                      "value": pa.array(bulk, pa.binary())})
    batch_future = producer.send_batch(topic, table)
    futures = [producer.send(topic, v, key=b"k%d" % (i % 5)) for i, v in enumerate(singles)]
    producer.flush(60)
    assert batch_future.result(timeout=60).records == ROWS
    assert all(f.exception(timeout=60) is None for f in futures)
    return bulk + singles


def _lost_duplicated(values: list[bytes], expected: list[bytes]) -> tuple[int, int]:
    got, want = Counter(values), Counter(expected)
    return sum((want - got).values()), sum((got - want).values())


def _in_order(records: list[ConsumedRecord], tag: bytes) -> bool:
    for partition in range(PARTITIONS):
        for kind in (b"b-", b"s-"):
            mine = [r.value or b"" for r in records if r.partition == partition
                    and (r.value or b"").startswith(tag + kind)]
            if mine != sorted(mine):
                return False
    return True


def test_split_parts_stay_in_the_transaction_commit_shows_all_once_abort_shows_none(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=PARTITIONS, config={"max.message.bytes": "65536"})
    options = {"bootstrap.servers": bootstrap, "transactional.id": f"split-{uuid.uuid4().hex[:8]}",
               "batch.size": 262_144, "linger.ms": 200, "max.block.ms": 30_000}
    with KafkaProducer(options) as producer:
        producer.init_transactions(60)
        producer.begin_transaction()
        committed = _send(producer, topic, b"c-")
        retried_in_commit = producer.metrics().get("record-retry-total", 0.0)
        producer.commit_transaction(60)

        producer.begin_transaction()
        aborted = _send(producer, topic, b"a-")
        retried_in_abort = producer.metrics().get("record-retry-total", 0.0) - retried_in_commit
        producer.abort_transaction(60)

        producer.begin_transaction()  # the producer goes on after the abort
        after = _send(producer, topic, b"d-")
        producer.commit_transaction(60)

    visible = readback(topic)
    everything = readback(topic, "read_uncommitted")
    values = [r.value or b"" for r in visible]
    lost, duplicated = _lost_duplicated(values, committed + after)
    aborted_visible = sum(1 for v in values if v.startswith(b"a-"))
    aborted_written = Counter(v for r in everything if (v := r.value or b"").startswith(b"a-"))
    print(f"\ncommitted: {len(committed)} + {len(after)} records, {retried_in_commit:.0f} records resent in split "
          f"parts; read_committed read {len(visible)}: lost {lost}, duplicated {duplicated}; aborted: "
          f"{len(aborted)} records ({retried_in_abort:.0f} resent in split parts), {aborted_visible} visible to "
          f"read_committed, {sum(aborted_written.values())} in the log (read_uncommitted)")
    assert retried_in_commit > 0 and retried_in_abort > 0, "no batch was refused and split: the test tests nothing"
    assert (lost, duplicated, aborted_visible) == (0, 0, 0)
    assert len(visible) == len(committed) + len(after)
    assert _in_order(visible, b"c-") and _in_order(visible, b"d-")
    # The aborted records (split parts included) reached the log inside the transaction, once each.
    assert aborted_written == Counter(aborted)
