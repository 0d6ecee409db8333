"""A task that fails because the cluster went away hands Spark its error without waiting to close its producer.

The task and driver code run in-process (Spark adds nothing here) against a broker of this module's own, SIGKILLed
mid-task. An exactly_once task then fails its flush after delivery.timeout.ms, tries to abort its transaction for
max.block.ms, and closes its producer at once: before, a graceful close went on waiting up to 30 s for the abort
that could not reach the coordinator, so Spark's retry of the task started 30 s later.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.errors import DeliveryTimeoutError
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.writer import write_partition
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import create_topic, wait_for
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.broker]

DELIVERY_TIMEOUT_S = 3.0
MAX_BLOCK_S = 3.0


@pytest.fixture
def doomed_broker() -> Iterator[KafkaCluster]:
    fetch_jars()
    with KafkaCluster(size=1) as cluster:
        yield cluster


def _sender_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("kafka-producer-network-thread")}


@pytest.mark.parametrize("reuse", [True, False], ids=["producerReuse", "no reuse"])
def test_an_exactly_once_task_failing_on_a_dead_cluster_returns_without_waiting_for_its_abort(
        doomed_broker: KafkaCluster, reuse: bool) -> None:
    bootstrap = doomed_broker.bootstrap_servers
    topic = create_topic(bootstrap, "doomed", partitions=1)
    options = SinkOptions.parse({
        "kafka.bootstrap.servers": bootstrap, "topic": topic, "deliveryGuarantee": "exactly_once",
        "producerReuse": str(reuse).lower(), "kafka.delivery.timeout.ms": str(int(DELIVERY_TIMEOUT_S * 1000)),
        "kafka.request.timeout.ms": "1000", "kafka.max.block.ms": str(int(MAX_BLOCK_S * 1000))}, streaming=False)
    plan = plan_columns(StructType([StructField("value", StringType())]), topic)
    killed_at: list[float] = []

    def batches() -> Iterator[pa.RecordBatch]:
        yield pa.RecordBatch.from_pydict({"value": [f"before-{i}" for i in range(1000)]})
        # The task's transaction has records in the log (the high watermark counts uncommitted ones) ...
        wait_for("the task's first records", lambda: end_offsets(bootstrap, topic)[0] > 0, timeout=60)
        doomed_broker.kill_node(1)  # ... when the only broker, its partition leader and coordinator, dies
        killed_at.append(time.monotonic())
        yield pa.RecordBatch.from_pydict({"value": [f"after-{i}" for i in range(1000)]})

    others = _sender_threads()  # earlier tests' producers in this process
    with pytest.raises(DeliveryTimeoutError, match=r"delivery\.timeout\.ms=3000"):
        write_partition(options, plan, batches())
    failed_after_s = time.monotonic() - killed_at[0]
    # delivery.timeout.ms for the flush, max.block.ms for the abort, then nothing: a graceful close would add 30 s.
    assert failed_after_s < DELIVERY_TIMEOUT_S + MAX_BLOCK_S + 10, f"failed {failed_after_s:.1f} s after the kill"
    assert not [t.name for t in _sender_threads() - others if t.is_alive()], "the failed task's producer still runs"
