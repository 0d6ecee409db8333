"""Many small tasks: a Python worker's at_least_once tasks share one producer (real Spark, worker reuse on)."""

from __future__ import annotations

import json
import time
import uuid
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.errors import RecordTooLargeError
from spark_kafka_sink.spark.commit import KafkaCommitMessage, commit_write
from spark_kafka_sink.spark.datasource import KafkaSinkDataSource
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.writer import KafkaBatchWriter, write_partition
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]


class ReportingWriter(KafkaBatchWriter):
    """The sink's batch writer, also writing the driver's summary to a file the test reads."""

    report: str = ""

    def commit(self, messages: list[Any]) -> None:
        summary = commit_write(self.options, messages)
        done = [m for m in messages if isinstance(m, KafkaCommitMessage)]
        Path(self.report).write_text(json.dumps({"tasks": summary.tasks, "new_producers": summary.new_producers,
                                                 "rows": summary.rows, "with_rows": sum(1 for m in done if m.rows),
                                                 "attempts": {m.partition_id: m.attempt for m in done}}))


class ReportingSink(KafkaSinkDataSource):
    @classmethod
    def name(cls) -> str:
        return "pykafka-sink-reporting"

    def writer(self, schema: StructType, overwrite: bool) -> ReportingWriter:
        inner = super().writer(schema, overwrite)
        assert isinstance(inner, KafkaBatchWriter)
        writer = ReportingWriter(inner.options, inner.plan, inner.resume)
        writer.report = self.options["report"]
        return writer


def report_of(spark: Any, df: Any, bootstrap: str, tmp_path: Path, **options: Any) -> dict[str, Any]:
    spark.dataSource.register(ReportingSink)
    path = tmp_path / f"report-{uuid.uuid4().hex[:6]}.json"
    write_df(df, bootstrap, fmt="pykafka-sink-reporting", report=str(path), **options)
    report: dict[str, Any] = json.loads(path.read_text())
    return report


def test_at_least_once_tasks_of_a_worker_share_its_producer(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=6)
    df = spark.range(0, 2400, 1, 24).select(F.col("id").cast("string").alias("key"),
                                          F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"))
    # A client.id of this test's own: producers that earlier tests left in the shared workers do not match its key.
    own = {"kafka.client.id": f"small-tasks-{uuid.uuid4().hex[:8]}"}
    first = report_of(spark, df, bootstrap, tmp_path, topic=topic, **own)
    # local[2]: two Python workers run the 24 tasks; each makes its producer once (a respawned worker, once more).
    assert first["tasks"] == 24 and first["with_rows"] == 24 and 1 <= first["new_producers"] <= 4, first
    second = report_of(spark, df, bootstrap, tmp_path, topic=topic, **own)
    assert second["new_producers"] <= 2, second  # the workers kept their producers for the next write
    off = report_of(spark, df, bootstrap, tmp_path, topic=topic, producerReuse="false", **own)
    assert off["new_producers"] == 24, off  # reuse off: one producer per task, as before
    values = Counter(r.value for r in readback(topic))
    assert len(values) == 2400 and set(values.values()) == {3}  # three writes, every row each time


def test_exactly_once_tasks_of_a_worker_share_its_producer_under_their_own_transactional_ids(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    df = spark.range(0, 1200, 1, 24).select(F.col("id").cast("string").alias("value"))
    own = {"kafka.client.id": f"small-tasks-{uuid.uuid4().hex[:8]}"}  # see above: earlier tests' producers differ
    report = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once", **own)
    # Two Python workers: each makes one transactional producer and switches it to each task's transactional.id.
    assert report["tasks"] == 24 and report["with_rows"] == 24 and 1 <= report["new_producers"] <= 4, report
    again = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once", **own)
    assert again["new_producers"] <= 2, again
    off = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once",
                    producerReuse="false", **own)
    assert off["new_producers"] == 24, off
    values = Counter(r.value for r in readback(topic))  # read_committed: every transaction was committed once
    assert len(values) == 1200 and set(values.values()) == {3}


FENCED_ROWS = 12_000
FENCE_AT = 10_000  # a row of Spark partition 1 (rows 6,000-11,999) after the writer sent several 500-row batches


def value_of(i: int) -> str:
    # Large values: the UDF worker's output leaves its buffer for the writer while the UDF waits (see below).
    return f"v{i}-".ljust(200, "x")


def test_a_task_whose_producer_was_fenced_fails_and_its_retry_writes_exactly_once(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    """Partition 1's first attempt has its transactional.id fenced by another client while it writes: its producer
    hits PRODUCER_FENCED (fatal), the task fails, the broken producer is closed (never lent again), and Spark's
    retry writes the partition on another producer; the other tasks reused their workers' producers throughout."""
    topic = topic_factory(partitions=3)
    prefix = f"fenced-{uuid.uuid4().hex[:8]}"

    def compute(i: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        if i == FENCE_AT and context is not None and context.attemptNumber() == 0:
            from spark_kafka_sink.producer import fence_transactional_id
            from tests.spark.conftest import end_offsets

            deadline = time.monotonic() + 60
            # More than partition 0's 6,000 rows: some are this attempt's, its transaction is open when fenced.
            while sum(end_offsets(bootstrap, topic).values()) <= FENCED_ROWS // 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # polling interval of the condition: this attempt's first batches landed
            fence_transactional_id({"bootstrap.servers": bootstrap}, f"{prefix}-1", 60)
        return value_of(i)

    udf = F.udf(compute, "string", useArrow=False)
    df = spark.range(0, FENCED_ROWS, 1, 2).select(udf("id").alias("value"))
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "500")
    try:
        report = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once",
                           transactionalIdPrefix=prefix)
    finally:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)
    assert report["attempts"] == {"0": 0, "1": 1}, report  # partition 1 failed once, its retry succeeded
    assert Counter(r.value for r in readback(topic)) == Counter(value_of(i).encode() for i in range(FENCED_ROWS))
    # The fenced attempt really wrote records before it failed: they are in the log, aborted.
    assert len(readback(topic, isolation="read_uncommitted")) > FENCED_ROWS


