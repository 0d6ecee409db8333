"""Avro schemas: derived from an Arrow (Spark) type, or parsed from the user's JSON into a typed tree.

Derivation follows Spark's ``SchemaConverters.toAvroType`` (so Spark's ``from_avro`` reads the records with the
registered schema: the same record, fixed and field names, the same logical types) except for nullable types:
Spark writes ``[T, "null"]`` with no default, which no later schema can add a field beside under BACKWARD
compatibility; here a nullable field is ``["null", T]`` with ``"default": null`` (Avro requires a union's default
to be of its first branch), and a nullable array item or map value is ``["null", T]``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

import pyarrow as pa

from spark_kafka_sink.errors import ConfigError

__all__ = [
    "AvroType", "Primitive", "Fixed", "Enum", "Array", "Map", "Record", "Field", "AvroUnion", "AvroSchema",
    "derive_schema", "parse_schema", "decimal_fixed_size",
]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})


@dataclass(frozen=True)
class Primitive:
    kind: str  # one of _PRIMITIVES
    logical: str | None = None  # date, timestamp-millis, timestamp-micros, local-timestamp-*, decimal (bytes)
    precision: int = 0  # a bytes decimal's
    scale: int = 0


@dataclass(frozen=True)
class Fixed:
    name: str  # full name
    size: int
    logical: str | None = None  # decimal or None
    precision: int = 0
    scale: int = 0


@dataclass(frozen=True)
class Enum:
    name: str
    symbols: tuple[str, ...]


@dataclass(frozen=True)
class Array:
    items: AvroType


@dataclass(frozen=True)
class Map:
    values: AvroType


@dataclass(frozen=True)
class Field:
    name: str
    type: AvroType
    has_default: bool
    default: Any


@dataclass(frozen=True)
class Record:
    name: str
    fields: tuple[Field, ...]


@dataclass(frozen=True)
class AvroUnion:
    branches: tuple[AvroType, ...]

    @property
    def null_index(self) -> int | None:
        return next((i for i, b in enumerate(self.branches) if b == Primitive("null")), None)


AvroType = Union[Primitive, Fixed, Enum, Array, Map, Record, AvroUnion]


@dataclass(frozen=True)
class AvroSchema:
    """A parsed schema: its tree, and its JSON as the registry is sent it."""

    root: AvroType
    json: str

    @property
    def full_name(self) -> str | None:
        """The record's (or enum's, fixed's) full name, for the record subject name strategies."""
        return self.root.name if isinstance(self.root, (Record, Enum, Fixed)) else None


# --------------------------------------------------------------------------------------------------- derive


def decimal_fixed_size(precision: int) -> int:
    """The fewest bytes whose two's complement holds every unscaled value of ``precision`` digits."""
    size = 1
    while (1 << (8 * size - 1)) - 1 < 10**precision - 1:
        size += 1
    return size


def _check_name(name: str, path: str) -> None:
    if not _NAME.match(name):
        raise ConfigError(f"column {path!r}: {name!r} is not a valid Avro name (letters, digits and _, not starting "
                          "with a digit): rename the column or give an Avro schema", key=path)


def _derive(t: pa.DataType, path: str, record_name: str, namespace: str) -> Any:
    if pa.types.is_dictionary(t):
        return _derive(t.value_type, path, record_name, namespace)
    if pa.types.is_boolean(t):
        return "boolean"
    if pa.types.is_int8(t) or pa.types.is_int16(t) or pa.types.is_int32(t) or pa.types.is_uint8(t) \
            or pa.types.is_uint16(t):
        return "int"
    if pa.types.is_int64(t) or pa.types.is_uint32(t):
        return "long"
    if pa.types.is_float32(t):
        return "float"
    if pa.types.is_float64(t):
        return "double"
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "bytes"
    if pa.types.is_date(t):
        return {"type": "int", "logicalType": "date"}
    if pa.types.is_timestamp(t):
        return {"type": "long", "logicalType": "timestamp-micros" if t.tz else "local-timestamp-micros"}
    if pa.types.is_decimal128(t):
        return {"type": "fixed", "name": "fixed", "namespace": f"{namespace}.{record_name}".lstrip("."),
                "size": decimal_fixed_size(t.precision), "logicalType": "decimal", "precision": t.precision,
                "scale": t.scale}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        items = _derive(t.value_type, f"{path}.element", record_name, namespace)
        return {"type": "array", "items": ["null", items] if t.value_field.nullable else items}
    if pa.types.is_map(t):
        if not (pa.types.is_string(t.key_type) or pa.types.is_large_string(t.key_type)):
            raise ConfigError(f"column {path!r} is a map with {t.key_type} keys; Avro maps have string keys: cast "
                              "the keys to string (or turn the map into an array of structs)", key=path)
        values = _derive(t.item_type, f"{path}.value", record_name, namespace)
        return {"type": "map", "values": ["null", values] if t.item_field.nullable else values}
    if pa.types.is_struct(t):
        child_namespace = f"{namespace}.{record_name}".lstrip(".")
        fields = []
        for f in t:
            _check_name(f.name, f"{path}.{f.name}")
            avro = _derive(f.type, f"{path}.{f.name}", f.name, child_namespace)
            fields.append({"name": f.name, "type": ["null", avro], "default": None} if f.nullable
                          else {"name": f.name, "type": avro})
        record: dict[str, Any] = {"type": "record", "name": record_name}
        if namespace:
            record["namespace"] = namespace
        record["fields"] = fields
        return record
    if pa.types.is_null(t):
        return "null"
    raise ConfigError(f"column {path!r} has type {t}, which Avro cannot hold: cast it (to a string, a long, a "
                      "struct ...) or drop it", key=path)


