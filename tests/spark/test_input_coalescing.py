"""A task hands the producer its input batches together, up to ``fill_bytes``, so record batches fill batch.size.

Each ``send_batch`` call closes its batches: one 10,000-row Spark batch a call made ~100 KB batches into 12
partitions however large batch.size was. The writer holds consecutive input batches while they fit under
``fill_bytes`` (90% of batch.size for each partition of the topic), then sends them as one table, as soon as
another batch like the last would not fit (so a large batch is never held while Spark reads the next).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.producer.arrow_send import fill_bytes
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.writer import write_partition
from tests.conftest import ConsumedRecord

SCHEMA = StructType([StructField("key", StringType()), StructField("value", StringType())])
ROWS = 10_000  # Spark's default spark.sql.execution.arrow.maxRecordsPerBatch


def test_fill_bytes_gives_each_partition_most_of_a_batch_and_stays_one_slice() -> None:
    assert fill_bytes(256 << 10, 12) == int(0.9 * (256 << 10) * 12)  # 2.83 MB: two 1.24 MB Spark batches
    assert fill_bytes(16 << 10, 12) == int(0.9 * (16 << 10) * 12)  # 177 KB: every Spark batch goes alone
    assert fill_bytes(256 << 10, 200) == 3 << 20  # at most _FILL_CAP
    assert fill_bytes(1, 1) == 1


def _batches(count: int, topic_column: str | None = None) -> Iterator[pa.RecordBatch]:
    for b in range(count):  # ~1.24 MB of Arrow each: 16 B keys, 100 B values, as the benchmark's
        rows = range(b * ROWS, (b + 1) * ROWS)
        columns: dict[str, Any] = {"key": [f"{i:016d}" for i in rows], "value": [f"{i}-".ljust(100, "v") for i in rows]}
        if topic_column is not None:
            columns["topic"] = [topic_column] * ROWS
        yield pa.RecordBatch.from_pydict(columns)


@pytest.mark.broker
def test_input_batches_go_two_at_a_time_into_a_12_partition_topic(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        sent_rows: list[int]) -> None:
    sent = sent_rows
    topic = topic_factory(partitions=12)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic, "producerReuse": "false"},
                                streaming=False)
    message = write_partition(options, plan_columns(SCHEMA, topic), _batches(6))
    # The first batch in halves (see test_small_tasks), then two ~1.24 MB batches a call (2.48 of 2.83 MB), sent
    # with the second (a third would not fit), and the one left at the end alone. Without the coalescing: 5,000,
    # 5,000 and 10,000 five times.
    assert sent == [5_000, 5_000, 20_000, 20_000, 10_000]
    assert sum(w.records for w in message.writes) == 6 * ROWS
    records = readback(topic)
    assert sorted(int((r.value or b"").split(b"-")[0]) for r in records) == list(range(6 * ROWS))
    for part in range(12):  # each partition's rows in input order
        mine = [int((r.value or b"").split(b"-")[0]) for r in sorted(records, key=lambda r: r.offset)
                if r.partition == part]
        assert mine == sorted(mine)


@pytest.mark.broker
def test_with_a_topic_column_each_input_batch_goes_alone(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        sent_rows: list[int]) -> None:
    # Rows may name any topic: there is no one partition count to fill, so nothing is held.
    sent = sent_rows
    topic = topic_factory(partitions=12)
    schema = StructType([*SCHEMA.fields, StructField("topic", StringType())])
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "producerReuse": "false"}, streaming=False)
    write_partition(options, plan_columns(schema, None), _batches(3, topic_column=topic))
    assert sent == [5_000, 5_000, 10_000, 10_000]
    assert len(readback(topic)) == 3 * ROWS
