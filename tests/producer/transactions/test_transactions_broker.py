"""Transactions against the real broker: commit / abort read back with confluent-kafka, fencing, ending a
transaction from a fresh process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import uuid
from collections.abc import Callable
from typing import Any

import psutil
import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import IllegalStateError, KafkaTimeoutError, ProducerFencedError, SerializationError
from spark_kafka_sink.producer import (
    CoordinatorSession,
    TransactionIdentity,
    end_transaction,
    fence_transactional_id,
)
from tests.conftest import wait_for

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


def test_close_aborts_an_open_transaction_as_java_does(bootstrap: str, topic_factory: Callable[..., str],
                                                       readback: Callable[..., Any]) -> None:
    """A ``with`` block that raises inside a transaction: the graceful close aborts it, as Java's close does.
    Before, it stayed open until transaction.timeout.ms, and read_committed consumers saw nothing written after it
    (their last stable offset stuck at its first record) for that long. A begun transaction with nothing sent
    closes too, and close(abort_open_transaction=False) leaves one open (the Spark sink's tasks)."""
    topic = topic_factory(partitions=1)
    with pytest.raises(RuntimeError, match="user code failed"):
        with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
            p.init_transactions(30)
            p.begin_transaction()
            p.send(topic, b"aborted").result(30)
            raise RuntimeError("user code failed")
    with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as empty:
        empty.init_transactions(30)
        empty.begin_transaction()
    with producer(bootstrap) as plain:
        plain.send(topic, b"after").result(30)
    # read_committed reads up to the last stable offset: "after" is there only if nothing before it is open.
    assert [r.value for r in readback(topic, timeout=20)] == [b"after"]
    assert [r.value for r in readback(topic, isolation="read_uncommitted")] == [b"aborted", b"after"]
    kept_id = f"tx-{uuid.uuid4().hex}"
    kept = producer(bootstrap, **{"transactional.id": kept_id})
    kept.init_transactions(30)
    kept.begin_transaction()
    kept.send(topic, b"left open").result(30)
    kept.close(abort_open_transaction=False)
    with producer(bootstrap) as plain:
        plain.send(topic, b"behind it").result(30)
    assert [r.value for r in readback(topic, timeout=20)] == [b"after"]
    fence_transactional_id({"bootstrap.servers": bootstrap}, kept_id, 30)  # ends it: abort
    assert [r.value for r in readback(topic, timeout=20)] == [b"after", b"behind it"]


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
    p.close(abort_open_transaction=False)  # as the sink's tasks: the transaction stays open for the driver
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
        p.close(abort_open_transaction=False)  # left open, then fenced
    fence_transactional_id({"bootstrap.servers": bootstrap}, txn_id, 30)
    with pytest.raises(ProducerFencedError, match="cannot be committed.*transaction.timeout.ms"):
        end_transaction({"bootstrap.servers": bootstrap}, identity, commit=True, timeout_s=30)
    assert readback(topic) == []
    assert isinstance(identity, TransactionIdentity)


def test_one_producer_serves_transactional_ids_in_turn_while_another_client_ends_them(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., Any]) -> None:
    """What the Spark sink's producer cache does: the producer switches to each task's transactional.id and hands
    the transaction to the driver, which ends it from its own connection (EndTxn v5 bumps the epoch under TV2)."""
    topic = topic_factory(partitions=3)
    port = int(bootstrap.rsplit(":", 1)[1])
    prefix = f"tx-{uuid.uuid4().hex[:8]}"
    p = producer(bootstrap, **{"transactional.id": f"{prefix}-0"})
    driver = CoordinatorSession({"bootstrap.servers": bootstrap})
    sockets: set[int] = set()
    try:
        identities = []
        for turn in range(6):
            txn_id = f"{prefix}-{turn % 3}"
            if turn:
                p.switch_transactional_id(txn_id)
            p.init_transactions(30)  # fences an earlier producer of txn_id; the last one was ended already
            p.begin_transaction()
            p.send_batch(topic, pa.table({"value": [b"%d-%d" % (turn, i) for i in range(10)]})).result(30)
            p.flush()
            identity = p.transaction_identity()
            assert identity.transactional_id == txn_id and identity.coordinator >= 0  # the ender's lookup hint
            identities.append(identity)
            # Turn 4's transaction is aborted; the others are committed, from other connections, as a driver does:
            # one session's for all but the last, a one-off client's for that.
            if turn < 5:
                driver.end_transaction(identity, commit=turn != 4, timeout_s=30)
            else:
                end_transaction({"bootstrap.servers": bootstrap}, identity, commit=True, timeout_s=30)
            sockets.add(sum(1 for c in psutil.Process().net_connections("tcp")
                            if c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED))
        threads = [t for t in threading.enumerate() if t.name.startswith("kafka-producer-network-thread")]
        assert len(threads) == 1 and p.usable
        # The producer's and the session's connections throughout: none added per transactional.id or EndTxn.
        assert sockets == {min(sockets)}
        # An id's second transaction gets a fresh producer id/epoch from InitProducerId, never the old epoch.
        assert identities[3].producer_id == identities[0].producer_id
        assert identities[3].producer_epoch > identities[0].producer_epoch
    finally:
        p.close(5)
        driver.close()
    values = sorted(r.value or b"" for r in readback(topic))
    assert values == sorted(b"%d-%d" % (turn, i) for turn in (0, 1, 2, 3, 5) for i in range(10))


