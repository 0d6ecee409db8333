"""A scripted network client: the Sender's seam (``SenderClient``) in deterministic tests.

Requests handed to ``send`` are encoded with the real codec (so a malformed body fails the test) and kept in
``sent`` as :class:`FakeRequest`; the test answers them with ``respond`` / ``fail``, and the next ``poll`` returns
those answers as :class:`FakeResponse`. Metadata is the real cache; ``poll`` applies ``next_metadata`` when a
refresh was requested, as the real client would. mypy checks ``FakeClient`` against ``SenderClient`` (below) when
tests/test_typing.py type-checks the tests, so the fake cannot drift from what ``Sender`` really calls.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.producer.sender_client import RequestBody, SenderClient
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import PRODUCE, ApiSpec, encode_request_body
from spark_kafka_sink.protocol.record_batch import DecodedBatch, decode_batch
from tests.net_settings import net_config

__all__ = ["FakeClient", "FakeRequest", "FakeResponse", "batches_of", "metadata_body", "produce_answer"]

# connection_delay of a connected node, as NetworkClient: no limit, only network events change its readiness.
CONNECTED_DELAY_MS = 1 << 31


@dataclass(eq=False)
class FakeRequest:
    """A request the sender handed to ``send``, as NetworkClient's ClientRequest."""

    node_id: int
    api: ApiSpec
    version: int
    body: Mapping[str, Any]
    expect_response: bool
    created_ms: int
    context: object = None


@dataclass(frozen=True)
class FakeResponse:
    """An answer ``poll`` returns, as NetworkClient's ClientResponse."""

    request: FakeRequest
    body: dict[str, Any] | None
    error: KafkaError | None
    latency_ms: int
    received_ms: int


def metadata_body(leaders: Mapping[tuple[str, int], int], brokers: tuple[int, ...] = (1, 2, 3)) -> dict[str, Any]:
    topics: dict[str, list[dict[str, Any]]] = {}
    for (topic, partition), leader in sorted(leaders.items()):
        topics.setdefault(topic, []).append({
            "error_code": NO_ERROR, "partition_index": partition, "leader_id": leader, "leader_epoch": 0,
            "replica_nodes": list(brokers), "isr_nodes": list(brokers)})
    return {
        "brokers": [{"node_id": b, "host": f"broker{b}", "port": 9000 + b} for b in brokers],
        "controller_id": brokers[0],
        "cluster_id": "fake",
        "topics": [{"error_code": NO_ERROR, "name": t, "partitions": ps} for t, ps in topics.items()],
    }


def produce_answer(request: FakeRequest, codes: Mapping[tuple[str, int], int] | None = None,
                   base_offsets: Mapping[tuple[str, int], int] | None = None, log_start_offset: int = 0
                   ) -> dict[str, Any]:
    """A Produce response for every partition of ``request``: NO_ERROR unless ``codes`` says otherwise."""
    codes = codes or {}
    base_offsets = base_offsets or {}
    return {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [
            {"index": p["index"], "error_code": codes.get((t["name"], p["index"]), NO_ERROR),
             "base_offset": base_offsets.get((t["name"], p["index"]), 0), "log_append_time_ms": -1,
             "log_start_offset": log_start_offset, "record_errors": [], "error_message": None}
            for p in t["partition_data"]]}
        for t in request.body["topic_data"]]}


