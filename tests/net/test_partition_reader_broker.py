"""read_partition against a real Kafka 4.x broker, checked against confluent-kafka's own consumer (librdkafka).

Records are written with confluent-kafka (plain, compressed, transactional), so neither side of the comparison
shares code with the reader.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Producer

from spark_kafka_sink.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.partition_reader import Isolation, read_partition
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.messages import FETCH, LIST_OFFSETS
from spark_kafka_sink.protocol.record_batch import DecodedRecord
from tests.conftest import ConsumedRecord, read_topic, wait_for

pytestmark = pytest.mark.broker

BASE_TS = 1_700_000_000_000
TIMEOUT_MS = 30_000

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]


@pytest.fixture
def client(bootstrap: str) -> Iterator[NetworkClient]:
    with NetworkClient(ProducerConfig.from_dict({"bootstrap.servers": bootstrap,
                                                 "client.id": "partition-reader-test"}).net_config()) as net:
        yield net


def ours(records: list[DecodedRecord]) -> list[Row]:
    return [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in records]


def theirs(records: list[ConsumedRecord]) -> list[Row]:
    return [(r.offset, r.key, r.value, r.headers, r.timestamp_ms) for r in records if r.partition == 0]


def produce(bootstrap: str, topic: str, rows: list[dict[str, Any]], **config: Any) -> None:
    """Write ``rows`` (kwargs of Producer.produce) to partition 0, one flush per row group of 5: several batches."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **config})
    for i, row in enumerate(rows):
        producer.produce(topic, partition=0, **row)
        if i % 5 == 4:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def mixed_rows(tag: str, n: int) -> list[dict[str, Any]]:
    """Keys, null and empty keys, null values, headers (one with a null value), explicit timestamps."""
    rows: list[dict[str, Any]] = []
    for i in range(n):
        row: dict[str, Any] = {"value": None if i % 7 == 3 else f"{tag}-value-{i}".encode() * (i % 4 + 1),
                               "timestamp": BASE_TS + i}
        if i % 5 == 1:
            row["key"] = None
        elif i % 5 == 2:
            row["key"] = b""
        else:
            row["key"] = f"{tag}-key-{i}".encode()
        if i % 3 == 0:
            row["headers"] = [("h1", f"x{i}".encode()), ("h2", None), ("h1", b"")]
        rows.append(row)
    return rows


def read(client: NetworkClient, topic: str, isolation: Isolation = "read_committed", **kwargs: Any
         ) -> list[DecodedRecord]:
    return read_partition(client, topic, 0, isolation=isolation, timeout_ms=kwargs.pop("timeout_ms", TIMEOUT_MS),
                          **kwargs)


def read_once_settled(client: NetworkClient, topic: str, last_value: bytes) -> list[DecodedRecord]:
    """read_committed, again until the last record is ``last_value``: a transaction's markers are written after
    commit/abort returns, and until they are, the last stable offset stays at the transaction's first record."""
    records: list[DecodedRecord] = []

    def settled() -> bool:
        records[:] = read(client, topic)
        return bool(records) and records[-1].value == last_value

    wait_for(f"{last_value!r} readable as the last committed record of {topic}", settled, timeout=30, interval=0.05)
    return records


def transactional_producer(bootstrap: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"reader-{uuid.uuid4().hex[:8]}",
                         "linger.ms": 5})
    producer.init_transactions(30)
    return producer


# ------------------------------------------------------------------------------------------ plain records


@pytest.fixture
def mixed_topic(bootstrap: str, topic_factory: Callable[..., str]) -> str:
    """One partition: uncompressed, lz4 and gzip batches of mixed records (offsets 0-59). Kept forever: the records
    carry 2023 timestamps, which the default 7-day retention deletes at the broker's next check."""
    topic = topic_factory(partitions=1, config={"retention.ms": "-1"})
    produce(bootstrap, topic, mixed_rows("none", 20), **{"compression.type": "none"})
    produce(bootstrap, topic, mixed_rows("lz4", 20), **{"compression.type": "lz4"})
    produce(bootstrap, topic, mixed_rows("gzip", 20), **{"compression.type": "gzip"})
    return topic


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_reads_what_confluent_kafka_reads(client: NetworkClient, bootstrap: str, mixed_topic: str,
                                          isolation: Isolation) -> None:
    expected = theirs(read_topic(bootstrap, mixed_topic, isolation))
    assert len(expected) == 60
    got = read(client, mixed_topic, isolation)
    assert ours(got) == expected
    assert any(r.key is None for r in got) and any(r.value is None for r in got) and any(r.headers for r in got)
    node = client.metadata.leader_for(mixed_topic, 0)
    versions = client.broker_versions(node) if node is not None else None
    assert node is not None and versions is not None
    assert client.api_version(node, FETCH) == 12  # Kafka 4.x serves 4-17 or more; v13+ would need topic ids
    assert client.api_version(node, LIST_OFFSETS) == min(11, versions.api_versions[LIST_OFFSETS.key][1])


