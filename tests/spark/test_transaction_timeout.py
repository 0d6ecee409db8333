"""The error a user sees when a task's transaction outlives transaction.timeout.ms before the driver commits.

Runs the task and driver code in-process (no Spark needed to reach the broker's timeout) against a broker of its
own that looks for expired transactions every 200 ms instead of every 10 s.
"""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.spark.commit import TransactionCommitError, commit_write
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.writer import write_partition
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import create_topic, read_topic, wait_for
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.broker]


@pytest.fixture(scope="module")
def fast_expiry_bootstrap() -> Iterator[str]:
    cluster = KafkaCluster(size=1, properties={
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}).start()
    try:
        yield cluster.bootstrap_servers
    finally:
        cluster.stop()


def test_commit_after_the_transaction_timeout_fails_and_says_why(fast_expiry_bootstrap: str) -> None:
    bootstrap = fast_expiry_bootstrap
    topic = create_topic(bootstrap, "expiring", partitions=1)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                 "deliveryGuarantee": "exactly_once", "kafka.transaction.timeout.ms": "1000"},
                                streaming=False)
    plan = plan_columns(StructType([StructField("value", StringType())]), topic)
    message = write_partition(options, plan, iter([pa.RecordBatch.from_pydict({"value": ["a", "b"]})]))
    assert message.has_transaction

    # The coordinator aborts the expired transaction: its abort marker takes offset 2, after the two records.
    wait_for("the broker to abort the expired transaction", lambda: end_offsets(bootstrap, topic)[0] >= 3,
             timeout=60)

    with pytest.raises(TransactionCommitError) as info:
        commit_write(options, [message])
    text = str(info.value)
    assert message.transactional_id is not None
    assert "1 of 1 Kafka transactions could not be committed" in text and message.transactional_id in text
    assert "outlived transaction.timeout.ms (1000 ms)" in text and "0 were committed" in text
    assert read_topic(bootstrap, topic) == []
