"""Avro encoder alone: typed Arrow rows -> Avro binary bodies (the registry's frame included), no network, the
encoding thread pinned to one core.

Contenders, on the same ~15-field record (a long, strings, a decimal, a timestamp, a date, a boolean, a double,
an int, a list, a map, a nested struct, bytes, a nullable string), the schema derived from its Arrow type:
- ``fastavro per record`` (baseline): ``fastavro.schemaless_writer`` once per record from Python dicts built up
  front, as a per-row serializer (a UDF, Confluent's AvroSerializer) does;
- ``avro encoder 10k-row batches``: ``spark_kafka_sink.avro.AvroWriter.encode`` on 10,000-row slices, what a Spark
  task's Arrow batches get.
The baseline runs on at most BASELINE_ROWS records (its rate does not depend on the count).
"""

from __future__ import annotations

import decimal
import io
import time
from typing import Any

import pyarrow as pa

from benchmarks.context import Context, pinned_to_one_core
from benchmarks.harness import Comparison, Contender, Sample, run_comparison

__all__ = ["run", "TITLE", "BASELINE", "SUBJECT"]

TITLE = "avro encoder 15 fields"
BASELINE = "fastavro per record"
SUBJECT = "avro encoder 10k-row batches"
BASELINE_ROWS = 20_000
SPARK_ARROW_BATCH = 10_000
ROW_TYPE = pa.struct([
    pa.field("id", pa.int64(), False), ("user", pa.string()), ("email", pa.string()), ("country", pa.string()),
    ("amount", pa.decimal128(12, 2)), ("at", pa.timestamp("us", "UTC")), ("day", pa.date32()),
    ("ok", pa.bool_()), ("score", pa.float64()), ("qty", pa.int32()), ("tags", pa.list_(pa.string())),
    ("attrs", pa.map_(pa.string(), pa.string())),
    ("address", pa.struct([("street", pa.string()), ("city", pa.string()), ("zip", pa.int32())])),
    ("payload", pa.binary()), ("note", pa.string())])


def rows_of(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "user": f"user{i}", "email": f"user{i}@example.com", "country": "NL",
             "amount": decimal.Decimal(f"{i}.25"), "at": i * 1000, "day": 19000 + i % 100, "ok": i % 2 == 0,
             "score": i / 7, "qty": i % 1000, "tags": ["a", "bb", "ccc"], "attrs": [("k1", "v1"), ("k2", "v2")],
             "address": {"street": "Main street 1", "city": "Amsterdam", "zip": 1234},
             "payload": b"x" * 600, "note": None if i % 3 else "a note"} for i in range(n)]


def _fastavro(schema: Any, rows: list[dict[str, Any]]) -> Contender:
    try:
        import fastavro
    except ImportError:
        return Contender(BASELINE, lambda: Sample(), unavailable="fastavro missing: pip install fastavro")
    parsed = fastavro.parse_schema(schema)
    datums = [dict(r, attrs=dict(r["attrs"])) for r in rows]

    def run() -> Sample:
        out_bytes = 0
        start = time.perf_counter()
        for datum in datums:
            buffer = io.BytesIO()
            buffer.write(b"\0\0\0\0\1")
            fastavro.schemaless_writer(buffer, parsed, datum)
            out_bytes += len(buffer.getvalue())
        return Sample(len(datums), time.perf_counter() - start, extra={"bytes_out": out_bytes})

    return Contender(BASELINE, run)


def _ours(schema: Any, array: pa.Array) -> Contender:
    from spark_kafka_sink.avro import AvroWriter, parse_schema

    writer = AvroWriter(ROW_TYPE, parse_schema(schema), column="value")

    def run() -> Sample:
        out_bytes = 0
        start = time.perf_counter()
        for lo in range(0, len(array), SPARK_ARROW_BATCH):
            out_bytes += writer.encode(array.slice(lo, SPARK_ARROW_BATCH), prefix=b"\0\0\0\0\1").nbytes
        return Sample(len(array), time.perf_counter() - start, extra={"bytes_out": out_bytes})

    return Contender(SUBJECT, run)


def run(ctx: Context, rows: int) -> list[Comparison]:
    from spark_kafka_sink.avro import derive_schema

    ctx.log(f"  {TITLE}: generating {rows:,} records ...")
    data = rows_of(rows)
    array = pa.array(data, ROW_TYPE)
    schema = derive_schema(ROW_TYPE, column="value")
    contenders = [_fastavro(schema, data[:BASELINE_ROWS]), _ours(schema, array)]
    with pinned_to_one_core() as cpu:
        comp = run_comparison("encoder", TITLE, "records/s", contenders, ctx.rounds,
                              params={"rows": rows, "baseline_rows": min(rows, BASELINE_ROWS), "pinned_cpu": cpu},
                              log=ctx.log, warmup=True)
    return [comp]
