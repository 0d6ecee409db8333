"""Every sink column through ``writeStream``: on pyspark 4.0 the stream writer gets Rows (gathered back into Arrow),
on 4.1+ Arrow batches; either way each record must arrive as the batch sink would write it.

``make test`` runs this on the newest pyspark, ``make test-pyspark`` on the older ones (README "Versions").
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_kafka_sink.protocol.murmur2 import murmur2
from spark_kafka_sink.spark.writer import ARROW_STREAM_WRITER
from tests.conftest import ConsumedRecord
from tests.spark.conftest import pyspark_minor

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS = 600
BASE_MS = 1_700_000_000_000


def test_every_column_through_the_stream_writer(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                                readback: Callable[..., list[ConsumedRecord]],
                                                tmp_path: Path) -> None:
    # Which writer base this pyspark gives: the row path exactly where pyspark lacks the Arrow stream writer.
    assert ARROW_STREAM_WRITER == (pyspark_minor() >= (4, 1))
    topic = topic_factory(partitions=3)
    v = F.col("value")
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", ROWS).option("numPartitions", 2)
            .load().select(
                F.when(v % 7 == 3, None).otherwise(F.concat(F.lit("v-"), v.cast("string")).cast("binary"))
                .alias("value"),
                F.when(v % 5 == 0, None).otherwise(F.concat(F.lit("k-"), v.cast("string"))).alias("key"),
                F.lit(topic).alias("topic"),
                F.when(v % 4 == 1, None).otherwise((v % 3).cast("int")).alias("partition"),
                F.array(F.struct(F.lit("n").alias("key"), v.cast("string").cast("binary").alias("value")))
                .alias("headers"),
                F.timestamp_millis(F.lit(BASE_MS) + v).alias("event_time"),
                F.create_map(F.lit("ignored"), v).alias("extra")))
    query = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
             .option("deliveryGuarantee", "exactly_once").option("timestampColumn", "event_time")
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()

    records = readback(topic, "read_committed")
    by_id = {int(r.headers[0][1] or b""): r for r in records}
    assert len(records) == len(by_id) == ROWS
    for i, record in sorted(by_id.items()):
        assert record.headers == (("n", str(i).encode()),)
        assert record.value == (None if i % 7 == 3 else f"v-{i}".encode()), i
        assert record.key == (None if i % 5 == 0 else f"k-{i}".encode()), i
        assert record.timestamp_ms == BASE_MS + i, i
        if i % 4 != 1:
            assert record.partition == i % 3, i
    # Null partitions went to the partitioner: keyed rows to Java's murmur2 of the key modulo the partition count
    # (murmur2 is pinned to Java's own vectors in tests/producer/test_partitioner.py).
    keyed = {i: r.partition for i, r in by_id.items() if i % 4 == 1 and i % 5 != 0}
    assert keyed and keyed == {i: (murmur2(f"k-{i}".encode()) & 0x7FFFFFFF) % 3 for i in keyed}
