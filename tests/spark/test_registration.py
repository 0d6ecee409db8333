"""``format("pykafka-sink")`` with no register call: Spark finds ``pyspark_kafka_sink.DefaultSource`` by itself.

The session fixture never registers the source, so every Spark test relies on it; but its workers start in the
repository, whose folder is on their sys.path. The installed case (the module in a site-packages-like folder, a
Spark application started elsewhere) is
``tests/cluster/test_jobs.py::test_batch_job_through_spark_submit_as_installed``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 (pyspark 4.0-4.2): the backport, a test dependency there
    import tomli as tomllib

from spark_kafka_sink.spark import KafkaSinkDataSource
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from tests.conftest import ConsumedRecord
from tests.spark.conftest import pyspark_minor, write_df

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
    if pyspark_minor() < (4, 1):
        # pyspark 4.0 refuses to register a name it discovered itself (README "Versions"): Spark's own clear error,
        # and the discovered source keeps working.
        with pytest.raises(Exception, match="DATA_SOURCE_ALREADY_EXISTS"):
            spark.dataSource.register(KafkaSinkDataSource)
    else:
        spark.dataSource.register(KafkaSinkDataSource)
    topic = topic_factory(partitions=1)
    write_df(spark.createDataFrame([("registered",)], "value string"), bootstrap, topic=topic)
    assert [r.value for r in readback(topic)] == [b"registered"]