def test_a_tasks_first_large_batch_goes_out_in_two_halves_in_order(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]],
        sent_rows: list[int]) -> None:
    """A task's first Arrow batch of >= 512 KiB goes as two halves (for a small task, whose input is that one batch,
    the broker writes the first half while the second is encoded); later batches, and small ones, go whole. Nothing
    is read ahead: each input batch is freed before the next is read. Every row lands once, in input order."""
    sent = sent_rows
    topic = topic_factory(partitions=2)
    plan = plan_columns(StructType([StructField("key", StringType()), StructField("value", StringType())]), topic)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic, "producerReuse": "false"},
                                streaming=False)

    def batch(lo: int, hi: int) -> pa.RecordBatch:  # ~120 B a row
        return pa.RecordBatch.from_pydict({"key": [str(i % 7) for i in range(lo, hi)],
                                           "value": [f"{i}-".ljust(120, "x") for i in range(lo, hi)]})

    alive: list[bool] = []

    def one_at_a_time(*bounds: tuple[int, int]) -> Iterator[pa.RecordBatch]:
        previous = None
        for lo, hi in bounds:
            alive.append(previous is not None and previous() is not None)  # the last one, when this one is read
            current = batch(lo, hi)
            previous = weakref.ref(current)
            yield current
            del current

    write_partition(options, plan, one_at_a_time((0, 5_000), (5_000, 10_001)))  # ~0.6 MB each: halves, whole
    write_partition(options, plan, one_at_a_time((10_001, 16_003)))  # one of ~0.72 MB: halves
    write_partition(options, plan, one_at_a_time((16_003, 19_002)))  # one of ~0.36 MB: whole
    assert sent == [2_500, 2_500, 5_001, 3_001, 3_001, 2_999]
    assert alive == [False, False, False, False]
    by_key: dict[bytes | None, list[int]] = {}
    for record in sorted(readback(topic), key=lambda r: (r.partition, r.offset)):
        assert record.value is not None
        by_key.setdefault(record.key, []).append(int(record.value.split(b"-")[0]))
    assert sorted(i for rows in by_key.values() for i in rows) == list(range(19_002))
    assert all(rows == sorted(rows) for rows in by_key.values())  # each key's rows in input order


def test_an_exactly_once_task_whose_first_rows_cannot_be_sent_leaves_nothing_open(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    """The first rows are encoded while init_transactions is on the wire: a row that can never be sent fails the
    task there, before anything is queued. Nothing reaches the log, and the retry of the partition (same
    transactional id) writes and commits at once."""
    topic = topic_factory(partitions=2)
    options = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                 "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"t-{uuid.uuid4().hex}",
                                 "kafka.max.request.size": "100000"}, streaming=False)
    plan = plan_columns(StructType([StructField("key", StringType()), StructField("value", StringType())]), topic)
    too_large = pa.RecordBatch.from_pydict({"key": ["a", "b"], "value": ["x", "y" * 200_000]})
    with pytest.raises(RecordTooLargeError, match="row 1 is 2000[0-9]{2} bytes when serialized"):
        write_partition(options, plan, iter([too_large]))
    assert readback(topic, isolation="read_uncommitted") == []
    retry = write_partition(options, plan, iter([pa.RecordBatch.from_pydict({"key": ["a"], "value": ["x"]})]))
    commit_write(options, [retry])
    assert [r.value for r in readback(topic)] == [b"x"]
