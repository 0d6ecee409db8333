"""ProduceResponseHandler on its own: one Produce answer settles each batch it carries (no sender round, no broker)."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from spark_kafka_sink.errors import InvalidRecordError
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.batch import BatchState
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.produce_responses import ProduceContext, ProduceResponseHandler
from spark_kafka_sink.producer.record_metadata import RecordMetadata, TopicPartition
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import PRODUCE
from tests.producer.fake_client import FakeClient, FakeRequest, FakeResponse

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
NOW = 10_000  # past the fake metadata's refresh backoff: a requested refresh is due at once


class Rig:
    def __init__(self) -> None:
        self.config = ProducerConfig.from_dict({
            "bootstrap.servers": "broker1:9001", "enable.idempotence": "false", "acks": "1", "linger.ms": 0,
            "delivery.timeout.ms": 60_000, "request.timeout.ms": 1000, "retry.backoff.ms": 100})
        self.client = FakeClient({("t", 0): 1, ("t", 1): 1})
        self.acc = RecordAccumulator.from_config(self.config, retry_jitter=0.0)
        self.metrics = ProducerMetrics()
        self.handler = ProduceResponseHandler(self.client, self.acc, self.config, metrics=self.metrics)

    def in_flight(self, *tps: TopicPartition) -> tuple[ProduceContext, list[Future[RecordMetadata]]]:
        """One one-record batch per partition, drained (IN_FLIGHT) into one request to node 1."""
        futures = [self.acc.append(tp, NOW, None, b"v", (), NOW, 0).future for tp in tps]
        batches = self.acc.drain(lambda tp: 1, [1], 1 << 20, NOW)[1]
        assert [b.tp for b in batches] == list(tps)
        return ProduceContext(1, {b.tp: b for b in batches}), futures

    def answer(self, context: ProduceContext, partitions: list[tuple[str, dict[str, Any]]], throttle_ms: int = 0
               ) -> None:
        request = FakeRequest(1, PRODUCE, 9, {}, True, NOW - 5, context)
        body = {"throttle_time_ms": throttle_ms,
                "responses": [{"name": topic, "partition_responses": [p]} for topic, p in partitions]}
        self.handler.handle(context, FakeResponse(request, body, None, 5, NOW))

    def metric(self, name: str) -> float:
        return self.metrics.snapshot(NOW)[name]


def partition(index: int, code: int = NO_ERROR, base_offset: int = -1, **extra: Any) -> dict[str, Any]:
    return {"index": index, "error_code": code, "base_offset": base_offset, "log_append_time_ms": -1,
            "log_start_offset": 0, "record_errors": [], "error_message": None, **extra}


def test_acknowledged_batches_complete_and_the_request_is_measured() -> None:
    rig = Rig()
    context, (f0, f1) = rig.in_flight(T0, T1)
    rig.answer(context, [("t", partition(0, base_offset=40)), ("t", partition(1, base_offset=7))], throttle_ms=30)
    assert f0.result(0) == RecordMetadata("t", 0, 40, NOW) and f1.result(0).offset == 7
    assert not rig.acc.has_incomplete()
    assert (rig.metric("request-total"), rig.metric("records-per-request-avg"), rig.metric("request-latency-max"),
            rig.metric("produce-throttle-time-max")) == (1, 2, 5, 30)


def test_a_partition_the_answer_leaves_out_is_retried_and_a_stranger_is_ignored() -> None:
    rig = Rig()
    context, (f0, f1) = rig.in_flight(T0, T1)
    assert not rig.client.metadata.needs_update(NOW)
    # t-1 is missing from the answer; u-0 was never asked for (a confused broker).
    rig.answer(context, [("t", partition(0, base_offset=3)), ("u", partition(0, base_offset=99))])
    assert f0.result(0).offset == 3 and not f1.done()
    retried = context.batches[T1]
    assert retried.state is BatchState.RETRYING and retried.attempts == 1
    assert rig.acc.has_undrained()  # back at the front of t-1's queue
    assert rig.client.metadata.needs_update(NOW)  # counted as NETWORK_EXCEPTION: invalid metadata, refresh
    assert rig.metric("record-retry-total") == 1 and rig.metric("record-error-total") == 0


def test_record_errors_are_named_in_the_failure() -> None:
    rig = Rig()
    context, (f0,) = rig.in_flight(T0)
    rejected = [{"batch_index": 0, "batch_index_error_message": "null key on a compacted topic"}]
    rig.answer(context, [("t", partition(0, InvalidRecordError.code, record_errors=rejected,
                                         error_message="one or more records have been rejected"))])
    with pytest.raises(InvalidRecordError, match=r"rejected \[record 0: null key on a compacted topic\]"):
        f0.result(0)
    error = f0.exception(0)
    assert isinstance(error, InvalidRecordError) and error.context == "Produce t-0 to broker1:9001"
    assert rig.metric("record-error-total") == 1 and not rig.acc.has_incomplete()
