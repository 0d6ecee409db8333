"""The Avro encoder does not loop per row in Python: its Python call count does not grow with the rows (counted
with sys.setprofile, so the test is deterministic; a per-row loop would grow it ~100x between the two sizes)."""

from __future__ import annotations

import datetime
import decimal
import sys
from types import FrameType

import pyarrow as pa

from spark_kafka_sink.avro import AvroWriter, derive_schema, parse_schema

ROW = pa.struct([
    pa.field("id", pa.int64(), False), ("name", pa.string()), ("price", pa.decimal128(12, 2)),
    ("at", pa.timestamp("us", "UTC")), ("day", pa.date32()), ("ok", pa.bool_()), ("score", pa.float64()),
    ("tags", pa.list_(pa.string())), ("attrs", pa.map_(pa.string(), pa.int32())),
    ("address", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
])


def _rows(n: int) -> pa.Array:
    row = {"id": 1, "name": "n", "price": decimal.Decimal("-3.50"), "at": datetime.datetime(2026, 1, 1),
           "day": datetime.date(2026, 1, 1), "ok": True, "score": 0.25, "tags": ["a", None],
           "attrs": [("k", 1)], "address": {"city": "c", "zip": 7}}
    return pa.array([row if i % 3 else {**row, "name": None, "tags": None} for i in range(n)], ROW)


def _python_calls(n: int) -> int:
    writer = AvroWriter(ROW, parse_schema(derive_schema(ROW, column="value")), column="value")
    array = _rows(n)
    calls = 0

    def profile(frame: FrameType, event: str, arg: object) -> None:
        nonlocal calls
        if event == "call":
            calls += 1

    sys.setprofile(profile)
    try:
        encoded = writer.encode(array, prefix=b"\0\0\0\0\1")
    finally:
        sys.setprofile(None)
    assert len(encoded) == n and encoded.null_count == 0
    return calls


def test_python_calls_do_not_grow_with_rows() -> None:
    _python_calls(10)  # first use imports lazily
    small = _python_calls(1_000)
    large = _python_calls(100_000)
    assert large < 2 * small, (small, large)
