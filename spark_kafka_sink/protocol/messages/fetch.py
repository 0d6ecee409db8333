"""Read-path APIs: ListOffsets (2) and Fetch (1), as much of them as reading one partition to its end needs.

Both are declared over the whole range a Kafka 4.x broker serves up to the point where the layout would need
topic ids; Kafka 3.x brokers serve the same versions, so negotiation finds a common one with either.
"""

from __future__ import annotations

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ApiSpec, field

__all__ = ["LIST_OFFSETS", "FETCH", "LATEST_TIMESTAMP", "EARLIEST_TIMESTAMP", "READ_UNCOMMITTED", "READ_COMMITTED"]

#: ListOffsets timestamp sentinels: the log end (high watermark, or the last stable offset when read_committed)
#: and the log start. Other sentinels (-3 max timestamp, -4 local log start ...) are not used here.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
#: Fetch / ListOffsets isolation levels.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

# ------------------------------------------------------------------------------------------ ListOffsets (2)
# versions 1-11, flexible from 6 (Kafka 4.0 dropped v0; 3.x serves 0-7..0-9, 4.x 1-10..1-11). v2 adds the
# isolation level (read_committed needs v2+), v4 leader epochs, v5 the OFFSET_NOT_AVAILABLE error, v7-v11 only new
# timestamp sentinels except v10's timeout_ms (for tiered storage).
#
#   request:  replica_id int32, isolation_level int8 (v2+),
#             topics [name string, partitions [partition_index int32, current_leader_epoch int32 (v4+),
#                                              timestamp int64]],
#             timeout_ms int32 (v10+)
#   response: throttle_time_ms int32 (v2+),
#             topics [name string, partitions [partition_index int32, error_code int16, timestamp int64,
#                                              offset int64, leader_epoch int32 (v4+)]]

LIST_OFFSETS = ApiSpec(
    key=2,
    name="ListOffsets",
    min_version=1,
    max_version=11,
    flexible_from=6,
    request_schema=(
        field("replica_id", "int32", "0+", default=-1),  # -1 = a client, not a follower broker
        field("isolation_level", "int8", "2+", default=READ_UNCOMMITTED),  # 1: latest means last stable offset
        field("topics", "[]", "0+", fields=(  # one entry per topic
            field("name", "string", "0+"),  # topic name
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("current_leader_epoch", "int32", "4+", default=-1, ignorable=True),  # -1 = not checked
                field("timestamp", "int64", "0+"),  # a time in ms, or LATEST_TIMESTAMP / EARLIEST_TIMESTAMP
            )),
        )),
        field("timeout_ms", "int32", "10+", ignorable=True),  # how long a remote (tiered) lookup may take
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "2+", default=0, ignorable=True),  # quota delay
        field("topics", "[]", "0+", fields=(  # one entry per topic
            field("name", "string", "0+"),  # topic name
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. NOT_LEADER_OR_FOLLOWER
                field("timestamp", "int64", "1+", default=-1),  # timestamp of the returned offset, -1 for sentinels
                field("offset", "int64", "1+", default=-1),  # the offset asked for
                field("leader_epoch", "int32", "4+", default=-1),  # leader epoch of that offset
            )),
        )),
    ),
    client_throttle_from=3,
)

# ------------------------------------------------------------------------------------------------ Fetch (1)
# versions 4-12, flexible from 12. Kafka 4.0 dropped v0-3; v13+ names topics by id (UUID from Metadata) instead
# of name, so we stop at 12, which Kafka 3.x and 4.x brokers both serve. v4 adds transactional reads (isolation
# level, last stable offset, aborted transactions), v5 log start offsets, v7 fetch sessions (we send the
# sessionless defaults: id 0, epoch -1), v9 leader epochs, v11 rack ids and preferred read replicas, v12 the
# last fetched epoch and tagged leader / divergence hints.
#
#   request:  cluster_id nullable string (tag 0, v12+), replica_id int32, max_wait_ms int32, min_bytes int32,
#             max_bytes int32, isolation_level int8, session_id int32 (v7+), session_epoch int32 (v7+),
#             topics [topic string, partitions [partition int32, current_leader_epoch int32 (v9+),
#                                               fetch_offset int64, last_fetched_epoch int32 (v12+),
#                                               log_start_offset int64 (v5+), partition_max_bytes int32]],
#             forgotten_topics_data [topic string, partitions []int32] (v7+), rack_id string (v11+)
#   response: throttle_time_ms int32, error_code int16 (v7+), session_id int32 (v7+),
#             responses [topic string, partitions [partition_index int32, error_code int16, high_watermark int64,
#                        last_stable_offset int64, log_start_offset int64 (v5+),
#                        diverging_epoch (tag 0), current_leader (tag 1), snapshot_id (tag 2) (v12+),
#                        aborted_transactions nullable [producer_id int64, first_offset int64],
#                        preferred_read_replica int32 (v11+), records nullable records]]

