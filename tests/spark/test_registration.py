"""``format("pykafka-sink")`` with no register call: Spark finds ``pyspark_kafka_sink.DefaultSource`` by itself.

The session fixture never registers the source, so every test here and in the other files already relies on it;
but its workers start in the repository, whose folder is on their sys.path. ``test_installed_module_is_found``
checks the real installed case in a fresh Spark application started elsewhere: the module sits in a
site-packages-like folder on PYTHONPATH, exactly where ``pip install`` puts a top-level module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.spark import KafkaSinkDataSource
from spark_kafka_sink.testing.broker import REPO_ROOT
from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_pyproject_installs_the_discovery_module() -> None:
    pyproject = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    assert "pyspark_kafka_sink" in pyproject["tool"]["setuptools"]["py-modules"]
    import pyspark_kafka_sink

    assert pyspark_kafka_sink.DefaultSource is KafkaSinkDataSource
    assert KafkaSinkDataSource.name() == "pykafka-sink"


def test_explicit_registration_also_works(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                          readback: Callable[..., list[ConsumedRecord]]) -> None:
    spark.dataSource.register(KafkaSinkDataSource)
    topic = topic_factory(partitions=1)
    write_df(spark.createDataFrame([("registered",)], "value string"), bootstrap, topic=topic)
    assert [r.value for r in readback(topic)] == [b"registered"]


_APP = textwrap.dedent("""
    import pkgutil, sys
    from pyspark.sql import SparkSession

    found = [m for m in pkgutil.iter_modules() if m.name == "pyspark_kafka_sink"]
    assert len(found) == 1 and found[0].module_finder.path == sys.argv[3], found
    spark = SparkSession.builder.master("local[1]").config("spark.ui.enabled", "false").getOrCreate()
    df = spark.createDataFrame([("installed-%d" % i,) for i in range(5)], "value string")
    df.write.format("pykafka-sink").option("kafka.bootstrap.servers", sys.argv[1]) \\
        .option("topic", sys.argv[2]).mode("append").save()
    spark.stop()
""")


def test_installed_module_is_found(bootstrap: str, topic_factory: Callable[..., str], tmp_path: Path,
                                   readback: Callable[..., list[ConsumedRecord]]) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    shutil.copy(REPO_ROOT / "pyspark_kafka_sink.py", site)
    app = tmp_path / "app.py"
    app.write_text(_APP)
    topic = topic_factory(partitions=1)
    env = {**os.environ, "PYTHONPATH": str(site), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable}
    # cwd outside the repository: only the site folder can supply the module.
    proc = subprocess.run([sys.executable, str(app), bootstrap, topic, str(site)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert sorted(r.value for r in readback(topic)) == [f"installed-{i}".encode() for i in range(5)]
