"""Structured Streaming into Kafka, exactly once per micro-batch.

    spark-submit examples/spark_streaming.py --bootstrap-servers 127.0.0.1:9092 --topic ticks \\
        --checkpoint /tmp/ticks-checkpoint

Restart with the same --checkpoint to go on where the query stopped.
"""

from __future__ import annotations

import argparse
from typing import Any


def start(spark: Any, bootstrap_servers: str, topic: str, checkpoint: str, **trigger: Any) -> Any:
    """Start the query; ``trigger`` as for ``DataStreamWriter.trigger`` (default: every 5 seconds)."""
    # --8<-- [start:stream]
    ticks = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 100).load()
    query = (ticks.selectExpr("CAST(value % 10 AS STRING) AS key", "to_json(struct(*)) AS value")
             .writeStream.format("pykafka-sink")
             .option("kafka.bootstrap.servers", bootstrap_servers)
             .option("topic", topic)
             .option("deliveryGuarantee", "exactly_once")
             .option("checkpointLocation", checkpoint)   # the transactional ids derive from it
             .trigger(**(trigger or {"processingTime": "5 seconds"}))
             .start())
    # --8<-- [end:stream]
    return query


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="ticks")
    parser.add_argument("--checkpoint", default="/tmp/ticks-checkpoint")
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_streaming").getOrCreate()
    start(session, args.bootstrap_servers, args.topic, args.checkpoint).awaitTermination()
