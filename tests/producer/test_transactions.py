"""TransactionManager: the transition table, coordinator request flows (scripted answers) and sequence bookkeeping.

Then real-broker flows: commit / abort read back with confluent-kafka, fencing, ending from a fresh process.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa

import pytest

from spark_kafka_sink.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TransactionAbortableError,
)
from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.producer import end_transaction, fence_transactional_id
from spark_kafka_sink.producer.batch import ProducerBatch
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions import (
    TRANSITIONS,
    RequestKind,
    TransactionIdentity,
    TransactionManager,
    TxnRequest,
    TxnState,
)

TP = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def idempotent() -> TransactionManager:
    return TransactionManager(transactional_id=None, transaction_timeout_ms=60_000, retry_backoff_ms=100)


def transactional() -> TransactionManager:
    return TransactionManager(transactional_id="tx", transaction_timeout_ms=60_000, retry_backoff_ms=100)


def batch(tp: TopicPartition = TP, records: int = 2) -> ProducerBatch:
    b = ProducerBatch.for_records(tp, 16384, "none", 0)
    for i in range(records):
        assert b.try_append(0, None, b"v%d" % i, (), 0) is not None
    b.close()
    return b


def answer(tm: TransactionManager, req: TxnRequest, body: dict[str, Any], now: int = 0, version: int = 3) -> None:
    tm.request_sent(req)
    tm.handle_response(req, version, body, now)


def next_req(tm: TransactionManager, now: int = 0, incomplete: bool = False) -> TxnRequest:
    req = tm.next_request(now, incomplete)
    assert req is not None
    return req


def ready_transactional() -> TransactionManager:
    tm = transactional()
    fut = tm.initialize_transactions()
    find = next_req(tm)
    assert find.kind is RequestKind.FIND_COORDINATOR and not find.to_coordinator
    assert find.build(3) == {"key": "tx", "key_type": 1}
    assert find.build(4) == {"key_type": 1, "coordinator_keys": ["tx"]}
    answer(tm, find, {"error_code": 0, "node_id": 7, "host": "h", "port": 1})
    assert tm.coordinator is not None and tm.coordinator.node_id == 7
    init = next_req(tm)
    assert init.kind is RequestKind.INIT_PRODUCER_ID and init.to_coordinator
    assert init.build(4) == {"transactional_id": "tx", "transaction_timeout_ms": 60_000, "producer_id": -1,
                             "producer_epoch": -1}
    answer(tm, init, {"error_code": 0, "producer_id": 42, "producer_epoch": 3})
    assert fut.result(0) is None and tm.state is TxnState.READY
    return tm


def add_partitions(tm: TransactionManager, *tps: TopicPartition) -> None:
    for tp in tps:
        tm.maybe_add_partition(tp)
    req = next_req(tm)
    assert req.kind is RequestKind.ADD_PARTITIONS
    answer(tm, req, {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": tp.topic, "results_by_partition": [{"partition_index": tp.partition, "partition_error_code": 0}]}
        for tp in tps]})


# ------------------------------------------------------------------------------------------------ state table


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_transition_table_is_enforced_with_a_named_error(source: TxnState, target: TxnState) -> None:
    tm = transactional()
    tm._state = source
    if source in TRANSITIONS[target]:
        tm._transition(target)
        assert tm.state is target
    else:
        with pytest.raises(IllegalStateError) as info:
            tm._transition(target)
        assert source.name in str(info.value) and target.name in str(info.value)
        assert tm.state is source


def test_user_calls_out_of_order_raise_illegal_state() -> None:
    tm = transactional()
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm.begin_transaction()
    with pytest.raises(IllegalStateError, match="UNINITIALIZED"):
        tm.begin_commit()
    with pytest.raises(IllegalStateError, match="transactional.id"):
        idempotent().begin_transaction()
    tm = ready_transactional()
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        tm.fail_if_not_ready_for_send()


# ------------------------------------------------------------------------------------------------ flows


def test_idempotent_producer_fetches_an_id_from_any_broker() -> None:
    tm = idempotent()
    assert tm.should_stop_draining(batch())  # no producer id yet
    tm.maybe_request_producer_id()
    req = next_req(tm)
    assert req.kind is RequestKind.INIT_PRODUCER_ID and not req.to_coordinator
    assert req.build(2) == {"transactional_id": None, "transaction_timeout_ms": 2**31 - 1}
    answer(tm, req, {"error_code": 0, "producer_id": 9, "producer_epoch": 0})
    assert tm.state is TxnState.READY and tm.producer_id_and_epoch.producer_id == 9
    tm.maybe_request_producer_id()
    assert tm.next_request(0, False) is None


def test_commit_and_abort_flows() -> None:
    tm = ready_transactional()
    assert tm.transaction_identity() == TransactionIdentity("tx", 42, 3)
    tm.begin_transaction()
    tm.fail_if_not_ready_for_send()
    tm.maybe_add_partition(TP)
    assert not tm.is_send_to_partition_allowed(TP)
    add = next_req(tm)
    assert add.build(3)["v3_and_below_topics"] == [{"name": "t", "partitions": [0]}]
    assert add.max_version == 3
    answer(tm, add, {"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}]})
    assert tm.is_send_to_partition_allowed(TP)
    done = tm.begin_commit()
    assert tm.next_request(0, has_incomplete_batches=True) is None  # EndTxn waits for the batches
    end = next_req(tm)
    assert end.kind is RequestKind.END_TXN and end.max_version == 4
    assert end.build(4) == {"transactional_id": "tx", "producer_id": 42, "producer_epoch": 3, "committed": True}
    answer(tm, end, {"error_code": 0})
    assert done.result(0) is None and tm.state is TxnState.READY
    assert not tm.is_send_to_partition_allowed(TP)  # a new transaction adds partitions again

    tm.begin_transaction()
    add_partitions(tm, TP)
    aborted = tm.begin_abort()
    end = next_req(tm)
    assert end.build(4)["committed"] is False
    answer(tm, end, {"error_code": 0})
    assert aborted.result(0) is None and tm.state is TxnState.READY


def test_empty_transaction_sends_no_end_txn() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    done = tm.begin_commit()
    assert tm.next_request(0, False) is None
    assert done.result(0) is None and tm.state is TxnState.READY


def test_not_coordinator_finds_the_coordinator_again_and_concurrent_transactions_backs_off() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    done = tm.begin_commit()
    end = next_req(tm, now=1000)
    answer(tm, end, {"error_code": 16}, now=1000)  # NOT_COORDINATOR
    find = next_req(tm, now=1000)
    assert find.kind is RequestKind.FIND_COORDINATOR
    answer(tm, find, {"error_code": 0, "node_id": 8, "host": "h", "port": 2}, now=1000)
    assert tm.next_request(1050, False) is None  # EndTxn backs off retry.backoff.ms
    end = next_req(tm, now=1100)
    answer(tm, end, {"error_code": 51}, now=1100)  # CONCURRENT_TRANSACTIONS
    assert tm.next_request(1150, False) is None
    assert tm.next_request_delay_ms(1150) == 50
    end = next_req(tm, now=1200)
    answer(tm, end, {"error_code": 0}, now=1200)
    assert done.result(0) is None


def test_first_add_partitions_retries_concurrent_transactions_quickly() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    add = next_req(tm, now=0)
    answer(tm, add, {"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 51}]}]})
    assert tm.next_request(19, False) is None
    assert next_req(tm, now=20) is add


@pytest.mark.parametrize("code", [90, 47])
def test_fencing_is_fatal_and_named_on_every_later_call(code: int) -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    done = tm.begin_commit()
    answer(tm, next_req(tm), {"error_code": code})
    assert tm.state is TxnState.FATAL_ERROR
    with pytest.raises(ProducerFencedError, match="fenced"):
        done.result(0)
    for call in (tm.begin_transaction, tm.begin_abort, tm.fail_if_not_ready_for_send):
        with pytest.raises(ProducerFencedError):
            call()
    assert tm.should_stop_draining(batch())


def test_transaction_abortable_fails_the_commit_and_abort_recovers() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    done = tm.begin_commit()
    answer(tm, next_req(tm), {"error_code": 120})
    with pytest.raises(TransactionAbortableError):
        done.result(0)
    assert tm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(TransactionAbortableError):
        tm.fail_if_not_ready_for_send()
    aborted = tm.begin_abort()
    answer(tm, next_req(tm), {"error_code": 0})
    assert aborted.result(0) is None and tm.state is TxnState.READY


def test_failed_batch_makes_the_transaction_abortable_and_abort_bumps_the_epoch() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    b = batch()
    tm.stamp(b)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (42, 3, 0)
    tm.batch_failed(b, ConcurrentTransactionsError(), maybe_written=False)
    assert tm.state is TxnState.ABORTABLE_ERROR
    aborted = tm.begin_abort()
    end = next_req(tm)
    answer(tm, end, {"error_code": 0})
    assert tm.state is TxnState.INITIALIZING
    bump = next_req(tm)
    assert bump.kind is RequestKind.EPOCH_BUMP
    assert bump.build(3)["producer_id"] == 42 and bump.build(3)["producer_epoch"] == 3
    answer(tm, bump, {"error_code": 0, "producer_id": 42, "producer_epoch": 4})
    assert aborted.result(0) is None and tm.state is TxnState.READY
    tm.begin_transaction()
    add_partitions(tm, TP)
    b2 = batch()
    tm.stamp(b2)
    assert (b2.producer_epoch, b2.base_sequence) == (4, 0)  # sequences restart with the new epoch


def test_identity_pickles() -> None:
    ident = TransactionIdentity("tx", 1, 2)
    assert pickle.loads(pickle.dumps(ident)) == ident


# ------------------------------------------------------------------------------------------------ sequences


def ready_idempotent() -> TransactionManager:
    tm = idempotent()
    tm.maybe_request_producer_id()
    answer(tm, next_req(tm), {"error_code": 0, "producer_id": 5, "producer_epoch": 0})
    return tm


def assert_epoch_bump_requested(tm: TransactionManager, current: tuple[int, int]) -> None:
    """The sender's next round asks for a new epoch: InitProducerId carrying the ``current`` id and epoch."""
    tm.maybe_request_producer_id()
    assert tm.state is TxnState.INITIALIZING
    bump = next_req(tm)
    assert bump.kind is RequestKind.INIT_PRODUCER_ID
    assert (bump.build(3)["producer_id"], bump.build(3)["producer_epoch"]) == current


