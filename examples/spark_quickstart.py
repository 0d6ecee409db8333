"""Spark quick start: write a DataFrame to Kafka with ``format("pykafka-sink")``.

    spark-submit examples/spark_quickstart.py --bootstrap-servers 127.0.0.1:9092 --topic events

Set PYSPARK_PYTHON to a Python that has spark-kafka-sink installed (the project's .venv/bin/python).
"""

from __future__ import annotations

import argparse
from typing import Any


def events(spark: Any) -> Any:
    """A small DataFrame of click events, one row per event."""
    return spark.createDataFrame(
        [(1, "view", "/home"), (2, "click", "/cart"), (1, "buy", "/checkout"), (3, "view", "/home")],
        "user_id INT, action STRING, page STRING",
    )


def main(spark: Any, bootstrap_servers: str, topic: str) -> None:
    df = events(spark)
    # --8<-- [start:write]
    (df.selectExpr("CAST(user_id AS STRING) AS key", "to_json(struct(*)) AS value")
       .write.format("pykafka-sink")                 # was: .format("kafka")
       .option("kafka.bootstrap.servers", bootstrap_servers)
       .option("topic", topic)
       .mode("append")                               # pyspark asks Python data sources for an explicit mode
       .save())
    # --8<-- [end:write]


if __name__ == "__main__":
    from pyspark.sql import SparkSession

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="events")
    args = parser.parse_args()
    session = SparkSession.builder.appName("spark_quickstart").getOrCreate()
    main(session, args.bootstrap_servers, args.topic)
    session.stop()
