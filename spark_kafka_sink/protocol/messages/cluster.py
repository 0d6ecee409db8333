"""Cluster-level APIs: ApiVersions (18), Metadata (3), CreateTopics (19, used by tests and tooling) and
DescribeConfigs (32, a topic's limits for the sink's dead letters)."""

from __future__ import annotations

from enum import IntEnum

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ZERO_UUID, ApiSpec, field

__all__ = ["API_VERSIONS", "METADATA", "CREATE_TOPICS", "DESCRIBE_CONFIGS", "TOPIC_RESOURCE", "AclOperation",
           "NO_AUTHORIZED_OPERATIONS"]

NO_AUTHORIZED_OPERATIONS = -(2**31)  # an authorized-operations field's value when they were not requested


class AclOperation(IntEnum):
    """ACL operation codes (Java's ``AclOperation``): bit ``1 << code`` of an authorized-operations bitfield."""

    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12

    def allowed_in(self, bitfield: int) -> bool:
        return bool(bitfield & (1 << self))

# ------------------------------------------------------------------------------------------ ApiVersions
# versions 0-4, flexible from 3. The response always comes with response header v0 (see ApiSpec).
#   request:  client_software_name string (v3+), client_software_version string (v3+)
#   response: error_code int16, api_keys [api_key, min_version, max_version int16], throttle_time_ms int32 (v1+),
#             tagged (v3+): 0 supported_features, 1 finalized_features_epoch, 2 finalized_features, 3 zk flag

API_VERSIONS = ApiSpec(
    key=18,
    name="ApiVersions",
    min_version=0,
    max_version=4,
    flexible_from=3,
    request_schema=(
        field("client_software_name", "string", "3+", ignorable=True),  # [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?
        field("client_software_version", "string", "3+", ignorable=True),  # same pattern as the name
    ),
    response_schema=(
        field("error_code", "int16", "0+", default=NO_ERROR),  # UNSUPPORTED_VERSION: retry with a version listed below
        field("api_keys", "[]", "0+", fields=(  # every API the broker serves
            field("api_key", "int16", "0+"),  # API key
            field("min_version", "int16", "0+"),  # oldest version served
            field("max_version", "int16", "0+"),  # newest version served
        )),
        field("throttle_time_ms", "int32", "1+", default=0, ignorable=True),  # quota delay
        field("supported_features", "[]", "3+", tag=0, tagged="3+", ignorable=True, fields=(  # broker's range
            field("name", "string", "3+"),  # feature name, e.g. transaction.version
            field("min_version", "int16", "3+"),  # lowest level this broker supports
            field("max_version", "int16", "3+"),  # highest level this broker supports
        )),
        field("finalized_features_epoch", "int64", "3+", tag=1, tagged="3+", default=-1, ignorable=True),
        field("finalized_features", "[]", "3+", tag=2, tagged="3+", ignorable=True, fields=(  # cluster-wide
            field("name", "string", "3+"),  # feature name
            field("max_version_level", "int16", "3+"),  # the level the cluster runs at
            field("min_version_level", "int16", "3+"),  # lowest level still allowed
        )),
        field("zk_migration_ready", "bool", "3+", tag=3, tagged="3+", default=False, ignorable=True),  # KRaft only
    ),
    client_throttle_from=2,
)

# --------------------------------------------------------------------------------------------- Metadata
# versions 0-13, flexible from 9. v10+ carries topic ids (uuid), v12 allows a null topic name (lookup by id),
# v13 adds a top-level error code (REBOOTSTRAP_REQUIRED). topics = null (v1+) means "all topics"; in v0 an
# empty list means all topics.

