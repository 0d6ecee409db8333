"""A running aggregation in the update output mode, written with ``foreachBatch`` and the batch writer.

pyspark refuses the update mode for every Python data source; ``foreachBatch`` hands each micro-batch's changed
rows to an ordinary batch write, exactly once with a stable prefix and the batch id as ``writeId``.

    spark-submit examples/spark_foreach_batch.py --bootstrap-servers 127.0.0.1:9092 --topic totals \\
        --checkpoint /tmp/totals-checkpoint
"""

from __future__ import annotations

import argparse
from typing import Any


def start(spark: Any, bootstrap_servers: str, topic: str, checkpoint: str, **trigger: Any) -> Any:
    """Start the query; ``trigger`` as for ``DataStreamWriter.trigger`` (default: every 5 seconds)."""
    ticks = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 100).load()
    # --8<-- [start:foreach]
    def write_batch(batch_df: Any, batch_id: int) -> None:
        (batch_df.selectExpr("CAST(bucket AS STRING) AS key", "to_json(struct(*)) AS value")
            .coalesce(1)                                         # one transaction for a few rows
            .write.format("pykafka-sink")
            .option("kafka.bootstrap.servers", bootstrap_servers)
            .option("topic", topic)
            .option("deliveryGuarantee", "exactly_once")
            .option("transactionalIdPrefix", f"totals-{topic}")  # stable across restarts of the query
            .option("writeId", batch_id)                         # a replayed batch is recognised and skipped
            .mode("append")
            .save())

    totals = ticks.selectExpr("value % 10 AS bucket").groupBy("bucket").count()
    query = (totals.writeStream.outputMode("update")
             .foreachBatch(write_batch)
             .option("checkpointLocation", checkpoint)
             .trigger(**(trigger or {"processingTime": "5 seconds"}))
             .start())
    # --8<-- [end:foreach]
    return query


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="totals")
    parser.add_argument("--checkpoint", default="/tmp/totals-checkpoint")
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_foreach_batch").getOrCreate()
    start(session, args.bootstrap_servers, args.topic, args.checkpoint).awaitTermination()
