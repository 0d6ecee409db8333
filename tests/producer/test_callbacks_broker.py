"""Producer calls made from a callback, which runs on the sender thread, against a real broker (read back with
confluent-kafka): the calls that wait for the sender fail at once instead of waiting for themselves (Java since
4.0, KIP-1118, for flush), and close() there is close(0)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer, RecordMetadata
from spark_kafka_sink.errors import IllegalStateError, ProducerClosedError
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]
# Long enough for a round trip on a loaded host; the old behaviour waited forever (flush) or max.block.ms.
_CALLBACK_RETURNS_S = 15.0


def _call_in_callback(p: KafkaProducer, topic: str, call: Callable[[], Any]) -> BaseException | None:
    """Send one record whose callback makes ``call``; what the call raised (None if nothing), once it returned."""
    returned = threading.Event()
    raised: list[BaseException | None] = []

    def callback(metadata: RecordMetadata | None, error: BaseException | None) -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:  # noqa: BLE001 - the test inspects whatever the call raised
            raised.append(exc)
        finally:
            returned.set()

    p.send(topic, b"v", key=b"k", callback=callback)  # linger.ms=0: sent at once, no flush() of ours needed
    assert returned.wait(_CALLBACK_RETURNS_S), "the call made in the callback did not return: it waits for itself"
    return raised[0]


def test_flush_from_a_callback_raises_at_once_and_the_producer_goes_on(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(1)
    p = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    error = _call_in_callback(p, topic, p.flush)
    assert isinstance(error, IllegalStateError)
    assert "flush() was called from a producer callback" in str(error)
    p.send(topic, b"after", key=b"k").result(timeout=30)
    p.flush()
    p.close()
    assert [r.value for r in readback(topic)] == [b"v", b"after"]


def test_transaction_calls_from_a_callback_raise_at_once_and_the_transaction_commits(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(1)
    # max.block.ms above the wait: before, commit_transaction() from the callback waited for it, then timed out.
    p = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": f"callback-{topic}", "linger.ms": 0,
                       "max.block.ms": 60_000})
    p.init_transactions()
    p.begin_transaction()
    for call, name in ((p.commit_transaction, "commit_transaction()"), (p.abort_transaction, "abort_transaction()"),
                       (p.init_transactions, "init_transactions()")):
        error = _call_in_callback(p, topic, call)
        assert isinstance(error, IllegalStateError), (name, error)
        assert f"{name} was called from a producer callback" in str(error)
    p.commit_transaction()
    p.close()
    assert [r.value for r in readback(topic)] == [b"v", b"v", b"v"]


def test_close_from_a_callback_fails_what_is_queued_without_waiting(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(1)
    p = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    queued: list[Future[RecordMetadata]] = []

    def send_then_close() -> None:
        # The sender thread runs this callback, so the record stays queued until close() (as Java: close(0)).
        queued.append(p.send(topic, b"queued", key=b"k"))
        p.close()

    assert _call_in_callback(p, topic, send_then_close) is None
    with pytest.raises(ProducerClosedError):
        queued[0].result(timeout=30)
    with pytest.raises(ProducerClosedError):
        p.send(topic, b"later")
    p.close()  # again: nothing to do
    assert [r.value for r in readback(topic)] == [b"v"]
