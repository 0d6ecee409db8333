"""send_offsets_to_transaction in the TransactionManager, with scripted answers: AddOffsetsToTxn then TxnOffsetCommit
(transaction version 1), TxnOffsetCommit alone (version 2), each to its coordinator, and how their answers are
handled (the real-broker flows are in test_offsets_broker.py)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from spark_kafka_sink.errors import (
    CoordinatorLoadInProgressError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,
    IllegalStateError,
    NotCoordinatorError,
    ProducerFencedError,
    SerializationError,
    UnknownMemberIdError,
)
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    RequestKind,
    TransactionManager,
    TxnRequest,
    TxnState,
    offsets_to_commit,
)
from spark_kafka_sink.protocol.messages import (
    ADD_OFFSETS_TO_TXN,
    END_TXN,
    TXN_OFFSET_COMMIT,
    decode_request_body,
    encode_request_body,
)
from tests.producer.transactions.test_manager import answer, next_req, ready_transactional, state

GROUP = ConsumerGroupMetadata("g", generation_id=3, member_id="m-1", group_instance_id=None)
OFFSETS = {TopicPartition("in", 0): OffsetAndMetadata(10), TopicPartition("in", 1): OffsetAndMetadata(7, "note", 2)}
COMMIT_BODY_V3 = {
    "transactional_id": "tx", "group_id": "g", "producer_id": 42, "producer_epoch": 3, "generation_id": 3,
    "member_id": "m-1", "group_instance_id": None, "topics": [{"name": "in", "partitions": [
        {"partition_index": 0, "committed_offset": 10, "committed_leader_epoch": -1, "committed_metadata": ""},
        {"partition_index": 1, "committed_offset": 7, "committed_leader_epoch": 2, "committed_metadata": "note"}]}]}


def in_transaction(transaction_version: int = 1) -> TransactionManager:
    tm = ready_transactional()
    if transaction_version >= 2:
        tm.observe_features({"transaction.version": 2})
    tm.begin_transaction()
    return tm


def find_group_coordinator(tm: TransactionManager, node_id: int = 9) -> None:
    find = next_req(tm)
    assert find.kind is RequestKind.FIND_COORDINATOR and not find.to_coordinator and find.group_id == "g"
    assert find.build(3) == {"key": "g", "key_type": 0}
    assert find.build(4) == {"key_type": 0, "coordinator_keys": ["g"]}
    answer(tm, find, {"error_code": 0, "node_id": node_id, "host": "h", "port": 2})


def commit_answer(codes: dict[int, int]) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "topics": [{"name": "in", "partitions": [
        {"partition_index": p, "error_code": code} for p, code in codes.items()]}]}


def offsets_request(tm: TransactionManager) -> TxnRequest:
    """TV1: AddOffsetsToTxn answered NONE, the group's coordinator found: the TxnOffsetCommit that follows."""
    add = next_req(tm)
    assert add.kind is RequestKind.ADD_OFFSETS and add.api is ADD_OFFSETS_TO_TXN
    assert add.to_coordinator and add.group_id is None and tm.coordinator_of(add) == tm.coordinator
    assert add.build(3) == {"transactional_id": "tx", "producer_id": 42, "producer_epoch": 3, "group_id": "g"}
    answer(tm, add, {"throttle_time_ms": 0, "error_code": 0})
    find_group_coordinator(tm)
    commit = next_req(tm)
    assert commit.api is TXN_OFFSET_COMMIT and commit.to_coordinator and commit.group_id == "g"
    return commit


def test_tv1_adds_the_group_then_commits_its_offsets_at_the_group_coordinator_then_ends_the_transaction() -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    commit = offsets_request(tm)
    coordinator = tm.coordinator_of(commit)
    assert coordinator is not None and coordinator.node_id == 9  # the group's, not the transaction's (7)
    assert commit.max_version == 4  # v5 is the TV2 form
    assert commit.build(3) == COMMIT_BODY_V3
    assert not result.done()
    answer(tm, commit, commit_answer({0: 0, 1: 0}))
    assert result.result(0) is None
    # Nothing was produced, but the offsets are in the transaction: EndTxn is sent.
    committing = tm.begin_commit()
    end = next_req(tm)
    assert end.api is END_TXN and end.build(4)["committed"] is True
    answer(tm, end, {"throttle_time_ms": 0, "error_code": 0})
    assert committing.result(0) is None and tm.state is TxnState.READY


