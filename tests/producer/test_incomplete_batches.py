"""IncompleteBatches: the set flush and abort walk, safe to change while a copy is being walked."""

from __future__ import annotations

from spark_kafka_sink.producer.batch import ProducerBatch
from spark_kafka_sink.producer.incomplete_batches import IncompleteBatches
from spark_kafka_sink.producer.record_metadata import TopicPartition


def batch(partition: int = 0) -> ProducerBatch:
    return ProducerBatch.for_records(TopicPartition("t", partition), 1000, "none", 0)


def test_add_remove_copy() -> None:
    incomplete = IncompleteBatches()
    assert incomplete.is_empty() and incomplete.copy_all() == []
    a, b = batch(0), batch(1)
    incomplete.add(a)
    incomplete.add(b)
    incomplete.add(a)  # a set: once each
    assert not incomplete.is_empty() and sorted(incomplete.copy_all(), key=lambda x: x.tp) == [a, b]
    incomplete.remove(a)
    incomplete.remove(a)  # already gone: ignored
    assert incomplete.copy_all() == [b]
    incomplete.remove(b)
    assert incomplete.is_empty()


def test_a_copy_is_unaffected_by_later_changes() -> None:
    incomplete = IncompleteBatches()
    batches = [batch(i) for i in range(3)]
    for b in batches:
        incomplete.add(b)
    copy = incomplete.copy_all()
    for b in batches:
        incomplete.remove(b)  # e.g. completed on the sender thread while a flush walks its copy
    assert len(copy) == 3 and incomplete.is_empty()

