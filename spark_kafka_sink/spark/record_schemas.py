"""Schema'd keys and values: the registry's wire format from typed columns (``keyFormat`` / ``valueFormat``).

On the driver, before any task starts, ``resolve_serializers`` settles each framed column's schema (derived from
the column's Spark type, given as ``keySchema``/``valueSchema``, a registered id, or the subject's latest
version), registers it (or looks it up when ``autoRegisterSchemas=false``) and checks that the column's type
fits it: an incompatible schema, a type Avro cannot hold or a registry that stays down fails the write there,
before anything is sent. The tasks get the ids inside the :class:`ColumnSerializer` objects of the column plan and
never call the registry, so a registry that goes down mid-job does not fail them.

The subject depends on the topic under the topic and topic_record strategies. With the ``topic`` option the
driver settles it; with a ``topic`` column (rows of any topic) the driver still settles the schema and checks the
column's type, and a task asks the registry for the id of each topic it meets, once per Python worker
(``_topic_ids``): the one case where tasks call the registry.
"""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BinaryType, DataType, StringType, StructType

from spark_kafka_sink.avro import AvroSchema, AvroWriter, derive_schema, parse_schema
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.schema_registry import (
    RegistrySettings,
    SchemaRegistryClient,
    SubjectNameStrategy,
    frame_prefix,
    protobuf_frame_prefix,
    subject_name,
)
from spark_kafka_sink.spark.options import ColumnFormat, RecordFormat, SinkOptions
from spark_kafka_sink.spark.schema import ColumnPlan

__all__ = ["ColumnSerializer", "resolve_serializers", "with_serializers"]

_SCHEMA_TYPES = {RecordFormat.AVRO: "AVRO", RecordFormat.PROTOBUF: "PROTOBUF", RecordFormat.JSON: "JSON"}


@dataclass(frozen=True)
class PerTopicSchema:
    """What a task needs to settle a schema's id for a topic it meets (a topic column under a topic strategy)."""

    registry: RegistrySettings
    strategy: SubjectNameStrategy
    schema: str
    schema_type: str
    record_name: str | None
    auto_register: bool


@dataclass(frozen=True)
class ColumnSerializer:
    """Turns one key or value column into framed record bytes, with the id the driver settled. Picklable."""

    column: str
    format: RecordFormat
    subject: str | None  # None: written with a given id, or per topic (``per_topic``)
    schema_id: int  # -1 with ``per_topic``
    prefix: bytes  # magic byte + id (+ Protobuf's message indexes); empty with ``per_topic``
    avro: AvroWriter | None  # the Avro format's encoder
    per_topic: PerTopicSchema | None = None  # the id depends on each row's topic

    def encode(self, array: pa.Array, topics: pa.Array | None = None) -> pa.Array:
        """Each row's record bytes; a null row stays null (a null key, or a tombstone). ``topics``: each row's
        topic (non-null), for a serializer whose id depends on it."""
        if self.avro is not None:
            body = self.avro.encode(array, prefix=self.prefix)
        else:
            if pa.types.is_string(array.type) or pa.types.is_large_string(array.type):
                array = array.view(pa.binary() if pa.types.is_string(array.type) else pa.large_binary())
            body = pc.binary_join_element_wise(pa.scalar(self.prefix, array.type), array,
                                               pa.scalar(b"", array.type))
        if self.per_topic is None:
            return body
        if topics is None:
            raise ConfigError(f"the {self.column} schema's id depends on the topic, and the rows have none",
                              key="topic")
        return self._with_topic_frames(body, topics)

    def _with_topic_frames(self, body: pa.Array, topics: pa.Array) -> pa.Array:
        assert self.per_topic is not None
        encoded = pc.dictionary_encode(topics)
        prefixes = [self._prefix(self._topic_id(str(topic))) for topic in encoded.dictionary.to_pylist()]
        per_row = pa.array(prefixes, body.type).take(encoded.indices)  # one prefix per row, by its topic
        return pc.binary_join_element_wise(per_row, body, pa.scalar(b"", body.type))

    def _prefix(self, schema_id: int) -> bytes:
        return protobuf_frame_prefix(schema_id) if self.format is RecordFormat.PROTOBUF else frame_prefix(schema_id)

    def _topic_id(self, topic: str) -> int:
        spec = self.per_topic
        assert spec is not None
        subject = subject_name(spec.strategy, topic, is_key=self.column == "key", record_name=spec.record_name)
        cache_key = (spec.registry.urls, subject, spec.schema)
        with _settled_lock:
            if cache_key in _settled:
                return _settled[cache_key]
        client = SchemaRegistryClient(spec.registry)
        if spec.auto_register:
            schema_id = client.register(subject, spec.schema, spec.schema_type)
        else:
            found = client.lookup(subject, spec.schema, spec.schema_type)
            if found is None:
                raise ConfigError(f"the {self.column} schema is not registered under subject {subject!r} (topic "
                                  f"{topic!r}) and autoRegisterSchemas=false: register it first",
                                  key="autoRegisterSchemas")
            schema_id = found.schema_id
        with _settled_lock:
            _settled[cache_key] = schema_id
        return schema_id


# The ids this process settled, by (registry URLs, subject, schema): on the driver, a streaming query asks for its
# serializers every micro-batch, and registering again would cost a round trip each time; in a Python worker, the
# ids of the topics its tasks met (a topic column under a topic strategy).
_settled: dict[tuple[tuple[str, ...], str, str], int] = {}
_settled_lock = threading.Lock()  # guards _settled


