"""Golden vectors for every API version in spark_kafka_sink.protocol.messages (test data, no tests here).

How they were produced -- independently of our codec: each SAMPLES body was pruned to the fields of one version,
turned into Kafka's JSON form (camelCase keys, base64 bytes, Kafka's base64 UUID strings) and serialized by the
Java classes of kafka-clients 4.3.1 (``<Api>RequestDataJsonConverter.read`` then
``MessageUtil.toByteBufferAccessor(message, version)``) in a throwaway program outside this repository. The hex
below is what Java printed. ``None`` marks a (body, version) pair that both Java and our encoder refuse (a null
where that version has none).

Keys: (api_key, version, "req" | "resp", variant).
"""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["SAMPLES", "GOLDEN"]

U1 = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
Z = uuid.UUID(int=0)
NO_OPS = -(2**31)

SAMPLES: dict[int, dict[str, dict[str, dict[str, Any]]]] = {
    # key: {direction: {variant: body}}
    0: {
        "req": {
            "a": {"transactional_id": "txn-1", "acks": -1, "timeout_ms": 30000, "topic_data": [
                {"name": "topic-a",
                 "partition_data": [{"index": 0, "records": b"\x00\x01batch"}, {"index": 3, "records": b""}]},
                {"name": "b", "partition_data": []}]},
            "b": {"transactional_id": None, "acks": 1, "timeout_ms": 1500, "topic_data": [
                {"name": "t", "partition_data": [{"index": 2, "records": None}]}]},
        },
        "resp": {
            "a": {"responses": [{"name": "topic-a", "partition_responses": [
                {"index": 0, "error_code": 0, "base_offset": 42, "log_append_time_ms": 1700000000000,
                 "log_start_offset": 7,
                 "record_errors": [{"batch_index": 1, "batch_index_error_message": "bad"},
                                   {"batch_index": 2, "batch_index_error_message": None}],
                 "error_message": "some failed", "current_leader": {"leader_id": 3, "leader_epoch": 9}}]}],
                "throttle_time_ms": 5,
                "node_endpoints": [{"node_id": 3, "host": "h3", "port": 9093, "rack": "r1"},
                                   {"node_id": 4, "host": "h4", "port": 9094, "rack": None}]},
            "b": {"responses": [{"name": "t", "partition_responses": [
                {"index": 1, "error_code": 6, "base_offset": -1, "log_append_time_ms": -1, "log_start_offset": -1,
                 "record_errors": [], "error_message": None,
                 "current_leader": {"leader_id": -1, "leader_epoch": -1}}]}],
                "throttle_time_ms": 0, "node_endpoints": []},
        },
    },
    3: {
        "req": {
            "a": {"topics": [{"topic_id": U1, "name": "topic-a"}, {"topic_id": Z, "name": "b"}],
                  "allow_auto_topic_creation": True,
                  "include_cluster_authorized_operations": False, "include_topic_authorized_operations": True},
            "b": {"topics": None, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
                  "include_topic_authorized_operations": False},
            "c": {"topics": [{"topic_id": U1, "name": None}], "allow_auto_topic_creation": False,
                  "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
        },
        "resp": {
            "a": {"throttle_time_ms": 10, "brokers": [{"node_id": 1, "host": "broker1", "port": 9092, "rack": "rack-a"},
                                                       {"node_id": 2, "host": "b2", "port": 9093, "rack": None}],
                  "cluster_id": "clu", "controller_id": 1, "topics": [
                      {"error_code": 0, "name": "topic-a", "topic_id": U1, "is_internal": False, "partitions": [
                          {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 5,
                           "replica_nodes": [1, 2], "isr_nodes": [1], "offline_replicas": [2]},
                          {"error_code": 5, "partition_index": 1, "leader_id": -1, "leader_epoch": -1,
                           "replica_nodes": [], "isr_nodes": [], "offline_replicas": []}],
                       "topic_authorized_operations": 248},
                      {"error_code": 3, "name": "missing", "topic_id": Z, "is_internal": True, "partitions": [],
                       "topic_authorized_operations": NO_OPS}],
                  "cluster_authorized_operations": 1024, "error_code": 0},
            "b": {"throttle_time_ms": 0, "brokers": [], "cluster_id": None, "controller_id": -1, "topics": [
                      {"error_code": 100, "name": None, "topic_id": U1, "is_internal": False, "partitions": [],
                       "topic_authorized_operations": NO_OPS}],
                  "cluster_authorized_operations": NO_OPS, "error_code": 129},
        },
    },
    18: {
        "req": {"a": {"client_software_name": "spark-kafka-sink", "client_software_version": "0.1.0"}},
        "resp": {
            "a": {"error_code": 0, "api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12},
                                                {"api_key": 18, "min_version": 0, "max_version": 4}],
                  "throttle_time_ms": 0,
                  "supported_features": [{"name": "transaction.version", "min_version": 0, "max_version": 2}],
                  "finalized_features_epoch": 12,
                  "finalized_features": [{"name": "transaction.version", "max_version_level": 2,
                                          "min_version_level": 0}],
                  "zk_migration_ready": False},
            "b": {"error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}],
                  "throttle_time_ms": 7, "supported_features": [], "finalized_features_epoch": -1,
                  "finalized_features": [], "zk_migration_ready": True},
        },
    },
    19: {
        "req": {"a": {"topics": [
            {"name": "t1", "num_partitions": 3, "replication_factor": 1, "assignments": [],
             "configs": [{"name": "cleanup.policy", "value": "compact"}, {"name": "x", "value": None}]},
            {"name": "t2", "num_partitions": -1, "replication_factor": -1,
             "assignments": [{"partition_index": 0, "broker_ids": [1, 2]}], "configs": []}],
            "timeout_ms": 30000, "validate_only": True}},
        "resp": {"a": {"throttle_time_ms": 3, "topics": [
            {"name": "t1", "topic_id": U1, "error_code": 0, "error_message": None, "topic_config_error_code": 0,
             "num_partitions": 3, "replication_factor": 1,
             "configs": [{"name": "cleanup.policy", "value": "compact", "read_only": False, "config_source": 1,
                          "is_sensitive": False},
                         {"name": "secret", "value": None, "read_only": True, "config_source": -1,
                          "is_sensitive": True}]},
            {"name": "t2", "topic_id": Z, "error_code": 36, "error_message": "exists", "topic_config_error_code": 29,
             "num_partitions": -1, "replication_factor": -1, "configs": None}]}},
    },
    32: {
        "req": {"a": {"resources": [
            {"resource_type": 2, "resource_name": "t1", "configuration_keys": ["max.message.bytes", "cleanup.policy"]},
            {"resource_type": 2, "resource_name": "t2", "configuration_keys": None}],
            "include_synonyms": False, "include_documentation": True}},
        "resp": {"a": {"throttle_time_ms": 3, "results": [
            {"error_code": 0, "error_message": None, "resource_type": 2, "resource_name": "t1", "configs": [
                {"name": "max.message.bytes", "value": "2000", "read_only": False, "config_source": 1,
                 "is_sensitive": False, "synonyms": [{"name": "message.max.bytes", "value": "1048588", "source": 5}],
                 "config_type": 3, "documentation": "doc"},
                {"name": "secret", "value": None, "read_only": True, "config_source": -1, "is_sensitive": True,
                 "synonyms": [], "config_type": 0, "documentation": None}]},
            {"error_code": 3, "error_message": "unknown", "resource_type": 2, "resource_name": "t2", "configs": []}]}},
    },
    22: {
        "req": {"a": {"transactional_id": "txn", "transaction_timeout_ms": 60000, "producer_id": 1000,
                      "producer_epoch": 5},
                "b": {"transactional_id": None, "transaction_timeout_ms": 2147483647, "producer_id": -1,
                      "producer_epoch": -1}},
        "resp": {"a": {"throttle_time_ms": 2, "error_code": 0, "producer_id": 4000, "producer_epoch": 2},
                 "b": {"throttle_time_ms": 0, "error_code": 51, "producer_id": -1, "producer_epoch": -1}},
    },
    10: {
        "req": {"a": {"key": "txn-1", "key_type": 1, "coordinator_keys": ["txn-1", "txn-2"]},
                "b": {"key": "group", "key_type": 0, "coordinator_keys": []}},
        "resp": {"a": {"throttle_time_ms": 4, "error_code": 0, "error_message": None, "node_id": 1, "host": "h",
                       "port": 9092,
                       "coordinators": [{"key": "txn-1", "node_id": 1, "host": "h", "port": 9092, "error_code": 0,
                                         "error_message": None},
                                        {"key": "txn-2", "node_id": -1, "host": "", "port": -1, "error_code": 15,
                                         "error_message": "not yet"}]},
                 "b": {"throttle_time_ms": 0, "error_code": 15, "error_message": "loading", "node_id": -1, "host": "",
                       "port": -1, "coordinators": []}},
    },
    24: {
        "req": {"a": {"v3_and_below_transactional_id": "txn", "v3_and_below_producer_id": 1000,
                      "v3_and_below_producer_epoch": 0,
                      "v3_and_below_topics": [{"name": "t", "partitions": [0, 1, 2]},
                                              {"name": "u", "partitions": []}]}},
        "resp": {"a": {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [{"name": "t", "results_by_partition": [
            {"partition_index": 0, "partition_error_code": 0}, {"partition_index": 1, "partition_error_code": 51}]}]}},
    },
    25: {
        "req": {"a": {"transactional_id": "txn", "producer_id": 1000, "producer_epoch": 3, "group_id": "g"}},
        "resp": {"a": {"throttle_time_ms": 1, "error_code": 0}},
    },
    26: {
        "req": {"a": {"transactional_id": "txn", "producer_id": 1000, "producer_epoch": 3, "committed": True},
                "b": {"transactional_id": "txn", "producer_id": 1000, "producer_epoch": 3, "committed": False}},
        "resp": {"a": {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 4},
                 "b": {"throttle_time_ms": 9, "error_code": 90, "producer_id": -1, "producer_epoch": -1}},
    },
    28: {
        "req": {"a": {"transactional_id": "txn", "group_id": "g", "producer_id": 1000, "producer_epoch": 3,
                      "generation_id": -1,
                      "member_id": "", "group_instance_id": None, "topics": [{"name": "t", "partitions": [
                          {"partition_index": 0, "committed_offset": 100, "committed_leader_epoch": -1,
                           "committed_metadata": "writeId=7"},
                          {"partition_index": 1, "committed_offset": 5, "committed_leader_epoch": 2,
                           "committed_metadata": None}]}]}},
        "resp": {"a": {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
            {"partition_index": 0, "error_code": 0}, {"partition_index": 1, "error_code": 3}]}]}},
    },
    9: {
        "req": {"a": {"group_id": "g", "topics": [{"name": "t", "partition_indexes": [0, 1]}],
                      "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1,
                                  "topics": [{"name": "t", "partition_indexes": [0, 1]}]}], "require_stable": True},
                "b": {"group_id": "g", "topics": None,
                      "groups": [{"group_id": "g", "member_id": None, "member_epoch": -1, "topics": None}],
                      "require_stable": False}},
        "resp": {"a": {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
                           {"partition_index": 0, "committed_offset": 100, "committed_leader_epoch": 3,
                            "metadata": "writeId=7", "error_code": 0},
                           {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1,
                            "metadata": None, "error_code": 0}]}],
                       "error_code": 0,
                       "groups": [{"group_id": "g", "topics": [{"name": "t", "partitions": [
                           {"partition_index": 0, "committed_offset": 100, "committed_leader_epoch": 3,
                            "metadata": "writeId=7", "error_code": 0},
                           {"partition_index": 1, "committed_offset": -1, "committed_leader_epoch": -1,
                            "metadata": None, "error_code": 0}]}],
                                   "error_code": 0}]}},
    },
    17: {
        "req": {"a": {"mechanism": "SCRAM-SHA-512"}},
        "resp": {"a": {"error_code": 0, "mechanisms": ["PLAIN", "SCRAM-SHA-512"]},
                 "b": {"error_code": 33, "mechanisms": []}},
    },
    36: {
        "req": {"a": {"auth_bytes": b"\x00user\x00pass"}},
        "resp": {"a": {"error_code": 0, "error_message": None, "auth_bytes": b"server-final",
                       "session_lifetime_ms": 3600000},
                 "b": {"error_code": 58, "error_message": "bad password", "auth_bytes": b"", "session_lifetime_ms": 0}},
    },
    1: {
        "req": {
            "a": {"cluster_id": "clu", "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 52428800,
                  "isolation_level": 1, "session_id": 0, "session_epoch": -1, "topics": [
                      {"topic": "topic-a", "partitions": [
                          {"partition": 0, "current_leader_epoch": 5, "fetch_offset": 42, "last_fetched_epoch": 4,
                           "log_start_offset": -1, "partition_max_bytes": 1048576},
                          {"partition": 3, "current_leader_epoch": -1, "fetch_offset": 0, "last_fetched_epoch": -1,
                           "log_start_offset": 9, "partition_max_bytes": 0}]},
                      {"topic": "b", "partitions": []}],
                  "forgotten_topics_data": [{"topic": "old", "partitions": [1, 2]}], "rack_id": "rack-a"},
            "b": {"cluster_id": None, "replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 2147483647,
                  "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
                      {"topic": "t", "partitions": [
                          {"partition": 1, "current_leader_epoch": -1, "fetch_offset": 7, "last_fetched_epoch": -1,
                           "log_start_offset": -1, "partition_max_bytes": 65536}]}],
                  "forgotten_topics_data": [], "rack_id": ""},
        },
        "resp": {
            "a": {"throttle_time_ms": 5, "error_code": 0, "session_id": 0, "responses": [
                {"topic": "topic-a", "partitions": [
                {"partition_index": 0, "error_code": 0, "high_watermark": 100, "last_stable_offset": 90,
                 "log_start_offset": 3, "diverging_epoch": {"epoch": 2, "end_offset": 50},
                 "current_leader": {"leader_id": 1, "leader_epoch": 7}, "snapshot_id": {"end_offset": 10, "epoch": 1},
                 "aborted_transactions": [{"producer_id": 1000, "first_offset": 20},
                                          {"producer_id": 1001, "first_offset": 33}],
                 "preferred_read_replica": -1, "records": b"\x00\x01batch"},
                {"partition_index": 1, "error_code": 6, "high_watermark": -1, "last_stable_offset": -1,
                 "log_start_offset": -1, "diverging_epoch": {"epoch": -1, "end_offset": -1},
                 "current_leader": {"leader_id": 2, "leader_epoch": -1},
                 "snapshot_id": {"end_offset": -1, "epoch": -1}, "aborted_transactions": None,
                 "preferred_read_replica": 2, "records": None}]}]},
            "b": {"throttle_time_ms": 0, "error_code": 0, "session_id": 123, "responses": [
                {"topic": "t", "partitions": [
                {"partition_index": 2, "error_code": 0, "high_watermark": 0, "last_stable_offset": 0,
                 "log_start_offset": 0, "diverging_epoch": {"epoch": -1, "end_offset": -1},
                 "current_leader": {"leader_id": -1, "leader_epoch": -1},
                 "snapshot_id": {"end_offset": -1, "epoch": -1}, "aborted_transactions": [],
                 "preferred_read_replica": -1, "records": b""}]}]},
            "c": {"throttle_time_ms": 1, "error_code": 70, "session_id": 0, "responses": []},
        },
    },
    2: {
        "req": {
            "a": {"replica_id": -1, "isolation_level": 1, "topics": [{"name": "topic-a", "partitions": [
                      {"partition_index": 0, "current_leader_epoch": 5, "timestamp": -1},
                      {"partition_index": 2, "current_leader_epoch": -1, "timestamp": -2}]}],
                  "timeout_ms": 30000},
            "b": {"replica_id": -1, "isolation_level": 0, "topics": [
                      {"name": "t", "partitions": [
                          {"partition_index": 1, "current_leader_epoch": -1, "timestamp": 1700000000000}]},
                      {"name": "u", "partitions": []}],
                  "timeout_ms": 0},
        },
        "resp": {
            "a": {"throttle_time_ms": 3, "topics": [{"name": "topic-a", "partitions": [
                {"partition_index": 0, "error_code": 0, "timestamp": -1, "offset": 1234, "leader_epoch": 5},
                {"partition_index": 2, "error_code": 78, "timestamp": -1, "offset": -1, "leader_epoch": -1}]}]},
            "b": {"throttle_time_ms": 0, "topics": [{"name": "t", "partitions": [
                {"partition_index": 1, "error_code": 6, "timestamp": 1700000000000, "offset": 55,
                 "leader_epoch": -1}]}]},
        },
    },
    66: {
        "req": {
            "a": {"state_filters": ["Ongoing", "PrepareCommit"], "producer_id_filters": [7, 1 << 40],
                  "duration_filter": 60000, "transactional_id_pattern": "sks-pool-.*"},
            "b": {"state_filters": [], "producer_id_filters": [], "duration_filter": -1,
                  "transactional_id_pattern": None},
        },
        "resp": {
            "a": {"throttle_time_ms": 2, "error_code": 0, "unknown_state_filters": ["Bogus"], "transaction_states": [
                {"transactional_id": "sks-pool-0-1", "producer_id": 1000, "transaction_state": "Ongoing"},
                {"transactional_id": "t", "producer_id": 3, "transaction_state": "CompleteCommit"}]},
            "b": {"throttle_time_ms": 0, "error_code": 14, "unknown_state_filters": [], "transaction_states": []},
        },
    },
    65: {
        "req": {
            "a": {"transactional_ids": ["sks-pool-0-1", "x"]},
            "b": {"transactional_ids": []},
        },
        "resp": {
            "a": {"throttle_time_ms": 1, "transaction_states": [
                {"error_code": 0, "transactional_id": "sks-pool-0-1", "transaction_state": "Ongoing",
                 "transaction_timeout_ms": 900000, "transaction_start_time_ms": 1700000000000,
                 "producer_id": 1000, "producer_epoch": 3,
                 "topics": [{"topic": "events", "partitions": [0, 2]}]},
                {"error_code": 105, "transactional_id": "x", "transaction_state": "", "transaction_timeout_ms": 0,
                 "transaction_start_time_ms": -1, "producer_id": -1, "producer_epoch": -1, "topics": []}]},
            "b": {"throttle_time_ms": 0, "transaction_states": []},
        },
    },
    61: {
        "req": {
            "a": {"topics": [{"name": "events", "partition_indexes": [0, 1, 2]},
                             {"name": "t", "partition_indexes": []}]},
            "b": {"topics": []},
        },
        "resp": {
            "a": {"throttle_time_ms": 0, "topics": [{"name": "events", "partitions": [
                {"partition_index": 0, "error_code": 0, "error_message": None, "active_producers": [
                    {"producer_id": 1000, "producer_epoch": 3, "last_sequence": 41, "last_timestamp": 1700000000000,
                     "coordinator_epoch": 2, "current_txn_start_offset": 120}]},
                {"partition_index": 1, "error_code": 6, "error_message": "not leader", "active_producers": []}]}]},
            "b": {"throttle_time_ms": 5, "topics": []},
        },
    },
}