def derive_schema(t: pa.DataType, *, column: str, record_name: str = "topLevelRecord",
                  namespace: str = "") -> dict[str, Any] | str:
    """The Avro schema (as JSON-ready data) of a column of Arrow type ``t`` (see the module docstring).
    ``column`` names it in errors; a struct becomes the record ``record_name`` in ``namespace``."""
    _check_name(record_name, column)
    derived: dict[str, Any] | str = _derive(t, column, record_name, namespace)
    return derived


# ---------------------------------------------------------------------------------------------------- parse


class _Parser:
    """Parses one schema: named types are declared once and referred to by full name afterwards."""

    def __init__(self, where: str) -> None:
        self._where = where
        self._named: dict[str, AvroType] = {}

    def _error(self, message: str) -> ConfigError:
        return ConfigError(f"{self._where}: {message}", key=self._where)

    def _full_name(self, spec: Mapping[str, Any], namespace: str) -> tuple[str, str]:
        name = spec.get("name")
        if not isinstance(name, str) or not name:
            raise self._error(f"a {spec.get('type')} needs a name")
        if "." in name:
            full = name
        else:
            ns = spec.get("namespace", namespace) or ""
            full = f"{ns}.{name}" if ns else name
        for part in full.split("."):
            if not _NAME.match(part):
                raise self._error(f"{full!r} is not a valid Avro name")
        return full, full.rpartition(".")[0]

    def _declare(self, full: str, node: AvroType) -> AvroType:
        if full in self._named:
            raise self._error(f"the name {full!r} is declared twice")
        self._named[full] = node
        return node

    def parse(self, spec: Any, namespace: str) -> AvroType:
        if isinstance(spec, list):
            branches = tuple(self.parse(b, namespace) for b in spec)
            if any(isinstance(b, AvroUnion) for b in branches):
                raise self._error("a union directly inside a union")
            return AvroUnion(branches)
        if isinstance(spec, str):
            if spec in _PRIMITIVES:
                return Primitive(spec)
            full = spec if "." in spec or not namespace else f"{namespace}.{spec}"
            found = self._named.get(full, self._named.get(spec))
            if found is None:
                raise self._error(f"unknown type {spec!r}")
            return found
        if not isinstance(spec, Mapping):
            raise self._error(f"{spec!r} is not an Avro type")
        kind = spec.get("type")
        logical = spec.get("logicalType")
        if kind in _PRIMITIVES:
            if logical == "decimal" and kind == "bytes":
                return Primitive("bytes", "decimal", int(spec["precision"]), int(spec.get("scale", 0)))
            known = {"int": ("date",), "long": ("timestamp-millis", "timestamp-micros", "local-timestamp-millis",
                                                  "local-timestamp-micros")}
            return Primitive(kind, logical if logical in known.get(kind, ()) else None)
        if kind == "record" or kind == "error":
            full, child_ns = self._full_name(spec, namespace)
            fields_spec = spec.get("fields")
            if not isinstance(fields_spec, list):
                raise self._error(f"record {full!r} needs a list of fields")
            # Declared before its fields are parsed: a field may refer to its own record (recursion).
            placeholder_fields: list[Field] = []
            record = Record(full, ())
            self._named[full] = record
            for f in fields_spec:
                if not isinstance(f, Mapping) or not isinstance(f.get("name"), str):
                    raise self._error(f"record {full!r} has a field without a name")
                placeholder_fields.append(Field(f["name"], self.parse(f.get("type"), child_ns), "default" in f,
                                                f.get("default")))
            object.__setattr__(record, "fields", tuple(placeholder_fields))
            return record
        if kind == "enum":
            full, _ = self._full_name(spec, namespace)
            symbols = spec.get("symbols")
            if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                raise self._error(f"enum {full!r} needs a list of string symbols")
            return self._declare(full, Enum(full, tuple(symbols)))
        if kind == "fixed":
            full, _ = self._full_name(spec, namespace)
            size = spec.get("size")
            if not isinstance(size, int) or size < 0:
                raise self._error(f"fixed {full!r} needs a size")
            if logical == "decimal":
                return self._declare(full, Fixed(full, size, "decimal", int(spec["precision"]),
                                                 int(spec.get("scale", 0))))
            return self._declare(full, Fixed(full, size))
        if kind == "array":
            return Array(self.parse(spec.get("items"), namespace))
        if kind == "map":
            return Map(self.parse(spec.get("values"), namespace))
        if isinstance(kind, (str, list, Mapping)):  # {"type": "com.x.Named"} or {"type": [...]}
            return self.parse(kind, namespace)
        raise self._error(f"{spec!r} is not an Avro type")


def parse_schema(schema: str | Mapping[str, Any] | list[Any], *, where: str = "Avro schema") -> AvroSchema:
    """Parse an Avro schema (JSON text or its parsed data); ``where`` names it in errors (an option, a column)."""
    if isinstance(schema, str) and schema not in _PRIMITIVES:  # a bare primitive name is a schema too
        try:
            data = json.loads(schema)
        except json.JSONDecodeError as e:
            raise ConfigError(f"{where} is not valid JSON: {e}", key=where) from None
    else:
        data = schema
    root = _Parser(where).parse(data, "")
    return AvroSchema(root, json.dumps(data, separators=(",", ":")))
