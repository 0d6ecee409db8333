"""A missing Java or Maven makes ``python -m spark_kafka_sink.testing`` print one clear line, not a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _run_cli(args: list[str], path: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=path, SKS_KAFKA_HOME=str(tmp_path / "kafka-home"))
    return subprocess.run([sys.executable, "-m", "spark_kafka_sink.testing", *args],
                          env=env, capture_output=True, text=True, timeout=60)


def test_missing_java_is_one_clear_line(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    result = _run_cli(["up", "--port", "1"], str(empty), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Java 17+ is needed" in lines[0] and "install" in lines[0]
    assert "Traceback" not in result.stderr + result.stdout


def test_missing_maven_is_one_clear_line(tmp_path: Path) -> None:
    java_only = tmp_path / "java-bin"
    java_only.mkdir()
    java = subprocess.run(["bash", "-c", "readlink -f $(command -v java)"], capture_output=True, text=True).stdout
    (java_only / "java").symlink_to(java.strip())
    result = _run_cli(["jars"], str(java_only), tmp_path)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Maven is needed" in lines[0] and "apt-get install maven" in lines[0]
