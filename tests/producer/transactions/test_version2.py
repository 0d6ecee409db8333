"""Transaction version 2 (KIP-890) in the TransactionManager, with scripted coordinator answers given as exact
wire bytes: no AddPartitionsToTxn, Produce v12, EndTxn v5 whose answer's producer id and epoch the producer adopts
(epoch exhaustion: a new producer id with epoch 0), TRANSACTION_ABORTABLE aborting, a retried EndTxn resending
the same epoch, and a transaction keeping the version it began with."""

from __future__ import annotations

import struct

from spark_kafka_sink.errors import TransactionAbortableError
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions import RequestKind, TransactionIdentity, TransactionManager, TxnState
from spark_kafka_sink.protocol.messages import END_TXN, decode_response_body, encode_request_body
from tests.producer.transactions.test_manager import add_partitions, answer, batch, next_req, ready_transactional, state

TP = TopicPartition("t", 0)

# EndTxn v5 request (flexible): compact string "tx" (length+1 = 3), producer id 42, epoch 3, committed 1, no tags.
END_TXN_V5_COMMIT_42_3 = (b"\x03tx" + struct.pack(">qh", 42, 3) + b"\x01" + b"\x00")


def end_txn_v5_answer(error_code: int, producer_id: int, epoch: int) -> bytes:
    """EndTxn v5 response body: throttle int32, error int16, producer id int64, epoch int16, no tagged fields."""
    return struct.pack(">ihqh", 0, error_code, producer_id, epoch) + b"\x00"


def tv2_ready() -> TransactionManager:
    tm = ready_transactional()  # producer id 42, epoch 3
    tm.observe_features({"metadata.version": 30, "transaction.version": 2})
    return tm


def test_a_tv2_transaction_adds_partitions_by_produce_and_adopts_the_bumped_epoch() -> None:
    tm = tv2_ready()
    tm.begin_transaction()
    assert tm.transaction_version == 2 and tm.produce_max_version == 12
    tm.maybe_add_partition(TP)
    assert tm.is_send_to_partition_allowed(TP)  # at once: the partition leader adds it
    done = tm.begin_commit()
    end = next_req(tm)  # no AddPartitionsToTxn before it
    assert end.kind is RequestKind.END_TXN and end.max_version == 5
    assert encode_request_body(END_TXN, 5, end.build(5)) == END_TXN_V5_COMMIT_42_3
    answer(tm, end, decode_response_body(END_TXN, 5, end_txn_v5_answer(0, 42, 4)), version=5)
    assert done.result(0) is None and tm.state is TxnState.READY
    assert (tm.producer_id_and_epoch.producer_id, tm.producer_id_and_epoch.epoch) == (42, 4)
    assert tm.transaction_identity() == TransactionIdentity("tx", 42, 4, 2, coordinator=7)
    assert not tm.is_send_to_partition_allowed(TP)  # the next transaction starts empty


def test_epoch_exhaustion_gives_a_new_producer_id_with_epoch_0_and_fresh_sequences() -> None:
    tm = tv2_ready()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    b = batch(TP)
    tm.stamp(b)
    assert (b.producer_id, b.producer_epoch, b.base_sequence) == (42, 3, 0)
    tm.batch_succeeded(b, 0)
    committed = tm.begin_commit()
    end = next_req(tm)
    answer(tm, end, decode_response_body(END_TXN, 5, end_txn_v5_answer(0, 77, 0)), version=5)
    assert (tm.producer_id_and_epoch.producer_id, tm.producer_id_and_epoch.epoch) == (77, 0)
    assert committed.result(0) is None
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    nxt = batch(TP)
    tm.stamp(nxt)
    assert (nxt.producer_id, nxt.producer_epoch, nxt.base_sequence) == (77, 0, 0)


def test_a_retried_end_txn_resends_the_epoch_it_began_with() -> None:
    tm = tv2_ready()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    done = tm.begin_commit()
    end = next_req(tm)
    tm.request_sent(end)
    tm.handle_request_failure(end, ConnectionError("answer lost"), 0)
    find = next_req(tm, now=1000)  # the coordinator is looked up again first
    answer(tm, find, {"error_code": 0, "node_id": 7, "host": "h", "port": 1})
    again = next_req(tm, now=1000)
    assert again is end and encode_request_body(END_TXN, 5, again.build(5)) == END_TXN_V5_COMMIT_42_3
    answer(tm, again, decode_response_body(END_TXN, 5, end_txn_v5_answer(0, 42, 4)), version=5)
    assert done.result(0) is None and tm.producer_id_and_epoch.epoch == 4


def test_transaction_abortable_aborts_with_end_txn_v5_and_the_next_transaction_goes_on() -> None:
    tm = tv2_ready()
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    b = batch(TP)
    tm.stamp(b)
    tm.batch_failed(b, TransactionAbortableError("leader says abort"), maybe_written=False)
    assert tm.state is TxnState.ABORTABLE_ERROR
    aborted = tm.begin_abort()
    end = next_req(tm)
    assert end.build(5)["committed"] is False and end.max_version == 5
    answer(tm, end, decode_response_body(END_TXN, 5, end_txn_v5_answer(0, 42, 4)), version=5)
    # EndTxn v5 bumped the epoch already: no InitProducerId follows, the sequences start afresh.
    assert aborted.result(0) is None and state(tm) is TxnState.READY
    assert tm.next_request(0, False) is None
    tm.begin_transaction()
    tm.maybe_add_partition(TP)
    nxt = batch(TP)
    tm.stamp(nxt)
    assert (nxt.producer_id, nxt.producer_epoch, nxt.base_sequence) == (42, 4, 0)


def test_a_transaction_keeps_the_version_it_began_with() -> None:
    tm = ready_transactional()
    tm.observe_features({"transaction.version": 1})
    tm.begin_transaction()
    tm.observe_features({"transaction.version": 2})  # finalized mid-transaction: this one stays on TV1
    assert tm.transaction_version == 1 and tm.produce_max_version == 11
    add_partitions(tm, TP)
    committed = tm.begin_commit()
    end = next_req(tm)
    assert end.max_version == 4
    answer(tm, end, {"error_code": 0}, version=4)
    assert committed.result(0) is None
    assert tm.producer_id_and_epoch.epoch == 3  # TV1 never bumps at the end
    tm.begin_transaction()
    assert tm.transaction_version == 2
    assert tm.transaction_identity().transaction_version == 2
