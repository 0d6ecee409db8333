"""spark.speculation in a Spark of its own (the setting is fixed when a Spark starts): an exactly_once write is
refused before anything is sent, saying why; an at_least_once write goes through (a speculative copy could only
add duplicates, which at_least_once allows)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable

import pytest

from tests.conftest import ConsumedRecord
from tests.spark.conftest import end_offsets

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.broker]

SCRIPT = textwrap.dedent("""
    import json, os, sys
    from pyspark.sql import SparkSession, functions as F

    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.speculation", "true").getOrCreate())
    bootstrap, refused_topic, topic = sys.argv[1], sys.argv[2], sys.argv[3]

    def write(topic, guarantee):
        df = spark.range(0, 1000, 1, 2).select(F.col("id").cast("string").alias("value"))
        (df.write.format("pykafka-sink").option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
         .option("deliveryGuarantee", guarantee).mode("append").save())

    outcome = {}
    try:
        write(refused_topic, "exactly_once")
        outcome["exactly_once"] = "written"
    except Exception as exc:
        outcome["exactly_once"] = str(exc)
    write(topic, "at_least_once")
    outcome["at_least_once"] = "written"
    spark.stop()
    print(json.dumps(outcome))
""")


def test_speculation_is_refused_with_exactly_once_and_fine_with_at_least_once(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    refused_topic, topic = topic_factory(partitions=2), topic_factory(partitions=2)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, bootstrap, refused_topic, topic], capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr[-3000:]
    outcome = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "cannot run with spark.speculation=true" in outcome["exactly_once"], outcome["exactly_once"][:2000]
    assert "Disable speculation for this job, or use at_least_once" in outcome["exactly_once"]
    assert sum(end_offsets(bootstrap, refused_topic).values()) == 0  # refused before anything was sent
    assert outcome["at_least_once"] == "written"
    assert set(Counter(int(r.value or b"-1") for r in readback(topic))) == set(range(1000))