METADATA = ApiSpec(
    key=3,
    name="Metadata",
    min_version=0,
    max_version=13,
    flexible_from=9,
    request_schema=(
        field("topics", "[]", "0+", nullable="1+", fields=(  # topics to describe; null = all (v1+)
            field("topic_id", "uuid", "10+", default=ZERO_UUID, ignorable=True),  # zero UUID when asking by name
            field("name", "string", "0+", nullable="10+"),  # null when asking by id
        )),
        field("allow_auto_topic_creation", "bool", "4+", default=True),  # broker may create missing topics
        field("include_cluster_authorized_operations", "bool", "8-10", default=False),  # ACL bitfield for cluster
        field("include_topic_authorized_operations", "bool", "8+", default=False),  # ACL bitfield per topic
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "3+", default=0, ignorable=True),  # quota delay
        field("brokers", "[]", "0+", fields=(  # live brokers
            field("node_id", "int32", "0+"),  # broker id
            field("host", "string", "0+"),  # advertised host
            field("port", "int32", "0+"),  # advertised port
            field("rack", "string", "1+", nullable="1+", default=None, ignorable=True),  # rack, if set
        )),
        field("cluster_id", "string", "2+", nullable="2+", default=None, ignorable=True),  # cluster id
        field("controller_id", "int32", "1+", default=-1, ignorable=True),  # a controller, or -1
        field("topics", "[]", "0+", fields=(  # one entry per topic
            field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. UNKNOWN_TOPIC_OR_PARTITION
            field("name", "string", "0+", nullable="12+"),  # null for an unknown topic asked by id
            field("topic_id", "uuid", "10+", default=ZERO_UUID, ignorable=True),  # zero if unknown, asked by name
            field("is_internal", "bool", "1+", default=False, ignorable=True),  # e.g. __consumer_offsets
            field("partitions", "[]", "0+", fields=(  # one entry per partition
                field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. LEADER_NOT_AVAILABLE
                field("partition_index", "int32", "0+"),  # partition number
                field("leader_id", "int32", "0+"),  # leader broker, -1 if none
                field("leader_epoch", "int32", "7+", default=-1, ignorable=True),  # leader epoch
                field("replica_nodes", "[]int32", "0+"),  # all replicas
                field("isr_nodes", "[]int32", "0+"),  # in-sync replicas
                field("offline_replicas", "[]int32", "5+", default=[], ignorable=True),  # replicas offline
            )),
            field("topic_authorized_operations", "int32", "8+", default=NO_AUTHORIZED_OPERATIONS),  # ACL bitfield
        )),
        field("cluster_authorized_operations", "int32", "8-10", default=NO_AUTHORIZED_OPERATIONS),  # ACL bitfield
        field("error_code", "int16", "13+", default=NO_ERROR, ignorable=True),  # top-level error (v13+)
    ),
    client_throttle_from=6,
)

# ----------------------------------------------------------------------------------------- CreateTopics
# versions 2-7, flexible from 5. v5+ returns the topic's resulting configs, v7 its topic id.