def assert_no_epoch_bump(tm: TransactionManager) -> None:
    """The sender's next round asks for nothing: the current epoch goes on."""
    tm.maybe_request_producer_id()
    assert tm.state is TxnState.READY and tm.next_request(0, False) is None


def test_sequences_are_assigned_at_drain_and_retries_go_in_order() -> None:
    tm = ready_idempotent()
    b1, b2, b3 = batch(records=2), batch(records=3), batch(records=1)
    tm.stamp(b1)
    assert tm.should_stop_draining(b2)  # one at a time until the broker acknowledged a first batch
    tm.batch_succeeded(b1, 0)
    b1 = batch(records=2)
    for b in (b1, b2, b3):
        assert not tm.should_stop_draining(b)
        tm.stamp(b)
    assert [b.base_sequence for b in (b1, b2, b3)] == [2, 4, 7]
    assert b1.payload()[53:57] == (2).to_bytes(4, "big")
    # b1 failed retriably and b2 came back first: b2 waits until b1 is through.
    assert tm.should_stop_draining(b2)
    assert not tm.should_stop_draining(b1)
    tm.batch_succeeded(b1, 100)
    assert not tm.should_stop_draining(b2)
    tm.stamp(b2)
    assert b2.base_sequence == 4  # a retry keeps its sequence: identical bytes


