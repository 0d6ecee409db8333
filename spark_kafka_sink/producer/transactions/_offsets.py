"""A consumer group's offsets in the open transaction (``send_offsets_to_transaction``, Java's
``sendOffsetsToTransaction``): the consume-transform-produce loop, where the offsets a consumer read up to are
committed if and only if the transaction that wrote its output commits.

Two requests, each with a handler, as the Java client's:

* AddOffsetsToTxn (transaction version 1 only) to the transaction coordinator: the group's ``__consumer_offsets``
  partition joins the transaction. TV2 (KIP-890) skips it: the group coordinator adds the partition itself when
  TxnOffsetCommit v5 arrives.
* TxnOffsetCommit to the group's coordinator (FindCoordinator with key type group): the offsets, tagged with the
  producer id and epoch; they become the group's committed offsets when the transaction commits, and vanish when
  it aborts. v3+ carries the consumer's generation and member id, so a consumer that lost its partitions in a
  rebalance cannot commit them (KIP-447).

Answers, as the Java client (4.4) handles them:

=====================  ===================================================================================
AddOffsetsToTxn        NONE: queue TxnOffsetCommit; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE: find the
                       transaction coordinator again; COORDINATOR_LOAD_IN_PROGRESS / CONCURRENT_TRANSACTIONS:
                       retry; PRODUCER_FENCED / INVALID_PRODUCER_EPOCH: fatal; GROUP_AUTHORIZATION_FAILED and
                       the codes abortable for AddPartitionsToTxn (UNKNOWN_PRODUCER_ID, TRANSACTION_ABORTABLE,
                       INVALID_PRODUCER_ID_MAPPING, which Java makes fatal here): abortable; anything else fatal
TxnOffsetCommit        per partition; NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE / REQUEST_TIMED_OUT: find the
                       group coordinator again and resend the partitions not yet committed; other retriable codes
                       (COORDINATOR_LOAD_IN_PROGRESS, UNKNOWN_TOPIC_OR_PARTITION, CONCURRENT_TRANSACTIONS):
                       resend them; UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / GROUP_ID_NOT_FOUND /
                       STALE_MEMBER_EPOCH (the consumer is no longer the member it was), FENCED_INSTANCE_ID,
                       GROUP_AUTHORIZATION_FAILED, TRANSACTION_ABORTABLE: abortable; fenced: fatal; anything else
                       fatal
=====================  ===================================================================================
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import (
    COORDINATOR_MOVED_CODES,
    FENCED_CODES,
    FencedInstanceIdError,
    GroupAuthorizationFailedError,
    GroupIdNotFoundError,
    IllegalGenerationError,
    RequestTimedOutError,
    SerializationError,
    StaleMemberEpochError,
    TransactionAbortableError,
    UnknownMemberIdError,
    error_for_code,
)
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions._errors import broker_error, fenced_error
from spark_kafka_sink.producer.transactions._handlers import CallResult, RequestKind, TxnHost, TxnRequest
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import ADD_OFFSETS_TO_TXN, TXN_OFFSET_COMMIT

__all__ = ["ConsumerGroupMetadata", "OffsetAndMetadata", "AddOffsetsToTxnHandler", "TxnOffsetCommitHandler",
           "TV2_TXN_OFFSET_COMMIT_VERSION", "offsets_to_commit"]

# TxnOffsetCommit v5 is the TV2 form (the group coordinator adds the offsets partition to the transaction); a TV1
# transaction, whose AddOffsetsToTxn added it, is sent at most v4.
TV2_TXN_OFFSET_COMMIT_VERSION = 5
_MAX_TV1_TXN_OFFSET_COMMIT_VERSION = 4
_GROUP_MEMBER_CODES = frozenset({UnknownMemberIdError.code, IllegalGenerationError.code, GroupIdNotFoundError.code,
                                 StaleMemberEpochError.code})
_ABORTABLE_GROUP_CODES = frozenset({GroupAuthorizationFailedError.code, FencedInstanceIdError.code,
                                    TransactionAbortableError.code})


@dataclass(frozen=True, slots=True)
class ConsumerGroupMetadata:
    """The consumer whose offsets a transaction commits (Java's ``ConsumerGroupMetadata``). ``group_id`` alone
    (generation -1, member id "") commits without the group's membership check, as Java's deprecated
    ``sendOffsetsToTransaction(offsets, groupId)``; give the consumer's generation and member id (and its
    ``group.instance.id`` for a static member) and the group coordinator refuses the commit once a rebalance took
    the partitions away from that member (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.group_id, str) or not self.group_id:
            raise SerializationError(
                f"ConsumerGroupMetadata.group_id must be a non-empty string, not {self.group_id!r}")


@dataclass(frozen=True, slots=True)
class OffsetAndMetadata:
    """The offset to commit for a partition -- the next record the group will read, i.e. the last one processed
    plus one, as in Java -- with optional free-form ``metadata`` and the leader epoch of the last record read."""

    offset: int
    metadata: str = ""
    leader_epoch: int | None = None

    def __post_init__(self) -> None:
        offset = _index(self.offset)
        if offset is None or offset < 0:
            raise SerializationError(f"OffsetAndMetadata.offset must be an int >= 0 (the next offset to read), "
                                     f"not {self.offset!r}")
        object.__setattr__(self, "offset", offset)  # a numpy integer becomes an int