def test_switching_is_refused_with_records_unanswered_or_after_a_failure(
        bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    txn_id = f"tx-{uuid.uuid4().hex}"
    p = producer(bootstrap, **{"transactional.id": txn_id, "linger.ms": 60_000})
    rival = producer(bootstrap, **{"transactional.id": txn_id})
    try:
        p.init_transactions(30)
        p.begin_transaction()
        p.send(topic, b"queued")  # lingers: not sent yet
        with pytest.raises(IllegalStateError, match="flush"):
            p.switch_transactional_id("other")
        p.flush()
        rival.init_transactions(30)  # fences p
        fenced = p.send(topic, b"fenced")
        p.flush(30)
        with pytest.raises(ProducerFencedError):
            fenced.result(0)
        with pytest.raises(ProducerFencedError):
            p.switch_transactional_id("other")  # a failed producer never serves another id
        assert not p.usable
    finally:
        p.close(5)
        rival.close(5)


def test_rows_encoded_while_init_transactions_is_on_the_wire_commit_like_send_batch(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., Any]) -> None:
    # The Spark sink's task start: the coordinator round trips go out, the first rows are encoded meanwhile, and
    # are queued only after init_transactions and begin_transaction. They must land as send_batch's would: same
    # partitions (murmur2 of the key), committed, and only once.
    topic = topic_factory(partitions=3)
    keys = [b"k%d" % i for i in range(300)]
    table = pa.table({"key": keys, "value": [b"v%d" % i for i in range(300)]})
    with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
        p.start_init_transactions()
        prepared = p.prepare_batch(topic, table)
        assert prepared.records == 300
        with pytest.raises(IllegalStateError):
            p.send_prepared(prepared)  # no transaction yet: nothing may be queued
        p.init_transactions(30)  # waits for the initialization started above
        p.begin_transaction()
        result = p.send_prepared(prepared).result(30)
        with pytest.raises(ValueError, match="sent already"):
            p.send_prepared(prepared)
        p.commit_transaction(30)
    assert result.records == 300
    with producer(bootstrap) as plain:
        later = plain.send_batch(topic, table).result(30)  # where send_batch puts the same rows, after them
    got = readback(topic)
    first_later = {partition: stats.first_offset for (_, partition), stats in later.partitions.items()}
    prepared_rows = [r for r in got if r.offset < first_later.get(r.partition, 1 << 62)]
    sent_rows = [r for r in got if r.offset >= first_later.get(r.partition, 1 << 62)]
    rows = list(zip(keys, table.column("value").to_pylist(), strict=True))
    assert sorted((r.key, r.value) for r in prepared_rows) == sorted(rows)  # each row once, committed
    assert {r.key: r.partition for r in prepared_rows} == {r.key: r.partition for r in sent_rows}


