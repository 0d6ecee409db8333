"""Every column the sink reads: key, value, topic, partition, headers, and the records' timestamps.

    spark-submit examples/spark_columns.py --bootstrap-servers 127.0.0.1:9092 --topic orders
"""

from __future__ import annotations

import argparse
from typing import Any


def main(spark: Any, bootstrap_servers: str, topic: str) -> None:
    # --8<-- [start:columns]
    from pyspark.sql import functions as F

    orders = spark.createDataFrame(
        [(1, "alice", 12.5, "2024-05-01 10:00:00"), (2, "bob", 3.0, "2024-05-01 10:00:05"),
         (3, "alice", None, "2024-05-01 10:00:09")],
        "order_id INT, customer STRING, amount DOUBLE, placed_at STRING",
    )
    rows = orders.select(
        F.col("customer").alias("key"),                                   # string or binary; null: no key
        F.when(F.col("amount").isNull(), None)                            # null value: a tombstone
         .otherwise(F.to_json(F.struct("order_id", "amount"))).alias("value"),
        F.lit(topic).alias("topic"),                                      # per row (the topic option wins)
        (F.col("order_id") % 2).cast("int").alias("partition"),           # null or absent: the partitioner
        F.array(F.struct(F.lit("source").alias("key"),                    # array<struct<key string, value binary>>
                         F.lit(b"shop").alias("value"))).alias("headers"),
        F.to_timestamp("placed_at").alias("placed_at"),                   # any other column is ignored ...
    )
    (rows.write.format("pykafka-sink")
         .option("kafka.bootstrap.servers", bootstrap_servers)
         .option("timestampColumn", "placed_at")                          # ... unless named here: record timestamps
         .mode("append")
         .save())
    # --8<-- [end:columns]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_columns").getOrCreate()
    main(session, args.bootstrap_servers, args.topic)
    session.stop()
