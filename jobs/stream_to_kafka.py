"""Stream Spark's rate source into Kafka with ``writeStream.format("pykafka-sink")``, exactly once per micro-batch.

    spark-submit jobs/stream_to_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic ticks \\
        --checkpoint /tmp/ticks-checkpoint --rows-per-second 1000 --seconds 60

Each micro-batch is one Kafka transaction per Spark partition, committed by the driver when the batch commits;
consumers with isolation.level=read_committed see each committed batch once. Restart with the same --checkpoint
to continue where the query stopped: the transactional ids derive from the checkpoint location, so the restart
fences and aborts whatever a crashed run left open (a graceful stop aborts what it interrupts). (A batch replayed
after a crash that happened between the Kafka commit and Spark's commit log is written again; see README
"Streaming".)
"""

from __future__ import annotations

import argparse
import sys


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="stream_to_kafka.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, help="topic to write to")
    parser.add_argument("--checkpoint", required=True, help="checkpoint folder (reuse it to restart the query)")
    parser.add_argument("--rows-per-second", type=int, default=1000, help="rate source speed (1000)")
    parser.add_argument("--partitions", type=int, default=2, help="rate source partitions = producers (2)")
    parser.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval (5)")
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="stop after this many seconds (0: run until interrupted)")
    parser.add_argument("--guarantee", default="exactly_once", choices=["at_least_once", "exactly_once"],
                        help="deliveryGuarantee (exactly_once)")
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = SparkSession.builder.appName("stream_to_kafka").getOrCreate()
    ticks = (spark.readStream.format("rate").option("rowsPerSecond", args.rows_per_second)
             .option("numPartitions", args.partitions).load())
    rows = ticks.select(
        (F.col("value") % 100).cast("string").alias("key"),
        F.to_json(F.struct("value", "timestamp")).alias("value"),
        F.col("timestamp"),  # with the timestampColumn option below, the tick's time becomes the record's timestamp
    )
    query = (rows.writeStream.format("pykafka-sink")
             .option("kafka.bootstrap.servers", args.bootstrap_servers)
             .option("topic", args.topic)
             .option("deliveryGuarantee", args.guarantee)
             .option("timestampColumn", "timestamp")
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
    print(f"stream_to_kafka: stopped after micro-batch {progress.get('batchId', 'none')}; restart with the same "
          f"--checkpoint to continue")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
