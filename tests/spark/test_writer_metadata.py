"""A task's producer asks for the topic option's metadata in its first Metadata request (no second request, which
would wait out retry.backoff.ms on every task)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.net.nonblocking_client import NonBlockingClient
from spark_kafka_sink.protocol.messages import METADATA
from spark_kafka_sink.spark.commit import commit_write
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.writer import write_partition
from tests.conftest import ConsumedRecord

pytestmark = [pytest.mark.broker]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_one_metadata_request_per_task(bootstrap: str, topic_factory: Callable[..., str],
                                       readback: Callable[..., list[ConsumedRecord]],
                                       monkeypatch: pytest.MonkeyPatch, guarantee: str) -> None:
    topic = topic_factory(partitions=3)
    metadata_topics: list[list[str]] = []
    send = NonBlockingClient.send

    def counting_send(self: NonBlockingClient, node_id: int, api: Any, body: Any, now_ms: int,
                      **kwargs: Any) -> Any:
        if api is METADATA:
            built = body(0) if callable(body) else body
            metadata_topics.append([t["name"] for t in built.get("topics") or []])
        return send(self, node_id, api, body, now_ms, **kwargs)

    monkeypatch.setattr(NonBlockingClient, "send", counting_send)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                 "deliveryGuarantee": guarantee}, streaming=False)
    plan = plan_columns(StructType([StructField("key", StringType()), StructField("value", StringType())]), topic)
    batch = pa.RecordBatch.from_pydict({"key": [f"k{i}" for i in range(30)], "value": [f"v{i}" for i in range(30)]})
    message = write_partition(options, plan, iter([batch]))
    assert message.rows == 30
    assert metadata_topics == [[topic]], metadata_topics
    commit_write(options, [message])  # exactly_once: the driver's commit
    assert sorted(r.value for r in readback(topic)) == sorted(f"v{i}".encode() for i in range(30))
