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
from collections.abc import Callable
from typing import Any

import pyarrow as pa

from benchmarks.context import Context, pinned_to_one_core
from benchmarks.harness import Comparison, Contender, Sample, run_comparison

__all__ = ["run", "TITLE", "BASELINE", "SUBJECT", "SPARK_TO_AVRO", "AVRO_RECORD_BYTES", "spark_title", "spark_records",
           "value_schema", "spark_to_avro_writer"]

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


# ------------------------------------------------------------------------------------------------ Spark: Avro values
# ``spark 1 KB Avro 15 fields <codec>`` (bench_spark's "avro" set): a tenth of the main workload's rows, each a
# ~1 KB record of the encoder comparison's 15 fields (its ``payload`` 950 random bytes), made by Spark expressions
# and cached as one struct column ``value``; written as registry-framed Avro values (no keys) to a fresh topic.
# - ``Spark to_avro + frame + format(kafka)`` (baseline): what users run without this sink: the value schema
#   registered once per write, spark-avro's ``to_avro`` of the struct with that schema, the 5-byte frame
#   (magic 0 + schema id) concatenated in front, Spark's built-in ``format("kafka")``;
# - ``pykafka-sink at_least_once``: ``format("pykafka-sink")`` with ``valueFormat=avro`` (it derives the schema,
#   registers it on the driver, encodes each Arrow batch in the Python workers).
# Both register the same derived schema under ``<topic>-value``, so both write the same bytes.
SPARK_TO_AVRO = "Spark to_avro + frame + format(kafka)"
AVRO_SPARK_PAYLOAD = 950
AVRO_RECORD_BYTES = 1000  # about: the encoded record with the payload above (for MB/s)
_AVRO_COLUMNS = {
    "id": "id",
    "user": "concat('user', id)",
    "email": "concat('user', id, '@example.com')",
    "country": "'NL'",
    "amount": "cast(id + 0.25 as decimal(12, 2))",
    "at": "timestamp_micros(id * 1000)",
    "day": "date_add(date'2022-01-08', cast(id % 100 as int))",
    "ok": "id % 2 = 0",
    "score": "id / 7",
    "qty": "cast(id % 1000 as int)",
    "tags": "array('a', 'bb', 'ccc')",
    "attrs": "map('k1', 'v1', 'k2', 'v2')",
    "address": "named_struct('street', 'Main street 1', 'city', 'Amsterdam', 'zip', 1234)",
    "payload": f"cast(randstr({AVRO_SPARK_PAYLOAD}, 7) as binary)",
    "note": "case when id % 3 = 0 then 'a note' end",
}


def spark_title(codec: str) -> str:
    return f"spark 1 KB Avro 15 fields {codec}"


def spark_records(spark: Any, rows: int, partitions: int) -> Any:
    """The cached DataFrame: one struct column ``value`` of the 15 fields, ``rows`` rows in ``partitions``."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    df = spark.range(0, rows, 1, partitions).select(
        F.struct(*[F.expr(sql).alias(name) for name, sql in _AVRO_COLUMNS.items()]).alias("value"))
    df = df.persist(StorageLevel.MEMORY_AND_DISK)
    count = df.count()
    if count != rows:
        raise RuntimeError(f"cached DataFrame has {count} rows, expected {rows}")
    return df


def value_schema(df: Any) -> str:
    """The Avro schema the sink derives for ``df``'s ``value`` column (from the Arrow type Spark hands it)."""
    import json

    from pyspark.sql.pandas.types import to_arrow_type

    from spark_kafka_sink.avro import derive_schema

    data_type = df.schema["value"].dataType
    try:  # pyspark 4.3 asks for the session time zone; older ones take none (UTC)
        arrow_type = to_arrow_type(data_type, timezone="UTC")
    except TypeError:
        arrow_type = to_arrow_type(data_type)
    return json.dumps(derive_schema(arrow_type, column="value"))


def spark_to_avro_writer(registry_url: str, df: Any, schema: str) -> Callable[[dict[str, str]], None]:
    """The workaround's write of ``df`` with Kafka ``options`` (bench_spark.kafka_options): register ``schema``
    under the topic's subject, to_avro with it, the frame in front, ``format("kafka")``."""
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import to_avro

    from spark_kafka_sink.schema_registry import RegistrySettings, SchemaRegistryClient, frame_prefix

    client = SchemaRegistryClient(RegistrySettings.from_config({"url": registry_url}))

    def save(options: dict[str, str]) -> None:
        schema_id = client.register(f"{options['topic']}-value", schema)
        framed = F.concat(F.unhex(F.lit(frame_prefix(schema_id).hex())), to_avro(F.col("value"), schema))
        writer = df.select(framed.alias("value")).write.format("kafka").mode("append")
        for k, v in options.items():
            writer = writer.option(k, v)
        writer.save()

    return save
