"""Exactly once: one Kafka transaction per Spark partition, committed by the driver; a re-run of the same
``writeId`` skips what the first run committed.

    spark-submit examples/spark_exactly_once.py --bootstrap-servers 127.0.0.1:9092 --topic payments --write-id 7
"""

from __future__ import annotations

import argparse
from typing import Any


def payments(spark: Any) -> Any:
    return spark.range(0, 1000, 1, 4).selectExpr("CAST(id % 10 AS STRING) AS key",
                                                  "to_json(named_struct('payment', id)) AS value")


def main(spark: Any, bootstrap_servers: str, topic: str, write_id: int = 7) -> None:
    df = payments(spark)
    # --8<-- [start:write]
    def write(df: Any) -> None:
        (df.write.format("pykafka-sink")
           .option("kafka.bootstrap.servers", bootstrap_servers)
           .option("topic", topic)
           .option("deliveryGuarantee", "exactly_once")
           .option("transactionalIdPrefix", f"payments-{topic}")   # stable: names this job's transactions
           .option("writeId", write_id)                              # names this write in the commit log
           .mode("append")
           .save())

    write(df)
    write(df)   # the same writeId again (a re-run after a crash): every partition is skipped, nothing doubles
    # --8<-- [end:write]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="payments")
    parser.add_argument("--write-id", type=int, default=7)
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_exactly_once").getOrCreate()
    main(session, args.bootstrap_servers, args.topic, args.write_id)
    session.stop()
