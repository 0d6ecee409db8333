"""Produce (API key 0), versions 3-12; flexible from 9.

v3 is the floor of Kafka 4.x brokers; v13 names topics by id, so we stop at 12. What changes by version:
v5 adds log_start_offset, v8 per-record errors, v10 the new leader on NOT_LEADER_OR_FOLLOWER (tagged),
v12 lets transaction-version-2 coordinators add partitions implicitly (same layout as v11).

Request::

    transactional_id  nullable string
    acks              int16
    timeout_ms        int32
    topic_data        [name string, partition_data [index int32, records nullable bytes]]
"""

from __future__ import annotations

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ApiSpec, field

__all__ = ["PRODUCE"]

_REQUEST = (
    field("transactional_id", "string", "3+", nullable="3+", default=None),  # set only by transactional producers
    field("acks", "int16", "0+"),  # 0 = no response, 1 = leader only, -1 = all in-sync replicas
    field("timeout_ms", "int32", "0+"),  # how long the broker waits for replication before answering
    field("topic_data", "[]", "0+", fields=(  # one entry per topic
        field("name", "string", "0-12"),  # topic name (v13+ would send a topic id instead)
        field("partition_data", "[]", "0+", fields=(  # one entry per partition
            field("index", "int32", "0+"),  # partition number
            field("records", "records", "0+", nullable="0+"),  # one encoded RecordBatch (v2)
        )),
    )),
)

_RESPONSE = (
    field("responses", "[]", "0+", fields=(  # one entry per topic
        field("name", "string", "0-12"),  # topic name
        field("partition_responses", "[]", "0+", fields=(  # one entry per partition
            field("index", "int32", "0+"),  # partition number
            field("error_code", "int16", "0+", default=NO_ERROR),  # NO_ERROR = written
            field("base_offset", "int64", "0+", default=-1),  # offset of the batch's first record
            field("log_append_time_ms", "int64", "2+", default=-1, ignorable=True),  # -1 unless LogAppendTime
            field("log_start_offset", "int64", "5+", default=-1, ignorable=True),  # earliest offset in the log
            field("record_errors", "[]", "8+", default=[], ignorable=True, fields=(  # records that failed
                field("batch_index", "int32", "8+"),  # index of the record inside the batch
                field("batch_index_error_message", "string", "8+", nullable="8+", default=None),  # why
            )),
            field("error_message", "string", "8+", nullable="8+", default=None, ignorable=True),  # summary
            field("current_leader", "struct", "10+", tag=0, tagged="10+", fields=(  # where to send next
                field("leader_id", "int32", "10+", default=-1),  # -1 = unknown
                field("leader_epoch", "int32", "10+", default=-1),  # -1 = unknown
            )),
        )),
    )),
    field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),  # quota delay the broker applied
    field("node_endpoints", "[]", "10+", tag=0, tagged="10+", fields=(  # addresses of the new leaders
        field("node_id", "int32", "10+"),  # broker id
        field("host", "string", "10+"),  # host name
        field("port", "int32", "10+"),  # port
        field("rack", "string", "10+", nullable="10+", default=None),  # rack, if assigned
    )),
)

PRODUCE = ApiSpec(
    key=0,
    name="Produce",
    min_version=3,
    max_version=12,
    flexible_from=9,
    request_schema=_REQUEST,
    response_schema=_RESPONSE,
    client_throttle_from=6,
)