FETCH = ApiSpec(
    key=1,
    name="Fetch",
    min_version=4,
    max_version=12,
    flexible_from=12,
    request_schema=(
        field("cluster_id", "string", "12+", nullable="12+", tag=0, tagged="12+", default=None,
              ignorable=True),  # only brokers fetching before registration set it
        field("replica_id", "int32", "0+", default=-1),  # -1 = a consumer, not a follower broker
        field("max_wait_ms", "int32", "0+"),  # how long the broker may wait for min_bytes to accumulate
        field("min_bytes", "int32", "0+"),  # answer once this much data is there (or max_wait_ms passed)
        field("max_bytes", "int32", "3+", default=0x7FFFFFFF, ignorable=True),  # response size limit (soft)
        field("isolation_level", "int8", "4+", default=READ_UNCOMMITTED, ignorable=True),  # 1 = read_committed
        field("session_id", "int32", "7+", default=0, ignorable=True),  # 0 = no fetch session
        field("session_epoch", "int32", "7+", default=-1, ignorable=True),  # -1 = full fetch, no session
        field("topics", "[]", "0+", fields=(  # what to read
            field("topic", "string", "0-12"),  # topic name (v13+ would send a topic id)
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("partition", "int32", "0+"),  # partition number
                field("current_leader_epoch", "int32", "9+", default=-1, ignorable=True),  # -1 = not checked
                field("fetch_offset", "int64", "0+"),  # first offset wanted
                field("last_fetched_epoch", "int32", "12+", default=-1),  # epoch of the last record read, or -1
                field("log_start_offset", "int64", "5+", default=-1, ignorable=True),  # followers only
                field("partition_max_bytes", "int32", "0+"),  # size limit for this partition (soft)
            )),
        )),
        field("forgotten_topics_data", "[]", "7+", default=[], fields=(  # incremental sessions only
            field("topic", "string", "7-12"),  # topic name
            field("partitions", "[]int32", "7+"),  # partitions to drop from the session
        )),
        field("rack_id", "string", "11+", default="", ignorable=True),  # client rack, for follower fetching
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),  # quota delay
        field("error_code", "int16", "7+", default=NO_ERROR, ignorable=True),  # top-level (session) error
        field("session_id", "int32", "7+", default=0),  # fetch session id, 0 = none
        field("responses", "[]", "0+", fields=(  # one entry per topic
            field("topic", "string", "0-12"),  # topic name (v13+: a topic id)
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("partition_index", "int32", "0+"),  # partition number
                field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. OFFSET_OUT_OF_RANGE
                field("high_watermark", "int64", "0+"),  # end of the replicated log
                field("last_stable_offset", "int64", "4+", default=-1, ignorable=True),  # end for read_committed
                field("log_start_offset", "int64", "5+", default=-1, ignorable=True),  # earliest offset kept
                field("diverging_epoch", "struct", "12+", tag=0, tagged="12+", fields=(  # followers: truncate here
                    field("epoch", "int32", "12+", default=-1),  # largest epoch in common
                    field("end_offset", "int64", "12+", default=-1),  # where that epoch ends
                )),
                field("current_leader", "struct", "12+", tag=1, tagged="12+", fields=(  # where to fetch next
                    field("leader_id", "int32", "12+", default=-1),  # -1 = unknown
                    field("leader_epoch", "int32", "12+", default=-1),  # -1 = unknown
                )),
                field("snapshot_id", "struct", "12+", tag=2, tagged="12+", fields=(  # KRaft metadata log only
                    field("end_offset", "int64", "12+", default=-1),  # snapshot end offset
                    field("epoch", "int32", "12+", default=-1),  # snapshot epoch
                )),
                field("aborted_transactions", "[]", "4+", nullable="4+", default=[], ignorable=True, fields=(
                    field("producer_id", "int64", "4+"),  # producer of the aborted transaction
                    field("first_offset", "int64", "4+"),  # its first offset in this partition
                )),
                field("preferred_read_replica", "int32", "11+", default=-1),  # -1 = keep reading from the leader
                field("records", "records", "0+", nullable="0+", default=None),  # RecordBatches; the last may be cut
            )),
        )),
    ),
    client_throttle_from=8,
)
