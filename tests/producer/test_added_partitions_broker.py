"""Partitions added to a topic while a producer holds its metadata: a record naming a new partition is sent, not
refused from the stale cache (Java refreshes the metadata for it too), and a partition the topic really lacks is
still refused at once. Against a real broker; records read back with confluent-kafka. The sink's path (a task
taking the producer an earlier task left, with the partition column naming a new partition) runs the task code
in-process, as Spark would with ``producerReuse``."""

from __future__ import annotations

import time
from collections.abc import Callable

import pyarrow as pa
import pytest
from pyspark.sql.types import IntegerType, StringType, StructField, StructType

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import PartitionOutOfRangeError
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import InvalidColumnError, plan_columns
from spark_kafka_sink.spark.writer import write_partition
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


def _add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_partitions([NewPartitions(topic, total)]).values():
        future.result(30)


def test_send_and_send_batch_reach_partitions_added_after_the_metadata_was_cached(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(2)
    # metadata.max.age.ms keeps the cached 2 partitions for the whole test unless something asks for a refresh.
    with KafkaProducer({"bootstrap.servers": bootstrap, "metadata.max.age.ms": 600_000, "max.block.ms": 20_000}) as p:
        p.send(topic, b"old", partition=1).result(30)
        assert p.partitions_for(topic) == [0, 1]
        _add_partitions(bootstrap, topic, 4)
        assert p.send(topic, b"new", partition=3).result(30).partition == 3
        table = pa.table({"value": [b"a", b"b"], "partition": pa.array([2, 0], pa.int32())})
        p.send_batch(topic, table).result(30)
        assert p.partitions_for(topic) == [0, 1, 2, 3]
        # A partition the topic does not have: refused once a fresh answer says so, not after max.block.ms.
        started = time.monotonic()
        with pytest.raises(PartitionOutOfRangeError, match=r"partition 9 is not a partition of topic .* \(it has 4"):
            p.send(topic, b"x", partition=9)
        with pytest.raises(PartitionOutOfRangeError, match=r"row 0: partition 7 .* \(it has 4"):
            p.send_batch(topic, pa.table({"value": [b"x"], "partition": pa.array([7], pa.int32())}))
        assert time.monotonic() - started < 10
    assert sorted((r.partition, r.value) for r in readback(topic)) == [
        (0, b"b"), (1, b"old"), (2, b"a"), (3, b"new")]


def test_a_reused_producer_writes_a_new_partition_of_the_partition_column(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(2)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic, "producerReuse": "true",
                                 "kafka.metadata.max.age.ms": "600000"}, streaming=False)
    plan = plan_columns(StructType([StructField("value", StringType()), StructField("partition", IntegerType())]),
                        topic)

    def task(values: list[str], partitions: list[int]) -> None:
        write_partition(options, plan, iter([pa.RecordBatch.from_pydict(
            {"value": values, "partition": pa.array(partitions, pa.int32())})]))

    task(["first"], [1])  # leaves its producer, with the topic's 2 partitions cached, for the next task
    _add_partitions(bootstrap, topic, 3)
    task(["second"], [2])
    with pytest.raises(InvalidColumnError, match="column 'partition' holds 5, but topic .* has 3 partition"):
        task(["third"], [5])
    assert sorted((r.partition, r.value) for r in readback(topic)) == [(1, b"first"), (2, b"second")]
