"""read_partition against a scripted client: the request sequence, retries on moved leaders, deadlines, errors.

The fake client encodes every request body and decodes every answer with the real codecs, so bodies the reader
builds and fields it reads are checked against the schemas; time is a counter that ``sleep`` advances.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    KafkaConnectionError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    OffsetOutOfRangeError,
    ProtocolError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from spark_kafka_sink.net.client import Body
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.net.partition_reader import PartitionReaderClient, read_partition
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import (
    FETCH,
    LIST_OFFSETS,
    METADATA,
    ApiSpec,
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
)
from spark_kafka_sink.protocol.messages.fetch import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from spark_kafka_sink.protocol.record_batch import Record, encode_batch

TOPIC = "control"
TS = 1_700_000_000_000
BACKOFF_MS = 100

Handler = Callable[[int, dict[str, Any]], Mapping[str, Any]]  # (node id, decoded request) -> response body


@dataclass
class Sent:
    node_id: int
    api: str
    version: int
    body: dict[str, Any]


@dataclass
class FakeClient:
    """A :class:`PartitionReaderClient` whose answers come from ``handlers`` (by API key)."""

    handlers: dict[int, Handler]
    leaders: list[int | None] = field(default_factory=lambda: [1])  # leader per metadata refresh; last one sticks
    topic_error: int = NO_ERROR
    versions: dict[int, int] = field(default_factory=lambda: {FETCH.key: 12, LIST_OFFSETS.key: 11})
    now_ms: int = 0
    sent: list[Sent] = field(default_factory=list)
    sleeps: list[float] = field(default_factory=list)
    metadata_refreshes: int = 0

    def __post_init__(self) -> None:
        self._config = ProducerConfig.from_dict({"bootstrap.servers": "fake:9092",
                                                 "retry.backoff.ms": BACKOFF_MS}).net_config()
        self._metadata = Metadata(self._config)

    @property
    def config(self) -> NetConfig:
        return self._config

    @property
    def metadata(self) -> Metadata:
        return self._metadata

    def clock(self) -> int:
        return self.now_ms

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now_ms += int(seconds * 1000)

    def fetch_metadata(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None, *,
                       allow_auto_topic_creation: bool = True) -> Metadata:
        assert list(topics or ()) == [TOPIC] and not allow_auto_topic_creation
        leader = self.leaders[min(self.metadata_refreshes, len(self.leaders) - 1)]
        self.metadata_refreshes += 1
        body = {"brokers": [{"node_id": n, "host": f"h{n}", "port": 9092} for n in (1, 2)],
                "topics": [{"error_code": self.topic_error, "name": TOPIC, "partitions": [] if self.topic_error else [
                    {"error_code": NO_ERROR, "partition_index": 0, "leader_id": -1 if leader is None else leader,
                     "replica_nodes": [1, 2], "isr_nodes": [1, 2]}]}]}
        self._metadata.update(decode_response_body(METADATA, 12, encode_response_body(METADATA, 12, body)),
                              self.now_ms)
        return self._metadata

    def request(self, node_id: int | None, api: ApiSpec, body: Body, timeout_ms: int, *,
                min_version: int | None = None, max_version: int | None = None,
                raise_on_error: bool = True) -> dict[str, Any]:
        assert node_id is not None and timeout_ms > 0
        version = self.versions[api.key]
        assert min_version is None or version >= min_version
        payload = body(version) if callable(body) else body
        decoded = decode_request_body(api, version, encode_request_body(api, version, payload))
        self.sent.append(Sent(node_id, api.name, version, decoded))
        answer = self.handlers[api.key](node_id, decoded)
        return decode_response_body(api, version, encode_response_body(api, version, answer))


def _typed(client: FakeClient) -> PartitionReaderClient:
    return client  # mypy checks the fake against the seam


# ------------------------------------------------------------------------------------------ a fake log


def batch(offset: int, *values: bytes) -> bytes:
    return encode_batch([Record(b"k", v, TS) for v in values], base_offset=offset)


LOG = [batch(0, b"v0", b"v1"), batch(2, b"v2"), batch(3, b"v3", b"v4", b"v5")]  # offsets 0-5


def list_offsets(earliest: int = 0, latest: int = 6, error: int = NO_ERROR) -> Handler:
    def handle(node_id: int, req: dict[str, Any]) -> Mapping[str, Any]:
        (part,) = req["topics"][0]["partitions"]
        offset = {EARLIEST_TIMESTAMP: earliest, LATEST_TIMESTAMP: latest}[part["timestamp"]]
        return {"topics": [{"name": TOPIC, "partitions": [
            {"partition_index": 0, "error_code": error, "offset": offset}]}]}
    return handle


def fetch_answer(records: bytes | None = b"", error: int = NO_ERROR, end: int = 6, throttle_ms: int = 0,
                 aborted: list[dict[str, int]] | None = None) -> dict[str, Any]:
    return {"throttle_time_ms": throttle_ms, "responses": [{"topic": TOPIC, "partitions": [
        {"partition_index": 0, "error_code": error, "high_watermark": end, "last_stable_offset": end,
         "aborted_transactions": aborted, "records": records}]}]}


def fetch_from(log: list[bytes], per_fetch: int = 1) -> Handler:
    """Answers each Fetch with up to ``per_fetch`` batches holding offsets at or after the fetch offset."""
    def handle(node_id: int, req: dict[str, Any]) -> Mapping[str, Any]:
        offset = req["topics"][0]["partitions"][0]["fetch_offset"]
        found = [b for b in log if _last_offset(b) >= offset][:per_fetch]
        return fetch_answer(b"".join(found))
    return handle


def _last_offset(raw: bytes) -> int:
    return int.from_bytes(raw[0:8], "big") + int.from_bytes(raw[23:27], "big")  # baseOffset + lastOffsetDelta


def read(client: FakeClient, **kwargs: Any) -> list[tuple[int, bytes | None]]:
    kwargs.setdefault("timeout_ms", 5_000)
    records = read_partition(_typed(client), TOPIC, 0, clock=client.clock, sleep=client.sleep, **kwargs)
    return [(r.offset, r.value) for r in records]


# ------------------------------------------------------------------------------------------ the happy path


def test_reads_from_the_log_start_to_the_end_one_fetch_at_a_time() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch_from(LOG)})
    assert read(client) == [(0, b"v0"), (1, b"v1"), (2, b"v2"), (3, b"v3"), (4, b"v4"), (5, b"v5")]
    assert [(s.api, s.node_id) for s in client.sent] == [("ListOffsets", 1)] * 2 + [("Fetch", 1)] * 3
    latest, earliest = (s.body["topics"][0]["partitions"][0]["timestamp"] for s in client.sent[:2])
    assert (latest, earliest) == (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP)
    assert all(s.body["isolation_level"] == 1 for s in client.sent)  # read_committed by default
    fetch = client.sent[2].body
    assert (fetch["replica_id"], fetch["max_wait_ms"], fetch["session_id"], fetch["session_epoch"]) == (-1, 0, 0, -1)
    assert [s.body["topics"][0]["partitions"][0]["fetch_offset"] for s in client.sent[2:]] == [0, 2, 3]
    assert client.sleeps == [] and client.metadata_refreshes == 1


def test_start_offset_skips_earliest_and_records_before_it() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch_from(LOG, per_fetch=3)})
    assert read(client, start_offset=4, isolation="read_uncommitted") == [(4, b"v4"), (5, b"v5")]
    assert [s.api for s in client.sent] == ["ListOffsets", "Fetch"]
    assert all(s.body["isolation_level"] == 0 for s in client.sent)


def test_records_past_the_end_snapshot_are_not_returned() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(latest=3), FETCH.key: fetch_from(LOG, per_fetch=3)})
    assert read(client) == [(0, b"v0"), (1, b"v1"), (2, b"v2")]


@pytest.mark.parametrize("start_offset", [None, 6, 9])
def test_nothing_to_read_sends_no_fetch(start_offset: int | None) -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(earliest=6, latest=6), FETCH.key: fetch_from(LOG)})
    assert read(client, start_offset=start_offset) == []
    assert "Fetch" not in [s.api for s in client.sent]


def test_read_committed_needs_list_offsets_v2_and_fetch_v4() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch_from(LOG, per_fetch=3)},
                        versions={FETCH.key: 4, LIST_OFFSETS.key: 2})
    assert len(read(client)) == 6
    assert [s.version for s in client.sent] == [2, 2, 4]


def test_aborted_transactions_from_the_answer_are_honoured() -> None:
    txn = encode_batch([Record(None, b"aborted", TS)], base_offset=0, producer_id=7, producer_epoch=0,
                       base_sequence=0, transactional=True)
    answer = fetch_answer(txn + batch(1, b"plain"), end=2, aborted=[{"producer_id": 7, "first_offset": 0}])
    client = FakeClient({LIST_OFFSETS.key: list_offsets(latest=2), FETCH.key: lambda n, r: answer})
    assert read(client) == [(1, b"plain")]


# ------------------------------------------------------------------------------------------ no progress


def test_an_empty_answer_at_the_end_returns_what_is_visible() -> None:
    # Nothing between the offset asked for and the end is visible (e.g. compacted away before an open
    # transaction): the read ends at once instead of waiting for the timeout.
    client = FakeClient({LIST_OFFSETS.key: list_offsets(latest=10), FETCH.key: lambda n, r: fetch_answer(end=10)})
    assert read(client, start_offset=4) == []
    assert client.sleeps == []


def test_a_throttled_empty_answer_waits_and_fetches_again() -> None:
    answers = iter([fetch_answer(throttle_ms=250), fetch_answer(b"".join(LOG))])
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: lambda n, r: next(answers)})
    assert len(read(client)) == 6
    assert client.sleeps == [0.25]


def test_a_leader_behind_the_end_is_waited_for() -> None:
    answers = iter([fetch_answer(end=2), fetch_answer(b"".join(LOG))])
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: lambda n, r: next(answers)})
    assert len(read(client, start_offset=3)) == 3
    assert client.sleeps == [BACKOFF_MS / 1000] and client.metadata_refreshes == 2


def test_a_cut_batch_alone_is_a_protocol_error() -> None:
    answer = fetch_answer(LOG[0][:-3])
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: lambda n, r: answer})
    with pytest.raises(ProtocolError, match="not one whole record batch"):
        read(client)


# ------------------------------------------------------------------------------------------ corrupt batches

# LOG[0] byte for byte: baseOffset 0, batchLength 69, epoch -1, magic 2, crc 0x2f0ac6ec, attributes 0,
# lastOffsetDelta 1, timestamps, producer id/epoch/sequence -1, 2 records: (k, v0) and (k, v1).
GOOD_BATCH = bytes.fromhex(
    "0000000000000000" "00000045" "ffffffff" "02" "2f0ac6ec" "0000" "00000001" "0000018bcfe56800" "0000018bcfe56800"
    "ffffffffffffffff" "ffff" "ffffffff" "00000002"
    "12" "00" "00" "00" "02" "6b" "04" "7630" "00"  # length 9, attrs, ts delta 0, offset delta 0, key k, value v0
    "12" "00" "00" "02" "02" "6b" "04" "7631" "00")  # ... offset delta 1, value v1
# The same batch with the last record's value "v1" turned into "v3": still well framed, so only the CRC tells.
CORRUPT_BATCH = GOOD_BATCH[:-2] + b"3" + GOOD_BATCH[-1:]


def test_the_golden_batch_is_the_log_s_first() -> None:
    assert GOOD_BATCH == LOG[0]


@pytest.mark.parametrize("answer", [CORRUPT_BATCH, CORRUPT_BATCH + LOG[1]], ids=["alone", "before-a-good-batch"])
def test_a_batch_failing_its_crc_fails_the_read_naming_partition_offset_and_crcs(answer: bytes) -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: lambda n, r: fetch_answer(answer)})
    with pytest.raises(ProtocolError) as caught:
        read(client)
    assert str(caught.value) == (
        "corrupt record batch in the Fetch response for control-0 at offset 0 from node 1: record batch at offset 0: "
        "CRC 0x084ff602 != stored 0x2f0ac6ec. Nothing from it was used; check the leader's log segment for that "
        "offset (kafka-dump-log.sh --deep-iteration reports isValid: false) or restore the replica")
    assert isinstance(caught.value.__cause__, ProtocolError)
    assert client.sleeps == [] and [s.api for s in client.sent] == ["ListOffsets", "ListOffsets", "Fetch"]


# ------------------------------------------------------------------------------------------ errors and retries


def test_a_moved_leader_is_found_again_and_the_fetch_retried() -> None:
    def fetch(node_id: int, req: dict[str, Any]) -> Mapping[str, Any]:
        if node_id == 1:
            return fetch_answer(error=NotLeaderOrFollowerError.code)
        return fetch_from(LOG, per_fetch=3)(node_id, req)

    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch}, leaders=[1, 2])
    assert len(read(client)) == 6
    assert [(s.api, s.node_id) for s in client.sent][-2:] == [("Fetch", 1), ("Fetch", 2)]
    assert client.sleeps == [BACKOFF_MS / 1000] and client.metadata_refreshes == 2


@pytest.mark.parametrize("code", [3, 5, 6, 78])  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER...,
def test_metadata_class_errors_retry_until_the_timeout(code: int) -> None:  # OFFSET_NOT_AVAILABLE
    client = FakeClient({LIST_OFFSETS.key: list_offsets(error=code)})
    with pytest.raises(KafkaTimeoutError, match="could not read control-0 within 1000 ms") as caught:
        read(client, timeout_ms=1_000)
    assert getattr(caught.value.__cause__, "code", None) == code
    assert 8 <= len(client.sleeps) <= 10 and client.now_ms <= 1_000


def test_a_leaderless_partition_and_an_unknown_topic_are_retried() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch_from(LOG, per_fetch=3)},
                        leaders=[None, None, 1])
    assert len(read(client)) == 6
    assert client.metadata_refreshes == 3
    missing = FakeClient({}, topic_error=UnknownTopicOrPartitionError.code)
    with pytest.raises(KafkaTimeoutError) as caught:
        read(missing, timeout_ms=500)
    assert isinstance(caught.value.__cause__, UnknownTopicOrPartitionError)


def test_a_lost_connection_is_retried() -> None:
    calls = iter([KafkaConnectionError("gone"), None])

    def fetch(node_id: int, req: dict[str, Any]) -> Mapping[str, Any]:
        error = next(calls)
        if error is not None:
            raise error
        return fetch_answer(b"".join(LOG))

    client = FakeClient({LIST_OFFSETS.key: list_offsets(), FETCH.key: fetch})
    assert len(read(client)) == 6


def test_other_broker_errors_raise_at_once_by_name() -> None:
    client = FakeClient({LIST_OFFSETS.key: list_offsets(),
                         FETCH.key: lambda n, r: fetch_answer(error=OffsetOutOfRangeError.code)})
    with pytest.raises(OffsetOutOfRangeError, match="Fetch at offset 0 for control-0"):
        read(client)
    assert client.sleeps == []
    denied = FakeClient({}, topic_error=TopicAuthorizationFailedError.code)
    with pytest.raises(TopicAuthorizationFailedError):
        read(denied)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"isolation": "committed"}, "isolation must be one of"),
    ({"start_offset": -1}, "start_offset must be >= 0"),
    ({"timeout_ms": -1}, "timeout_ms must be >= 0"),
])
def test_bad_arguments_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        read(FakeClient({}), **kwargs)
