"""A batch whose records cannot be built fails alone: its futures get the error, its partition's later records go.

The build is made to fail once (the first ``BatchBuilder.build`` of the test) on a real broker; what reached the
topic is read back with confluent-kafka. Before, the build raised inside the sender thread's drain: the batch was
off its queue but never completed, so its futures and every ``flush()`` after it waited forever.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.protocol.record_batch import BatchBuilder
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


class _InjectedBuildFailure(RuntimeError):
    pass


@pytest.fixture
def fail_first_build(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first build raises; returns the threads that built (the first one is where the failure happened)."""
    build = BatchBuilder.build
    threads: list[str] = []

    def failing_once(self: BatchBuilder) -> bytes:
        threads.append(threading.current_thread().name)
        if len(threads) == 1:
            raise _InjectedBuildFailure("injected: the codec ran out of memory")
        return build(self)

    monkeypatch.setattr(BatchBuilder, "build", failing_once)
    return threads


def _producer(bootstrap: str, **options: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 20_000, "partitioner.ignore.keys": True,
                          **options})


def _assert_build_failure(error: BaseException | None, topic: str) -> None:
    assert isinstance(error, KafkaError), error
    assert f"a batch for {topic}-0 could not be built" in str(error)
    assert "_InjectedBuildFailure: injected: the codec ran out of memory" in str(error)
    assert isinstance(error.__cause__, _InjectedBuildFailure)


def test_a_batch_built_by_the_sender_fails_alone_and_the_partition_goes_on(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
        fail_first_build: list[str]) -> None:
    topic = topic_factory(partitions=1)
    with _producer(bootstrap, **{"linger.ms": 0}) as p:  # idempotent (the default): sequences must stay valid
        lost = p.send(topic, b"lost", partition=0)
        assert lost.exception(30) is not None
        kept = [p.send(topic, b"kept-%d" % i, partition=0) for i in range(20)]
        p.flush(30)
        assert all(f.result(0).partition == 0 for f in kept)
    assert fail_first_build[0].startswith("kafka-producer-network-thread")  # closed by the sender's drain
    _assert_build_failure(lost.exception(0), topic)
    assert [r.value for r in readback(topic)] == [b"kept-%d" % i for i in range(20)]


def test_a_batch_closed_by_a_send_fails_alone_and_that_send_is_kept(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
        fail_first_build: list[str]) -> None:
    topic = topic_factory(partitions=1)
    # linger.ms keeps the first batch open until the second record does not fit: that send() closes it.
    with _producer(bootstrap, **{"linger.ms": 60_000, "batch.size": 1024}) as p:
        lost = p.send(topic, b"a" * 700, partition=0)
        kept = p.send(topic, b"b" * 700, partition=0)  # did not raise: the failure is the first batch's
        p.flush(30)
        assert kept.result(0).offset == 0
    assert not fail_first_build[0].startswith("kafka-producer-network-thread")
    _assert_build_failure(lost.exception(0), topic)
    assert [r.value for r in readback(topic)] == [b"b" * 700]


def test_in_a_transaction_the_failure_aborts_it_and_the_next_one_commits(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
        fail_first_build: list[str]) -> None:
    topic = topic_factory(partitions=1)
    with _producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}", "linger.ms": 0}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        lost = p.send(topic, b"lost", partition=0)
        assert lost.exception(30) is not None  # failed in the sender: the transaction can only be aborted now
        with pytest.raises(KafkaError, match="could not be built"):
            p.send(topic, b"refused", partition=0)  # as Java: no more sends into an abortable transaction
        with pytest.raises(KafkaError, match="could not be built"):
            p.commit_transaction(30)  # a record of the transaction failed: it must not commit
        p.abort_transaction(30)
        p.begin_transaction()
        p.send(topic, b"committed", partition=0)
        p.commit_transaction(30)
    _assert_build_failure(lost.exception(0), topic)
    assert [r.value for r in readback(topic)] == [b"committed"]
