"""A driver of its own for tests/spark/test_id_pool.py: a batch exactly_once write without transactionalIdPrefix
whose tasks send their first rows, then stop (their transactions open) until the test SIGKILLs this driver.

Run as ``python pool_crash_job.py BOOTSTRAP TOPIC COMMIT_LOG_TOPIC LEASE_MS``.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Iterator
from typing import Any

from pyspark.sql import SparkSession

_ROWS = 400  # per partition, before it stops: 400 KB, past the 64 KB buffers between Python and the JVM, so they go out
_BATCH_ROWS = 10  # the sink's input batches (spark.sql.execution.arrow.maxRecordsPerBatch)


def _rows_then_stop(topic: str) -> Any:
    def rows(partition: Iterator[int]) -> Iterator[tuple[str, str]]:
        for i in partition:
            for n in range(_ROWS):
                yield f"crashed-{i}-{n}-" + "x" * 1000, topic
        threading.Event().wait(600)  # the test kills the driver long before

    return rows


def main(bootstrap: str, topic: str, log_topic: str, lease_ms: str) -> None:
    spark = (SparkSession.builder.master("local[2]").appName("pool-crash").config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(_BATCH_ROWS)).getOrCreate())
    rdd = spark.sparkContext.parallelize(range(2), 2).mapPartitions(_rows_then_stop(topic))
    df = spark.createDataFrame(rdd, "value string, topic string")
    # The topic column, not the option: the sink then sends each input batch as it comes.
    (df.write.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap)
     .option("deliveryGuarantee", "exactly_once").option("commitLogTopic", log_topic)
     .option("idPoolLeaseMs", lease_ms).mode("append").save())


if __name__ == "__main__":
    main(*sys.argv[1:5])
