"""The driver's summary line shows up whatever pyspark's worker logging setting (pyspark 4.1+): in the driver's log
and, with ``spark.sql.pyspark.worker.logging.enabled``, in ``python_worker_logs()`` as one INFO record."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from spark_kafka_sink.spark.commit import LOGGER_NAME
from tests.conftest import ConsumedRecord
from tests.spark.conftest import pyspark_minor

pytestmark = [pytest.mark.spark, pytest.mark.broker]
JOB = Path(__file__).with_name("summary_log_job.py")


def test_summary_line_reaches_driver_log_and_worker_logs_with_worker_logging_on_and_off(
        bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]) -> None:
    if pyspark_minor() < (4, 1):
        pytest.fail("this test needs pyspark 4.1+ (worker logging); run it with the main venv")
    topic_off, topic_on = topic_factory(partitions=1), topic_factory(partitions=1)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, str(JOB), bootstrap, topic_off, topic_on], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert len(readback(topic_off)) == 5 and len(readback(topic_on)) == 5
    driver_log = [line for line in proc.stderr.splitlines() if "pykafka-sink committed 5 rows" in line]
    # One line per write in the driver's log, each naming its topic: worker logging on or off.
    assert [topic_off in driver_log[0], topic_on in driver_log[-1], len(driver_log)] == [True, True, 2], proc.stderr
    assert all(f" INFO {LOGGER_NAME}: " in line for line in driver_log)
    logs = json.loads(proc.stdout.strip().splitlines()[-1])
    summaries = [r for r in logs if "pykafka-sink committed" in r["msg"]]
    # The write with worker logging on, once, at INFO under the sink's logger (not a second copy through stderr).
    assert len(summaries) == 1, logs
    assert summaries[0]["level"] == "INFO" and summaries[0]["logger"] == LOGGER_NAME
    assert topic_on in summaries[0]["msg"] and topic_off not in summaries[0]["msg"]
