"""The vectorized encoder does not loop per row in Python: its Python call count does not grow with the rows.

Counting calls (sys.setprofile) instead of timing keeps the test deterministic; a per-row loop, a per-row helper
or a per-row comprehension would make the count grow ~100x between the two sizes below.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

import pyarrow as pa

from spark_kafka_sink.protocol.arrow_encoder import encode_arrow_batches

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _table(rows: int, with_headers: bool) -> dict[str, Any]:
    keys = pa.array([b"k%015d" % i for i in range(rows)], pa.binary())
    values = pa.array([b"v" * (i % 300) if i % 7 else None for i in range(rows)], pa.binary())
    timestamps = pa.array([1_700_000_000_000 + i for i in range(rows)], pa.int64())
    headers = None
    if with_headers:
        headers = pa.array([[{"key": "h", "value": b"x"}] if i % 2 else [] for i in range(rows)], HEADER_TYPE)
    return {"value": values, "key": keys, "timestamp_ms": timestamps, "headers": headers}


def _python_calls(rows: int, with_headers: bool, max_batch_bytes: int) -> int:
    columns = _table(rows, with_headers)
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        batches = encode_arrow_batches(**columns, max_batch_bytes=max_batch_bytes)
    finally:
        sys.setprofile(None)
    assert sum(b.record_count for b in batches) == rows
    return calls


def test_python_calls_do_not_grow_with_rows() -> None:
    for with_headers in (False, True):
        _python_calls(10, with_headers, max_batch_bytes=1 << 30)  # first use imports and registers lazily
        small = _python_calls(1_000, with_headers, max_batch_bytes=1 << 30)
        large = _python_calls(100_000, with_headers, max_batch_bytes=1 << 30)
        # 100x the rows: a few more 4 MiB join groups are allowed, a per-row loop is not.
        assert large < 5 * small, (with_headers, small, large)
