"""TransactionManager through its public calls, with scripted coordinator answers: the transition table, request
flows and sequence bookkeeping (the real-broker flows are in test_transactions_broker.py)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    KafkaError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortableError,
)
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


def add_partitions(tm: TransactionManager, *tps: TopicPartition, code: int = 0) -> None:
    """AddPartitionsToTxn for ``tps``, answered with ``code`` for each."""
    for tp in tps:
        tm.maybe_add_partition(tp)
    req = next_req(tm)
    assert req.kind is RequestKind.ADD_PARTITIONS
    answer(tm, req, {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
        {"name": tp.topic, "results_by_partition": [{"partition_index": tp.partition, "partition_error_code": code}]}
        for tp in tps]})


def state(tm: TransactionManager) -> TxnState:
    """``tm.state`` read afresh (mypy would otherwise keep an earlier ``is`` narrowing of the property)."""
    return tm.state


# ------------------------------------------------------------------------------------------------ state table


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(TxnState))
def test_check_transition_enforces_the_table_with_a_named_error(source: TxnState, target: TxnState) -> None:
    if source in TRANSITIONS[target]:
        source.check_transition(target, "tx")
    else:
        with pytest.raises(IllegalStateError) as info:
            source.check_transition(target, "tx")
        assert info.value.from_state is source and info.value.to_state is target
        assert source.name in str(info.value) and target.name in str(info.value) and "tx" in str(info.value)


_S = TxnState


def reach(source: TxnState) -> tuple[TransactionManager, Future[None] | None]:
    """A transactional manager brought to ``source`` through public calls and scripted answers, with the future
    of the user call still running there, if any."""
    if source is _S.UNINITIALIZED:
        return transactional(), None
    if source is _S.INITIALIZING:
        tm = transactional()
        return tm, tm.initialize_transactions()
    tm = ready_transactional()
    if source is _S.READY:
        return tm, None
    tm.begin_transaction()
    if source is _S.COMMITTING_TRANSACTION:
        add_partitions(tm, TP)
        return tm, tm.begin_commit()
    if source is _S.ABORTING_TRANSACTION:
        add_partitions(tm, TP)
        return tm, tm.begin_abort()
    if source is _S.ABORTABLE_ERROR:
        add_partitions(tm, TP, code=TopicAuthorizationFailedError.code)
    elif source is _S.FATAL_ERROR:
        tm.transition_to_fatal_error(KafkaError("first fatal error"))
    return tm, None


# The public call that tries to move a transactional manager to each target state (READY: what EndTxn's answer
# calls; ABORTABLE_ERROR: what a failed batch or coordinator answer calls; UNINITIALIZED: taking another
# transactional.id).
CALLS: dict[TxnState, Callable[[TransactionManager], object]] = {
    _S.UNINITIALIZED: lambda tm: tm.switch_transactional_id("tx-other"),
    _S.INITIALIZING: lambda tm: tm.initialize_transactions(),
    _S.IN_TRANSACTION: lambda tm: tm.begin_transaction(),
    _S.COMMITTING_TRANSACTION: lambda tm: tm.begin_commit(),
    _S.ABORTING_TRANSACTION: lambda tm: tm.begin_abort(),
    _S.READY: lambda tm: tm.complete_transaction(None),
    _S.ABORTABLE_ERROR: lambda tm: tm.transition_to_abortable_error(KafkaError("abortable")),
    _S.FATAL_ERROR: lambda tm: tm.transition_to_fatal_error(KafkaError("fatal")),
}

# What each call does in each state. "moves": the state becomes the target; "illegal": IllegalStateError naming
# both states (TRANSITIONS forbids the move). The rest are answers given before the table is consulted: "recall"
# returns the future of the same call still running, "busy": another call is still running, "failed" re-raises
# the abortable or fatal error, "init first": begin before init, "ignored": nothing changes.
_INIT, _BEGIN, _COMMIT, _ABORT = (_S.INITIALIZING, _S.IN_TRANSACTION, _S.COMMITTING_TRANSACTION,
                                  _S.ABORTING_TRANSACTION)
_READY, _ABORTABLE, _FATAL, _SWITCH = _S.READY, _S.ABORTABLE_ERROR, _S.FATAL_ERROR, _S.UNINITIALIZED
OUTCOMES: dict[TxnState, dict[TxnState, str]] = {
    _S.UNINITIALIZED: {_INIT: "moves", _BEGIN: "init first", _COMMIT: "illegal", _ABORT: "illegal",
                       _READY: "illegal", _ABORTABLE: "ignored", _FATAL: "moves", _SWITCH: "illegal"},
    _S.INITIALIZING: {_INIT: "recall", _BEGIN: "busy", _COMMIT: "busy", _ABORT: "busy",
                      _READY: "moves", _ABORTABLE: "ignored", _FATAL: "moves", _SWITCH: "busy"},
    _S.READY: {_INIT: "illegal", _BEGIN: "moves", _COMMIT: "illegal", _ABORT: "illegal",
               _READY: "illegal", _ABORTABLE: "ignored", _FATAL: "moves", _SWITCH: "moves"},
    _S.IN_TRANSACTION: {_INIT: "illegal", _BEGIN: "illegal", _COMMIT: "moves", _ABORT: "moves",
                        _READY: "illegal", _ABORTABLE: "moves", _FATAL: "moves", _SWITCH: "moves"},
    _S.COMMITTING_TRANSACTION: {_INIT: "busy", _BEGIN: "busy", _COMMIT: "recall", _ABORT: "busy",
                                _READY: "moves", _ABORTABLE: "moves", _FATAL: "moves", _SWITCH: "busy"},
    _S.ABORTING_TRANSACTION: {_INIT: "busy", _BEGIN: "busy", _COMMIT: "busy", _ABORT: "recall",
                              _READY: "moves", _ABORTABLE: "ignored", _FATAL: "moves", _SWITCH: "busy"},
    _S.ABORTABLE_ERROR: {_INIT: "failed", _BEGIN: "failed", _COMMIT: "failed", _ABORT: "moves",
                         _READY: "illegal", _ABORTABLE: "moves", _FATAL: "moves", _SWITCH: "failed"},
    _S.FATAL_ERROR: {_INIT: "failed", _BEGIN: "failed", _COMMIT: "failed", _ABORT: "failed",
                     _READY: "illegal", _ABORTABLE: "ignored", _FATAL: "moves", _SWITCH: "failed"},
}
RUNNING_CALL = {_INIT: r"init_transactions\(\)", _COMMIT: r"commit_transaction\(\)", _ABORT: r"abort_transaction\(\)"}
USER_CALLS = (_INIT, _BEGIN, _COMMIT, _ABORT)
WHAT_TO_DO = {(_S.UNINITIALIZED, _COMMIT): "call init_transactions() first, then begin_transaction()",
              (_S.UNINITIALIZED, _ABORT): "call init_transactions() first, then begin_transaction()",
              (_S.READY, _COMMIT): "no transaction is open: call begin_transaction() first",
              (_S.READY, _ABORT): "no transaction is open: call begin_transaction() first",
              (_S.READY, _INIT): "init_transactions() was already called",
              (_S.IN_TRANSACTION, _INIT): "init_transactions() was already called",
              (_S.IN_TRANSACTION, _BEGIN): "a transaction is already open: commit_transaction() or abort_transaction()"}
# Moves the table allows that no user call makes: the epoch bump after an abort (tested by the flows below).
INTERNAL_MOVES = {(_S.ABORTING_TRANSACTION, _S.INITIALIZING)}


def test_the_outcomes_agree_with_the_transition_table() -> None:
    assert set(OUTCOMES) == set(TxnState) and all(set(row) == set(CALLS) for row in OUTCOMES.values())
    for source, row in OUTCOMES.items():
        for target, outcome in row.items():
            allowed = source in TRANSITIONS[target]
            if outcome == "moves":
                assert allowed, (source, target)
            elif (source, target) not in INTERNAL_MOVES:
                assert not allowed, (source, target, outcome)


@pytest.mark.parametrize("source", list(TxnState))
@pytest.mark.parametrize("target", list(CALLS))
def test_public_calls_follow_the_transition_table(source: TxnState, target: TxnState) -> None:
    tm, running = reach(source)
    assert state(tm) is source
    error_before = tm.last_error
    call, outcome = CALLS[target], OUTCOMES[source][target]
    if outcome == "moves":
        call(tm)
        assert state(tm) is target
        if source is _S.FATAL_ERROR:
            assert tm.last_error is error_before  # the first fatal error is the one reported
        return
    if outcome == "illegal":
        with pytest.raises(IllegalStateError) as info:
            call(tm)
        assert info.value.from_state is source and info.value.to_state is target
        assert source.name in str(info.value) and target.name in str(info.value)
        if target in USER_CALLS:  # a user's own call out of order: the error says what to call instead
            assert WHAT_TO_DO[(source, target)] in str(info.value), str(info.value)
    elif outcome == "recall":
        assert running is not None and call(tm) is running
    elif outcome == "busy":
        with pytest.raises(IllegalStateError, match=rf"the last {RUNNING_CALL[source]} call is still in progress"):
            call(tm)
    elif outcome == "failed":
        assert error_before is not None
        with pytest.raises(type(error_before)) as failed:
            call(tm)
        assert failed.value is not error_before and str(failed.value) == str(error_before)  # a fresh copy
    elif outcome == "init first":
        with pytest.raises(IllegalStateError, match=r"call init_transactions\(\) before begin_transaction\(\)"):
            call(tm)
    else:
        assert outcome == "ignored"
        call(tm)
    assert state(tm) is source
    assert tm.last_error is error_before


def test_a_call_made_again_gets_its_first_result_until_a_caller_waited_for_it() -> None:
    # Java's rule: a call that timed out (or was only started) is answered later; made again, it returns that
    # answer instead of starting over (which READY would refuse), and every other call is refused until then.
    tm = transactional()
    started = tm.initialize_transactions()
    with pytest.raises(TimeoutError):
        started.result(0)  # the caller gave up waiting: not acknowledged
    answer(tm, next_req(tm), {"error_code": 0, "node_id": 7, "host": "h", "port": 1})
    answer(tm, next_req(tm), {"error_code": 0, "producer_id": 42, "producer_epoch": 3})
    assert tm.state is TxnState.READY and started.done()
    with pytest.raises(IllegalStateError, match=r"the last init_transactions\(\) call ended, but no caller has "):
        tm.begin_transaction()
    again = tm.initialize_transactions()
    assert again is started and again.result(0) is None
    with pytest.raises(IllegalStateError, match="READY"):
        tm.initialize_transactions()  # waited for: a new call starts afresh, and READY refuses it
    tm.begin_transaction()
    add_partitions(tm, TP)
    committing = tm.begin_commit()
    answer(tm, next_req(tm), {"error_code": 0})
    assert tm.state is TxnState.READY
    with pytest.raises(IllegalStateError, match=r"commit_transaction\(\) call ended"):
        tm.begin_abort()
    assert tm.begin_commit() is committing
    with pytest.raises(IllegalStateError, match=r"commit_transaction\(\)"):
        tm.begin_transaction()
    assert committing.exception(0) is None  # exception() waits as well as result()
    tm.begin_transaction()
    assert state(tm) is TxnState.IN_TRANSACTION


def test_a_call_that_failed_is_acknowledged_by_the_wait_that_raised_it() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    committing = tm.begin_commit()
    answer(tm, next_req(tm), {"error_code": TransactionAbortableError.code})
    with pytest.raises(TransactionAbortableError):
        committing.result(0)
    assert tm.state is TxnState.ABORTABLE_ERROR
    aborting = tm.begin_abort()  # the failed commit was seen: the abort is a new call
    assert aborting is not committing


def test_switching_ids_drops_a_finished_call_of_the_old_id_but_not_a_running_one() -> None:
    tm = transactional()
    tm.initialize_transactions()
    with pytest.raises(IllegalStateError, match=r"init_transactions\(\) call is still in progress"):
        tm.switch_transactional_id("tx-2")
    answer(tm, next_req(tm), {"error_code": 0, "node_id": 7, "host": "h", "port": 1})
    answer(tm, next_req(tm), {"error_code": 0, "producer_id": 42, "producer_epoch": 3})
    tm.switch_transactional_id("tx-2")  # the old id's finished start, never waited for, goes with it
    fresh = tm.initialize_transactions()
    assert not fresh.done() and tm.state is TxnState.INITIALIZING


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
    assert tm.transaction_identity() == TransactionIdentity("tx", 42, 3, coordinator=7)
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


def test_a_producer_takes_another_transactional_id_once_its_records_are_answered() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    add_partitions(tm, TP)
    sent = batch()
    tm.stamp(sent)
    with pytest.raises(IllegalStateError, match="batches without an answer"):
        tm.switch_transactional_id("tx-2")
    assert tm.state is TxnState.IN_TRANSACTION
    assert tm.transaction_identity() == TransactionIdentity("tx", 42, 3, coordinator=7)  # the node of the answer
    tm.batch_succeeded(sent, 0)
    tm.switch_transactional_id("tx-2")  # the open transaction of "tx" is left to whoever holds its identity
    assert state(tm) is TxnState.UNINITIALIZED and tm.transactional_id == "tx-2"
    assert not tm.producer_id_and_epoch.is_valid and not tm.is_send_to_partition_allowed(TP)
    with pytest.raises(IllegalStateError, match="init_transactions"):
        tm.begin_transaction()

    init = tm.initialize_transactions()
    find = next_req(tm)  # a new id: its coordinator is looked up
    assert find.build(4) == {"key_type": 1, "coordinator_keys": ["tx-2"]}
    answer(tm, find, {"error_code": 0, "node_id": 8, "host": "h", "port": 2})
    pid = next_req(tm)
    assert pid.kind is RequestKind.INIT_PRODUCER_ID and pid.build(4)["transactional_id"] == "tx-2"
    assert pid.build(4)["producer_id"] == -1  # a fresh start, not a bump of "tx"'s id
    answer(tm, pid, {"error_code": 0, "producer_id": 50, "producer_epoch": 0})
    assert init.result(0) is None and tm.transaction_identity() == TransactionIdentity("tx-2", 50, 0, 1, 8)
    tm.begin_transaction()
    second = batch()
    assert tm.should_stop_draining(second)  # its partition must join the new transaction first
    add_partitions(tm, TP)
    tm.stamp(second)
    assert (second.producer_id, second.producer_epoch, second.base_sequence) == (50, 0, 0)  # sequences restart
    tm.batch_succeeded(second, 1)

    tm.switch_transactional_id("tx")  # back to an id seen before: its coordinator is remembered
    tm.initialize_transactions()
    pid = next_req(tm)
    assert pid.kind is RequestKind.INIT_PRODUCER_ID and pid.build(4)["transactional_id"] == "tx"
    assert tm.coordinator is not None and tm.coordinator.node_id == 7


def test_a_coordinator_that_moved_is_looked_up_again_after_a_switch() -> None:
    tm = ready_transactional()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    add = next_req(tm)
    answer(tm, add, {"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 16}]}]})  # moved
    find = next_req(tm, now=1000)
    assert find.kind is RequestKind.FIND_COORDINATOR
    answer(tm, find, {"error_code": 0, "node_id": 9, "host": "h", "port": 3}, now=1000)
    answer(tm, next_req(tm, now=1000), {"results_by_topic_v3_and_below": [
        {"name": "t", "results_by_partition": [{"partition_index": 0, "partition_error_code": 0}]}]})
    tm.switch_transactional_id("tx-2")
    assert tm.coordinator is None  # "tx-2" was never looked up
    tm.initialize_transactions()
    answer(tm, next_req(tm), {"error_code": 0, "node_id": 8, "host": "h", "port": 2})
    answer(tm, next_req(tm), {"error_code": 0, "producer_id": 50, "producer_epoch": 0})
    tm.switch_transactional_id("tx")
    assert tm.coordinator is not None and tm.coordinator.node_id == 9  # where "tx" was found last, not node 7


def test_init_producer_id_retries_concurrent_transactions_quickly_then_backs_off() -> None:
    """The id's last transaction is still completing (the driver just ended it): 20, 40, 80 ms, then
    retry.backoff.ms (100 ms)."""
    tm = transactional()
    tm.initialize_transactions()
    answer(tm, next_req(tm), {"error_code": 0, "node_id": 7, "host": "h", "port": 1})
    init = next_req(tm, now=0)
    for now, wait in ((0, 20), (20, 40), (60, 80), (140, 100), (240, 100)):
        answer(tm, init, {"error_code": 51, "producer_id": -1, "producer_epoch": -1}, now=now)  # CONCURRENT_TXNS
        assert tm.next_request(now + wait - 1, False) is None
        assert next_req(tm, now=now + wait) is init
    answer(tm, init, {"error_code": 0, "producer_id": 42, "producer_epoch": 1}, now=340)
    assert state(tm) is TxnState.READY


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
    assert aborted.result(0) is None and state(tm) is TxnState.READY


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
    assert state(tm) is TxnState.INITIALIZING
    bump = next_req(tm)
    assert bump.kind is RequestKind.EPOCH_BUMP
    assert bump.build(3)["producer_id"] == 42 and bump.build(3)["producer_epoch"] == 3
    answer(tm, bump, {"error_code": 0, "producer_id": 42, "producer_epoch": 4})
    assert aborted.result(0) is None and state(tm) is TxnState.READY
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


def test_a_gap_found_while_the_new_epoch_is_on_its_way_joins_that_bump() -> None:
    # Two partitions' batches expire 50 ms apart while the broker is paused: the first one's InitProducerId is
    # already out when the second asks. The one answer renumbers both partitions; a second InitProducerId would only
    # throw that producer id away (seen on a real broker: ids 0 -> 1 -> 2 for one pause).
    tm = ready_idempotent()
    b0, b1 = batch(TP), batch(TP1)
    tm.stamp(b0)
    tm.stamp(b1)
    tm.batch_failed(b0, KafkaError("expired"), maybe_written=True)
    tm.maybe_resolve_sequences()
    tm.maybe_request_producer_id()
    bump = next_req(tm)
    tm.request_sent(bump)
    tm.batch_failed(b1, KafkaError("expired"), maybe_written=True)
    tm.maybe_resolve_sequences()
    tm.handle_response(bump, 3, {"error_code": 0, "producer_id": 6, "producer_epoch": 0}, 0)
    assert_no_epoch_bump(tm)
    for b in (batch(TP), batch(TP1)):
        assert not tm.should_stop_draining(b)
        tm.stamp(b)
        assert (b.producer_id, b.base_sequence) == (6, 0)


def test_rejected_batch_bumps_idempotent_epoch() -> None:
    tm = ready_idempotent()
    b1 = batch()
    tm.stamp(b1)
    tm.batch_failed(b1, OutOfOrderSequenceNumberError(), maybe_written=False)
    assert tm.state is TxnState.READY  # an idempotent producer goes on: the sender fetches the new epoch
    assert_epoch_bump_requested(tm, (5, 0))
