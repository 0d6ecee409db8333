"""Our codecs and our network client against the session's real broker (each release of the version matrix);
results checked with confluent-kafka.

ApiVersions negotiation, Metadata (known, unknown and not auto-created topics), CreateTopics, and Produce of
RecordBatches in every codec, read back byte for byte by librdkafka (an implementation sharing none of our code).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest

from spark_kafka_sink.errors import TopicAlreadyExistsError, UnknownTopicOrPartitionError, error_for_code
from spark_kafka_sink.net.client import ClientResponse, NetworkClient
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import API_SPECS, CREATE_TOPICS, METADATA, PRODUCE
from spark_kafka_sink.protocol.record_batch import Record, encode_batch
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

BASE_TS = 1_700_000_000_000


@pytest.fixture
def client(bootstrap: str) -> Iterator[NetworkClient]:
    with NetworkClient(ProducerConfig.from_dict({"bootstrap.servers": bootstrap,
                                                 "client.id": "against-broker"}).net_config()) as net:
        net.fetch_metadata([], timeout_ms=30_000)
        yield net


def leader_of(client: NetworkClient, topic: str, partition: int) -> int:
    client.fetch_metadata([topic], timeout_ms=30_000)
    leader = client.metadata.leader_for(topic, partition)
    assert leader is not None, f"{topic}-{partition} has no leader"
    return leader


# What each release's ApiVersions advertises for the producer's APIs (read from the brokers themselves), and
# the transaction.version it finalizes by default (0: the feature does not exist before 4.0).
_RELEASE_RANGES: dict[str, dict[str, tuple[int, int]]] = {
    "2.8": {"Produce": (0, 9), "Metadata": (0, 11), "InitProducerId": (0, 4), "EndTxn": (0, 3),
            "FindCoordinator": (0, 3), "AddPartitionsToTxn": (0, 3)},
    "3.6": {"Produce": (0, 9), "Metadata": (0, 12), "InitProducerId": (0, 4), "EndTxn": (0, 3),
            "FindCoordinator": (0, 4), "AddPartitionsToTxn": (0, 4)},
    "3.7": {"Produce": (0, 10), "Metadata": (0, 12), "InitProducerId": (0, 4), "EndTxn": (0, 3),
            "FindCoordinator": (0, 4), "AddPartitionsToTxn": (0, 4)},
    "3.9": {"Produce": (0, 11), "Metadata": (0, 12), "InitProducerId": (0, 5), "EndTxn": (0, 4),
            "FindCoordinator": (0, 6), "AddPartitionsToTxn": (0, 5)},
    "4.3": {"Produce": (0, 13), "Metadata": (0, 13), "InitProducerId": (0, 5), "EndTxn": (0, 5),
            "FindCoordinator": (0, 6), "AddPartitionsToTxn": (0, 5)},
    "4.4": {"Produce": (0, 13), "Metadata": (0, 13), "InitProducerId": (0, 5), "EndTxn": (0, 5),
            "FindCoordinator": (0, 6), "AddPartitionsToTxn": (0, 5)},
}


def test_api_versions_negotiates_the_highest_common_versions(client: NetworkClient, kafka: KafkaCluster) -> None:
    node = 1
    client.request(node, METADATA, {"topics": []}, 30_000)  # connects to the broker itself
    versions = client.broker_versions(node)
    assert versions is not None
    release = ".".join(kafka.version.split(".")[:2])
    by_name = {spec.name: key for key, spec in API_SPECS.items()}
    for name, advertised in _RELEASE_RANGES[release].items():
        assert versions.api_versions[by_name[name]] == advertised, name
    for key, spec in API_SPECS.items():
        if key in versions.api_versions:
            expected = min(spec.max_version, versions.api_versions[key][1])
            assert client.api_version(node, spec) == expected, spec.name
    # Produce: we stop before v13 (topic ids); 4.x removed v0-2 (still advertised as 0), and we never send them.
    assert client.api_version(node, PRODUCE) == min(12, _RELEASE_RANGES[release]["Produce"][1])
    features = client.finalized_features(node)
    if kafka.major < 4:
        assert "transaction.version" not in features
    else:
        expected_tv = 2 if kafka.transaction_version is None else kafka.transaction_version
        assert features.get("transaction.version", 0) == expected_tv


def test_metadata_for_known_and_unknown_topics(client: NetworkClient, topic_factory: Callable[..., str],
                                               bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    topic = topic_factory(partitions=3)
    missing = f"missing-{uuid.uuid4().hex[:10]}"
    for _ in range(2):  # asking twice without auto-creation must not create it
        md = client.fetch_metadata([topic, missing], timeout_ms=30_000, allow_auto_topic_creation=False)
        assert isinstance(md.topic_error(missing), UnknownTopicOrPartitionError)
        assert md.partitions_for(missing) is None
    assert md.partitions_for(topic) == [0, 1, 2]
    assert all(md.leader_for(topic, p) == 1 for p in range(3))
    broker = md.broker(1)
    assert broker is not None and broker.address == bootstrap
    assert md.cluster_id and md.controller_id is not None
    listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics
    assert missing not in listed


def test_create_topics_through_our_codec(client: NetworkClient, bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    name = f"created-{uuid.uuid4().hex[:10]}"
    body = {"topics": [{"name": name, "num_partitions": 4, "replication_factor": 1,
                        "configs": [{"name": "cleanup.policy", "value": "compact"}]}], "timeout_ms": 30_000}
    answer = client.request(None, CREATE_TOPICS, body, 30_000)
    [result] = answer["topics"]
    assert (result["name"], result["error_code"], result["num_partitions"]) == (name, NO_ERROR, 4)
    again = client.request(None, CREATE_TOPICS, body, 30_000)
    assert again["topics"][0]["error_code"] == TopicAlreadyExistsError.code
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 30
    while True:  # the controller acknowledges before every broker serves the new topic
        topic = admin.list_topics(name, timeout=10).topics.get(name)
        if topic is not None and topic.error is None and len(topic.partitions) == 4:
            break
        assert time.monotonic() < deadline, f"{name} never became visible"


def records_for(partition: int, codec: str) -> list[Record]:
    """Keys, null keys, empty keys, null values, headers (incl. null values), spread timestamps."""
    ts = BASE_TS + partition * 1000
    big = (f"{codec}-{partition}-".encode() * 200)[:3000]  # compressible and bigger than one lz4 run
    return [
        Record(b"key-%d" % partition, b"value", ts),
        Record(None, b"null key", ts + 1),
        Record(b"tombstone", None, ts + 2),
        Record(b"", b"", ts - 5, headers=[("h", b"x"), ("null-header", None), ("unicode-\u00e9", b"\x00\xff")]),
        Record(b"big", big, ts + 3, headers=[("empty", b"")]),
    ]


def as_consumed(topic: str, partition: int, offset: int, record: Record) -> ConsumedRecord:
    return ConsumedRecord(topic, partition, offset, record.key, record.value, tuple(record.headers),
                          record.timestamp_ms)


def normalize(records: list[ConsumedRecord]) -> list[ConsumedRecord]:
    # librdkafka hands back headers as lists of (key, value); compare as tuples of tuples.
    return [ConsumedRecord(r.topic, r.partition, r.offset, r.key, r.value,
                           tuple((k, v) for k, v in r.headers), r.timestamp_ms) for r in records]


def produce_all(client: NetworkClient, topic: str, batches: dict[int, bytes]) -> dict[int, int]:
    """Produce one batch per partition with acks=all; retry partitions answering a retriable error (a brand-new
    topic's leader may not serve yet: NOT_LEADER_OR_FOLLOWER), as the producer would. -> base offsets."""
    offsets: dict[int, int] = {}
    deadline = time.monotonic() + 30
    while len(offsets) < len(batches):
        assert time.monotonic() < deadline, f"partitions {sorted(set(batches) - set(offsets))} never accepted"
        pending = {p: b for p, b in batches.items() if p not in offsets}
        body = {"transactional_id": None, "acks": -1, "timeout_ms": 30_000, "topic_data": [{
            "name": topic, "partition_data": [{"index": p, "records": b} for p, b in pending.items()]}]}
        answer = client.request(leader_of(client, topic, min(pending)), PRODUCE, body, 30_000)
        for part in answer["responses"][0]["partition_responses"]:
            if part["error_code"] == NO_ERROR:
                offsets[part["index"]] = part["base_offset"]
            else:
                assert error_for_code(part["error_code"]).retriable, part
        if len(offsets) < len(batches):
            client.poll(100, monotonic_ms())  # retry backoff
    return offsets


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_produce_each_codec_reads_back_byte_for_byte(
    client: NetworkClient, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
    codec: str,
) -> None:
    topic = topic_factory(partitions=3)
    sent = {p: records_for(p, codec) for p in range(3)}

    offsets = produce_all(client, topic, {p: encode_batch(recs, compression=codec) for p, recs in sent.items()})
    assert offsets == {0: 0, 1: 0, 2: 0}
    expected = [as_consumed(topic, p, i, r) for p, recs in sent.items() for i, r in enumerate(recs)]
    assert normalize(readback(topic)) == expected


def test_produce_with_acks_zero_expects_no_response(
    client: NetworkClient, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
) -> None:
    topic = topic_factory(partitions=1)
    first = [Record(b"acked", b"with acks=all first: the leader is serving", BASE_TS)]
    assert produce_all(client, topic, {0: encode_batch(first)}) == {0: 0}  # acks=0 losses would go unnoticed
    leader = leader_of(client, topic, 0)
    records = [Record(b"k", b"fire and forget", BASE_TS + 1), Record(None, b"second", BASE_TS + 2)]
    body = {"transactional_id": None, "acks": 0, "timeout_ms": 30_000, "topic_data": [{
        "name": topic, "partition_data": [{"index": 0, "records": encode_batch(records, compression="lz4")}]}]}
    deadline = time.monotonic() + 30
    while not client.ready(leader, monotonic_ms()):
        assert time.monotonic() < deadline
        client.poll(50, monotonic_ms())
    request = client.send(leader, PRODUCE, body, monotonic_ms(), expect_response=False)
    done: list[ClientResponse] = []
    while not any(r.request is request for r in done):
        assert time.monotonic() < deadline
        done += client.poll(50, monotonic_ms())
    [mine] = [r for r in done if r.request is request]
    assert mine.ok and mine.body is None
    # A follow-up request on the same connection proves the broker sent nothing for the acks=0 one (a stray
    # response would arrive first and break the correlation order).
    client.request(leader, METADATA, {"topics": []}, 30_000)
    assert normalize(readback(topic)) == [as_consumed(topic, 0, i, r) for i, r in enumerate(first + records)]