GOLDEN: dict[tuple[int, int, str, str], str | None] = {
    (0, 3, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 4, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 5, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 6, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 7, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 8, 'req', 'a'): (
        "000574786e2d31ffff00007530000000020007746f7069632d6100000002000000000000000700016261746368000000030000000000"
        "016200000000"
    ),
    (0, 9, 'req', 'a'): (
        "0674786e2d31ffff000075300308746f7069632d610300000000080001626174636800000000030100000262010000"
    ),
    (0, 10, 'req', 'a'): (
        "0674786e2d31ffff000075300308746f7069632d610300000000080001626174636800000000030100000262010000"
    ),
    (0, 11, 'req', 'a'): (
        "0674786e2d31ffff000075300308746f7069632d610300000000080001626174636800000000030100000262010000"
    ),
    (0, 12, 'req', 'a'): (
        "0674786e2d31ffff000075300308746f7069632d610300000000080001626174636800000000030100000262010000"
    ),
    (0, 3, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 4, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 5, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 6, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 7, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 8, 'req', 'b'): "ffff0001000005dc000000010001740000000100000002ffffffff",
    (0, 9, 'req', 'b'): "000001000005dc020274020000000200000000",
    (0, 10, 'req', 'b'): "000001000005dc020274020000000200000000",
    (0, 11, 'req', 'b'): "000001000005dc020274020000000200000000",
    (0, 12, 'req', 'b'): "000001000005dc020274020000000200000000",
    (0, 3, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe5680000000005"
    ),
    (0, 4, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe5680000000005"
    ),
    (0, 5, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe56800000000000000000700000005"
    ),
    (0, 6, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe56800000000000000000700000005"
    ),
    (0, 7, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe56800000000000000000700000005"
    ),
    (0, 8, 'resp', 'a'): (
        "000000010007746f7069632d6100000001000000000000000000000000002a0000018bcfe56800000000000000000700000002000000"
        "01000362616400000002ffff000b736f6d65206661696c656400000005"
    ),
    (0, 9, 'resp', 'a'): (
        "0208746f7069632d6102000000000000000000000000002a0000018bcfe5680000000000000000070300000001046261640000000002"
        "00000c736f6d65206661696c656400000000000500"
    ),
    (0, 10, 'resp', 'a'): (
        "0208746f7069632d6102000000000000000000000000002a0000018bcfe5680000000000000000070300000001046261640000000002"
        "00000c736f6d65206661696c6564010009000000030000000900000000000501001d0300000003036833000023850372310000000004"
        "036834000023860000"
    ),
    (0, 11, 'resp', 'a'): (
        "0208746f7069632d6102000000000000000000000000002a0000018bcfe5680000000000000000070300000001046261640000000002"
        "00000c736f6d65206661696c6564010009000000030000000900000000000501001d0300000003036833000023850372310000000004"
        "036834000023860000"
    ),
    (0, 12, 'resp', 'a'): (
        "0208746f7069632d6102000000000000000000000000002a0000018bcfe5680000000000000000070300000001046261640000000002"
        "00000c736f6d65206661696c6564010009000000030000000900000000000501001d0300000003036833000023850372310000000004"
        "036834000023860000"
    ),
    (0, 3, 'resp', 'b'): "0000000100017400000001000000010006ffffffffffffffffffffffffffffffff00000000",
    (0, 4, 'resp', 'b'): "0000000100017400000001000000010006ffffffffffffffffffffffffffffffff00000000",
    (0, 5, 'resp', 'b'): (
        "0000000100017400000001000000010006ffffffffffffffffffffffffffffffffffffffffffffffff00000000"
    ),
    (0, 6, 'resp', 'b'): (
        "0000000100017400000001000000010006ffffffffffffffffffffffffffffffffffffffffffffffff00000000"
    ),
    (0, 7, 'resp', 'b'): (
        "0000000100017400000001000000010006ffffffffffffffffffffffffffffffffffffffffffffffff00000000"
    ),
    (0, 8, 'resp', 'b'): (
        "0000000100017400000001000000010006ffffffffffffffffffffffffffffffffffffffffffffffff00000000ffff00000000"
    ),
    (0, 9, 'resp', 'b'): (
        "02027402000000010006ffffffffffffffffffffffffffffffffffffffffffffffff010000000000000000"
    ),
    (0, 10, 'resp', 'b'): (
        "02027402000000010006ffffffffffffffffffffffffffffffffffffffffffffffff010000000000000000"
    ),
    (0, 11, 'resp', 'b'): (
        "02027402000000010006ffffffffffffffffffffffffffffffffffffffffffffffff010000000000000000"
    ),
    (0, 12, 'resp', 'b'): (
        "02027402000000010006ffffffffffffffffffffffffffffffffffffffffffffffff010000000000000000"
    ),
    (3, 0, 'req', 'a'): "000000020007746f7069632d61000162",
    (3, 1, 'req', 'a'): "000000020007746f7069632d61000162",
    (3, 2, 'req', 'a'): "000000020007746f7069632d61000162",
    (3, 3, 'req', 'a'): "000000020007746f7069632d61000162",
    (3, 4, 'req', 'a'): "000000020007746f7069632d6100016201",
    (3, 5, 'req', 'a'): "000000020007746f7069632d6100016201",
    (3, 6, 'req', 'a'): "000000020007746f7069632d6100016201",
    (3, 7, 'req', 'a'): "000000020007746f7069632d6100016201",
    (3, 8, 'req', 'a'): "000000020007746f7069632d61000162010001",
    (3, 9, 'req', 'a'): "0308746f7069632d610002620001000100",
    (3, 10, 'req', 'a'): (
        "030f1e2d3c4b5a69788796a5b4c3d2e1f008746f7069632d61000000000000000000000000000000000002620001000100"
    ),
    (3, 11, 'req', 'a'): (
        "030f1e2d3c4b5a69788796a5b4c3d2e1f008746f7069632d610000000000000000000000000000000000026200010100"
    ),
    (3, 12, 'req', 'a'): (
        "030f1e2d3c4b5a69788796a5b4c3d2e1f008746f7069632d610000000000000000000000000000000000026200010100"
    ),
    (3, 13, 'req', 'a'): (
        "030f1e2d3c4b5a69788796a5b4c3d2e1f008746f7069632d610000000000000000000000000000000000026200010100"
    ),
    (3, 0, 'req', 'b'): None,
    (3, 1, 'req', 'b'): "ffffffff",
    (3, 2, 'req', 'b'): "ffffffff",
    (3, 3, 'req', 'b'): "ffffffff",
    (3, 4, 'req', 'b'): "ffffffff00",
    (3, 5, 'req', 'b'): "ffffffff00",
    (3, 6, 'req', 'b'): "ffffffff00",
    (3, 7, 'req', 'b'): "ffffffff00",
    (3, 8, 'req', 'b'): "ffffffff000100",
    (3, 9, 'req', 'b'): "0000010000",
    (3, 10, 'req', 'b'): "0000010000",
    (3, 11, 'req', 'b'): "00000000",
    (3, 12, 'req', 'b'): "00000000",
    (3, 13, 'req', 'b'): "00000000",
    (3, 0, 'req', 'c'): None,
    (3, 1, 'req', 'c'): None,
    (3, 2, 'req', 'c'): None,
    (3, 3, 'req', 'c'): None,
    (3, 4, 'req', 'c'): None,
    (3, 5, 'req', 'c'): None,
    (3, 6, 'req', 'c'): None,
    (3, 7, 'req', 'c'): None,
    (3, 8, 'req', 'c'): None,
    (3, 9, 'req', 'c'): None,
    (3, 10, 'req', 'c'): "020f1e2d3c4b5a69788796a5b4c3d2e1f0000000000000",
    (3, 11, 'req', 'c'): "020f1e2d3c4b5a69788796a5b4c3d2e1f00000000000",
    (3, 12, 'req', 'c'): "020f1e2d3c4b5a69788796a5b4c3d2e1f00000000000",
    (3, 13, 'req', 'c'): "020f1e2d3c4b5a69788796a5b4c3d2e1f00000000000",
    (3, 0, 'resp', 'a'): (
        "0000000200000001000762726f6b657231000023840000000200026232000023850000000200000007746f7069632d61000000020000"
        "00000000000000010000000200000001000000020000000100000001000500000001ffffffff0000000000000000000300076d697373"
        "696e6700000000"
    ),
    (3, 1, 'resp', 'a'): (
        "0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0000000100000002000000"
        "07746f7069632d610000000002000000000000000000010000000200000001000000020000000100000001000500000001ffffffff00"
        "00000000000000000300076d697373696e670100000000"
    ),
    (3, 2, 'resp', 'a'): (
        "0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c75000000010000"
        "000200000007746f7069632d610000000002000000000000000000010000000200000001000000020000000100000001000500000001"
        "ffffffff0000000000000000000300076d697373696e670100000000"
    ),
    (3, 3, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000002000000010000000200000001000000010005"
        "00000001ffffffff0000000000000000000300076d697373696e670100000000"
    ),
    (3, 4, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000002000000010000000200000001000000010005"
        "00000001ffffffff0000000000000000000300076d697373696e670100000000"
    ),
    (3, 5, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000002000000010000000200000001000000010000"
        "000100000002000500000001ffffffff000000000000000000000000000300076d697373696e670100000000"
    ),
    (3, 6, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000002000000010000000200000001000000010000"
        "000100000002000500000001ffffffff000000000000000000000000000300076d697373696e670100000000"
    ),
    (3, 7, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000005000000020000000100000002000000010000"
        "00010000000100000002000500000001ffffffffffffffff000000000000000000000000000300076d697373696e670100000000"
    ),
    (3, 8, 'resp', 'a'): (
        "0000000a0000000200000001000762726f6b6572310000238400067261636b2d61000000020002623200002385ffff0003636c750000"
        "00010000000200000007746f7069632d6100000000020000000000000000000100000005000000020000000100000002000000010000"
        "00010000000100000002000500000001ffffffffffffffff000000000000000000000000000000f8000300076d697373696e67010000"
        "00008000000000000400"
    ),
    (3, 9, 'resp', 'a'): (
        "0000000a03000000010862726f6b65723100002384077261636b2d61000000000203623200002385000004636c750000000103000008"
        "746f7069632d61000300000000000000000001000000050300000001000000020200000001020000000200000500000001ffffffffff"
        "ffffff01010100000000f8000003086d697373696e67010180000000000000040000"
    ),
    (3, 10, 'resp', 'a'): (
        "0000000a03000000010862726f6b65723100002384077261636b2d61000000000203623200002385000004636c750000000103000008"
        "746f7069632d610f1e2d3c4b5a69788796a5b4c3d2e1f000030000000000000000000100000005030000000100000002020000000102"
        "0000000200000500000001ffffffffffffffff01010100000000f8000003086d697373696e6700000000000000000000000000000000"
        "010180000000000000040000"
    ),
    (3, 11, 'resp', 'a'): (
        "0000000a03000000010862726f6b65723100002384077261636b2d61000000000203623200002385000004636c750000000103000008"
        "746f7069632d610f1e2d3c4b5a69788796a5b4c3d2e1f000030000000000000000000100000005030000000100000002020000000102"
        "0000000200000500000001ffffffffffffffff01010100000000f8000003086d697373696e6700000000000000000000000000000000"
        "0101800000000000"
    ),
    (3, 12, 'resp', 'a'): (
        "0000000a03000000010862726f6b65723100002384077261636b2d61000000000203623200002385000004636c750000000103000008"
        "746f7069632d610f1e2d3c4b5a69788796a5b4c3d2e1f000030000000000000000000100000005030000000100000002020000000102"
        "0000000200000500000001ffffffffffffffff01010100000000f8000003086d697373696e6700000000000000000000000000000000"
        "0101800000000000"
    ),
    (3, 13, 'resp', 'a'): (
        "0000000a03000000010862726f6b65723100002384077261636b2d61000000000203623200002385000004636c750000000103000008"
        "746f7069632d610f1e2d3c4b5a69788796a5b4c3d2e1f000030000000000000000000100000005030000000100000002020000000102"
        "0000000200000500000001ffffffffffffffff01010100000000f8000003086d697373696e6700000000000000000000000000000000"
        "01018000000000000000"
    ),
    (3, 0, 'resp', 'b'): None,
    (3, 1, 'resp', 'b'): None,
    (3, 2, 'resp', 'b'): None,
    (3, 3, 'resp', 'b'): None,
    (3, 4, 'resp', 'b'): None,
    (3, 5, 'resp', 'b'): None,
    (3, 6, 'resp', 'b'): None,
    (3, 7, 'resp', 'b'): None,
    (3, 8, 'resp', 'b'): None,
    (3, 9, 'resp', 'b'): None,
    (3, 10, 'resp', 'b'): None,
    (3, 11, 'resp', 'b'): None,
    (3, 12, 'resp', 'b'): "000000000100ffffffff020064000f1e2d3c4b5a69788796a5b4c3d2e1f00001800000000000",
    (3, 13, 'resp', 'b'): "000000000100ffffffff020064000f1e2d3c4b5a69788796a5b4c3d2e1f000018000000000008100",
    (18, 0, 'req', 'a'): "",
    (18, 1, 'req', 'a'): "",
    (18, 2, 'req', 'a'): "",
    (18, 3, 'req', 'a'): "11737061726b2d6b61666b612d73696e6b06302e312e3000",
    (18, 4, 'req', 'a'): "11737061726b2d6b61666b612d73696e6b06302e312e3000",
    (18, 0, 'resp', 'a'): "00000000000200000003000c001200000004",
    (18, 1, 'resp', 'a'): "00000000000200000003000c00120000000400000000",
    (18, 2, 'resp', 'a'): "00000000000200000003000c00120000000400000000",
    (18, 3, 'resp', 'a'): (
        "00000300000003000c00001200000004000000000003001a02147472616e73616374696f6e2e76657273696f6e000000020001080000"
        "00000000000c021a02147472616e73616374696f6e2e76657273696f6e0002000000"
    ),
    (18, 4, 'resp', 'a'): (
        "00000300000003000c00001200000004000000000003001a02147472616e73616374696f6e2e76657273696f6e000000020001080000"
        "00000000000c021a02147472616e73616374696f6e2e76657273696f6e0002000000"
    ),
    (18, 0, 'resp', 'b'): "002300000001001200000002",
    (18, 1, 'resp', 'b'): "00230000000100120000000200000007",
    (18, 2, 'resp', 'b'): "00230000000100120000000200000007",
    (18, 3, 'resp', 'b'): "002302001200000002000000000701030101",
    (18, 4, 'resp', 'b'): "002302001200000002000000000701030101",
    (19, 2, 'req', 'a'): (
        "00000002000274310000000300010000000000000002000e636c65616e75702e706f6c6963790007636f6d70616374000178ffff0002"
        "7432ffffffffffff0000000100000000000000020000000100000002000000000000753001"
    ),
    (19, 3, 'req', 'a'): (
        "00000002000274310000000300010000000000000002000e636c65616e75702e706f6c6963790007636f6d70616374000178ffff0002"
        "7432ffffffffffff0000000100000000000000020000000100000002000000000000753001"
    ),
    (19, 4, 'req', 'a'): (
        "00000002000274310000000300010000000000000002000e636c65616e75702e706f6c6963790007636f6d70616374000178ffff0002"
        "7432ffffffffffff0000000100000000000000020000000100000002000000000000753001"
    ),
    (19, 5, 'req', 'a'): (
        "0303743100000003000101030f636c65616e75702e706f6c69637908636f6d70616374000278000000037432ffffffffffff02000000"
        "00030000000100000002000100000075300100"
    ),
    (19, 6, 'req', 'a'): (
        "0303743100000003000101030f636c65616e75702e706f6c69637908636f6d70616374000278000000037432ffffffffffff02000000"
        "00030000000100000002000100000075300100"
    ),
    (19, 7, 'req', 'a'): (
        "0303743100000003000101030f636c65616e75702e706f6c69637908636f6d70616374000278000000037432ffffffffffff02000000"
        "00030000000100000002000100000075300100"
    ),
    (32, 4, 'req', 'a'): (
        "030203743103126d61782e6d6573736167652e62797465730f636c65616e75702e706f6c69637900020374320000000100"),
    (32, 4, 'resp', 'a'): (
        "00000003030000000203743103126d61782e6d6573736167652e6279746573053230303000010002126d6573736167652e6d61782e"
        "6279746573083130343835383805000304646f6300077365637265740001ff010100000000000308756e6b6e6f776e0203743201"
        "0000"),
    (19, 2, 'resp', 'a'): "0000000300000002000274310000ffff0002743200240006657869737473",
    (19, 3, 'resp', 'a'): "0000000300000002000274310000ffff0002743200240006657869737473",
    (19, 4, 'resp', 'a'): "0000000300000002000274310000ffff0002743200240006657869737473",
    (19, 5, 'resp', 'a'): (
        "0000000303037431000000000000030001030f636c65616e75702e706f6c69637908636f6d7061637400010000077365637265740001"
        "ff010000037432002407657869737473ffffffffffff00010002001d00"
    ),
    (19, 6, 'resp', 'a'): (
        "0000000303037431000000000000030001030f636c65616e75702e706f6c69637908636f6d7061637400010000077365637265740001"
        "ff010000037432002407657869737473ffffffffffff00010002001d00"
    ),
    (19, 7, 'resp', 'a'): (
        "00000003030374310f1e2d3c4b5a69788796a5b4c3d2e1f0000000000000030001030f636c65616e75702e706f6c69637908636f6d70"
        "61637400010000077365637265740001ff01000003743200000000000000000000000000000000002407657869737473ffffffffffff"
        "00010002001d00"
    ),
    (22, 0, 'req', 'a'): "000374786e0000ea60",
    (22, 1, 'req', 'a'): "000374786e0000ea60",
    (22, 2, 'req', 'a'): "0474786e0000ea6000",
    (22, 3, 'req', 'a'): "0474786e0000ea6000000000000003e8000500",
    (22, 4, 'req', 'a'): "0474786e0000ea6000000000000003e8000500",
    (22, 5, 'req', 'a'): "0474786e0000ea6000000000000003e8000500",
    (22, 0, 'req', 'b'): "ffff7fffffff",
    (22, 1, 'req', 'b'): "ffff7fffffff",
    (22, 2, 'req', 'b'): "007fffffff00",
    (22, 3, 'req', 'b'): "007fffffffffffffffffffffffffff00",
    (22, 4, 'req', 'b'): "007fffffffffffffffffffffffffff00",
    (22, 5, 'req', 'b'): "007fffffffffffffffffffffffffff00",
    (22, 0, 'resp', 'a'): "0000000200000000000000000fa00002",
    (22, 1, 'resp', 'a'): "0000000200000000000000000fa00002",
    (22, 2, 'resp', 'a'): "0000000200000000000000000fa0000200",
    (22, 3, 'resp', 'a'): "0000000200000000000000000fa0000200",
    (22, 4, 'resp', 'a'): "0000000200000000000000000fa0000200",
    (22, 5, 'resp', 'a'): "0000000200000000000000000fa0000200",
    (22, 0, 'resp', 'b'): "000000000033ffffffffffffffffffff",
    (22, 1, 'resp', 'b'): "000000000033ffffffffffffffffffff",
    (22, 2, 'resp', 'b'): "000000000033ffffffffffffffffffff00",
    (22, 3, 'resp', 'b'): "000000000033ffffffffffffffffffff00",
    (22, 4, 'resp', 'b'): "000000000033ffffffffffffffffffff00",
    (22, 5, 'resp', 'b'): "000000000033ffffffffffffffffffff00",
    (10, 0, 'req', 'a'): "000574786e2d31",
    (10, 1, 'req', 'a'): "000574786e2d3101",
    (10, 2, 'req', 'a'): "000574786e2d3101",
    (10, 3, 'req', 'a'): "0674786e2d310100",
    (10, 4, 'req', 'a'): "01030674786e2d310674786e2d3200",
    (10, 5, 'req', 'a'): "01030674786e2d310674786e2d3200",
    (10, 6, 'req', 'a'): "01030674786e2d310674786e2d3200",
    (10, 0, 'req', 'b'): "000567726f7570",
    (10, 1, 'req', 'b'): "000567726f757000",
    (10, 2, 'req', 'b'): "000567726f757000",
    (10, 3, 'req', 'b'): "0667726f75700000",
    (10, 4, 'req', 'b'): "000100",
    (10, 5, 'req', 'b'): "000100",
    (10, 6, 'req', 'b'): "000100",
    (10, 0, 'resp', 'a'): "00000000000100016800002384",
    (10, 1, 'resp', 'a'): "000000040000ffff0000000100016800002384",
    (10, 2, 'resp', 'a'): "000000040000ffff0000000100016800002384",
    (10, 3, 'resp', 'a'): "000000040000000000000102680000238400",
    (10, 4, 'resp', 'a'): (
        "00000004030674786e2d3100000001026800002384000000000674786e2d32ffffffff01ffffffff000f086e6f74207965740000"
    ),
    (10, 5, 'resp', 'a'): (
        "00000004030674786e2d3100000001026800002384000000000674786e2d32ffffffff01ffffffff000f086e6f74207965740000"
    ),
    (10, 6, 'resp', 'a'): (
        "00000004030674786e2d3100000001026800002384000000000674786e2d32ffffffff01ffffffff000f086e6f74207965740000"
    ),
    (10, 0, 'resp', 'b'): "000fffffffff0000ffffffff",
    (10, 1, 'resp', 'b'): "00000000000f00076c6f6164696e67ffffffff0000ffffffff",
    (10, 2, 'resp', 'b'): "00000000000f00076c6f6164696e67ffffffff0000ffffffff",
    (10, 3, 'resp', 'b'): "00000000000f086c6f6164696e67ffffffff01ffffffff00",
    (10, 4, 'resp', 'b'): "000000000100",
    (10, 5, 'resp', 'b'): "000000000100",
    (10, 6, 'resp', 'b'): "000000000100",
    (24, 0, 'req', 'a'): (
        "000374786e00000000000003e80000000000020001740000000300000000000000010000000200017500000000"
    ),
    (24, 1, 'req', 'a'): (
        "000374786e00000000000003e80000000000020001740000000300000000000000010000000200017500000000"
    ),
    (24, 2, 'req', 'a'): (
        "000374786e00000000000003e80000000000020001740000000300000000000000010000000200017500000000"
    ),
    (24, 3, 'req', 'a'): "0474786e00000000000003e8000003027404000000000000000100000002000275010000",
    (24, 0, 'resp', 'a'): "000000000000000100017400000002000000000000000000010033",
    (24, 1, 'resp', 'a'): "000000000000000100017400000002000000000000000000010033",
    (24, 2, 'resp', 'a'): "000000000000000100017400000002000000000000000000010033",
    (24, 3, 'resp', 'a'): "000000000202740300000000000000000000010033000000",
    (25, 0, 'req', 'a'): "000374786e00000000000003e80003000167",
    (25, 1, 'req', 'a'): "000374786e00000000000003e80003000167",
    (25, 2, 'req', 'a'): "000374786e00000000000003e80003000167",
    (25, 3, 'req', 'a'): "0474786e00000000000003e80003026700",
    (25, 4, 'req', 'a'): "0474786e00000000000003e80003026700",
    (25, 0, 'resp', 'a'): "000000010000",
    (25, 1, 'resp', 'a'): "000000010000",
    (25, 2, 'resp', 'a'): "000000010000",
    (25, 3, 'resp', 'a'): "00000001000000",
    (25, 4, 'resp', 'a'): "00000001000000",
    (26, 0, 'req', 'a'): "000374786e00000000000003e8000301",
    (26, 1, 'req', 'a'): "000374786e00000000000003e8000301",
    (26, 2, 'req', 'a'): "000374786e00000000000003e8000301",
    (26, 3, 'req', 'a'): "0474786e00000000000003e800030100",
    (26, 4, 'req', 'a'): "0474786e00000000000003e800030100",
    (26, 5, 'req', 'a'): "0474786e00000000000003e800030100",
    (26, 0, 'req', 'b'): "000374786e00000000000003e8000300",
    (26, 1, 'req', 'b'): "000374786e00000000000003e8000300",
    (26, 2, 'req', 'b'): "000374786e00000000000003e8000300",
    (26, 3, 'req', 'b'): "0474786e00000000000003e800030000",
    (26, 4, 'req', 'b'): "0474786e00000000000003e800030000",
    (26, 5, 'req', 'b'): "0474786e00000000000003e800030000",
    (26, 0, 'resp', 'a'): "000000000000",
    (26, 1, 'resp', 'a'): "000000000000",
    (26, 2, 'resp', 'a'): "000000000000",
    (26, 3, 'resp', 'a'): "00000000000000",
    (26, 4, 'resp', 'a'): "00000000000000",
    (26, 5, 'resp', 'a'): "00000000000000000000000003e8000400",
    (26, 0, 'resp', 'b'): "00000009005a",
    (26, 1, 'resp', 'b'): "00000009005a",
    (26, 2, 'resp', 'b'): "00000009005a",
    (26, 3, 'resp', 'b'): "00000009005a00",
    (26, 4, 'resp', 'b'): "00000009005a00",
    (26, 5, 'resp', 'b'): "00000009005affffffffffffffffffff00",
    (28, 0, 'req', 'a'): (
        "000374786e00016700000000000003e8000300000001000174000000020000000000000000000000640009777269746549643d370000"
        "00010000000000000005ffff"
    ),
    (28, 1, 'req', 'a'): (
        "000374786e00016700000000000003e8000300000001000174000000020000000000000000000000640009777269746549643d370000"
        "00010000000000000005ffff"
    ),
    (28, 2, 'req', 'a'): (
        "000374786e00016700000000000003e800030000000100017400000002000000000000000000000064ffffffff000977726974654964"
        "3d3700000001000000000000000500000002ffff"
    ),
    (28, 3, 'req', 'a'): (
        "0474786e026700000000000003e80003ffffffff010002027403000000000000000000000064ffffffff0a777269746549643d370000"
        "00000100000000000000050000000200000000"
    ),
    (28, 4, 'req', 'a'): (
        "0474786e026700000000000003e80003ffffffff010002027403000000000000000000000064ffffffff0a777269746549643d370000"
        "00000100000000000000050000000200000000"
    ),
    (28, 5, 'req', 'a'): (
        "0474786e026700000000000003e80003ffffffff010002027403000000000000000000000064ffffffff0a777269746549643d370000"
        "00000100000000000000050000000200000000"
    ),
    (28, 0, 'resp', 'a'): "000000000000000100017400000002000000000000000000010003",
    (28, 1, 'resp', 'a'): "000000000000000100017400000002000000000000000000010003",
    (28, 2, 'resp', 'a'): "000000000000000100017400000002000000000000000000010003",
    (28, 3, 'resp', 'a'): "000000000202740300000000000000000000010003000000",
    (28, 4, 'resp', 'a'): "000000000202740300000000000000000000010003000000",
    (28, 5, 'resp', 'a'): "000000000202740300000000000000000000010003000000",
    (9, 1, 'req', 'a'): "00016700000001000174000000020000000000000001",
    (9, 2, 'req', 'a'): "00016700000001000174000000020000000000000001",
    (9, 3, 'req', 'a'): "00016700000001000174000000020000000000000001",
    (9, 4, 'req', 'a'): "00016700000001000174000000020000000000000001",
    (9, 5, 'req', 'a'): "00016700000001000174000000020000000000000001",
    (9, 6, 'req', 'a'): "02670202740300000000000000010000",
    (9, 7, 'req', 'a'): "0267020274030000000000000001000100",
    (9, 8, 'req', 'a'): "02026702027403000000000000000100000100",
    (9, 9, 'req', 'a'): "02026700ffffffff02027403000000000000000100000100",
    (9, 1, 'req', 'b'): None,
    (9, 2, 'req', 'b'): "000167ffffffff",
    (9, 3, 'req', 'b'): "000167ffffffff",
    (9, 4, 'req', 'b'): "000167ffffffff",
    (9, 5, 'req', 'b'): "000167ffffffff",
    (9, 6, 'req', 'b'): "02670000",
    (9, 7, 'req', 'b'): "0267000000",
    (9, 8, 'req', 'b'): "02026700000000",
    (9, 9, 'req', 'b'): "02026700ffffffff00000000",
    (9, 1, 'resp', 'a'): (
        "00000001000174000000020000000000000000000000640009777269746549643d37000000000001ffffffffffffffffffff0000"
    ),
    (9, 2, 'resp', 'a'): (
        "00000001000174000000020000000000000000000000640009777269746549643d37000000000001ffffffffffffffffffff00000000"
    ),
    (9, 3, 'resp', 'a'): (
        "0000000000000001000174000000020000000000000000000000640009777269746549643d37000000000001ffffffffffffffffffff"
        "00000000"
    ),
    (9, 4, 'resp', 'a'): (
        "0000000000000001000174000000020000000000000000000000640009777269746549643d37000000000001ffffffffffffffffffff"
        "00000000"
    ),
    (9, 5, 'resp', 'a'): (
        "000000000000000100017400000002000000000000000000000064000000030009777269746549643d37000000000001ffffffffffff"
        "ffffffffffffffff00000000"
    ),
    (9, 6, 'resp', 'a'): (
        "0000000002027403000000000000000000000064000000030a777269746549643d3700000000000001ffffffffffffffffffffffff00"
        "00000000000000"
    ),
    (9, 7, 'resp', 'a'): (
        "0000000002027403000000000000000000000064000000030a777269746549643d3700000000000001ffffffffffffffffffffffff00"
        "00000000000000"
    ),
    (9, 8, 'resp', 'a'): (
        "0000000002026702027403000000000000000000000064000000030a777269746549643d3700000000000001ffffffffffffffffffff"
        "ffff000000000000000000"
    ),
    (9, 9, 'resp', 'a'): (
        "0000000002026702027403000000000000000000000064000000030a777269746549643d3700000000000001ffffffffffffffffffff"
        "ffff000000000000000000"
    ),
    (17, 0, 'req', 'a'): "000d534352414d2d5348412d353132",
    (17, 1, 'req', 'a'): "000d534352414d2d5348412d353132",
    (17, 0, 'resp', 'a'): "0000000000020005504c41494e000d534352414d2d5348412d353132",
    (17, 1, 'resp', 'a'): "0000000000020005504c41494e000d534352414d2d5348412d353132",
    (17, 0, 'resp', 'b'): "002100000000",
    (17, 1, 'resp', 'b'): "002100000000",
    (36, 0, 'req', 'a'): "0000000a00757365720070617373",
    (36, 1, 'req', 'a'): "0000000a00757365720070617373",
    (36, 2, 'req', 'a'): "0b0075736572007061737300",
    (36, 0, 'resp', 'a'): "0000ffff0000000c7365727665722d66696e616c",
    (36, 1, 'resp', 'a'): "0000ffff0000000c7365727665722d66696e616c000000000036ee80",
    (36, 2, 'resp', 'a'): "0000000d7365727665722d66696e616c000000000036ee8000",
    (36, 0, 'resp', 'b'): "003a000c6261642070617373776f726400000000",
    (36, 1, 'resp', 'b'): "003a000c6261642070617373776f7264000000000000000000000000",
    (36, 2, 'resp', 'b'): "003a0d6261642070617373776f726401000000000000000000",
    (1, 4, 'req', 'a'): (
        "ffffffff000001f4000000010320000001000000020007746f7069632d610000000200000000000000000000002a0010000000000003"
        "00000000000000000000000000016200000000"
    ),
    (1, 5, 'req', 'a'): (
        "ffffffff000001f4000000010320000001000000020007746f7069632d610000000200000000000000000000002affffffffffffffff"
        "0010000000000003000000000000000000000000000000090000000000016200000000"
    ),
    (1, 6, 'req', 'a'): (
        "ffffffff000001f4000000010320000001000000020007746f7069632d610000000200000000000000000000002affffffffffffffff"
        "0010000000000003000000000000000000000000000000090000000000016200000000"
    ),
    (1, 7, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff000000020007746f7069632d610000000200000000000000000000002a"
        "ffffffffffffffff00100000000000030000000000000000000000000000000900000000000162000000000000000100036f6c640000"
        "00020000000100000002"
    ),
    (1, 8, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff000000020007746f7069632d610000000200000000000000000000002a"
        "ffffffffffffffff00100000000000030000000000000000000000000000000900000000000162000000000000000100036f6c640000"
        "00020000000100000002"
    ),
    (1, 9, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff000000020007746f7069632d6100000002000000000000000500000000"
        "0000002affffffffffffffff0010000000000003ffffffff000000000000000000000000000000090000000000016200000000000000"
        "0100036f6c64000000020000000100000002"
    ),
    (1, 10, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff000000020007746f7069632d6100000002000000000000000500000000"
        "0000002affffffffffffffff0010000000000003ffffffff000000000000000000000000000000090000000000016200000000000000"
        "0100036f6c64000000020000000100000002"
    ),
    (1, 11, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff000000020007746f7069632d6100000002000000000000000500000000"
        "0000002affffffffffffffff0010000000000003ffffffff000000000000000000000000000000090000000000016200000000000000"
        "0100036f6c6400000002000000010000000200067261636b2d61"
    ),
    (1, 12, 'req', 'a'): (
        "ffffffff000001f400000001032000000100000000ffffffff0308746f7069632d61030000000000000005000000000000002a000000"
        "04ffffffffffffffff001000000000000003ffffffff0000000000000000ffffffff0000000000000009000000000000026201000204"
        "6f6c6403000000010000000200077261636b2d6101000404636c75"
    ),
    (1, 4, 'req', 'b'): (
        "ffffffff00000000000000007fffffff00000000010001740000000100000001000000000000000700010000"
    ),
    (1, 5, 'req', 'b'): (
        "ffffffff00000000000000007fffffff000000000100017400000001000000010000000000000007ffffffffffffffff00010000"
    ),
    (1, 6, 'req', 'b'): (
        "ffffffff00000000000000007fffffff000000000100017400000001000000010000000000000007ffffffffffffffff00010000"
    ),
    (1, 7, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff0000000100017400000001000000010000000000000007ffffffffffff"
        "ffff0001000000000000"
    ),
    (1, 8, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff0000000100017400000001000000010000000000000007ffffffffffff"
        "ffff0001000000000000"
    ),
    (1, 9, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff000000010001740000000100000001ffffffff0000000000000007ffff"
        "ffffffffffff0001000000000000"
    ),
    (1, 10, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff000000010001740000000100000001ffffffff0000000000000007ffff"
        "ffffffffffff0001000000000000"
    ),
    (1, 11, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff000000010001740000000100000001ffffffff0000000000000007ffff"
        "ffffffffffff00010000000000000000"
    ),
    (1, 12, 'req', 'b'): (
        "ffffffff00000000000000007fffffff0000000000ffffffff0202740200000001ffffffff0000000000000007ffffffffffffffffff"
        "ffffff000100000000010100"
    ),
    (1, 4, 'resp', 'a'): (
        "00000005000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000200000000000003"
        "e8000000000000001400000000000003e900000000000000210000000700016261746368000000010006ffffffffffffffffffffffff"
        "ffffffffffffffffffffffff"
    ),
    (1, 5, 'resp', 'a'): (
        "00000005000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000000003000000"
        "0200000000000003e8000000000000001400000000000003e900000000000000210000000700016261746368000000010006ffffffff"
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 6, 'resp', 'a'): (
        "00000005000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000000003000000"
        "0200000000000003e8000000000000001400000000000003e900000000000000210000000700016261746368000000010006ffffffff"
        "ffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 7, 'resp', 'a'): (
        "00000005000000000000000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000"
        "0000030000000200000000000003e8000000000000001400000000000003e90000000000000021000000070001626174636800000001"
        "0006ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 8, 'resp', 'a'): (
        "00000005000000000000000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000"
        "0000030000000200000000000003e8000000000000001400000000000003e90000000000000021000000070001626174636800000001"
        "0006ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 9, 'resp', 'a'): (
        "00000005000000000000000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000"
        "0000030000000200000000000003e8000000000000001400000000000003e90000000000000021000000070001626174636800000001"
        "0006ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 10, 'resp', 'a'): (
        "00000005000000000000000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000"
        "0000030000000200000000000003e8000000000000001400000000000003e90000000000000021000000070001626174636800000001"
        "0006ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff"
    ),
    (1, 11, 'resp', 'a'): (
        "00000005000000000000000000010007746f7069632d61000000020000000000000000000000000064000000000000005a0000000000"
        "0000030000000200000000000003e8000000000000001400000000000003e90000000000000021ffffffff0000000700016261746368"
        "000000010006ffffffffffffffffffffffffffffffffffffffffffffffffffffffff00000002ffffffff"
    ),
    (1, 12, 'resp', 'a'): (
        "000000050000000000000208746f7069632d61030000000000000000000000000064000000000000005a000000000000000303000000"
        "00000003e800000000000000140000000000000003e9000000000000002100ffffffff080001626174636803000d0000000200000000"
        "00000032000109000000010000000700020d000000000000000a0000000100000000010006ffffffffffffffffffffffffffffffffff"
        "ffffffffffffff00000000020001010900000002ffffffff000000"
    ),
    (1, 4, 'resp', 'b'): (
        "000000000000000100017400000001000000020000000000000000000000000000000000000000000000000000"
    ),
    (1, 5, 'resp', 'b'): (
        "0000000000000001000174000000010000000200000000000000000000000000000000000000000000000000000000000000000000"
    ),
    (1, 6, 'resp', 'b'): (
        "0000000000000001000174000000010000000200000000000000000000000000000000000000000000000000000000000000000000"
    ),
    (1, 7, 'resp', 'b'): (
        "0000000000000000007b0000000100017400000001000000020000000000000000000000000000000000000000000000000000000000"
        "0000000000"
    ),
    (1, 8, 'resp', 'b'): (
        "0000000000000000007b0000000100017400000001000000020000000000000000000000000000000000000000000000000000000000"
        "0000000000"
    ),
    (1, 9, 'resp', 'b'): (
        "0000000000000000007b0000000100017400000001000000020000000000000000000000000000000000000000000000000000000000"
        "0000000000"
    ),
    (1, 10, 'resp', 'b'): (
        "0000000000000000007b0000000100017400000001000000020000000000000000000000000000000000000000000000000000000000"
        "0000000000"
    ),
    (1, 11, 'resp', 'b'): (
        "0000000000000000007b0000000100017400000001000000020000000000000000000000000000000000000000000000000000000000"
        "00ffffffff00000000"
    ),
    (1, 12, 'resp', 'b'): (
        "0000000000000000007b0202740200000002000000000000000000000000000000000000000000000000000001ffffffff01000000"
    ),
    (1, 4, 'resp', 'c'): "0000000100000000",
    (1, 5, 'resp', 'c'): "0000000100000000",
    (1, 6, 'resp', 'c'): "0000000100000000",
    (1, 7, 'resp', 'c'): "0000000100460000000000000000",
    (1, 8, 'resp', 'c'): "0000000100460000000000000000",
    (1, 9, 'resp', 'c'): "0000000100460000000000000000",
    (1, 10, 'resp', 'c'): "0000000100460000000000000000",
    (1, 11, 'resp', 'c'): "0000000100460000000000000000",
    (1, 12, 'resp', 'c'): "000000010046000000000100",
    (2, 1, 'req', 'a'): (
        "ffffffff000000010007746f7069632d610000000200000000ffffffffffffffff00000002fffffffffffffffe"
    ),
    (2, 2, 'req', 'a'): (
        "ffffffff01000000010007746f7069632d610000000200000000ffffffffffffffff00000002fffffffffffffffe"
    ),
    (2, 3, 'req', 'a'): (
        "ffffffff01000000010007746f7069632d610000000200000000ffffffffffffffff00000002fffffffffffffffe"
    ),
    (2, 4, 'req', 'a'): (
        "ffffffff01000000010007746f7069632d61000000020000000000000005ffffffffffffffff00000002fffffffffffffffffffffffe"
    ),
    (2, 5, 'req', 'a'): (
        "ffffffff01000000010007746f7069632d61000000020000000000000005ffffffffffffffff00000002fffffffffffffffffffffffe"
    ),
    (2, 6, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000"
    ),
    (2, 7, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000"
    ),
    (2, 8, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000"
    ),
    (2, 9, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000"
    ),
    (2, 10, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000007530"
        "00"
    ),
    (2, 11, 'req', 'a'): (
        "ffffffff010208746f7069632d61030000000000000005ffffffffffffffff0000000002fffffffffffffffffffffffe000000007530"
        "00"
    ),
    (2, 1, 'req', 'b'): "ffffffff0000000200017400000001000000010000018bcfe5680000017500000000",
    (2, 2, 'req', 'b'): "ffffffff000000000200017400000001000000010000018bcfe5680000017500000000",
    (2, 3, 'req', 'b'): "ffffffff000000000200017400000001000000010000018bcfe5680000017500000000",
    (2, 4, 'req', 'b'): "ffffffff00000000020001740000000100000001ffffffff0000018bcfe5680000017500000000",
    (2, 5, 'req', 'b'): "ffffffff00000000020001740000000100000001ffffffff0000018bcfe5680000017500000000",
    (2, 6, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe5680000000275010000",
    (2, 7, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe5680000000275010000",
    (2, 8, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe5680000000275010000",
    (2, 9, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe5680000000275010000",
    (2, 10, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe568000000027501000000000000",
    (2, 11, 'req', 'b'): "ffffffff000302740200000001ffffffff0000018bcfe568000000027501000000000000",
    (2, 1, 'resp', 'a'): (
        "000000010007746f7069632d6100000002000000000000ffffffffffffffff00000000000004d200000002004effffffffffffffffff"
        "ffffffffffffff"
    ),
    (2, 2, 'resp', 'a'): (
        "00000003000000010007746f7069632d6100000002000000000000ffffffffffffffff00000000000004d200000002004effffffffff"
        "ffffffffffffffffffffff"
    ),
    (2, 3, 'resp', 'a'): (
        "00000003000000010007746f7069632d6100000002000000000000ffffffffffffffff00000000000004d200000002004effffffffff"
        "ffffffffffffffffffffff"
    ),
    (2, 4, 'resp', 'a'): (
        "00000003000000010007746f7069632d6100000002000000000000ffffffffffffffff00000000000004d20000000500000002004eff"
        "ffffffffffffffffffffffffffffffffffffff"
    ),
    (2, 5, 'resp', 'a'): (
        "00000003000000010007746f7069632d6100000002000000000000ffffffffffffffff00000000000004d20000000500000002004eff"
        "ffffffffffffffffffffffffffffffffffffff"
    ),
    (2, 6, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 7, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 8, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 9, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 10, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 11, 'resp', 'a'): (
        "000000030208746f7069632d6103000000000000ffffffffffffffff00000000000004d2000000050000000002004effffffffffffff"
        "ffffffffffffffffffffffffff000000"
    ),
    (2, 1, 'resp', 'b'): "00000001000174000000010000000100060000018bcfe568000000000000000037",
    (2, 2, 'resp', 'b'): "0000000000000001000174000000010000000100060000018bcfe568000000000000000037",
    (2, 3, 'resp', 'b'): "0000000000000001000174000000010000000100060000018bcfe568000000000000000037",
    (2, 4, 'resp', 'b'): "0000000000000001000174000000010000000100060000018bcfe568000000000000000037ffffffff",
    (2, 5, 'resp', 'b'): "0000000000000001000174000000010000000100060000018bcfe568000000000000000037ffffffff",
    (2, 6, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (2, 7, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (2, 8, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (2, 9, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (2, 10, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (2, 11, 'resp', 'b'): "00000000020274020000000100060000018bcfe568000000000000000037ffffffff000000",
    (66, 0, 'req', 'a'): "03084f6e676f696e670e50726570617265436f6d6d6974030000000000000007000001000000000000",
    (66, 1, 'req', 'a'): (
        "03084f6e676f696e670e50726570617265436f6d6d69740300000000000000070000010000000000000000000000ea6000"
    ),
    (66, 2, 'req', 'a'): (
        "03084f6e676f696e670e50726570617265436f6d6d69740300000000000000070000010000000000000000000000ea600c736b732d70"
        "6f6f6c2d2e2a00"
    ),
    (66, 0, 'req', 'b'): "010100",
    (66, 1, 'req', 'b'): "0101ffffffffffffffff00",
    (66, 2, 'req', 'b'): "0101ffffffffffffffff0000",
    (66, 0, 'resp', 'a'): (
        "0000000200000206426f677573030d736b732d706f6f6c2d302d3100000000000003e8084f6e676f696e670002740000000000000003"
        "0f436f6d706c657465436f6d6d69740000"
    ),
    (66, 1, 'resp', 'a'): (
        "0000000200000206426f677573030d736b732d706f6f6c2d302d3100000000000003e8084f6e676f696e670002740000000000000003"
        "0f436f6d706c657465436f6d6d69740000"
    ),
    (66, 2, 'resp', 'a'): (
        "0000000200000206426f677573030d736b732d706f6f6c2d302d3100000000000003e8084f6e676f696e670002740000000000000003"
        "0f436f6d706c657465436f6d6d69740000"
    ),
    (66, 0, 'resp', 'b'): "00000000000e010100",
    (66, 1, 'resp', 'b'): "00000000000e010100",
    (66, 2, 'resp', 'b'): "00000000000e010100",
    (65, 0, 'req', 'a'): "030d736b732d706f6f6c2d302d31027800",
    (65, 0, 'req', 'b'): "0100",
    (65, 0, 'resp', 'a'): (
        "000000010300000d736b732d706f6f6c2d302d31084f6e676f696e67000dbba00000018bcfe5680000000000000003e8000302076576"
        "656e74730300000000000000020000006902780100000000ffffffffffffffffffffffffffffffffffff010000"
    ),
    (65, 0, 'resp', 'b'): "000000000100",
    (61, 0, 'req', 'a'): "03076576656e747304000000000000000100000002000274010000",
    (61, 0, 'req', 'b'): "0100",
    (61, 0, 'resp', 'a'): (
        "0000000002076576656e747303000000000000000200000000000003e800000003000000290000018bcfe56800000000020000000000"
        "00007800000000000100060b6e6f74206c656164657201000000"
    ),
    (61, 0, 'resp', 'b'): "000000050100",
}
