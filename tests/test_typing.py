"""The package and its tests type-check under mypy --strict (house style: typed public API, py.typed shipped; the
tests' fakes are checked against the seams they stand in for)."""

from __future__ import annotations

import subprocess
import sys

from spark_kafka_sink.testing.broker_jars import REPO_ROOT


def test_package_and_tests_are_mypy_strict_clean() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--no-error-summary", "spark_kafka_sink", "pyspark_kafka_sink.py", "tests"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_py_typed_marker_is_shipped() -> None:
    assert (REPO_ROOT / "spark_kafka_sink" / "py.typed").is_file()
