"""The commit log's own requests (Metadata, CreateTopics) ride out a swallowed request or a lost connection: each
waits at most request.timeout.ms and is tried again until the log's timeout, as the driver's commit must survive a
flapping link (tests/network/test_flapping_link.py shows the real one). Read back with confluent-kafka."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from spark_kafka_sink.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.spark.commit_log import CommitLog
from tests.conftest import read_topic

pytestmark = pytest.mark.broker

REQUEST_TIMEOUT_MS = 4000


def _flaky_requests(monkeypatch: pytest.MonkeyPatch, failures: dict[str, list[KafkaError]],
                    timeouts: dict[str, list[int]]) -> None:
    """Make NetworkClient.request raise the listed errors for the first requests of each api, as a link that
    swallowed them would (an unanswered request, a connection closed under it); record every request's timeout."""
    real = NetworkClient.request

    def request(self: NetworkClient, node_id: int | None, api: Any, body: Any, timeout_ms: int,
                **kwargs: Any) -> dict[str, Any]:
        timeouts.setdefault(api.name, []).append(timeout_ms)
        pending = failures.get(api.name)
        if pending:
            raise pending.pop(0)
        return real(self, node_id, api, body, timeout_ms, **kwargs)

    monkeypatch.setattr(NetworkClient, "request", request)


def test_commit_log_retries_swallowed_requests(bootstrap: str, monkeypatch: pytest.MonkeyPatch) -> None:
    topic = f"commit-log-{uuid.uuid4().hex[:10]}"
    failures: dict[str, list[KafkaError]] = {
        "Metadata": [KafkaTimeoutError("Metadata request got no response within 4000 ms (request.timeout.ms)"),
                     KafkaConnectionError("connection to the broker closed")],
        "CreateTopics": [KafkaTimeoutError("CreateTopics request got no response within 4000 ms")],
    }
    timeouts: dict[str, list[int]] = {}
    _flaky_requests(monkeypatch, failures, timeouts)
    config = {"bootstrap.servers": bootstrap, "request.timeout.ms": REQUEST_TIMEOUT_MS, "retry.backoff.ms": 50}
    with CommitLog(topic, "retries", config, 60.0) as log:
        assert log.read() is None  # creates the topic, after the swallowed requests
        log.append_entry("plan", {"writeId": 7})
        assert [e.value for e in log.entries() if e.value is not None][0]["writeId"] == 7
    assert failures == {"Metadata": [], "CreateTopics": []}, "a swallowed request was not tried again"
    # Each request waited request.timeout.ms at most, not the log's whole minute: a request lost to a dead
    # connection must not hold the commit up for longer than that.
    assert max(timeouts["Metadata"] + timeouts["CreateTopics"]) <= REQUEST_TIMEOUT_MS
    records = read_topic(bootstrap, topic, isolation="read_uncommitted")
    assert [(r.key, json.loads(r.value or b"{}")["writeId"]) for r in records] == [(b"retries/plan", 7)]


def test_commit_log_gives_up_at_its_timeout_naming_the_last_error(bootstrap: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    swallowed: list[KafkaError] = [KafkaTimeoutError(f"Metadata request {i} got no response (request.timeout.ms)")
                                   for i in range(500)]
    _flaky_requests(monkeypatch, {"Metadata": swallowed}, {})
    config = {"bootstrap.servers": bootstrap, "request.timeout.ms": REQUEST_TIMEOUT_MS, "retry.backoff.ms": 200}
    with CommitLog(f"commit-log-{uuid.uuid4().hex[:10]}", "gives-up", config, 1.0) as log, \
            pytest.raises(KafkaError, match=r"did not become available within 1 s; last error: .*request.timeout.ms"):
        log.read()
