"""A driver of its own for test_driver_crash.py's late-attempt test: an exactly_once write of two Spark partitions
whose partition 1 fails upstream of the sink on its first attempt, once that attempt's writer holds its first rows
(``LATE_ATTEMPT_HOLD`` of ``commit_pause/``: the writer is stalled before its InitProducerId). Spark then retries
the partition (local[2,4]: up to 4 attempts).

Run as ``spark-submit late_attempt_job.py BOOTSTRAP TOPIC PREFIX HOLD_FOLDER`` (``-``: no failure). Values are
``<partition>-<n>-x...``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pyspark import TaskContext
from pyspark.sql import SparkSession

ROWS = 400  # per partition: 400 KB, past the 64 KB buffers between Python and the JVM, so they reach the writer
_BATCH_ROWS = 10  # the sink's input batches (spark.sql.execution.arrow.maxRecordsPerBatch)


def _rows(hold_folder: Path) -> Any:
    def rows(partition: Iterator[int]) -> Iterator[tuple[str]]:
        ctx = TaskContext.get()
        assert ctx is not None
        for i in partition:
            for n in range(ROWS):
                yield (f"{i}-{n}-" + "x" * 1000,)
            if i == 1 and ctx.attemptNumber() == 0 and hold_folder.name != "-":
                deadline = time.monotonic() + 300
                while not (hold_folder / "held").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)  # poll interval of a condition wait: the writer got its first rows
                raise RuntimeError("upstream failure of partition 1, attempt 0 (late_attempt_job)")

    return rows


def main(bootstrap: str, topic: str, prefix: str, hold_folder: str) -> None:
    spark = (SparkSession.builder.master("local[2,4]").appName("late-attempt").config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(_BATCH_ROWS)).getOrCreate())
    rdd = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_rows(Path(hold_folder)))
    df = spark.createDataFrame(rdd, "value string")
    (df.write.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
     .option("deliveryGuarantee", "exactly_once").option("transactionalIdPrefix", prefix).option("writeId", "1")
     .mode("append").save())


if __name__ == "__main__":
    main(*sys.argv[1:5])
