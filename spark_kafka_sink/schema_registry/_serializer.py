"""``AvroSerializer``: Avro in the registry's wire format for the standalone producer, from Arrow columns (for
``send_batch``, vectorized) or one dict (for ``send``), with the encoder and the registry client the Spark sink
uses::

    values = AvroSerializer({"url": "http://registry:8081"})                # schema derived from the column's type
    producer.send_batch("orders", values.encode_table("orders", table))     # the value column, encoded
    producer.send("orders", value=AvroSerializer(registry, schema=ORDER)("orders", {"id": 1}))

A schema is registered (or, with ``auto_register=False``, looked up) once per subject and Arrow type, on first
use; the ids are kept for the serializer's life.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from spark_kafka_sink.avro import (
    Array,
    AvroSchema,
    AvroType,
    AvroUnion,
    AvroWriter,
    Enum,
    Fixed,
    Map,
    Primitive,
    Record,
    derive_schema,
    parse_schema,
)
from spark_kafka_sink.errors import ConfigError, SchemaRegistryError
from spark_kafka_sink.schema_registry._client import SchemaRegistryClient
from spark_kafka_sink.schema_registry._settings import RegistrySettings
from spark_kafka_sink.schema_registry._wire import SubjectNameStrategy, frame_prefix, subject_name

__all__ = ["AvroSerializer"]


class AvroSerializer:
    """Encodes a key or value column (or one dict) as framed Avro. ``registry``: the client's settings (Confluent's
    names: ``url``, ``basic.auth.user.info``, ``ssl.ca.location`` ...), parsed settings or a client. ``schema``:
    the Avro schema (JSON) to write with; None derives it from each column's Arrow type (a dict needs one)."""

    def __init__(self, registry: Mapping[str, str] | RegistrySettings | SchemaRegistryClient, *,
                 schema: str | None = None, is_key: bool = False, subject_name_strategy: str = "topic",
                 auto_register: bool = True, record_name: str = "topLevelRecord", namespace: str = "") -> None:
        if isinstance(registry, SchemaRegistryClient):
            self._client = registry
        else:
            settings = registry if isinstance(registry, RegistrySettings) else RegistrySettings.from_config(registry)
            self._client = SchemaRegistryClient(settings)
        self._schema = None if schema is None else parse_schema(schema, where="schema")
        self._column = "key" if is_key else "value"
        self._strategy = SubjectNameStrategy.parse(subject_name_strategy, key="subject_name_strategy")
        self._auto_register = auto_register
        self._record_name, self._namespace = record_name, namespace
        self._lock = threading.Lock()  # guards _writers
        self._writers: dict[tuple[str, pa.DataType], tuple[AvroWriter, bytes]] = {}

    def _writer(self, topic: str, arrow_type: pa.DataType) -> tuple[AvroWriter, bytes]:
        with self._lock:
            found = self._writers.get((topic, arrow_type))
        if found is not None:
            return found
        schema: AvroSchema = self._schema or parse_schema(derive_schema(
            arrow_type, column=self._column, record_name=self._record_name, namespace=self._namespace))
        writer = AvroWriter(arrow_type, schema, column=self._column)
        subject = subject_name(self._strategy, topic, is_key=self._column == "key", record_name=schema.full_name)
        if self._auto_register:
            schema_id = self._client.register(subject, schema.json)
        else:
            registered = self._client.lookup(subject, schema.json)
            if registered is None:
                raise SchemaRegistryError(f"the {self._column} schema is not registered under subject {subject!r} "
                                          "and auto_register is False: register it first", subject=subject)
            schema_id = registered.schema_id
        found = (writer, frame_prefix(schema_id))
        with self._lock:
            self._writers[(topic, arrow_type)] = found
        return found

    def encode_column(self, topic: str, column: pa.Array | pa.ChunkedArray) -> pa.Array:
        """Each row as framed Avro (binary); a null row stays null (a tombstone, or no key)."""
        writer, prefix = self._writer(topic, column.type)
        return writer.encode(column, prefix=prefix)

    def encode_table(self, topic: str, table: pa.Table | pa.RecordBatch) -> pa.Table:
        """``table`` with its ``value`` (or ``key``) column encoded, for ``send_batch``."""
        if isinstance(table, pa.RecordBatch):
            table = pa.Table.from_batches([table])
        if self._column not in table.column_names:
            raise ConfigError(f"the table has no {self._column!r} column to encode; columns are {table.column_names}",
                              key=self._column)
        index = table.column_names.index(self._column)
        encoded = self.encode_column(topic, table.column(index))
        return table.set_column(index, pa.field(self._column, encoded.type), encoded)

    def __call__(self, topic: str, datum: Any) -> bytes | None:
        """One value (a dict for a record) as framed Avro, for ``send``; None stays None."""
        if datum is None:
            return None
        if self._schema is None:
            raise ConfigError("encoding one value needs the schema: give AvroSerializer(schema=...)", key="schema")
        arrow_type = arrow_type_of(self._schema.root, self._column)
        try:
            column = pa.array([datum], arrow_type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as e:
            raise ConfigError(f"the {self._column} does not fit the schema: {e}", key=self._column) from None
        encoded: bytes = self.encode_column(topic, column)[0].as_py()
        return encoded


def arrow_type_of(avro: AvroType, path: str) -> pa.DataType:
    """The Arrow type that holds values of an Avro type (to build an array from Python values)."""
    if isinstance(avro, AvroUnion):
        others = [b for i, b in enumerate(avro.branches) if i != avro.null_index]
        if len(others) == 2 and others == [Primitive("int"), Primitive("long")]:
            return pa.int64()
        if len(others) != 1:
            raise ConfigError(f"{path}: a union of several types cannot be built from a Python value; use an "
                              "Arrow column of one of them", key=path)
        return arrow_type_of(others[0], path)
    if isinstance(avro, Record):
        return pa.struct([pa.field(f.name, arrow_type_of(f.type, f"{path}.{f.name}"),
                                   isinstance(f.type, AvroUnion) and f.type.null_index is not None)
                          for f in avro.fields])
    if isinstance(avro, Array):
        return pa.list_(arrow_type_of(avro.items, f"{path}.element"))
    if isinstance(avro, Map):
        return pa.map_(pa.string(), arrow_type_of(avro.values, f"{path}.value"))
    if isinstance(avro, Enum):
        return pa.string()
    if isinstance(avro, Fixed):
        return pa.decimal128(avro.precision, avro.scale) if avro.logical == "decimal" else pa.binary(avro.size)
    kind, logical = avro.kind, avro.logical
    if logical == "decimal":
        return pa.decimal128(avro.precision, avro.scale)
    if logical == "date":
        return pa.date32()
    if logical in ("timestamp-millis", "timestamp-micros"):
        return pa.timestamp("ms" if logical.endswith("millis") else "us", "UTC")
    if logical in ("local-timestamp-millis", "local-timestamp-micros"):
        return pa.timestamp("ms" if logical.endswith("millis") else "us")
    return {"null": pa.null(), "boolean": pa.bool_(), "int": pa.int32(), "long": pa.int64(), "float": pa.float32(),
            "double": pa.float64(), "bytes": pa.binary(), "string": pa.string()}[kind]
