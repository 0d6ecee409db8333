"""Transactions against the real broker: commit / abort read back with confluent-kafka, fencing, ending a
transaction from a fresh process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import ProducerFencedError
from spark_kafka_sink.producer import TransactionIdentity, end_transaction, fence_transactional_id

pytestmark = pytest.mark.broker


def producer(bootstrap: str, **options: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 20_000, **options})


def test_committed_visible_aborted_never(bootstrap: str, topic_factory: Callable[..., str],
                                         readback: Callable[..., Any]) -> None:
    topic = topic_factory(partitions=2)
    with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        for i in range(100):
            p.send(topic, b"commit-%d" % i)
        p.send_batch(topic, pa.table({"value": [b"commit-batch"]}))
        p.commit_transaction(30)
        p.begin_transaction()
        for i in range(50):
            p.send(topic, b"abort-%d" % i)
        p.flush()  # written to the log, then aborted
        p.abort_transaction(30)
        p.begin_transaction()
        p.send(topic, b"commit-last")
        p.commit_transaction(30)
    committed = sorted(r.value or b"" for r in readback(topic))
    assert committed == sorted([b"commit-%d" % i for i in range(100)] + [b"commit-batch", b"commit-last"])
    everything = readback(topic, isolation="read_uncommitted")
    assert sum(1 for r in everything if (r.value or b"").startswith(b"abort-")) == 50


def test_second_producer_fences_the_first(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    txn_id = f"tx-{uuid.uuid4().hex}"
    first = producer(bootstrap, **{"transactional.id": txn_id})
    second = producer(bootstrap, **{"transactional.id": txn_id})
    try:
        first.init_transactions(30)
        first.begin_transaction()
        first.send(topic, b"zombie").result(30)
        second.init_transactions(30)  # bumps the epoch: the first is fenced, its transaction aborted
        with pytest.raises(ProducerFencedError):
            first.send(topic, b"more").result(30)
            first.commit_transaction(30)
        with pytest.raises(ProducerFencedError):
            first.begin_transaction()
    finally:
        first.close(5)
        second.close(5)


def test_end_transaction_from_a_fresh_process_commits(bootstrap: str, topic_factory: Callable[..., str],
                                                     readback: Callable[..., Any]) -> None:
    topic = topic_factory(partitions=2)
    txn_id = f"tx-{uuid.uuid4().hex}"
    p = producer(bootstrap, **{"transactional.id": txn_id})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(10):
        p.send(topic, b"r%d" % i)
    p.flush()
    identity = p.transaction_identity()
    p.close()  # close never aborts: the transaction stays open for the driver
    assert readback(topic) == []
    script = textwrap.dedent(f"""
        from spark_kafka_sink.producer import TransactionIdentity, end_transaction
        identity = TransactionIdentity({identity.transactional_id!r}, {identity.producer_id},
                                       {identity.producer_epoch})
        end_transaction({{"bootstrap.servers": {bootstrap!r}}}, identity, commit=True, timeout_s=30)
        end_transaction({{"bootstrap.servers": {bootstrap!r}}}, identity, commit=True, timeout_s=30)  # repeat: NONE
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=60)
    assert sorted(r.value or b"" for r in readback(topic)) == sorted(b"r%d" % i for i in range(10))


def test_end_transaction_after_fencing_explains(bootstrap: str, topic_factory: Callable[..., str],
                                                readback: Callable[..., Any]) -> None:
    topic = topic_factory(partitions=1)
    txn_id = f"tx-{uuid.uuid4().hex}"
    with producer(bootstrap, **{"transactional.id": txn_id}) as p:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"lost").result(30)
        identity = p.transaction_identity()
    fence_transactional_id({"bootstrap.servers": bootstrap}, txn_id, 30)
    with pytest.raises(ProducerFencedError, match="cannot be committed.*transaction.timeout.ms"):
        end_transaction({"bootstrap.servers": bootstrap}, identity, commit=True, timeout_s=30)
    assert readback(topic) == []
    assert isinstance(identity, TransactionIdentity)
