"""Idempotence and transaction APIs: InitProducerId, FindCoordinator, AddPartitionsToTxn, AddOffsetsToTxn,
EndTxn, TxnOffsetCommit and OffsetFetch (to read back what a transaction committed)."""

from __future__ import annotations

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ApiSpec, field

__all__ = [
    "INIT_PRODUCER_ID",
    "FIND_COORDINATOR",
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "TXN_OFFSET_COMMIT",
    "OFFSET_FETCH",
]

# ------------------------------------------------------------------------------------- InitProducerId (22)
# versions 0-5, flexible from 2. v3+ sends the current producer id/epoch so the coordinator can bump the epoch
# of an idempotent producer (after OUT_OF_ORDER_SEQUENCE_NUMBER) instead of handing out a new id.

INIT_PRODUCER_ID = ApiSpec(
    key=22,
    name="InitProducerId",
    min_version=0,
    max_version=5,
    flexible_from=2,
    request_schema=(
        field("transactional_id", "string", "0+", nullable="0+", default=None),  # null = idempotent only
        field("transaction_timeout_ms", "int32", "0+"),  # coordinator aborts transactions open longer
        field("producer_id", "int64", "3+", default=-1),  # current id when bumping the epoch, else -1
        field("producer_epoch", "int16", "3+", default=-1),  # current epoch when bumping, else -1
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0, ignorable=True),  # quota delay
        field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. CONCURRENT_TRANSACTIONS (retry)
        field("producer_id", "int64", "0+", default=-1),  # assigned producer id
        field("producer_epoch", "int16", "0+", default=-1),  # assigned epoch
    ),
    client_throttle_from=1,
)

# ------------------------------------------------------------------------------------ FindCoordinator (10)
# versions 0-6, flexible from 3. v4+ batches: coordinator_keys in, one coordinators entry per key out.
# key_type: 0 = group, 1 = transaction (v1+).

FIND_COORDINATOR = ApiSpec(
    key=10,
    name="FindCoordinator",
    min_version=0,
    max_version=6,
    flexible_from=3,
    request_schema=(
        field("key", "string", "0-3"),  # group id or transactional id (v0-3)
        field("key_type", "int8", "1+", default=0),  # 0 = group, 1 = transaction
        field("coordinator_keys", "[]string", "4+", default=[]),  # the keys to look up (v4+)
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),  # quota delay
        field("error_code", "int16", "0-3", default=NO_ERROR),  # v0-3: one answer
        field("error_message", "string", "1-3", nullable="1-3", default=None, ignorable=True),  # details
        field("node_id", "int32", "0-3", default=-1),  # coordinator broker id
        field("host", "string", "0-3", default=""),  # coordinator host
        field("port", "int32", "0-3", default=-1),  # coordinator port
        field("coordinators", "[]", "4+", default=[], fields=(  # v4+: one answer per key
            field("key", "string", "4+"),  # the key asked for
            field("node_id", "int32", "4+"),  # coordinator broker id
            field("host", "string", "4+"),  # coordinator host
            field("port", "int32", "4+"),  # coordinator port
            field("error_code", "int16", "4+", default=NO_ERROR),  # e.g. COORDINATOR_NOT_AVAILABLE
            field("error_message", "string", "4+", nullable="4+", default=None, ignorable=True),  # details
        )),
    ),
    client_throttle_from=2,
)

# --------------------------------------------------------------------------------- AddPartitionsToTxn (24)
# versions 0-3 (flexible from 3). v4+ batches several transactions and is reserved for brokers, so the field
# names below carry Kafka's "v3_and_below" prefix.

_TOPIC_PARTITIONS = (
    field("name", "string", "0+"),  # topic name
    field("partitions", "[]int32", "0+"),  # partitions joining the transaction
)
_TOPIC_RESULTS = (
    field("name", "string", "0+"),  # topic name
    field("results_by_partition", "[]", "0+", fields=(  # one result per partition
        field("partition_index", "int32", "0+"),  # partition number
        field("partition_error_code", "int16", "0+", default=NO_ERROR),  # e.g. CONCURRENT_TRANSACTIONS
    )),
)

ADD_PARTITIONS_TO_TXN = ApiSpec(
    key=24,
    name="AddPartitionsToTxn",
    min_version=0,
    max_version=3,
    flexible_from=3,
    request_schema=(
        field("v3_and_below_transactional_id", "string", "0-3"),  # transactional id
        field("v3_and_below_producer_id", "int64", "0-3"),  # producer id from InitProducerId
        field("v3_and_below_producer_epoch", "int16", "0-3"),  # producer epoch from InitProducerId
        field("v3_and_below_topics", "[]", "0-3", fields=_TOPIC_PARTITIONS),  # partitions to add
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("results_by_topic_v3_and_below", "[]", "0-3", fields=_TOPIC_RESULTS),  # one result per topic
    ),
    client_throttle_from=1,
)

# ---------------------------------------------------------------------------------- AddOffsetsToTxn (25)
# versions 0-4, flexible from 3. Adds the group's offsets partition to the transaction (before TxnOffsetCommit).

ADD_OFFSETS_TO_TXN = ApiSpec(
    key=25,
    name="AddOffsetsToTxn",
    min_version=0,
    max_version=4,
    flexible_from=3,
    request_schema=(
        field("transactional_id", "string", "0+"),  # transactional id
        field("producer_id", "int64", "0+"),  # producer id
        field("producer_epoch", "int16", "0+"),  # producer epoch
        field("group_id", "string", "0+"),  # consumer group whose offsets join the transaction
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. CONCURRENT_TRANSACTIONS
    ),
    client_throttle_from=1,
)

