"""The transactions command's argument handling (no broker: these fail before any request)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from spark_kafka_sink.spark.transactions_command import main


def test_an_option_that_is_not_key_value_is_refused_without_echoing_it(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["list", "--bootstrap-servers", "127.0.0.1:1", "--prefix", "p", "--option", "hunter2-secret"],
                out=io.StringIO())
    err = capsys.readouterr().err
    assert code == 2 and "--option: entry 1 is not KEY=VALUE" in err and "hunter2" not in err


def test_a_misspelt_sink_option_names_the_nearest_one(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["list", "--bootstrap-servers", "127.0.0.1:1", "--prefix", "p", "--option", "kafka.lingr.ms=5"],
                out=io.StringIO())
    assert code == 2 and "kafka.linger.ms" in capsys.readouterr().err


def test_the_module_names_its_one_command() -> None:
    proc = subprocess.run([sys.executable, "-m", "spark_kafka_sink"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "transactions {list,end}" in proc.stderr
