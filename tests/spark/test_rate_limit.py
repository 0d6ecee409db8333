"""maxRecordsPerSecond / maxBytesPerSecond: a whole write's caps, split over rateLimitTasks tasks, as the broker saw
them. The topics stamp every batch with the broker's own clock (message.timestamp.type=LogAppendTime); the batches'
append times and sizes are read from the partition's log with Kafka's own tool (DumpLogSegments), records with
confluent-kafka."""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.spark.commit import summarize
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import require_java, tools_lib
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

_APPEND_TIME = {"message.timestamp.type": "LogAppendTime"}
_BATCH_LINE = re.compile(r"count: (\d+) .*LogAppendTime: (\d+) size: (\d+)")


def _rows(spark: Any, n: int, value_bytes: int) -> Any:
    """``n`` rows in 2 Spark partitions; task i writes topic partition i (so each partition is one task's pace)."""
    return (spark.range(0, n, 1, 2)
            .select(F.col("id").cast("string").alias("key"), F.lit("v" * value_bytes).alias("value"),
                    F.spark_partition_id().alias("partition")))


def logged_batches(kafka: KafkaCluster, topic: str, partition: int) -> list[tuple[int, int, int]]:
    """(append time ms, records, bytes) of each batch in the partition's first log segment, by DumpLogSegments."""
    (node,) = kafka.nodes.values()
    segment = node.data_dir / "data" / f"{topic}-{partition}" / "00000000000000000000.log"
    out = subprocess.run([require_java(), "-XX:TieredStopAtLevel=1", "-cp", f"{tools_lib(kafka.version)}/*",
                          "org.apache.kafka.tools.DumpLogSegments", "--files", str(segment)],
                         capture_output=True, text=True, timeout=180, check=True).stdout
    return [(int(m[2]), int(m[1]), int(m[3])) for m in _BATCH_LINE.finditer(out)]


def test_write_capped_in_records_per_second_takes_n_over_r(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    n, cap = 3000, 1000  # each of 2 tasks: 1500 records at 500 a second
    topic = topic_factory(partitions=2, config=_APPEND_TIME)
    started = time.monotonic()
    write_df(_rows(spark, n, 100), bootstrap, topic=topic, maxRecordsPerSecond=cap, rateLimitTasks=2,
             **{"kafka.batch.size": "16384"})
    elapsed = time.monotonic() - started
    records = readback(topic)
    assert sorted(int(r.key or b"-1") for r in records) == list(range(n))
    assert elapsed >= n / cap
    for partition in (0, 1):
        times = [r.timestamp_ms for r in records if r.partition == partition]
        # One task's 1500 records reached the broker over at least ~1500 / 500 s, less the first and last batch's
        # share (each batch of ~130 records goes once the limit has paid for it); unlimited, within a few ms.
        span_s = (max(times) - min(times)) / 1000
        assert span_s >= 0.75 * (n / 2) / (cap / 2), (partition, span_s)


def test_write_capped_in_bytes_per_second_stays_under_the_cap_at_the_broker(
        spark: Any, kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    n, cap = 2000, 120_000  # ~330 KB of batches: ~2.8 s at the cap
    topic = topic_factory(partitions=2, config=_APPEND_TIME)
    write_df(_rows(spark, n, 150), bootstrap, topic=topic, maxBytesPerSecond=cap, rateLimitTasks=2,
             **{"kafka.batch.size": "16384"})
    assert len(readback(topic)) == n
    per_partition = [logged_batches(kafka, topic, p) for p in (0, 1)]
    batches = sorted(b for logged in per_partition for b in logged)
    assert sum(records for _, records, _ in batches) == n
    total = sum(size for _, _, size in batches)
    assert total > 2.5 * cap, total  # long enough a write for the rate to mean something
    # The broker's byte rate over the write: the bytes appended from its first append to its last, less each task's
    # first batch (paid for from the task's start, before that first append). Within 10 % of the cap.
    span_s = (batches[-1][0] - batches[0][0]) / 1000
    firsts = sum(logged[0][2] for logged in per_partition)
    assert (total - firsts) / span_s <= 1.1 * cap, (total, firsts, span_s)
    # And over any 1 s window of append times, the bytes of the batches appended in it.
    for i, (start, _, _) in enumerate(batches):
        window = sum(size for t, _, size in batches[i:] if t < start + 1000)
        assert window <= 1.1 * cap + 2 * max(size for _, _, size in batches), (start, window)


def test_each_task_gets_its_share_of_the_caps_and_the_summary_shows_them() -> None:
    options = SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", "maxRecordsPerSecond": "1000",
                                 "maxBytesPerSecond": "3000000", "rateLimitTasks": "4"}, streaming=False)
    config = options.producer_config()
    assert (config["max.records.per.second"], config["max.bytes.per.second"]) == (250, 750_000)
    line = summarize(options, [], now=time.time()).line()
    assert "rate limit 1000 records/s and 3000000 bytes/s over 4 tasks at once" in line


@pytest.mark.parametrize(("options", "named"), [
    ({"maxRecordsPerSecond": "1000"}, "rateLimitTasks"),  # the cap is the whole write's: how many share it?
    ({"rateLimitTasks": "2"}, "rateLimitTasks"),
    ({"maxBytesPerSecond": "0", "rateLimitTasks": "2"}, "maxBytesPerSecond"),
    ({"kafka.max.records.per.second": "10"}, "maxRecordsPerSecond"),
])
def test_rate_limit_options_are_checked_on_the_driver(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", **options}, streaming=False)