def _arrow_type(dt: DataType) -> pa.DataType:
    """The Arrow type Spark hands a Python data source for ``dt`` (pyspark 4.0's function has no timezone)."""
    from pyspark.sql.pandas.types import to_arrow_type

    try:
        return to_arrow_type(dt, timezone="UTC")
    except TypeError:
        return to_arrow_type(dt)


def _subject(options: SinkOptions, fmt: ColumnFormat, record_name: str | None) -> str:
    strategy = options.subject_name_strategy
    if strategy is not SubjectNameStrategy.RECORD and options.topic is None:
        raise ConfigError(f"option {fmt.column}Format={fmt.format.value} with the {strategy.value} subject name "
                          "strategy needs the topic option (the subject is named after the topic): set topic, or "
                          "use subjectNameStrategy=record with a topic column", key="subjectNameStrategy")
    return subject_name(strategy, options.topic or "", is_key=fmt.column == "key", record_name=record_name)


def _settle_id(client: SchemaRegistryClient, options: SinkOptions, subject: str, schema: str, schema_type: str,
               fmt: ColumnFormat) -> int:
    assert options.registry is not None  # SinkOptions requires it with a framed column
    cache_key = (options.registry.urls, subject, schema)
    with _settled_lock:
        if cache_key in _settled:
            return _settled[cache_key]
    if options.auto_register_schemas:
        schema_id = client.register(subject, schema, schema_type)
    else:
        found = client.lookup(subject, schema, schema_type)
        if found is None:
            raise ConfigError(f"the {fmt.column} schema is not registered under subject {subject!r} and "
                              "autoRegisterSchemas=false: register it first, or give its id as "
                              f"{fmt.column}SchemaId", key="autoRegisterSchemas")
        schema_id = found.schema_id
    with _settled_lock:
        _settled[cache_key] = schema_id
    return schema_id


def _resolve(options: SinkOptions, fmt: ColumnFormat, dt: DataType,
             client: SchemaRegistryClient) -> ColumnSerializer:
    column = fmt.column
    if fmt.format is RecordFormat.PROTOBUF and not isinstance(dt, BinaryType):
        raise ConfigError(f"column {column!r} has type {dt.simpleString()}; {column}Format=protobuf frames bytes "
                          "already serialized (binary, e.g. from to_protobuf)", key=column)
    if fmt.format is RecordFormat.JSON and not isinstance(dt, (BinaryType, StringType)):
        raise ConfigError(f"column {column!r} has type {dt.simpleString()}; {column}Format=json frames a JSON "
                          "document already serialized (string or binary, e.g. from to_json)", key=column)
    schema_type = _SCHEMA_TYPES[fmt.format]
    subject: str | None = None
    if fmt.schema_id is not None:
        registered = client.by_id(fmt.schema_id)
        text, schema_id = registered.schema, fmt.schema_id
    elif fmt.use_latest:
        subject = _subject(options, fmt, None if options.subject_name_strategy is SubjectNameStrategy.TOPIC
                           else options.avro_record_name)
        latest = client.latest(subject)
        text, schema_id = latest.schema, latest.schema_id
    else:
        text, schema_id = fmt.schema or "", -1
    avro: AvroWriter | None = None
    if fmt.format is RecordFormat.AVRO:
        arrow_type = _arrow_type(dt)
        where = f"option {column}Schema" if fmt.schema is not None else f"the {column} schema"
        parsed: AvroSchema = parse_schema(text, where=where) if text else parse_schema(
            derive_schema(arrow_type, column=column, record_name=options.avro_record_name,
                          namespace=options.avro_record_namespace))
        avro = AvroWriter(arrow_type, parsed, column=column)  # the column's type must fit the schema: checked here
        text = parsed.json
        record_name = parsed.full_name
    else:
        record_name = None
    if schema_id < 0 and options.topic is None and options.subject_name_strategy is not SubjectNameStrategy.RECORD:
        assert options.registry is not None
        per_topic = PerTopicSchema(options.registry, options.subject_name_strategy, text, schema_type, record_name,
                                   options.auto_register_schemas)
        return ColumnSerializer(column, fmt.format, None, -1, b"", avro, per_topic)
    if schema_id < 0:
        subject = _subject(options, fmt, record_name)
        schema_id = _settle_id(client, options, subject, text, schema_type, fmt)
    prefix = protobuf_frame_prefix(schema_id) if fmt.format is RecordFormat.PROTOBUF else frame_prefix(schema_id)
    return ColumnSerializer(column, fmt.format, subject, schema_id, prefix, avro)


def resolve_serializers(options: SinkOptions, schema: StructType, *,
                        client: SchemaRegistryClient | None = None) -> dict[str, ColumnSerializer]:
    """The framed columns' serializers (``{"key": ..., "value": ...}``, only those with a format), settled with
    the registry on the driver (see the module docstring)."""
    formats = [f for f in (options.key_format, options.value_format) if f.framed]
    if not formats:
        return {}
    assert options.registry is not None  # SinkOptions requires it with a framed column
    client = client or SchemaRegistryClient(options.registry)
    by_name = {f.name: f.dataType for f in schema.fields}
    serializers = {}
    for fmt in formats:
        if fmt.column not in by_name:
            continue  # no key column: nothing to frame (the value column is required and checked before)
        serializers[fmt.column] = _resolve(options, fmt, by_name[fmt.column], client)
    return serializers


def with_serializers(plan: ColumnPlan, serializers: dict[str, ColumnSerializer]) -> ColumnPlan:
    return dataclasses.replace(plan, key_serializer=serializers.get("key"),
                               value_serializer=serializers.get("value"))
