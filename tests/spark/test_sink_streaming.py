"""Structured Streaming into ``pykafka-sink`` with exactly_once: stop, restart from the checkpoint, replay.

The source is ``rate-micro-batch``: batch b holds exactly the values b*ROWS .. (b+1)*ROWS-1, whenever it runs, so
a replayed batch regenerates the same rows and every committed batch's rows can be predicted.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from tests.conftest import ConsumedRecord, wait_for
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS = 500


def start(spark: Any, bootstrap: str, topic: str, checkpoint: Path, rows_per_batch: int = ROWS,
          **trigger: Any) -> Any:
    rows = (spark.readStream.format("rate-micro-batch").option("rowsPerBatch", rows_per_batch)
            .option("numPartitions", 2)
            .load().select(F.col("value").cast("string").alias("value")))
    writer = (rows.writeStream.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
              .option("topic", topic).option("deliveryGuarantee", "exactly_once")
              .option("checkpointLocation", str(checkpoint)))
    return (writer.trigger(**trigger) if trigger else writer).start()


def committed_batches(checkpoint: Path) -> list[int]:
    """Batch ids in Spark's commit log: the micro-batches Spark considers done."""
    return sorted(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())


def run_until_done(query: Any, timeout: float = 120.0) -> None:
    assert query.awaitTermination(timeout), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()


def batch_values(*batches: int) -> Counter[bytes | None]:
    return Counter(str(v).encode() for b in batches for v in range(b * ROWS, (b + 1) * ROWS))


def test_stop_and_restart_from_checkpoint(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                          readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    checkpoint = tmp_path / "checkpoint"
    query = start(spark, bootstrap, topic, checkpoint)
    deadline = time.monotonic() + 120
    try:
        # Wait for three committed micro-batches; awaitTermination's timeout is the polling interval and also
        # surfaces a failed query at once.
        while not (checkpoint / "commits").is_dir() or len(committed_batches(checkpoint)) < 3:
            assert time.monotonic() < deadline, "three micro-batches were not committed within 120 s"
            assert not query.awaitTermination(0.2), query.exception()
    finally:
        query.stop()  # abrupt: may interrupt a micro-batch whose transactions are open
    first_run = committed_batches(checkpoint)

    # Restarting from the checkpoint reuses the transactional ids (derived from the checkpoint location): the new
    # run's tasks fence whatever the interrupted batch left open, and Spark re-runs that batch.
    run_until_done(start(spark, bootstrap, topic, checkpoint, availableNow=True))
    batches = committed_batches(checkpoint)
    assert len(batches) > len(first_run) and batches == list(range(len(batches)))

    # The stop may land after the Kafka commit of a batch but before Spark's commit log records it: Spark replays
    # that batch, and the replay skips the partitions the commit log says were committed. Every row once.
    assert Counter(r.value for r in readback(topic, "read_committed")) == batch_values(*batches)


def test_batch_replayed_after_a_crash_is_written_once(spark: Any, bootstrap: str,
                                                      topic_factory: Callable[..., str],
                                                      readback: Callable[..., list[ConsumedRecord]],
                                                      tmp_path: Path) -> None:
    """A crash between the Kafka commit and Spark's commit log (simulated here by deleting batch 0's entry; the real
    SIGKILL of the driver is in tests/cluster/test_driver_crash.py): Spark replays batch 0, which skips every
    partition the commit log recorded as committed, so its rows stay visible once."""
    topic = topic_factory(partitions=3)
    checkpoint = tmp_path / "checkpoint"
    run_until_done(start(spark, bootstrap, topic, checkpoint, availableNow=True))
    assert committed_batches(checkpoint) == [0]
    for entry in (checkpoint / "commits").iterdir():
        if entry.name in ("0", ".0.crc"):
            entry.unlink()
    run_until_done(start(spark, bootstrap, topic, checkpoint, availableNow=True))
    batches = committed_batches(checkpoint)
    assert batches[0] == 0
    assert Counter(r.value for r in readback(topic, "read_committed")) == batch_values(*batches)


def stable_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    """Each partition's last stable offset: an open transaction holds it below the high watermark."""
    return end_offsets(bootstrap, topic, "read_committed")


def test_a_graceful_stop_leaves_no_transaction_open(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                                   tmp_path: Path) -> None:
    """query.stop() while a micro-batch's transactions hold records: Spark calls the sink's abort, which fences every
    task's transactional id, so right after stop() returns the last stable offset is the high watermark."""
    topic = topic_factory(partitions=2)
    query = start(spark, bootstrap, topic, tmp_path / "checkpoint", rows_per_batch=300_000)
    try:
        wait_for("a micro-batch's open transaction holding records",
                 lambda: stable_offsets(bootstrap, topic) != end_offsets(bootstrap, topic), timeout=120, interval=0.02)
    finally:
        query.stop()
    written = end_offsets(bootstrap, topic)
    assert sum(written.values()) > 0 and stable_offsets(bootstrap, topic) == written
