"""``format("pykafka-sink")`` with no register call: Spark finds ``pyspark_kafka_sink.DefaultSource`` by itself.

The session fixture never registers the source, so every Spark test relies on it; but its workers start in the
repository, whose folder is on their sys.path. The installed case (the module in a site-packages-like folder, a
Spark application started elsewhere) is ``test_jobs.py::test_batch_job_through_spark_submit_as_installed``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tomllib

from spark_kafka_sink.spark import KafkaSinkDataSource
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_pyproject_installs_the_discovery_module() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "pyspark_kafka_sink" in pyproject["tool"]["setuptools"]["py-modules"]
    import pyspark_kafka_sink

    assert pyspark_kafka_sink.DefaultSource is KafkaSinkDataSource
    assert KafkaSinkDataSource.name() == "pykafka-sink"


def test_format_works_without_registration(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                           readback: Callable[..., list[ConsumedRecord]]) -> None:
    # Runs before the next test registers the class explicitly (pytest keeps the file's order).
    topic = topic_factory(partitions=1)
    write_df(spark.createDataFrame([("found",)], "value string"), bootstrap, topic=topic)
    assert [r.value for r in readback(topic)] == [b"found"]


def test_explicit_registration_also_works(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                          readback: Callable[..., list[ConsumedRecord]]) -> None:
    spark.dataSource.register(KafkaSinkDataSource)
    topic = topic_factory(partitions=1)
    write_df(spark.createDataFrame([("registered",)], "value string"), bootstrap, topic=topic)
    assert [r.value for r in readback(topic)] == [b"registered"]