def test_tv2_sends_txn_offset_commit_v5_alone() -> None:
    tm = in_transaction(transaction_version=2)
    result = tm.send_offsets(OFFSETS, GROUP)
    find_group_coordinator(tm)
    commit = next_req(tm)
    assert commit.api is TXN_OFFSET_COMMIT and commit.max_version == 5
    answer(tm, commit, commit_answer({0: 0, 1: 0}), version=5)
    assert result.result(0) is None
    tm.begin_commit()
    end = next_req(tm)
    assert end.api is END_TXN and end.max_version == 5


def test_the_group_coordinator_is_remembered_and_the_transaction_coordinator_kept() -> None:
    tm = in_transaction()
    tm.send_offsets(OFFSETS, GROUP)
    answer(tm, offsets_request(tm), commit_answer({0: 0, 1: 0}))
    tm.send_offsets({TopicPartition("in", 0): OffsetAndMetadata(11)}, GROUP)
    add = next_req(tm)
    answer(tm, add, {"throttle_time_ms": 0, "error_code": 0})
    commit = next_req(tm)  # no second FindCoordinator
    assert commit.api is TXN_OFFSET_COMMIT
    assert tm.coordinator is not None and tm.coordinator.node_id == 7


def test_partitions_answered_with_a_retriable_error_are_sent_again_alone() -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    commit = offsets_request(tm)
    answer(tm, commit, commit_answer({0: 0, 1: CoordinatorLoadInProgressError.code}), now=1_000)
    assert not result.done()
    assert tm.next_request(1_050, False) is None  # retry.backoff.ms (100)
    again = next_req(tm, now=1_100)
    assert again is commit
    assert [p["partition_index"] for p in again.build(3)["topics"][0]["partitions"]] == [1]
    answer(tm, again, commit_answer({1: 0}))
    assert result.result(0) is None


def test_not_coordinator_looks_the_group_coordinator_up_again() -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    commit = offsets_request(tm)
    answer(tm, commit, commit_answer({0: NotCoordinatorError.code, 1: NotCoordinatorError.code}), now=1_000)
    assert tm.coordinator_of(commit) is None
    assert tm.coordinator is not None  # the transaction's coordinator stays
    find_group_coordinator(tm, node_id=8)
    again = next_req(tm, now=1_100)
    coordinator = tm.coordinator_of(again)
    assert again is commit and coordinator is not None and coordinator.node_id == 8
    answer(tm, again, commit_answer({0: 0, 1: 0}))
    assert result.result(0) is None


@pytest.mark.parametrize("code", [UnknownMemberIdError.code, IllegalGenerationError.code,
                                  GroupAuthorizationFailedError.code])
def test_a_consumer_no_longer_in_the_group_makes_the_transaction_abortable(code: int) -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    answer(tm, offsets_request(tm), commit_answer({0: 0, 1: code}))
    error = result.exception(0)
    assert error is not None and getattr(error, "code", None) == code and "'g'" in str(error)
    if code != GroupAuthorizationFailedError.code:
        assert "member 'm-1', generation 3" in str(error) and "Abort the transaction" in str(error)
    assert tm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(type(error)):
        tm.begin_commit()
    aborting = tm.begin_abort()
    end = next_req(tm)
    assert end.build(4)["committed"] is False
    answer(tm, end, {"throttle_time_ms": 0, "error_code": 0})
    assert aborting.result(0) is None and state(tm) is TxnState.READY


def test_a_fenced_producer_fails_for_good() -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    answer(tm, offsets_request(tm), commit_answer({0: ProducerFencedError.code, 1: 0}))
    assert isinstance(result.exception(0), ProducerFencedError)
    assert tm.state is TxnState.FATAL_ERROR


def test_add_offsets_refused_for_the_group_makes_the_transaction_abortable() -> None:
    tm = in_transaction()
    result = tm.send_offsets(OFFSETS, GROUP)
    add = next_req(tm)
    answer(tm, add, {"throttle_time_ms": 0, "error_code": GroupAuthorizationFailedError.code})
    assert isinstance(result.exception(0), GroupAuthorizationFailedError)
    assert tm.state is TxnState.ABORTABLE_ERROR


