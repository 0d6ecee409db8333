"""Avro: schemas derived from Arrow (Spark) types or given as JSON, and a vectorized Arrow -> Avro binary encoder.

    derive_schema(arrow_type, *, column, record_name="topLevelRecord", namespace="") -> JSON-ready schema
    parse_schema(json_text_or_data, *, where="Avro schema") -> AvroSchema      # .root (typed tree), .json
    AvroWriter(arrow_type, schema, *, column).encode(array, prefix=b"") -> pa.Array   # one body per row
    Primitive, Fixed, Enum, Array, Map, Record (of Field), AvroUnion   # AvroSchema.root's typed tree

Pure (no I/O); the bodies equal fastavro's ``schemaless_writer`` output byte for byte.
"""

from __future__ import annotations

from spark_kafka_sink.avro._encoder import AvroWriter
from spark_kafka_sink.avro._schema import (
    Array,
    AvroSchema,
    AvroType,
    AvroUnion,
    Enum,
    Field,
    Fixed,
    Map,
    Primitive,
    Record,
    decimal_fixed_size,
    derive_schema,
    parse_schema,
)

__all__ = ["AvroSchema", "AvroWriter", "decimal_fixed_size", "derive_schema", "parse_schema",
           # the parsed schema's tree (AvroSchema.root)
           "AvroType", "Primitive", "Fixed", "Enum", "Array", "Map", "Record", "Field", "AvroUnion"]