def test_small_fetches_read_the_same(client: NetworkClient, bootstrap: str, mixed_topic: str) -> None:
    # 200-byte fetches: roughly one batch per round trip, the first batch of each answer returned whole.
    assert ours(read(client, mixed_topic, max_bytes=200)) == theirs(read_topic(bootstrap, mixed_topic))


@pytest.mark.parametrize("start", [1, 22, 47, 59, 60])
def test_a_start_offset_in_the_middle(client: NetworkClient, bootstrap: str, mixed_topic: str, start: int) -> None:
    expected = [row for row in theirs(read_topic(bootstrap, mixed_topic)) if row[0] >= start]
    assert ours(read(client, mixed_topic, start_offset=start)) == expected


@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
def test_an_empty_topic_reads_as_nothing(client: NetworkClient, topic_factory: Callable[..., str],
                                         isolation: Isolation) -> None:
    topic = topic_factory(partitions=1)
    started = time.monotonic()
    assert read(client, topic, isolation) == []
    assert time.monotonic() - started < 5


def test_an_unknown_topic_times_out_naming_the_error(client: NetworkClient) -> None:
    with pytest.raises(KafkaTimeoutError, match="within 1500 ms") as caught:
        read(client, f"missing-{uuid.uuid4().hex[:8]}", timeout_ms=1_500)
    assert isinstance(caught.value.__cause__, UnknownTopicOrPartitionError)


# ------------------------------------------------------------------------------------------ transactions


def test_read_committed_skips_aborted_transactions_and_markers(client: NetworkClient, bootstrap: str,
                                                               topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1, config={"cleanup.policy": "compact"})  # like the control topic
    first, second = transactional_producer(bootstrap), transactional_producer(bootstrap)
    produce(bootstrap, topic, [{"key": b"plain", "value": b"before"}])
    first.begin_transaction()
    first.produce(topic, key=b"a", value=b"aborted-1", partition=0)
    first.flush(30)
    second.begin_transaction()  # commits while the first transaction is still open: interleaved in the log
    second.produce(topic, key=b"b", value=b"committed-1", partition=0, headers=[("h", b"v")])
    second.commit_transaction(30)
    first.produce(topic, key=b"a", value=b"aborted-2", partition=0)
    first.abort_transaction(30)
    first.begin_transaction()
    for i in range(3):
        first.produce(topic, key=f"c{i}".encode(), value=f"committed-2-{i}".encode(), partition=0)
    first.commit_transaction(30)
    produce(bootstrap, topic, [{"key": b"plain", "value": b"after"}])

    committed = read_once_settled(client, topic, b"after")
    assert [r.value for r in committed] == [b"before", b"committed-1", b"committed-2-0", b"committed-2-1",
                                            b"committed-2-2", b"after"]
    assert ours(committed) == theirs(read_topic(bootstrap, topic, "read_committed"))
    uncommitted = read(client, topic, "read_uncommitted")
    assert ours(uncommitted) == theirs(read_topic(bootstrap, topic, "read_uncommitted"))
    assert b"aborted-1" in [r.value for r in uncommitted]
    # The markers (3 of them) hold offsets but are never returned as records.
    offsets = [r.offset for r in uncommitted]
    assert offsets[-1] - offsets[0] + 1 == len(offsets) + 3
    assert all(r.key in (b"plain", b"a", b"b", b"c0", b"c1", b"c2") for r in uncommitted)


def test_an_open_transaction_ends_the_read_committed_view_at_once(client: NetworkClient, bootstrap: str,
                                                                  topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=1)
    producer = transactional_producer(bootstrap)
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed", partition=0)
    producer.commit_transaction(30)
    assert [r.value for r in read_once_settled(client, topic, b"committed")] == [b"committed"]
    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"open", partition=0)
    assert producer.flush(30) == 0
    try:
        produce(bootstrap, topic, [{"key": b"k", "value": b"after-the-open-one"}])
        started = time.monotonic()
        assert [r.value for r in read(client, topic)] == [b"committed"]  # stops at the last stable offset
        assert time.monotonic() - started < 5
        # read_uncommitted goes to the high watermark: the open transaction's record and the one after it.
        assert [r.value for r in read(client, topic, "read_uncommitted")] == [
            b"committed", b"open", b"after-the-open-one"]
    finally:
        producer.abort_transaction(30)
    assert [r.value for r in read_once_settled(client, topic, b"after-the-open-one")] == [
        b"committed", b"after-the-open-one"]