# ------------------------------------------------------------------------------------------- EndTxn (26)
# versions 0-5, flexible from 3. v5 (transaction version 2) bumps the epoch on every commit/abort and returns
# the producer id and epoch to use next.

END_TXN = ApiSpec(
    key=26,
    name="EndTxn",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_schema=(
        field("transactional_id", "string", "0+"),  # transactional id
        field("producer_id", "int64", "0+"),  # producer id
        field("producer_epoch", "int16", "0+"),  # producer epoch
        field("committed", "bool", "0+"),  # True = commit, False = abort
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. PRODUCER_FENCED, INVALID_TXN_STATE
        field("producer_id", "int64", "5+", default=-1, ignorable=True),  # id for the next transaction (v5)
        field("producer_epoch", "int16", "5+", default=-1, ignorable=True),  # epoch for the next one (v5)
    ),
    client_throttle_from=1,
)

# ---------------------------------------------------------------------------------- TxnOffsetCommit (28)
# versions 0-5, flexible from 3. v3+ carries group membership (a producer outside a group sends the defaults).

TXN_OFFSET_COMMIT = ApiSpec(
    key=28,
    name="TxnOffsetCommit",
    min_version=0,
    max_version=5,
    flexible_from=3,
    request_schema=(
        field("transactional_id", "string", "0+"),  # transactional id
        field("group_id", "string", "0+"),  # consumer group to commit for
        field("producer_id", "int64", "0+"),  # producer id
        field("producer_epoch", "int16", "0+"),  # producer epoch
        field("generation_id", "int32", "3+", default=-1),  # group generation, -1 outside a group
        field("member_id", "string", "3+", default=""),  # group member id, "" outside a group
        field("group_instance_id", "string", "3+", nullable="3+", default=None),  # static member id
        field("topics", "[]", "0+", fields=(  # offsets per topic
            field("name", "string", "0+"),  # topic name
            field("partitions", "[]", "0+", fields=(  # offsets per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("committed_offset", "int64", "0+"),  # offset to commit
                field("committed_leader_epoch", "int32", "2+", default=-1, ignorable=True),  # -1 = unknown
                field("committed_metadata", "string", "0+", nullable="0+", default=""),  # free-form text
            )),
        )),
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("topics", "[]", "0+", fields=(  # results per topic
            field("name", "string", "0+"),  # topic name
            field("partitions", "[]", "0+", fields=(  # results per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. UNKNOWN_TOPIC_OR_PARTITION
            )),
        )),
    ),
    client_throttle_from=1,
)

# --------------------------------------------------------------------------------------- OffsetFetch (9)
# versions 1-9, flexible from 6 (Kafka 4 dropped v0; v10 names topics by id). v8+ batches groups.
# topics = null (v2+) means "all topics of the group".

OFFSET_FETCH = ApiSpec(
    key=9,
    name="OffsetFetch",
    min_version=1,
    max_version=9,
    flexible_from=6,
    request_schema=(
        field("group_id", "string", "0-7"),  # group to read (v1-7)
        field("topics", "[]", "0-7", nullable="2-7", fields=(  # topics to read (v1-7); null = all
            field("name", "string", "0-7"),  # topic name
            field("partition_indexes", "[]int32", "0-7"),  # partitions
        )),
        field("groups", "[]", "8+", default=[], fields=(  # groups to read (v8+)
            field("group_id", "string", "8+"),  # group id
            field("member_id", "string", "9+", nullable="9+", default=None, ignorable=True),  # new-protocol member
            field("member_epoch", "int32", "9+", default=-1, ignorable=True),  # new-protocol member epoch
            field("topics", "[]", "8+", nullable="8+", fields=(  # topics to read; null = all
                field("name", "string", "8-9"),  # topic name
                field("partition_indexes", "[]int32", "8+"),  # partitions
            )),
        )),
        field("require_stable", "bool", "7+", default=False),  # wait for pending transactional offsets
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "3+", default=0, ignorable=True),  # quota delay
        field("topics", "[]", "0-7", default=[], fields=(  # v1-7 results per topic
            field("name", "string", "0-7"),  # topic name
            field("partitions", "[]", "0-7", fields=(  # results per partition
                field("partition_index", "int32", "0-7"),  # partition number
                field("committed_offset", "int64", "0-7", default=-1),  # -1 = nothing committed
                field("committed_leader_epoch", "int32", "5-7", default=-1, ignorable=True),  # leader epoch
                field("metadata", "string", "0-7", nullable="0-7", default=None),  # committed metadata
                field("error_code", "int16", "0-7", default=NO_ERROR),  # partition error
            )),
        )),
        field("error_code", "int16", "2-7", default=NO_ERROR, ignorable=True),  # group-level error (v2-7)
        field("groups", "[]", "8+", default=[], fields=(  # v8+ results per group
            field("group_id", "string", "8+"),  # group id
            field("topics", "[]", "8+", fields=(  # results per topic
                field("name", "string", "8-9"),  # topic name
                field("partitions", "[]", "8+", fields=(  # results per partition
                    field("partition_index", "int32", "8+"),  # partition number
                    field("committed_offset", "int64", "8+", default=-1),  # -1 = nothing committed
                    field("committed_leader_epoch", "int32", "8+", default=-1, ignorable=True),  # leader epoch
                    field("metadata", "string", "8+", nullable="8+", default=None),  # committed metadata
                    field("error_code", "int16", "8+", default=NO_ERROR),  # partition error
                )),
            )),
            field("error_code", "int16", "8+", default=NO_ERROR),  # group-level error
        )),
    ),
    client_throttle_from=4,
)