class FakeClient:
    """Satisfies ``SenderClient``; the scripting methods below stand in for brokers and connections."""

    def __init__(self, leaders: Mapping[tuple[str, int], int], *, max_in_flight: int = 5) -> None:
        self.metadata = Metadata(net_config(("broker1", 9001)))
        self.metadata.update(metadata_body(leaders), 0)
        for topic, _ in leaders:
            self.metadata.add_topic(topic, 0)
        self.next_metadata: dict[str, Any] | None = None  # applied by poll when a refresh is due
        self.max_in_flight = max_in_flight
        self.down: set[int] = set()  # nodes that never become ready
        self.errors: dict[int, KafkaError] = {}  # why a down node failed (fail_connection), else a generic error
        self.attempts: list[int] = []  # ready() calls on down nodes: each would be a connection attempt
        self.sent: list[FakeRequest] = []  # every request, in order
        self.outstanding: list[FakeRequest] = []  # sent, not yet answered
        self._answers: list[FakeResponse] = []  # returned by the next poll
        self.polls: list[int] = []  # the timeouts poll was called with
        self.closed = False
        self.wakeups = 0
        self.features: dict[str, int] = {}  # finalized features every node reports (e.g. transaction.version)

    # ------------------------------------------------------------------------------------------ SenderClient

    def ready(self, node_id: int, now_ms: int) -> bool:
        if node_id in self.down:
            self.attempts.append(node_id)
            return False
        return self.in_flight_count(node_id) < self.max_in_flight

    def in_flight_count(self, node_id: int | None = None) -> int:
        return sum(1 for r in self.outstanding if node_id is None or r.node_id == node_id)

    def connection_error(self, node_id: int) -> KafkaError | None:
        if node_id not in self.down:
            return None
        return self.errors.get(node_id) or KafkaError(f"node {node_id} is down")

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        # As NetworkClient: a down node's backoff; a connected one waits for network events.
        return 50 if node_id in self.down else CONNECTED_DELAY_MS

    def least_loaded_node(self, now_ms: int) -> int | None:
        up = [b for b in sorted(self.metadata.brokers()) if b not in self.down]
        return min(up, key=self.in_flight_count) if up else None

    def address(self, node_id: int) -> str:
        return f"broker{node_id}:{9000 + node_id}"

    def finalized_features(self, node_id: int) -> dict[str, int]:
        return dict(self.features)

    def send(self, node_id: int, api: ApiSpec, body: RequestBody, now_ms: int, *, expect_response: bool = True,
             max_version: int | None = None, context: object = None) -> FakeRequest:
        assert self.ready(node_id, now_ms), f"send to node {node_id}, which is not ready"
        version = api.max_version if max_version is None else min(api.max_version, max_version)
        payload = body(version) if callable(body) else body
        encode_request_body(api, version, payload)  # the real codec must accept it
        request = FakeRequest(node_id, api, version, payload, expect_response, now_ms, context)
        self.sent.append(request)
        if expect_response:
            self.outstanding.append(request)
        else:
            self._answers.append(FakeResponse(request, None, None, 0, now_ms))
        return request

    def poll(self, timeout_ms: int, now_ms: int) -> list[FakeResponse]:
        self.polls.append(timeout_ms)
        if self.next_metadata is not None and self.metadata.needs_update(now_ms):
            self.metadata.update(self.next_metadata, now_ms)
            self.next_metadata = None
        answers, self._answers = self._answers, []
        return answers

    def wakeup(self) -> None:
        self.wakeups += 1

    def close(self) -> None:
        self.closed = True

    # ------------------------------------------------------------------------------------------ scripting

    def fail_connection(self, node_id: int, error: KafkaError) -> None:
        """An attempt to connect to ``node_id`` failed with ``error``; the node stays down. A ``fatal`` error is
        recorded on the metadata, as NetworkClient does (that is where the sender and user threads look)."""
        self.down.add(node_id)
        self.errors[node_id] = error
        if error.fatal:
            self.metadata.set_fatal_error(error)

    def respond(self, request: FakeRequest, body: dict[str, Any], now_ms: int = 0) -> None:
        self.outstanding.remove(request)
        self._answers.append(FakeResponse(request, body, None, 1, now_ms))

    def fail(self, request: FakeRequest, error: KafkaError, now_ms: int = 0) -> None:
        self.outstanding.remove(request)
        self._answers.append(FakeResponse(request, None, error, 1, now_ms))

    def take(self, api: ApiSpec | None = None) -> FakeRequest:
        """The oldest unanswered request (of ``api``)."""
        for request in self.outstanding:
            if api is None or request.api is api:
                return request
        raise AssertionError(f"no outstanding {api.name if api else ''} request; sent: "
                             f"{[(r.api.name, r.node_id) for r in self.sent]}")

    def produce_requests(self) -> list[FakeRequest]:
        return [r for r in self.sent if r.api is PRODUCE]


def batches_of(request: FakeRequest) -> dict[tuple[str, int], DecodedBatch]:
    """The record batch of each partition in a Produce request, decoded (the sender hands it over in pieces: the
    stamped header, then a view of the records)."""
    return {(t["name"], p["index"]): decode_batch(b"".join(p["records"]))
            for t in request.body["topic_data"] for p in t["partition_data"]}


if TYPE_CHECKING:  # mypy checks the fake against the sender's seam; its notes name a missing or mismatched member
    _sender_client: SenderClient = FakeClient({})
