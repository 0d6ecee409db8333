"""The package type-checks under mypy --strict (house style: typed public API, py.typed shipped)."""

from __future__ import annotations

import subprocess
import sys

from spark_kafka_sink.testing.broker_jars import REPO_ROOT


def test_package_is_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "spark_kafka_sink", "pyspark_kafka_sink.py"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_py_typed_marker_is_shipped() -> None:
    assert (REPO_ROOT / "spark_kafka_sink" / "py.typed").is_file()