CREATE_TOPICS = ApiSpec(
    key=19,
    name="CreateTopics",
    min_version=2,
    max_version=7,
    flexible_from=5,
    request_schema=(
        field("topics", "[]", "0+", fields=(  # topics to create
            field("name", "string", "0+"),  # topic name
            field("num_partitions", "int32", "0+", default=-1),  # -1 = broker default (needs no assignments)
            field("replication_factor", "int16", "0+", default=-1),  # -1 = broker default
            field("assignments", "[]", "0+", default=[], fields=(  # explicit replica placement, or empty
                field("partition_index", "int32", "0+"),  # partition number
                field("broker_ids", "[]int32", "0+"),  # replicas, preferred leader first
            )),
            field("configs", "[]", "0+", default=[], fields=(  # topic configs to set
                field("name", "string", "0+"),  # config key, e.g. cleanup.policy
                field("value", "string", "0+", nullable="0+"),  # config value
            )),
        )),
        field("timeout_ms", "int32", "0+", default=60000),  # how long to wait for creation
        field("validate_only", "bool", "1+", default=False),  # dry run
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "2+", default=0, ignorable=True),  # quota delay
        field("topics", "[]", "0+", fields=(  # one result per topic
            field("name", "string", "0+"),  # topic name
            field("topic_id", "uuid", "7+", default=ZERO_UUID, ignorable=True),  # the new topic's id
            field("error_code", "int16", "0+", default=NO_ERROR),  # e.g. TOPIC_ALREADY_EXISTS
            field("error_message", "string", "1+", nullable="1+", default=None, ignorable=True),  # details
            field("topic_config_error_code", "int16", "5+", tag=0, tagged="5+", default=NO_ERROR, ignorable=True),
            field("num_partitions", "int32", "5+", default=-1, ignorable=True),  # resulting partition count
            field("replication_factor", "int16", "5+", default=-1, ignorable=True),  # resulting replication
            field("configs", "[]", "5+", nullable="5+", default=[], ignorable=True, fields=(  # resulting configs
                field("name", "string", "5+"),  # config key
                field("value", "string", "5+", nullable="5+"),  # value, null if sensitive
                field("read_only", "bool", "5+"),  # cannot be changed
                field("config_source", "int8", "5+", default=-1, ignorable=True),  # where the value comes from
                field("is_sensitive", "bool", "5+"),  # value hidden
            )),
        )),
    ),
    client_throttle_from=3,
)

# ----------------------------------------------------------------------------------------- DescribeConfigs
# version 4 only (flexible; brokers since 2.6 have it): the sink reads a topic's max.message.bytes and
# cleanup.policy. Earlier versions differ only in synonyms and documentation, which the sink never asks for.

TOPIC_RESOURCE = 2  # DescribeConfigs resource_type of a topic

DESCRIBE_CONFIGS = ApiSpec(
    key=32,
    name="DescribeConfigs",
    min_version=4,
    max_version=4,
    flexible_from=4,
    request_schema=(
        field("resources", "[]", "4+", fields=(  # what to describe
            field("resource_type", "int8", "4+"),  # 2 = topic, 4 = broker
            field("resource_name", "string", "4+"),  # the topic name
            field("configuration_keys", "[]string", "4+", nullable="4+", default=None),  # null = every config
        )),
        field("include_synonyms", "bool", "4+", default=False),  # also each value's other sources
        field("include_documentation", "bool", "4+", default=False),  # also each config's description
    ),
    response_schema=(
        field("throttle_time_ms", "int32", "4+", default=0, ignorable=True),  # quota delay
        field("results", "[]", "4+", fields=(  # one per resource asked for
            field("error_code", "int16", "4+", default=NO_ERROR),  # e.g. UNKNOWN_TOPIC_OR_PARTITION
            field("error_message", "string", "4+", nullable="4+", default=None),  # details
            field("resource_type", "int8", "4+"),  # as asked
            field("resource_name", "string", "4+"),  # as asked
            field("configs", "[]", "4+", default=[], fields=(  # the configs asked for
                field("name", "string", "4+"),  # config key, e.g. max.message.bytes
                field("value", "string", "4+", nullable="4+"),  # its value; null if sensitive
                field("read_only", "bool", "4+"),  # cannot be changed
                field("config_source", "int8", "4+", default=-1, ignorable=True),  # where the value comes from
                field("is_sensitive", "bool", "4+"),  # value hidden
                field("synonyms", "[]", "4+", default=[], ignorable=True, fields=(  # with include_synonyms
                    field("name", "string", "4+"),  # the synonym's key (e.g. the broker's message.max.bytes)
                    field("value", "string", "4+", nullable="4+"),  # its value
                    field("source", "int8", "4+"),  # its source
                )),
                field("config_type", "int8", "4+", default=0, ignorable=True),  # STRING, INT ... (0: unknown)
                field("documentation", "string", "4+", nullable="4+", default=None, ignorable=True),  # description
            )),
        )),
    ),
    client_throttle_from=2,
)