def test_init_transactions_waits_for_the_started_initialization_even_once_it_is_over(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., Any]) -> None:
    # The coordinator may answer before the caller finished encoding: init_transactions() must then return (the
    # initialization it started is done), not try to start another one from READY. After a switch, the started
    # initialization belongs to the old id: the new id is initialized anew (its own producer id).
    topic = topic_factory(partitions=1)
    with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
        p.start_init_transactions()
        wait_for("the producer id", lambda: has_producer_id(p))
        p.init_transactions(30)
        first = p.transaction_identity()
        p.begin_transaction()
        p.send(topic, b"one")
        p.commit_transaction(30)
        with pytest.raises(IllegalStateError, match="READY"):
            p.start_init_transactions()  # a second initialization of the same id is refused, as init's
        p.switch_transactional_id(f"tx-{uuid.uuid4().hex}")
        p.start_init_transactions()
        wait_for("the second id's producer id", lambda: has_producer_id(p))
        second = p.transaction_identity()
        third_id = f"tx-{uuid.uuid4().hex}"
        p.switch_transactional_id(third_id)  # the second id's start, never waited for, goes with it
        p.init_transactions(30)
        third = p.transaction_identity()
        assert third.transactional_id == third_id and third.producer_id not in (first.producer_id,
                                                                                  second.producer_id)
        p.begin_transaction()
        p.send(topic, b"two")
        p.commit_transaction(30)
    assert [r.value for r in readback(topic)] == [b"one", b"two"]


def test_init_and_commit_that_timed_out_are_made_again_and_wait_for_their_first_round_trips(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., Any]) -> None:
    # The Java client's rule: "call it again to keep waiting" must hold even when the answer came in between.
    topic = topic_factory(partitions=1)
    with producer(bootstrap, **{"transactional.id": f"tx-{uuid.uuid4().hex}"}) as p:
        with pytest.raises(KafkaTimeoutError, match=r"init_transactions\(\) did not complete"):
            p.init_transactions(0)  # two round trips cannot be over at once
        with pytest.raises(IllegalStateError, match=r"init_transactions\(\) call"):
            p.begin_transaction()  # not before init_transactions() returned
        wait_for("the producer id", lambda: has_producer_id(p))
        p.init_transactions(30)  # the answer came while nobody waited: this call returns it
        first = p.transaction_identity()
        p.begin_transaction()
        p.send(topic, b"one")
        with pytest.raises(KafkaTimeoutError):
            p.commit_transaction(0)
        wait_for("the commit", lambda: [r.value for r in readback(topic)] == [b"one"])
        with pytest.raises(IllegalStateError, match=r"the last commit_transaction\(\) call ended"):
            p.abort_transaction(5)  # the commit must be made again first, as in Java
        p.commit_transaction(30)  # returns the commit that happened, does not start another
        p.begin_transaction()
        p.send(topic, b"two")
        p.commit_transaction(30)
        assert p.transaction_identity().producer_id == first.producer_id
    assert [r.value for r in readback(topic)] == [b"one", b"two"]


def has_producer_id(p: KafkaProducer) -> bool:
    try:
        return p.transaction_identity().producer_id >= 0
    except IllegalStateError:
        return False


def test_a_prepared_batch_goes_only_to_the_producer_that_encoded_it(
        bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    with producer(bootstrap) as a, producer(bootstrap, **{"compression.type": "none"}) as b:
        prepared = a.prepare_batch(topic, pa.table({"value": [b"x"]}))
        with pytest.raises(ValueError, match="another producer"):
            b.send_prepared(prepared)
        with pytest.raises(TypeError, match="takes what prepare_batch.. returned, got Table; .* send_batch"):
            a.send_prepared(pa.table({"value": [b"x"]}))  # an AttributeError before
        with pytest.raises(SerializationError, match="value"):
            a.prepare_batch(topic, pa.table({"other": [b"x"]}))  # send_batch's checks, before anything is queued
        assert a.send_prepared(prepared).result(30).records == 1
