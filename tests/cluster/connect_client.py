"""A Spark Connect client, run as its own process by test_spark_connect.py (a Python with pyspark's Connect client
and nothing of this repository's tests): one write to Kafka through the server named by SPARK_CONNECT_URL.

    python connect_client.py '{"case": "batch", "bootstrap": "...", "topic": "...", "rows": 1000, ...}'

Prints one JSON line: {"ok": true} or {"error": "<the exception's class>: <its message>"}. Unless the case registers
the data source, importing the sink fails in this process, so a write that passes needed nothing of it here.
"""

from __future__ import annotations

import importlib.abc
import json
import os
import sys
from typing import Any

_SINK_MODULES = ("pyspark_kafka_sink", "spark_kafka_sink")


class _NoSink(importlib.abc.MetaPathFinder):
    """Makes importing the sink fail in this process: a client that only names the format must not need it."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name.split(".")[0] in _SINK_MODULES:
            raise ImportError(f"{name} imported by the Connect client (this test's client must not need it)")
        return None


def _kafka_writer(writer: Any, args: dict[str, Any]) -> Any:
    writer = writer.format("pykafka-sink").option("kafka.bootstrap.servers", args["bootstrap"])
    for key, value in args.get("options", {}).items():
        writer = writer.option(key, value)
    return writer.option("topic", args["topic"])


def run(args: dict[str, Any]) -> None:
    if not args.get("register"):
        sys.meta_path.insert(0, _NoSink())
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(os.environ["SPARK_CONNECT_URL"]).getOrCreate()
    try:
        if args.get("register"):
            from pyspark_kafka_sink import KafkaSinkDataSource

            spark.dataSource.register(KafkaSinkDataSource)
        case = args["case"]
        if case == "batch":
            df = spark.range(args["rows"]).selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value")
            _kafka_writer(df.write, args).mode("append").save()
        elif case == "bad_value_column":
            df = spark.range(args["rows"]).selectExpr("CAST(id AS STRING) AS key", "id AS value")  # bigint
            _kafka_writer(df.write, args).mode("append").save()
        elif case in ("stream", "foreach_batch"):
            source = (spark.readStream.schema("id LONG").option("maxFilesPerTrigger", 1).json(args["input"])
                      .selectExpr("CAST(id AS STRING) AS key", "CAST(id AS STRING) AS value"))
            if case == "stream":
                writer = _kafka_writer(source.writeStream, args)
            else:
                def write_batch(batch: Any, batch_id: int) -> None:
                    _kafka_writer(batch.write, args).option("writeId", str(batch_id)).mode("append").save()

                writer = source.writeStream.foreachBatch(write_batch)
            query = writer.option("checkpointLocation", args["checkpoint"]).start()
            try:
                query.processAllAvailable()
            finally:
                query.stop()
        else:
            raise ValueError(f"unknown case {case!r}")
    finally:
        spark.stop()


if __name__ == "__main__":
    try:
        run(json.loads(sys.argv[1]))
    except Exception as exc:  # noqa: BLE001 - reported to the test, which asserts on it
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
    else:
        print(json.dumps({"ok": True}))
