"""Write sample orders to Kafka as Avro through a schema registry with ``format("pykafka-sink")``.

    spark-submit jobs/avro_to_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic orders \\
        --registry-url http://127.0.0.1:8081 --rows 100000

The value is a struct of typed columns (ids, a decimal amount, a timestamp, a list of items, a nested address,
nullable fields), written as Avro with a schema derived from its Spark type and registered as "<topic>-value";
the key is the customer id as a string. Any Confluent-compatible consumer reads the records.
Set PYSPARK_PYTHON to a Python that has spark-kafka-sink installed (the project's .venv/bin/python).
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="avro_to_kafka.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, help="topic to write to")
    parser.add_argument("--registry-url", required=True, help="the schema registry's URL")
    parser.add_argument("--rows", type=int, default=100_000, help="rows to generate (100000)")
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions = parallel producers (4)")
    parser.add_argument("--guarantee", default="at_least_once", choices=["at_least_once", "exactly_once"],
                        help="deliveryGuarantee (at_least_once)")
    return parser.parse_args(argv)


def sample_orders(spark, rows: int, partitions: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    ids = spark.range(0, rows, 1, partitions)
    value = F.struct(
        F.col("id").alias("order_id"),
        F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("customer"),
        (F.col("id") * 7919 % 100_000 / 100).cast("decimal(10, 2)").alias("amount"),
        F.timestamp_seconds(F.lit(1_767_225_600) + F.col("id")).alias("placed_at"),
        F.array(F.lit("book"), F.when(F.col("id") % 2 == 0, F.lit("pen"))).alias("items"),
        F.struct(F.lit("Main street 1").alias("street"), (F.col("id") % 100).cast("int").alias("zip")).alias("address"),
        F.when(F.col("id") % 3 == 0, F.lit("gift")).alias("note"),
    )
    return ids.select(F.concat(F.lit("customer-"), (F.col("id") % 1000).cast("string")).alias("key"),
                      value.alias("value"))


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("avro_to_kafka").getOrCreate()
    df = sample_orders(spark, args.rows, args.partitions)
    started = time.perf_counter()
    (df.write.format("pykafka-sink")
       .option("kafka.bootstrap.servers", args.bootstrap_servers)
       .option("topic", args.topic)
       .option("deliveryGuarantee", args.guarantee)
       .option("valueFormat", "avro")
       .option("schema.registry.url", args.registry_url)
       .mode("append")
       .save())
    seconds = time.perf_counter() - started
    print(f"avro_to_kafka: wrote {args.rows} Avro rows to {args.topic} ({args.guarantee}); save() returned after "
          f"{seconds:.1f} s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
