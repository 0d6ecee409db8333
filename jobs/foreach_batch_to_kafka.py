"""Write each micro-batch with ``foreachBatch`` and the batch writer of ``pykafka-sink``.

    spark-submit jobs/foreach_batch_to_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic totals \\
        --checkpoint /tmp/totals-checkpoint --seconds 60

Use foreachBatch when a micro-batch needs batch-only operations before it goes to Kafka (here: a per-key total
computed with a groupBy over the micro-batch). Inside the function the write is an ordinary batch write: pass a
stable ``transactionalIdPrefix`` and ``.option("writeId", batch_id)`` with exactly_once, so each micro-batch is
committed in Kafka transactions named after the query, and a replayed batch id can be recognised.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="foreach_batch_to_kafka.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, help="topic to write to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder (reuse it to restart the query)")
    parser.add_argument("--transactional-id-prefix", default="foreach-batch-demo",
                        help="stable transactionalIdPrefix for this query (foreach-batch-demo)")
    parser.add_argument("--rows-per-second", type=int, default=1000, help="rate source speed (1000)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (5)")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="stop after this many seconds (0: run until interrupted)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.appName("foreach_batch_to_kafka").getOrCreate()
    ticks = spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second).load()

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        totals = (batch.groupBy((F.col("value") % 10).alias("bucket"))
                  .agg(F.count("*").alias("rows"), F.sum("value").alias("total")))
        (totals.select(F.col("bucket").cast("string").alias("key"),
                       F.to_json(F.struct(F.lit(batch_id).alias("batch_id"), "bucket", "rows", "total"))
                       .alias("value"))
         .coalesce(1)  # ten rows: one task, one transaction (instead of one per shuffle partition)
         .write.format("pykafka-sink")
         .option("kafka.bootstrap.servers", args.bootstrap_servers)
         .option("topic", args.topic)
         .option("deliveryGuarantee", "exactly_once")
         .option("transactionalIdPrefix", args.transactional_id_prefix)
         .option("writeId", batch_id)
         .mode("append")
         .save())

    query: Any = (ticks.writeStream.foreachBatch(write_batch)
                  .option("checkpointLocation", args.checkpoint)
                  .trigger(processingTime=f"{args.trigger_seconds} seconds")
                  .start())
    try:
        if args.seconds > 0:
            query.awaitTermination(args.seconds)
        else:
            query.awaitTermination()
    except KeyboardInterrupt:
        pass
    finally:
        query.stop()
    progress = query.lastProgress or {}
    print(f"foreach_batch_to_kafka: stopped after micro-batch {progress.get('batchId', 'none')}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
