"""send_offsets_to_transaction against the real broker: a consumer group's offsets committed with the transaction
(read back with confluent-kafka's ``committed``), gone with an abort, and refused for a member the group does not
have. Runs on transaction version 2 here and on version 1 in make test-versions."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as ConfluentPartition

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import IllegalGenerationError, IllegalStateError, KafkaTimeoutError, UnknownMemberIdError
from spark_kafka_sink.producer import ConsumerGroupMetadata, OffsetAndMetadata, TopicPartition
from tests.conftest import wait_for

pytestmark = pytest.mark.broker

NO_OFFSET = -1001  # librdkafka's OFFSET_INVALID: nothing committed


@pytest.fixture
def transactional(bootstrap: str) -> Iterator[KafkaProducer]:
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 30_000,
                        "transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
        p.init_transactions()
        yield p


def committed(bootstrap: str, group: str, topic: str, partitions: int,
              isolation: str = "read_committed") -> dict[int, tuple[int, str | None]]:
    """The group's committed offsets and metadata, as confluent-kafka reads them. read_committed asks for stable
    offsets (KIP-447), which the broker holds back while a transaction with offsets of the group is open."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                         "isolation.level": isolation})
    try:
        found = consumer.committed([ConfluentPartition(topic, p) for p in range(partitions)], timeout=30)
        return {tp.partition: (tp.offset, _as_stored(tp.metadata)) for tp in found}
    finally:
        consumer.close()


_METADATA = "after row 8"  # the one metadata string these tests commit


def _as_stored(read: str | None) -> str | None:
    """confluent-kafka-python copies librdkafka's offset metadata as a C string, but librdkafka's copy ends without
    a NUL: the string read may run on past the end into whatever follows in memory (once "after row 86\x02V" for
    "after row 8"). What the broker stored is its start: a string that starts with the one committed is that one."""
    return _METADATA if read is not None and read.startswith(_METADATA) else read


def test_offsets_commit_with_the_transaction_and_vanish_with_an_abort(
        bootstrap: str, transactional: KafkaProducer, topic_factory: Callable[..., str],
        readback: Callable[..., Any]) -> None:
    source, sink = topic_factory(partitions=2), topic_factory(partitions=1)
    group = f"g-{uuid.uuid4().hex}"
    p = transactional
    p.begin_transaction()
    p.send(sink, b"out-1")
    p.send_offsets_to_transaction({TopicPartition(source, 0): 5, (source, 1): OffsetAndMetadata(9, _METADATA)},
                                  ConsumerGroupMetadata(group))
    p.commit_transaction()
    assert committed(bootstrap, group, source, 2) == {0: (5, None), 1: (9, _METADATA)}

    p.begin_transaction()
    p.send(sink, b"out-2")
    p.send_offsets_to_transaction({(source, 0): 50, (source, 1): 90}, group)
    p.abort_transaction()
    assert committed(bootstrap, group, source, 2) == {0: (5, None), 1: (9, _METADATA)}

    p.begin_transaction()  # offsets alone, no record: the transaction still commits them
    p.send_offsets_to_transaction({(source, 0): 6}, group)
    p.commit_transaction()
    assert committed(bootstrap, group, source, 2)[0] == (6, None)
    assert [r.value for r in readback(sink)] == [b"out-1"]


def test_offsets_of_an_open_transaction_are_not_committed_yet(
        bootstrap: str, transactional: KafkaProducer, topic_factory: Callable[..., str]) -> None:
    source = topic_factory(partitions=1)
    group = f"g-{uuid.uuid4().hex}"
    p = transactional
    p.begin_transaction()
    p.send_offsets_to_transaction({(source, 0): 3}, group)
    assert committed(bootstrap, group, source, 1, "read_uncommitted") == {0: (NO_OFFSET, None)}
    p.commit_transaction()
    assert committed(bootstrap, group, source, 1) == {0: (3, None)}


def test_a_member_the_group_does_not_have_cannot_commit(
        bootstrap: str, transactional: KafkaProducer, topic_factory: Callable[..., str]) -> None:
    """KIP-447: the group coordinator checks the member id and generation. A consumer joins the group for real
    (confluent-kafka); offsets sent as another member are refused, the transaction must be aborted, and the group's
    committed offsets stay as they were."""
    source = topic_factory(partitions=1)
    group = f"g-{uuid.uuid4().hex}"
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False,
                       "auto.offset.reset": "earliest"})
    try:
        member.subscribe([source])
        wait_for("the consumer to join its group", lambda: (member.poll(0.2), bool(member.assignment()))[1], 60)
        p = transactional
        p.begin_transaction()
        stranger = ConsumerGroupMetadata(group, generation_id=1_000, member_id="not-a-member")
        with pytest.raises((UnknownMemberIdError, IllegalGenerationError)) as info:
            p.send_offsets_to_transaction({(source, 0): 4}, stranger)
        assert "not-a-member" in str(info.value) and "Abort the transaction" in str(info.value)
        with pytest.raises(type(info.value)):
            p.commit_transaction()
        p.abort_transaction()
        with pytest.raises(IllegalStateError, match="open transaction"):
            p.send_offsets_to_transaction({(source, 0): 4}, group)  # the abort ended the transaction
        p.begin_transaction()  # the producer goes on
        p.commit_transaction()
    finally:
        member.close()
    assert committed(bootstrap, group, source, 1) == {0: (NO_OFFSET, None)}


def test_a_send_that_timed_out_leaves_the_offsets_to_the_commit(
        bootstrap: str, transactional: KafkaProducer, topic_factory: Callable[..., str]) -> None:
    """send_offsets_to_transaction gives up waiting (timeout_s), naming both coordinators; its TxnOffsetCommit stays
    queued ahead of the EndTxn, so the commit carries the offsets."""
    source = topic_factory(partitions=1)
    group = f"g-{uuid.uuid4().hex}"
    p = transactional
    p.begin_transaction()
    with pytest.raises(KafkaTimeoutError) as info:
        p.send_offsets_to_transaction({(source, 0): 12}, group, timeout_s=0.0)
    assert f"consumer group {group!r}" in str(info.value) and "commit_transaction() sends them first" in str(info.value)
    p.commit_transaction()
    assert committed(bootstrap, group, source, 1) == {0: (12, None)}
