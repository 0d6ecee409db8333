"""``input_was_cut_off`` reads PySpark's framing after a task's data: END_OF_STREAM = complete, EOF = cut off."""

from __future__ import annotations

import io
from typing import Any

from spark_kafka_sink.spark.task_input import END_OF_STREAM, input_was_cut_off

# A stand-in for pyspark.worker.main(infile, outfile), which the check finds up the call stack.
_WORKER_SOURCE = """
def main(infile, outfile):
    return check()
"""


def run_in_fake_worker(remaining_input: bytes) -> bool:
    namespace: dict[str, Any] = {"__name__": "pyspark.worker", "check": input_was_cut_off}
    exec(compile(_WORKER_SOURCE, "pyspark/worker.py", "exec"), namespace)
    infile = io.BufferedReader(io.BytesIO(remaining_input))
    cut_off = namespace["main"](infile, None)
    assert infile.read() == remaining_input  # peeked, not consumed: the worker still reads the marker itself
    return bool(cut_off)


def test_end_of_stream_marker_means_complete() -> None:
    assert run_in_fake_worker(END_OF_STREAM) is False


def test_eof_means_the_task_was_cut_off() -> None:
    assert run_in_fake_worker(b"") is True


def test_unknown_framing_fails_open() -> None:
    assert run_in_fake_worker(b"\x00\x00\x00\x07more") is False


def test_outside_a_worker_nothing_is_cut_off() -> None:
    assert input_was_cut_off() is False
