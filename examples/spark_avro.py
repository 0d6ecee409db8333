"""Avro values through a schema registry, read by any Confluent-compatible consumer.

    spark-submit examples/spark_avro.py --bootstrap-servers 127.0.0.1:9092 --topic orders \
        --registry-url http://127.0.0.1:8081
"""

from __future__ import annotations

import argparse
from typing import Any


def main(spark: Any, bootstrap_servers: str, topic: str, registry_url: str) -> None:
    # --8<-- [start:avro]
    from pyspark.sql import functions as F

    orders = spark.createDataFrame(
        [(1, "alice", 12.5, ["book"]), (2, "bob", None, [])],
        "order_id BIGINT NOT NULL, customer STRING, amount DOUBLE, items ARRAY<STRING>",
    )
    (orders.select(F.col("customer").alias("key"),                       # the key stays a plain string
                   F.struct(*orders.columns).alias("value"))             # the value: a struct, written as Avro
        .write.format("pykafka-sink")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("topic", topic)
        .option("valueFormat", "avro")                                   # schema derived from the struct's type
        .option("schema.registry.url", registry_url)                     # registered as "<topic>-value"
        .mode("append")
        .save())
    # --8<-- [end:avro]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--registry-url", default="http://127.0.0.1:8081")
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_avro").getOrCreate()
    main(session, args.bootstrap_servers, args.topic, args.registry_url)
    session.stop()
