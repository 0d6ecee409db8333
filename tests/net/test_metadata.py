"""The metadata cache: updates, lookups, topic errors, refresh policy, waiting across threads."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    KafkaTimeoutError,
    LeaderNotAvailableError,
    UnknownTopicIdError,
    UnknownTopicOrPartitionError,
)
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.cluster import NO_AUTHORIZED_OPERATIONS, AclOperation
from tests.net_settings import net_config

CONFIG = net_config(("b", 1), metadata_max_age_ms=10_000, retry_backoff_ms=100)


def partition(index: int, leader: int, epoch: int = 0, error: int = NO_ERROR) -> dict[str, Any]:
    return {"error_code": error, "partition_index": index, "leader_id": leader, "leader_epoch": epoch,
            "replica_nodes": [1, 2], "isr_nodes": [leader] if leader >= 0 else [], "offline_replicas": []}


def response(topics: list[dict[str, Any]], brokers: tuple[int, ...] = (1, 2)) -> dict[str, Any]:
    return {
        "brokers": [{"node_id": n, "host": f"h{n}", "port": 9000 + n, "rack": None} for n in brokers],
        "cluster_id": "cluster-x",
        "controller_id": 2,
        "topics": topics,
    }


def topic(name: str, *parts: dict[str, Any], error: int = NO_ERROR) -> dict[str, Any]:
    return {"error_code": error, "name": name, "is_internal": False, "partitions": list(parts)}


def test_update_and_lookups() -> None:
    md = Metadata(CONFIG)
    leaderless = partition(2, -1, 1, error=LeaderNotAvailableError.code)
    md.update(response([topic("t", partition(1, 2, 5), partition(0, 1, 3), leaderless)]), 1000)
    assert md.cluster_id == "cluster-x" and md.controller_id == 2
    broker = md.broker(2)
    assert broker is not None and broker.address == "h2:9002"
    assert md.partitions_for("t") == [0, 1, 2]
    assert md.leader_for("t", 0) == 1 and md.leader_for("t", 1) == 2
    assert md.leader_for("t", 2) is None  # no leader right now
    assert md.leader_for("t", 9) is None and md.leader_for("other", 0) is None
    info = md.partition("t", 1)
    assert info is not None and info.leader_epoch == 5 and info.replicas == (1, 2) and info.isr == (2,)
    assert md.partitions_for("other") is None
    assert md.version == 1


def test_leader_without_a_known_broker_is_unknown() -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("t", partition(0, 7))]), 0)
    assert md.leader_for("t", 0) is None


def test_topic_errors_are_kept_per_topic() -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("gone", error=UnknownTopicOrPartitionError.code),
                    topic("new", error=LeaderNotAvailableError.code), topic("ok", partition(0, 1))]), 0)
    assert isinstance(md.topic_error("gone"), UnknownTopicOrPartitionError)
    assert isinstance(md.topic_error("new"), LeaderNotAvailableError)
    assert md.topic_error("ok") is None and md.topic_error("never-asked") is None
    assert md.partitions_for("gone") is None
    md.update(response([topic("gone", partition(0, 1))]), 1)  # the topic appeared: error cleared
    assert md.topic_error("gone") is None and md.partitions_for("gone") == [0]
    assert md.topic_error("new") is not None  # untouched by an answer that did not mention it


def test_authorized_operations_are_kept_when_the_broker_sent_them() -> None:
    md = Metadata(CONFIG)
    read_describe = (1 << AclOperation.READ) | (1 << AclOperation.DESCRIBE)  # 264: Describe and Read, no Write
    md.update(response([{**topic("acl", partition(0, 1)), "topic_authorized_operations": read_describe},
                        {**topic("unasked", partition(0, 1)), "topic_authorized_operations": NO_AUTHORIZED_OPERATIONS},
                        topic("old-version", partition(0, 1))]), 0)
    info = md.topic("acl")
    assert info is not None and info.authorized_operations == 264
    assert AclOperation.READ.allowed_in(264) and AclOperation.DESCRIBE.allowed_in(264)
    assert not AclOperation.WRITE.allowed_in(264) and not AclOperation.CREATE.allowed_in(264)
    assert [t.authorized_operations for t in (md.topic("unasked"), md.topic("old-version")) if t] == [None, None]


def test_stale_leader_epoch_is_ignored() -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("t", partition(0, 1, epoch=8))]), 0)
    md.update(response([topic("t", partition(0, 2, epoch=7))]), 1)  # from a broker that lags behind
    assert md.leader_for("t", 0) == 1
    md.update(response([topic("t", partition(0, 2, epoch=9))]), 2)
    assert md.leader_for("t", 0) == 2


def test_a_produce_answer_names_a_new_leader_kip_951() -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("t", partition(0, 1, 5), partition(1, 2, 3))]), 0)
    md.request_update()
    endpoints = [{"node_id": 3, "host": "h3", "port": 9003, "rack": "r3"}]
    assert md.update_partition_leadership({("t", 0): (3, 6), ("t", 1): (1, 4)}, endpoints) == {("t", 0), ("t", 1)}
    assert (md.leader_for("t", 0), md.leader_epoch_for("t", 0)) == (3, 6)
    assert (md.leader_for("t", 1), md.leader_epoch_for("t", 1)) == (1, 4)
    new_broker = md.broker(3)
    assert new_broker is not None and new_broker.address == "h3:9003" and new_broker.rack == "r3"
    info = md.partition("t", 0)
    assert info is not None and info.replicas == (1, 2)  # the rest of the partition's entry is kept
    assert md.version == 2
    assert md.time_to_next_update(0) == 100  # the requested full refresh still follows (after its backoff)


@pytest.mark.parametrize(("leaders", "endpoints", "why"), [
    ({("t", 0): (2, 5)}, [], "same epoch"),
    ({("t", 0): (2, 4)}, [], "older epoch"),
    ({("t", 0): (2, -1)}, [], "unknown epoch"),
    ({("t", 0): (-1, 6)}, [], "no leader"),
    ({("t", 0): (7, 6)}, [], "a node without an address"),
    ({("t", 9): (2, 6)}, [], "a partition not cached"),
    ({("u", 0): (2, 6)}, [], "a topic not cached"),
])
def test_a_named_leader_is_taken_only_when_newer_and_reachable(
        leaders: dict[tuple[str, int], tuple[int, int]], endpoints: list[dict[str, Any]], why: str) -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("t", partition(0, 1, 5))]), 0)
    assert md.update_partition_leadership(leaders, endpoints) == set(), why
    assert (md.leader_for("t", 0), md.leader_epoch_for("t", 0), md.version) == (1, 5, 1)
    assert md.broker(7) is None


def test_a_known_address_wins_over_the_answers_endpoint() -> None:
    md = Metadata(CONFIG)
    md.update(response([topic("t", partition(0, 1, 5))]), 0)
    md.update_partition_leadership({("t", 0): (2, 6)}, [{"node_id": 2, "host": "elsewhere", "port": 1}])
    broker = md.broker(2)
    assert broker is not None and broker.address == "h2:9002"
    assert md.leader_epoch_for("t", 0) == 6 and md.leader_epoch_for("t", 1) == -1


def test_refresh_policy() -> None:
    md = Metadata(CONFIG)
    assert md.needs_update(0)  # nothing known yet
    md.update(response([]), 1000)
    assert not md.needs_update(1000)
    assert md.time_to_next_update(1000) == 10_000
    assert md.needs_update(11_000)  # metadata.max.age.ms
    md.request_update()
    assert md.time_to_next_update(1050) == 50  # requested, but retry.backoff.ms after the last refresh
    assert md.needs_update(1100)
    md.failed_update(2000)
    assert md.time_to_next_update(2000) == 100


def test_a_new_topic_skips_the_refresh_backoff_once() -> None:
    md = Metadata(CONFIG)
    md.update(response([]), 1000)  # e.g. the bootstrap refresh, just now
    assert md.add_topic("new", 0)
    assert md.time_to_next_update(1001) == 0  # as Java's requestUpdateForNewTopics: no retry.backoff.ms wait
    md.failed_update(1002)  # (or an answer without the topic)
    assert not md.add_topic("new", 0)  # asked for already: its next refresh backs off as usual
    md.request_update()
    assert md.time_to_next_update(1003) == 99


def test_topics_of_interest_shape_the_request() -> None:
    md = Metadata(CONFIG)
    md.update(response([]), 0)
    assert md.add_topic("b", 0) and md.add_topic("a", 0) and not md.add_topic("a", 0)
    assert md.needs_update(1000)  # a new topic asks for a refresh
    assert md.request_body() == {"topics": [{"name": "a"}, {"name": "b"}], "allow_auto_topic_creation": True}
    md.remove_topic("a")
    assert md.topics_of_interest() == ["b"]


def test_wait_for_update_across_threads() -> None:
    md = Metadata(CONFIG)
    version = md.request_update()
    assert not md.wait_for_update(version, 10)  # nothing happens: times out
    updater = threading.Thread(target=md.update, args=(response([]), 0))
    updater.start()
    assert md.wait_for_update(version, 10_000)
    updater.join()
    md.close()
    assert not md.wait_for_update(md.version, 10_000)  # closed: returns at once


@pytest.mark.parametrize("name", [None])
def test_topics_without_a_name_are_skipped(name: None) -> None:
    md = Metadata(CONFIG)
    md.update(response([{"error_code": UnknownTopicIdError.code, "name": name, "partitions": []}]), 0)
    assert md.topics() == {}


def test_topics_unused_for_metadata_max_idle_ms_leave_the_refresh_set() -> None:
    md = Metadata(net_config(("b", 1), metadata_max_idle_ms=5_000))
    md.add_topic("old", 0)
    md.add_topic("used", 0)
    md.add_topic("waiting", 0)  # never answered: still waiting for its first metadata
    md.update(response([topic("old", partition(0, 1)), topic("used", partition(0, 1))]), 1_000)
    md.touch_topic("used", 4_000)  # a send renews the expiry (now + metadata.max.idle.ms)
    md.update(response([topic("old", partition(0, 1)), topic("used", partition(0, 1))]), 4_999)
    assert md.topics_of_interest() == ["old", "used", "waiting"]  # nothing expired yet
    md.update(response([topic("old", partition(0, 1)), topic("used", partition(0, 1))]), 5_000)
    assert md.topics_of_interest() == ["used", "waiting"]  # as Java's retainTopic: a new topic is kept
    assert md.partitions_for("old") is None and md.topic("old") is None  # dropped from the cache too
    assert md.request_body()["topics"] == [{"name": "used"}, {"name": "waiting"}]
    assert md.add_topic("old", 6_000)  # the next send adds it back, as a first send
    md.update(response([topic("used", partition(0, 1))]), 9_001)
    assert md.topics_of_interest() == ["old", "waiting"]  # "used" was last sent to at 4000


def test_allow_auto_create_topics_goes_into_every_refresh() -> None:
    md = Metadata(net_config(("b", 1), allow_auto_create_topics=False))
    md.add_topic("t", 0)
    assert md.request_body() == {"topics": [{"name": "t"}], "allow_auto_topic_creation": False}
    assert Metadata(CONFIG).request_body()["allow_auto_topic_creation"] is True  # the Java producer's default


def test_connection_error_stays_until_a_metadata_answer() -> None:
    """A connection that comes up does not clear why the last one failed: on a link slower than request.timeout.ms
    each connection comes up and then times out its Metadata request, and a caller timing out must say so."""
    md = Metadata(CONFIG)
    timed_out = KafkaTimeoutError("Metadata request to h:9092 got no response within 1000 ms (request.timeout.ms)")
    md.set_connection_error(timed_out)
    assert md.connection_error is timed_out
    md.update(response([topic("t", partition(0, 1))]), 0)
    assert md.connection_error is None
