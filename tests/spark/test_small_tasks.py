"""Many small tasks: a Python worker's at_least_once tasks share one producer (real Spark, worker reuse on)."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from spark_kafka_sink.spark.commit import KafkaCommitMessage, commit_write
from spark_kafka_sink.spark.datasource import KafkaSinkDataSource
from spark_kafka_sink.spark.writer import KafkaBatchWriter
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
                                                 "rows": summary.rows, "with_rows": sum(1 for m in done if m.rows)}))


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


def report_of(spark: Any, df: Any, bootstrap: str, tmp_path: Path, **options: Any) -> dict[str, int]:
    spark.dataSource.register(ReportingSink)
    path = tmp_path / f"report-{uuid.uuid4().hex[:6]}.json"
    write_df(df, bootstrap, fmt="pykafka-sink-reporting", report=str(path), **options)
    report: dict[str, int] = json.loads(path.read_text())
    return report


def test_at_least_once_tasks_of_a_worker_share_its_producer(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=6)
    df = spark.range(0, 2400, 1, 24).select(F.col("id").cast("string").alias("key"),
                                          F.concat(F.lit("v"), F.col("id").cast("string")).alias("value"))
    first = report_of(spark, df, bootstrap, tmp_path, topic=topic)
    # local[2]: two Python workers run the 24 tasks; each makes its producer once (a respawned worker, once more).
    assert first["tasks"] == 24 and first["with_rows"] == 24 and 1 <= first["new_producers"] <= 4, first
    second = report_of(spark, df, bootstrap, tmp_path, topic=topic)
    assert second["new_producers"] <= 2, second  # the workers kept their producers for the next write
    off = report_of(spark, df, bootstrap, tmp_path, topic=topic, producerReuse="false")
    assert off["new_producers"] == 24, off  # reuse off: one producer per task, as before
    values = Counter(r.value for r in readback(topic))
    assert len(values) == 2400 and set(values.values()) == {3}  # three writes, every row each time


def test_exactly_once_tasks_of_a_worker_share_its_producer_under_their_own_transactional_ids(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    df = spark.range(0, 1200, 1, 24).select(F.col("id").cast("string").alias("value"))
    report = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once")
    # Two Python workers: each makes one transactional producer and switches it to each task's transactional.id.
    assert report["tasks"] == 24 and report["with_rows"] == 24 and 1 <= report["new_producers"] <= 4, report
    again = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once")
    assert again["new_producers"] <= 2, again
    off = report_of(spark, df, bootstrap, tmp_path, topic=topic, deliveryGuarantee="exactly_once",
                    producerReuse="false")
    assert off["new_producers"] == 24, off
    values = Counter(r.value for r in readback(topic))  # read_committed: every transaction was committed once
    assert len(values) == 1200 and set(values.values()) == {3}
