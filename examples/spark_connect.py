"""Spark Connect: the client only names the format; the sink runs on the Connect server, whose Python workers
need the package installed.

    python examples/spark_connect.py --remote sc://connect-host:15002 --bootstrap-servers broker1:9092 --topic events
"""

from __future__ import annotations

import argparse
from typing import Any


def main(spark: Any, bootstrap_servers: str, topic: str) -> None:
    df = spark.range(0, 100).selectExpr("CAST(id AS STRING) AS key", "CAST(id * id AS STRING) AS value")
    # --8<-- [start:write]
    (df.write.format("pykafka-sink")
       .option("kafka.bootstrap.servers", bootstrap_servers)
       .option("topic", topic)
       .mode("append")
       .save())
    # --8<-- [end:write]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remote", default="sc://localhost:15002")
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="events")
    args = parser.parse_args()
    # --8<-- [start:session]
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(args.remote).getOrCreate()   # e.g. sc://connect-host:15002
    # --8<-- [end:session]
    main(spark, args.bootstrap_servers, args.topic)
    spark.stop()
