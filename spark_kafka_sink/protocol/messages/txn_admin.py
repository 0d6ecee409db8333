"""The transaction admin APIs of KIP-664: ListTransactions, DescribeTransactions and DescribeProducers, to find
and inspect transactions an application left open (the ``transactions`` command of ``python -m spark_kafka_sink``).

ListTransactions goes to every broker: each answers for the transaction log partitions it leads.
DescribeTransactions goes to each transactional id's coordinator; DescribeProducers to each partition's leader.
"""

from __future__ import annotations

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ApiSpec, field

__all__ = ["LIST_TRANSACTIONS", "DESCRIBE_TRANSACTIONS", "DESCRIBE_PRODUCERS"]

# ---------------------------------------------------------------------------------- ListTransactions (66)
# versions 0-2, flexible from 0. v1 adds a minimum duration, v2 a regular expression over transactional ids
# (Kafka 4.0+). Empty filters match everything.

LIST_TRANSACTIONS = ApiSpec(
    key=66,
    name="ListTransactions",
    min_version=0,
    max_version=2,
    flexible_from=0,
    request_schema=(
        field("state_filters", "[]string", "0+", default=[]),  # e.g. "Ongoing"; empty = every state
        field("producer_id_filters", "[]int64", "0+", default=[]),  # empty = every producer id
        field("duration_filter", "int64", "1+", default=-1),  # only transactions open longer (ms); -1 = all
        field("transactional_id_pattern", "string", "2+", nullable="2+", default=None),  # regex; null = all
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. COORDINATOR_LOAD_IN_PROGRESS
        field("unknown_state_filters", "[]string", "0+", default=[]),  # filters the coordinator did not know
        field("transaction_states", "[]", "0+", default=[], fields=(  # one entry per transactional id
            field("transactional_id", "string", "0+"),  # the id
            field("producer_id", "int64", "0+"),  # its current producer id
            field("transaction_state", "string", "0+"),  # Empty, Ongoing, PrepareCommit, CompleteAbort ...
        )),
    ),
    client_throttle_from=0,
)

# ------------------------------------------------------------------------------ DescribeTransactions (65)
# version 0, flexible. Sent to the transactional ids' coordinator; one answer per id.

DESCRIBE_TRANSACTIONS = ApiSpec(
    key=65,
    name="DescribeTransactions",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_schema=(
        field("transactional_ids", "[]string", "0+"),  # ids to describe
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("transaction_states", "[]", "0+", default=[], fields=(  # one entry per id asked for
            field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR
            field("transactional_id", "string", "0+"),  # the id
            field("transaction_state", "string", "0+"),  # Empty, Ongoing, PrepareCommit ...
            field("transaction_timeout_ms", "int32", "0+"),  # the producer's transaction.timeout.ms
            field("transaction_start_time_ms", "int64", "0+"),  # wall clock of the open transaction's start; -1
            field("producer_id", "int64", "0+"),  # current producer id
            field("producer_epoch", "int16", "0+"),  # current epoch
            field("topics", "[]", "0+", default=[], fields=(  # partitions in the open transaction
                field("topic", "string", "0+"),  # topic name
                field("partitions", "[]int32", "0+"),  # partitions without their marker yet
            )),
        )),
    ),
    client_throttle_from=0,
)

# --------------------------------------------------------------------------------- DescribeProducers (61)
# version 0, flexible. Sent to each partition's leader: the producers it keeps state for, with the first offset
# of an open transaction (which holds back the last stable offset, so read_committed consumers wait on it).

DESCRIBE_PRODUCERS = ApiSpec(
    key=61,
    name="DescribeProducers",
    min_version=0,
    max_version=0,
    flexible_from=0,
    request_schema=(
        field("topics", "[]", "0+", fields=(  # partitions to describe, by topic
            field("name", "string", "0+"),  # topic name
            field("partition_indexes", "[]int32", "0+"),  # partitions (this broker must lead them)
        )),
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "0+", default=0),  # quota delay
        field("topics", "[]", "0+", default=[], fields=(  # one entry per topic asked for
            field("name", "string", "0+"),  # topic name
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. NOT_LEADER_OR_FOLLOWER
                field("error_message", "string", "0+", nullable="0+", default=None),  # details
                field("active_producers", "[]", "0+", default=[], fields=(  # producers with state here
                    field("producer_id", "int64", "0+"),  # producer id
                    field("producer_epoch", "int32", "0+"),  # its epoch (int32 on this API)
                    field("last_sequence", "int32", "0+", default=-1),  # last sequence written
                    field("last_timestamp", "int64", "0+", default=-1),  # timestamp of its last write
                    field("coordinator_epoch", "int32", "0+"),  # epoch of its transaction coordinator
                    field("current_txn_start_offset", "int64", "0+", default=-1),  # open transaction's first offset
                )),
            )),
        )),
    ),
    client_throttle_from=0,
)