class AddOffsetsToTxnHandler(TxnRequest):
    """AddOffsetsToTxn (TV1): the group's offsets partition joins the transaction; then its TxnOffsetCommit."""

    def __init__(self, host: TxnHost, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                 group: ConsumerGroupMetadata, result: CallResult) -> None:
        super().__init__(host, RequestKind.ADD_OFFSETS, ADD_OFFSETS_TO_TXN, ADD_OFFSETS_TO_TXN.max_version,
                         to_coordinator=True, result=result)
        self._offsets = offsets
        self._group = group

    def build(self, version: int) -> dict[str, Any]:
        producer = self._host.producer_id_and_epoch
        return {"transactional_id": self._host.transactional_id, "producer_id": producer.producer_id,
                "producer_epoch": producer.epoch, "group_id": self._group.group_id}

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        code = body["error_code"]
        context = f"AddOffsetsToTxn for group {self._group.group_id!r}"
        host = self._host
        if code == NO_ERROR:
            host.offsets_joined_transaction()
            assert self.result is not None
            host.enqueue(TxnOffsetCommitHandler(host, self._offsets, self._group, self.result,
                                                transaction_version=1))
        elif code == GroupAuthorizationFailedError.code:
            self._fail_abortably(broker_error(code, context))
        else:
            self._handle_error(code, context, now_ms)


class TxnOffsetCommitHandler(TxnRequest):
    """TxnOffsetCommit to the group's coordinator: the partitions not yet committed, resent until each is."""

    def __init__(self, host: TxnHost, offsets: Mapping[TopicPartition, OffsetAndMetadata],
                 group: ConsumerGroupMetadata, result: CallResult, *, transaction_version: int) -> None:
        max_version = (TV2_TXN_OFFSET_COMMIT_VERSION if transaction_version >= 2
                       else _MAX_TV1_TXN_OFFSET_COMMIT_VERSION)
        super().__init__(host, RequestKind.ADD_OFFSETS, TXN_OFFSET_COMMIT, max_version, to_coordinator=True,
                         result=result, group_id=group.group_id)
        # The partitions still to commit: changed by the answer's handling (manager's lock held), read by build
        # while the request is not answered yet.
        self.pending = dict(offsets)
        self._group = group

    def build(self, version: int) -> dict[str, Any]:
        producer = self._host.producer_id_and_epoch
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for tp in sorted(self.pending):
            offset = self.pending[tp]
            by_topic.setdefault(tp.topic, []).append({
                "partition_index": tp.partition, "committed_offset": offset.offset,
                "committed_leader_epoch": -1 if offset.leader_epoch is None else offset.leader_epoch,
                "committed_metadata": offset.metadata})
        group = self._group
        return {"transactional_id": self._host.transactional_id, "group_id": group.group_id,
                "producer_id": producer.producer_id, "producer_epoch": producer.epoch,
                "generation_id": group.generation_id, "member_id": group.member_id,
                "group_instance_id": group.group_instance_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]}

    def handle_response(self, version: int, body: dict[str, Any], now_ms: int) -> None:
        host = self._host
        context = f"TxnOffsetCommit for group {self._group.group_id!r}"
        find_coordinator = False
        for topic in body["topics"]:
            for answer in topic["partitions"]:
                tp = TopicPartition(topic["name"], answer["partition_index"])
                code = answer["error_code"]
                if code == NO_ERROR:
                    self.pending.pop(tp, None)
                elif code in COORDINATOR_MOVED_CODES or code == RequestTimedOutError.code:
                    find_coordinator = True
                elif error_for_code(code).retriable:
                    pass  # still pending: resent below
                elif code in FENCED_CODES:
                    self._fail_fatally(fenced_error(broker_error(code, context), context))
                    return
                elif code in _GROUP_MEMBER_CODES or code in _ABORTABLE_GROUP_CODES:
                    self._fail_abortably(broker_error(code, context, _why(code, self._group)))
                    return
                else:
                    self._fail_fatally(broker_error(code, f"{context} {tp}"))
                    return
        if not self.pending:
            self.succeed()
        else:  # partitions answered with a retriable error (or left out of the answer): ask again for them
            host.requeue(self, now_ms, backoff_ms=host.retry_backoff_ms, find_coordinator=find_coordinator)


def offsets_to_commit(offsets: Mapping[tuple[str, int], int | OffsetAndMetadata]
                      ) -> dict[TopicPartition, OffsetAndMetadata]:
    """What ``send_offsets_to_transaction`` takes, checked: (topic, partition) -> offset or OffsetAndMetadata."""
    checked = {}
    for tp, offset in offsets.items():
        topic, partition = tp
        index = _index(partition)
        if not isinstance(topic, str) or not topic or index is None or index < 0:
            raise SerializationError(f"send_offsets_to_transaction(): {tp!r} is not a (topic, partition) pair with "
                                     "a non-empty topic and a partition >= 0")
        checked[TopicPartition(topic, index)] = offset if isinstance(offset, OffsetAndMetadata) else \
            OffsetAndMetadata(offset)
    return checked


def _index(value: object) -> int | None:
    """``value`` as an int if it is an integer (numpy's too, not bool), else None."""
    if isinstance(value, bool):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


def _why(code: int, group: ConsumerGroupMetadata) -> str | None:
    if code in _GROUP_MEMBER_CODES:
        return (f"the consumer (member {group.member_id!r}, generation {group.generation_id}) is no longer a member "
                "of the group as it was: a rebalance may have given its partitions to another member. Abort the "
                "transaction and go on from the group's committed offsets")
    return None