def test_out_of_order_behind_a_failed_batch_retries_without_bump() -> None:
    tm = ready_idempotent()
    b1, b2 = batch(), batch()
    tm.stamp(b1)
    tm.stamp(b2)
    assert tm.can_retry(b2, 45, -1)  # b1 is not acknowledged: b2 simply follows it
    assert_no_epoch_bump(tm)


def test_real_gap_bumps_the_epoch_and_renumbers_from_zero() -> None:
    tm = ready_idempotent()
    b1, b2, b3 = batch(records=2), batch(records=2), batch(records=2)
    for b in (b1, b2, b3):
        tm.stamp(b)
    tm.batch_succeeded(b1, 0)
    assert tm.can_retry(b2, 45, -1)  # b2 is the next sequence, yet out of order: a real gap
    tm.maybe_request_producer_id()
    assert tm.state is TxnState.INITIALIZING
    assert tm.should_stop_draining(b2)  # nothing is sent until the new id arrives
    bump = next_req(tm)
    assert bump.build(3) == {"transactional_id": None, "transaction_timeout_ms": 2**31 - 1, "producer_id": 5,
                             "producer_epoch": 0}
    answer(tm, bump, {"error_code": 0, "producer_id": 6, "producer_epoch": 0})
    b2.mark_in_flight(0)
    b2.mark_retrying(0, 0)
    tm.stamp(b2)
    assert (b2.producer_id, b2.base_sequence) == (6, 0)
    assert tm.can_retry(b3, 45, -1)  # answer to b3's old send: renumbered, so just retried
    assert_no_epoch_bump(tm)


def test_unknown_producer_id_for_idempotent_producer_bumps() -> None:
    tm = ready_idempotent()
    b1 = batch()
    tm.stamp(b1)
    assert tm.can_retry(b1, 59, -1)
    assert_epoch_bump_requested(tm, (5, 0))


def test_expired_batch_resolves_when_later_batches_succeeded() -> None:
    tm = ready_idempotent()
    b1, b2 = batch(), batch()
    tm.stamp(b1)
    tm.stamp(b2)
    tm.batch_failed(b1, KafkaError("expired"), maybe_written=True)
    assert tm.should_stop_draining(batch())  # unresolved: no new sequences
    tm.batch_succeeded(b2, 10)
    tm.maybe_resolve_sequences()
    assert not tm.should_stop_draining(batch())
    assert_no_epoch_bump(tm)


def test_expired_batch_without_later_success_bumps() -> None:
    tm = ready_idempotent()
    b1 = batch()
    tm.stamp(b1)
    tm.batch_failed(b1, KafkaError("expired"), maybe_written=True)
    tm.maybe_resolve_sequences()
    assert_epoch_bump_requested(tm, (5, 0))


def test_rejected_batch_bumps_idempotent_epoch() -> None:
    tm = ready_idempotent()
    b1 = batch()
    tm.stamp(b1)
    tm.batch_failed(b1, OutOfOrderSequenceNumberError(), maybe_written=False)
    assert tm.state is TxnState.READY  # an idempotent producer goes on: the sender fetches the new epoch
    assert_epoch_bump_requested(tm, (5, 0))


# ------------------------------------------------------------------------------------------------ real broker


def producer(bootstrap: str, **options: Any) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 20_000, **options})


@pytest.mark.broker
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


@pytest.mark.broker
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


@pytest.mark.broker
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


@pytest.mark.broker
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
