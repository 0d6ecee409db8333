"""A driver of its own for tests/spark/test_summary_log.py: writes one small DataFrame with pyspark's worker
logging off, then one with it on, and prints ``python_worker_logs()``'s messages as JSON on stdout.

Run as ``python summary_log_job.py BOOTSTRAP TOPIC_OFF TOPIC_ON``; the driver's log is this process's stderr.
"""

from __future__ import annotations

import json
import sys

from pyspark.sql import SparkSession


def main(bootstrap: str, topic_off: str, topic_on: str) -> None:
    spark = (SparkSession.builder.master("local[1]").appName("summary-log")
             .config("spark.ui.enabled", "false").getOrCreate())
    try:
        for topic, enabled in ((topic_off, "false"), (topic_on, "true")):
            spark.conf.set("spark.sql.pyspark.worker.logging.enabled", enabled)
            df = spark.range(5).selectExpr("CAST(id AS STRING) AS value")
            (df.write.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
             .option("deliveryGuarantee", "exactly_once").mode("append").save())
        rows = spark.tvf.python_worker_logs().select("level", "logger", "msg").collect()
        print(json.dumps([{"level": r["level"], "logger": r["logger"], "msg": r["msg"]} for r in rows]))
    finally:
        spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
