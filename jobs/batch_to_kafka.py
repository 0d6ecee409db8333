"""Write a DataFrame to Kafka with ``format("pykafka-sink")`` and print what was written.

    spark-submit jobs/batch_to_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic orders --rows 100000
    spark-submit jobs/batch_to_kafka.py --bootstrap-servers 127.0.0.1:9092 --topic orders \\
        --input data/orders.parquet --key-column customer_id --guarantee exactly_once

Without ``--input`` it generates sample orders: key = customer id, value = the order as JSON, a ``source`` header.
With ``--input`` it reads a Parquet/JSON/CSV dataset and sends each row as JSON, keyed by ``--key-column``.
Set PYSPARK_PYTHON to a Python that has spark-kafka-sink installed (the project's .venv/bin/python).
"""

from __future__ import annotations

import argparse
import sys
import time


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="batch_to_kafka.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port]")
    parser.add_argument("--topic", required=True, help="topic to write to")
    parser.add_argument("--rows", type=int, default=100_000, help="rows to generate without --input (100000)")
    parser.add_argument("--partitions", type=int, default=4, help="Spark partitions = parallel producers (4)")
    parser.add_argument("--input", help="read this dataset instead of generating one")
    parser.add_argument("--input-format", default="parquet", choices=["parquet", "json", "csv"],
                        help="format of --input (parquet)")
    parser.add_argument("--key-column", help="column of --input used as the Kafka key (none: no key)")
    parser.add_argument("--guarantee", default="at_least_once", choices=["at_least_once", "exactly_once"],
                        help="deliveryGuarantee (at_least_once)")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="extra sink option, e.g. kafka.compression.type=lz4 (repeatable)")
    parser.add_argument("--register", action="store_true",
                        help="register the format in the job (needed when the package comes with --py-files)")
    return parser.parse_args(argv)


def sample_orders(spark, rows: int, partitions: int):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    orders = spark.range(0, rows, 1, partitions).select(
        F.col("id").alias("order_id"),
        (F.col("id") % 1000).alias("customer_id"),
        F.round((F.col("id") * 7919 % 100_000) / 100, 2).alias("amount"),
        F.element_at(F.array(*[F.lit(s) for s in ("EUR", "USD", "JPY")]), (F.col("id") % 3 + 1).cast("int"))
        .alias("currency"),
    )
    return orders.select(
        F.concat(F.lit("customer-"), F.col("customer_id").cast("string")).alias("key"),
        F.to_json(F.struct("order_id", "amount", "currency")).alias("value"),
        F.array(F.struct(F.lit("source").alias("key"), F.lit(b"batch_to_kafka").alias("value"))).alias("headers"),
    )


def dataset_rows(spark, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    reader = spark.read.format(args.input_format)
    if args.input_format == "csv":
        reader = reader.option("header", "true").option("inferSchema", "true")
    data = reader.load(args.input)
    columns = [F.to_json(F.struct(*data.columns)).alias("value")]
    if args.key_column:
        columns.insert(0, F.col(args.key_column).cast("string").alias("key"))
    return data.select(*columns).repartition(args.partitions)


def main(argv: list[str]) -> int:
    args = parse_args(argv)
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("batch_to_kafka").getOrCreate()
    if args.register:
        # A wheel on --py-files is not scanned for pyspark_* modules: register the data source by hand.
        from spark_kafka_sink.spark import KafkaSinkDataSource

        spark.dataSource.register(KafkaSinkDataSource)
    df = dataset_rows(spark, args) if args.input else sample_orders(spark, args.rows, args.partitions)
    writer = (df.write.format("pykafka-sink")
              .option("kafka.bootstrap.servers", args.bootstrap_servers)
              .option("topic", args.topic)
              .option("deliveryGuarantee", args.guarantee))
    for item in args.option:
        key, sep, value = item.partition("=")
        if not sep:
            print(f"--option {item!r}: expected KEY=VALUE", file=sys.stderr)
            return 2
        writer = writer.option(key.strip(), value)
    rows = df.count() if args.input else args.rows
    started = time.perf_counter()
    writer.mode("append").save()
    seconds = time.perf_counter() - started
    # save() also spans query planning and Python worker start-up; the write's own time and rate (first task start
    # to commit) are in the sink's summary line, which the driver logs to stderr ("pykafka-sink ... rows/s").
    print(f"batch_to_kafka: wrote {rows} rows to {args.topic} ({args.guarantee}); save() returned after "
          f"{seconds:.1f} s")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