def test_a_group_the_producer_may_not_see_makes_the_transaction_abortable() -> None:
    tm = in_transaction(transaction_version=2)
    result = tm.send_offsets(OFFSETS, GROUP)
    find = next_req(tm)
    assert find.group_id == "g"
    answer(tm, find, {"error_code": GroupAuthorizationFailedError.code, "node_id": -1, "host": "", "port": -1})
    assert tm.state is TxnState.ABORTABLE_ERROR
    assert tm.next_request(0, False) is None  # the TxnOffsetCommit is dropped, failing the call
    assert isinstance(result.exception(0), GroupAuthorizationFailedError)


def test_only_inside_a_transaction() -> None:
    tm = ready_transactional()
    with pytest.raises(IllegalStateError, match=r"send_offsets_to_transaction\(\) needs an open transaction"):
        tm.send_offsets(OFFSETS, GROUP)
    idempotent = TransactionManager(transactional_id=None, transaction_timeout_ms=60_000, retry_backoff_ms=100)
    with pytest.raises(IllegalStateError, match="transactional.id"):
        idempotent.send_offsets(OFFSETS, GROUP)


def test_offsets_are_taken_as_java_takes_them_and_bad_ones_refused_by_name() -> None:
    # numpy integers are taken, as send() takes them (typed as int, like the rest of the API)
    numpy_keyed = {("in", np.int32(2)): np.int64(8), TopicPartition("in", 0): OffsetAndMetadata(1, "m")}
    assert offsets_to_commit(numpy_keyed) == {  # type: ignore[arg-type]
        TopicPartition("in", 2): OffsetAndMetadata(8), TopicPartition("in", 0): OffsetAndMetadata(1, "m")}
    assert type(OffsetAndMetadata(np.int64(8)).offset) is int  # type: ignore[arg-type]
    for bad in (-1, 1.5, True, "3"):
        with pytest.raises(SerializationError, match="offset must be an int >= 0"):
            OffsetAndMetadata(bad)  # type: ignore[arg-type]
    for pair in (("", 0), ("in", -1), ("in", True), (b"in", 0)):
        with pytest.raises(SerializationError, match=r"is not a \(topic, partition\) pair"):
            offsets_to_commit({pair: 1})  # type: ignore[dict-item]
    with pytest.raises(SerializationError, match="group_id must be a non-empty string"):
        ConsumerGroupMetadata("")


def test_the_requests_encode_to_the_bytes_kafka_defines() -> None:
    """AddOffsetsToTxn v3 and TxnOffsetCommit v3 bodies (both flexible) as the sender builds them, byte for byte."""
    tm = in_transaction()
    tm.send_offsets(OFFSETS, GROUP)
    add = next_req(tm)
    add_bytes = encode_request_body(ADD_OFFSETS_TO_TXN, 3, add.build(3))
    assert add_bytes.hex() == (
        "037478"                                   # compact string "tx"
        "000000000000002a" "0003"                  # producer id 42, epoch 3
        "0267" "00")                               # compact string "g", no tagged fields
    answer(tm, add, {"throttle_time_ms": 0, "error_code": 0})
    find_group_coordinator(tm)
    commit = next_req(tm)
    commit_bytes = encode_request_body(TXN_OFFSET_COMMIT, 3, commit.build(3))
    assert commit_bytes.hex() == (
        "037478" "0267"                            # transactional id "tx", group "g"
        "000000000000002a" "0003"                  # producer id 42, epoch 3
        "00000003" "046d2d31" "00"                 # generation 3, member "m-1", group instance id null
        "02" "03696e"                              # 1 topic: "in"
        "03"                                       # 2 partitions
        "00000000" "000000000000000a" "ffffffff" "01" "00"          # 0: offset 10, epoch -1, metadata "", no tags
        "00000001" "0000000000000007" "00000002" "056e6f7465" "00"  # 1: offset 7, leader epoch 2, "note"
        "00"                                       # the topic's tagged fields
        "00")                                      # the request's tagged fields
    assert decode_request_body(TXN_OFFSET_COMMIT, 3, commit_bytes) == COMMIT_BODY_V3
