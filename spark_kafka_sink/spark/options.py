"""The sink's options, parsed and validated once on the driver into one frozen, picklable object.

    opts = SinkOptions.parse({"kafka.bootstrap.servers": "h:9092", "topic": "t",
                              "deliveryGuarantee": "exactly_once"}, streaming=False)
    opts.producer_config(transactional_id="sks-1a2b-3")   # Java names -> values, for KafkaProducer(...)

Spark hands options over case-insensitively (keys arrive lower-cased); every error names the option as the user
wrote it in Spark (``kafka.linger.ms``, ``deliveryGuarantee``), never the value of a secret.

Decisions beyond Spark's own sink:
* ``kafka.batch.size`` defaults to 256 KiB, not Java's 16 KiB: rows arrive in bulk (see DEFAULT_BATCH_SIZE).
* ``kafka.transactional.id`` is refused: exactly_once derives one id per Spark partition from the prefix.
* Options that are neither ``kafka.*`` nor the connector's are ignored, as Spark does (``path``,
  ``checkpointLocation`` ...), except near-misspellings of the connector's options, which are errors: a silently
  ignored ``deliveryGuarentee`` would downgrade exactly_once to at_least_once.
* Record timestamps come from a column only when ``timestampColumn`` names it (a timestamp or long column of
  epoch milliseconds). Spark's sink ignores every column but key, value, topic, partition and headers, one named
  ``timestamp`` included, so by default records get the send time here too and a Kafka -> Kafka copy behaves the same
  with either format.
* ``keyFormat`` / ``valueFormat`` (``bytes``, the default, as Spark; ``avro``; ``protobuf`` and ``json`` for bytes
  already serialized) with the ``schema.registry.*`` options (Confluent's client setting names) write the
  registry's wire format; ``keySchema``/``valueSchema``, ``keySchemaId``/``valueSchemaId`` (an id or ``latest``),
  ``subjectNameStrategy``, ``autoRegisterSchemas``, ``avroRecordName``/``avroRecordNamespace`` say which schema.
* Streaming with exactly_once takes its default ``transactionalIdPrefix`` from the checkpoint location, so the
  ids are stable across micro-batches and restarts (a restart then fences the crashed run's open transactions).
* A batch exactly_once write without ``transactionalIdPrefix`` draws its prefix from a pool (``spark.id_pool``),
  so the ids a deployment leaves on the coordinators stay bounded by what runs at once.
"""

from __future__ import annotations

import difflib
import enum
import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.schema_registry import RegistrySettings, SubjectNameStrategy

__all__ = ["DeliveryGuarantee", "RecordFormat", "ColumnFormat", "RateLimit", "InvalidRecordPolicy", "DeadLetters",
           "SinkOptions",
           "DEFAULT_TRANSACTION_TIMEOUT_MS", "DEFAULT_BATCH_SIZE", "DEFAULT_COMMIT_LOG_TOPIC",
           "DEFAULT_PRODUCER_IDLE_TIMEOUT_MS", "DEFAULT_ID_POOL_LEASE_MS"]

#: The broker's default transaction.max.timeout.ms: the longest a transaction may stay open (see README).
DEFAULT_TRANSACTION_TIMEOUT_MS = 900_000
#: The sink's batch.size when ``kafka.batch.size`` is not given. Java's 16384 suits records trickling in one by one;
#: the sink hands over 10,000-row Arrow batches, and at 16 KiB (~140 rows of 100 B) the per-batch Python work
#: (futures, sequence bookkeeping, one Produce entry each) bounded it at ~0.6-0.7 M rows/s on 2 shared cores,
#: against ~1.0-1.1 M at 256 KiB (1 MiB gained nothing more). Spark users tune kafka.batch.size up the same way.
DEFAULT_BATCH_SIZE = 262_144
_KAFKA_PREFIX = "kafka."
# Lower-case key -> the spelling users see in docs and errors.
_CONNECTOR_OPTIONS = {
    "topic": "topic",
    "deliveryguarantee": "deliveryGuarantee",
    "transactionalidprefix": "transactionalIdPrefix",
    "writeid": "writeId",
    "timestampcolumn": "timestampColumn",
    "commitlogtopic": "commitLogTopic",
    "producerreuse": "producerReuse",
    "produceridletimeoutms": "producerIdleTimeoutMs",
    "workergcfreeze": "workerGcFreeze",
    "idpoolleasems": "idPoolLeaseMs",
    "keyformat": "keyFormat",
    "valueformat": "valueFormat",
    "keyschema": "keySchema",
    "valueschema": "valueSchema",
    "keyschemaid": "keySchemaId",
    "valueschemaid": "valueSchemaId",
    "subjectnamestrategy": "subjectNameStrategy",
    "autoregisterschemas": "autoRegisterSchemas",
    "avrorecordname": "avroRecordName",
    "avrorecordnamespace": "avroRecordNamespace",
    "maxrecordspersecond": "maxRecordsPerSecond",
    "maxbytespersecond": "maxBytesPerSecond",
    "ratelimittasks": "rateLimitTasks",
    "oninvalidrecord": "onInvalidRecord",
    "deadlettertopic": "deadLetterTopic",
    "deadlettercontextheaders": "deadLetterContextHeaders",
    "maxinvalidrecords": "maxInvalidRecords",
}
#: How long a pooled transactional id prefix stays claimed by a write that never released it (see spark.id_pool).
DEFAULT_ID_POOL_LEASE_MS = 86_400_000
_REGISTRY_PREFIX = "schema.registry."
#: How long a Python worker keeps an idle producer for the next task (as Spark's spark.kafka.producer.cache.timeout).
DEFAULT_PRODUCER_IDLE_TIMEOUT_MS = 600_000
#: Where exactly_once writes with a stable writeId (streaming, or the writeId option) record their commits.
DEFAULT_COMMIT_LOG_TOPIC = "_pykafka_sink_commits"
_REFUSED_PRODUCER_KEYS = {
    "key.serializer": "keys are written as the bytes of the key column (strings as UTF-8): serialize in the "
                      "DataFrame instead (e.g. to_json, to_avro, cast)",
    "value.serializer": "values are written as the bytes of the value column (strings as UTF-8): serialize in the "
                        "DataFrame instead (e.g. to_json, to_avro, cast)",
    "max.records.per.second": "a write's rate limit is the option maxRecordsPerSecond, for the whole write (split "
                              "over its tasks with rateLimitTasks)",
    "max.bytes.per.second": "a write's rate limit is the option maxBytesPerSecond, for the whole write (split "
                            "over its tasks with rateLimitTasks)",
    "transactional.id": "exactly_once derives one transactional.id per Spark partition: set "
                        "deliveryGuarantee=exactly_once and, to choose the ids, transactionalIdPrefix",
}
# Allowed characters of a transactional id prefix: Kafka accepts any string, but ids end up in broker logs and ACLs.
_PREFIX_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class DeliveryGuarantee(str, enum.Enum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class RecordFormat(str, enum.Enum):
    """How a key or value column becomes record bytes."""

    BYTES = "bytes"  # the column's bytes (strings as UTF-8), as Spark's sink
    AVRO = "avro"  # the column (any type) encoded as Avro, in the registry's frame
    PROTOBUF = "protobuf"  # bytes already Protobuf (to_protobuf), framed with the given schema's id
    JSON = "json"  # a JSON document (to_json), framed with the given JSON Schema's id


@dataclass(frozen=True)
class ColumnFormat:
    """The key's or the value's format options."""

    column: str  # "key" or "value"
    format: RecordFormat = RecordFormat.BYTES
    schema: str | None = None  # keySchema / valueSchema: the schema to write with (Avro: else derived)
    schema_id: int | None = None  # keySchemaId / valueSchemaId: a registered id to write with
    use_latest: bool = False  # keySchemaId=latest: the subject's latest version

    @property
    def framed(self) -> bool:
        return self.format is not RecordFormat.BYTES

    @property
    def option_prefix(self) -> str:
        return self.column  # keyFormat, valueSchema ...


class InvalidRecordPolicy(str, enum.Enum):
    """onInvalidRecord: what happens to a record its topic can never take (too large, a null key on a compacted
    topic)."""

    FAIL = "fail"  # the task fails, naming the row (Kafka Connect's errors.tolerance=none)
    SKIP = "skip"  # left out, counted (errors.tolerance=all)
    DEAD_LETTER = "deadLetter"  # written to deadLetterTopic instead (errors.deadletterqueue.topic.name)


@dataclass(frozen=True)
class DeadLetters:
    """onInvalidRecord and what goes with it."""

    policy: InvalidRecordPolicy = InvalidRecordPolicy.FAIL
    topic: str | None = None  # deadLetterTopic, set iff policy is DEAD_LETTER
    context_headers: bool = True  # deadLetterContextHeaders: headers naming the error, topic and Spark partition
    max_invalid: int | None = None  # maxInvalidRecords: the write fails past this many (None: no limit)

    @property
    def active(self) -> bool:
        return self.policy is not InvalidRecordPolicy.FAIL


@dataclass(frozen=True)
class RateLimit:
    """A write's caps (maxRecordsPerSecond, maxBytesPerSecond; 0: none) and the tasks they are split over."""

    records_per_second: int
    bytes_per_second: int
    tasks: int  # rateLimitTasks: how many of the write's tasks run at once

    @property
    def active(self) -> bool:
        return self.records_per_second > 0 or self.bytes_per_second > 0

    def task_settings(self) -> dict[str, str]:
        """One task's producer settings: its share of each cap, at least 1 a second (so never 'no limit')."""
        out = {}
        if self.records_per_second:
            out["max.records.per.second"] = str(max(1, self.records_per_second // self.tasks))
        if self.bytes_per_second:
            out["max.bytes.per.second"] = str(max(1, self.bytes_per_second // self.tasks))
        return out

    def describe(self) -> str:
        """For the summary line."""
        caps = [f"{self.records_per_second} records/s"] if self.records_per_second else []
        caps += [f"{self.bytes_per_second} bytes/s"] if self.bytes_per_second else []
        return f"rate limit {' and '.join(caps)} over {self.tasks} tasks at once" if caps else "no rate limit"


@dataclass(frozen=True)
class SinkOptions:
    """Everything a writer needs, validated. Holds only plain values (and ``Secret``), so it pickles."""

    producer_options: Mapping[str, Any]  # Java names; the user's kafka.* plus the sink's defaults; secrets wrapped
    topic: str | None
    guarantee: DeliveryGuarantee
    transactional_id_prefix: str | None  # set iff exactly_once
    write_id: int | None
    timestamp_column: str | None = None  # the column giving record timestamps; None: send time (as Spark's sink)
    commit_log_topic: str = DEFAULT_COMMIT_LOG_TOPIC
    producer_reuse: bool = True  # at_least_once tasks take a producer an earlier task of the worker left
    producer_idle_timeout_ms: int = DEFAULT_PRODUCER_IDLE_TIMEOUT_MS
    worker_gc_freeze: bool = True  # the worker's long-lived objects leave the per-task gc.collect() (worker_heap)
    # A batch exactly_once write without transactionalIdPrefix: its prefix is claimed from the pool (spark.id_pool)
    # when Spark asks for the writer; until then transactional_id_prefix is a unique placeholder.
    id_pool: bool = False
    id_pool_lease_ms: int = DEFAULT_ID_POOL_LEASE_MS
    # Options not used: passed through by Spark, unknown ones, and kafka.* keys that are no producer setting
    # (ProducerConfig.ignored, e.g. a consumer's kafka.group.id)
    ignored: tuple[str, ...] = field(default=())
    # The producer settings the adapter itself acts on, as the parsed ProducerConfig has them (its defaults
    # included): read from it once on the driver, so no layer here reads a raw option or repeats a default.
    bootstrap_servers: str = field(kw_only=True)  # host:port,... (for messages)
    batch_size: int = field(kw_only=True)
    delivery_timeout_ms: int = field(kw_only=True)
    request_timeout_ms: int = field(kw_only=True)
    max_block_ms: int = field(kw_only=True)
    transaction_timeout_ms: int = field(kw_only=True)
    # Schema'd keys and values (keyFormat / valueFormat and the schema registry's settings)
    key_format: ColumnFormat = field(kw_only=True, default=ColumnFormat("key"))
    value_format: ColumnFormat = field(kw_only=True, default=ColumnFormat("value"))
    registry: RegistrySettings | None = field(kw_only=True, default=None)
    subject_name_strategy: SubjectNameStrategy = field(kw_only=True, default=SubjectNameStrategy.TOPIC)
    auto_register_schemas: bool = field(kw_only=True, default=True)
    avro_record_name: str = field(kw_only=True, default="topLevelRecord")  # Spark's to_avro default
    avro_record_namespace: str = field(kw_only=True, default="")
    # maxRecordsPerSecond / maxBytesPerSecond (0: none): the whole write's caps, each task's producer gets
    # 1/rate_limit_tasks of them (producer_options' max.records.per.second / max.bytes.per.second)
    rate_limit: RateLimit = field(kw_only=True, default_factory=lambda: RateLimit(0, 0, 1))
    dead_letters: DeadLetters = field(kw_only=True, default_factory=DeadLetters)
    # The largest record batch the producer sends (min of max.request.size and buffer.memory)
    max_record_batch: int = field(kw_only=True, default=1_048_576)

    @property
    def exactly_once(self) -> bool:
        return self.guarantee is DeliveryGuarantee.EXACTLY_ONCE

    def stable_write_id(self, batch_id: int | None) -> int | None:
        """The id under which this exactly_once write is recorded in the commit log: the micro-batch id when
        streaming, else the writeId option; None when the write is not recorded (at_least_once, or no writeId)."""
        if not self.exactly_once:
            return None
        return batch_id if batch_id is not None else self.write_id

    def transactional_id(self, partition_id: int) -> str:
        """The deterministic id of one Spark partition's transaction: a retried task fences its zombie."""
        if self.transactional_id_prefix is None:
            raise ConfigError("transactional ids exist only with deliveryGuarantee=exactly_once",
                              key="deliveryGuarantee")
        return f"{self.transactional_id_prefix}-{partition_id}"

    def producer_config(self, transactional_id: str | None = None) -> dict[str, Any]:
        """A fresh dict for ``KafkaProducer(...)``; with ``transactional_id`` for an exactly_once task."""
        config = dict(self.producer_options)
        if transactional_id is not None:
            config["transactional.id"] = transactional_id
        return config

    def __repr__(self) -> str:
        # Only non-secret settings: the producer options' Secret values already print as ***.
        return (f"SinkOptions(bootstrap={self.bootstrap_servers!r}, topic={self.topic!r}, "
                f"guarantee={self.guarantee.value}, transactional_id_prefix={self.transactional_id_prefix!r}, "
                f"write_id={self.write_id!r}, timestamp_column={self.timestamp_column!r}, "
                f"producer_keys={sorted(self.producer_options)})")

    # ------------------------------------------------------------------------------------------ parsing

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
        """Validate Spark's options (any key case). Raises ConfigError naming the option."""
        lowered: dict[str, tuple[str, str]] = {}
        for raw_key, value in options.items():
            key = raw_key.strip().lower()
            if key in lowered:
                raise ConfigError(f"option {raw_key!r} is given twice (also as {lowered[key][0]!r})", key=raw_key)
            lowered[key] = (raw_key, value)

        producer_raw: dict[str, Any] = {}
        registry_raw: dict[str, str] = {}
        ignored: list[str] = []
        for key, (raw_key, value) in lowered.items():
            if key.startswith(_REGISTRY_PREFIX):
                registry_raw[key[len(_REGISTRY_PREFIX):]] = value
            elif key.startswith(_KAFKA_PREFIX):
                java_key = key[len(_KAFKA_PREFIX):]
                if java_key in _REFUSED_PRODUCER_KEYS:
                    raise ConfigError(f"option kafka.{java_key} is not supported: {_REFUSED_PRODUCER_KEYS[java_key]}",
                                      key=raw_key)
                producer_raw[java_key] = value
            elif key not in _CONNECTOR_OPTIONS:
                _refuse_misspelling(key, raw_key)
                ignored.append(raw_key)

        if not (_option(lowered, "kafka.bootstrap.servers") or "").strip():
            raise ConfigError("option kafka.bootstrap.servers is required: host:port[,host:port...] of the brokers",
                              key="kafka.bootstrap.servers")

        topic = _topic(lowered)
        guarantee = _guarantee(lowered)
        prefix = _prefix(lowered, guarantee, streaming)
        write_id = _write_id(lowered, guarantee)

        # The sink's own defaults of two producer settings (the user's kafka.* options win).
        sink_defaults: dict[str, Any] = {"batch.size": str(DEFAULT_BATCH_SIZE)}
        if guarantee is DeliveryGuarantee.EXACTLY_ONCE:
            # Raised from the client's 60 s: tasks' transactions stay open until the driver commits (README).
            sink_defaults["transaction.timeout.ms"] = str(DEFAULT_TRANSACTION_TIMEOUT_MS)
        rate_limit = _rate_limit(lowered)
        config = _validated({**sink_defaults, **producer_raw, **rate_limit.task_settings()},
                            f"{prefix}-0" if prefix else None, guarantee)
        ignored.extend(f"{_KAFKA_PREFIX}{key}" for key in config.ignored)
        producer_options = config.to_dict()  # without a transactional.id: each task sets its own
        raw_log_topic = _option(lowered, "commitlogtopic")
        commit_log_topic = DEFAULT_COMMIT_LOG_TOPIC if raw_log_topic is None else raw_log_topic.strip()
        if not commit_log_topic:
            raise ConfigError("option commitLogTopic is empty: name a topic, or drop the option for the default "
                              f"{DEFAULT_COMMIT_LOG_TOPIC!r}", key="commitLogTopic")
        id_pool = (guarantee is DeliveryGuarantee.EXACTLY_ONCE and not streaming
                   and _option(lowered, "transactionalidprefix") is None)
        return cls(producer_options, topic, guarantee, prefix, write_id, _timestamp_column(lowered), commit_log_topic,
                   _flag(lowered, "producerreuse"), _producer_idle_timeout_ms(lowered),
                   _flag(lowered, "workergcfreeze"), id_pool, _id_pool_lease_ms(lowered, id_pool),
                   tuple(sorted(ignored)),
                   bootstrap_servers=",".join(config.bootstrap_servers), batch_size=config.batch_size,
                   delivery_timeout_ms=config.delivery_timeout_ms, request_timeout_ms=config.request_timeout_ms,
                   max_block_ms=config.max_block_ms, transaction_timeout_ms=config.transaction_timeout_ms,
                   rate_limit=rate_limit,
                   dead_letters=_dead_letters(lowered, topic),
                   max_record_batch=min(config.max_request_size, config.buffer_memory),
                   **_schema_options(lowered, registry_raw))


def _schema_options(lowered: Mapping[str, tuple[str, str]], registry_raw: Mapping[str, str]) -> dict[str, Any]:
    """keyFormat / valueFormat and what goes with them (see the module docstring)."""
    formats = {column: _column_format(lowered, column) for column in ("key", "value")}
    framed = [f for f in formats.values() if f.framed]
    registry = RegistrySettings.from_config(registry_raw, prefix=_REGISTRY_PREFIX) if registry_raw else None
    if framed and registry is None:
        raise ConfigError(f"option {framed[0].column}Format={framed[0].format.value} writes the schema registry's "
                          "wire format: set schema.registry.url (and schema.registry.* for its credentials)",
                          key="schema.registry.url")
    strategy_raw = _option(lowered, "subjectnamestrategy")
    strategy = (SubjectNameStrategy.TOPIC if strategy_raw is None
                else SubjectNameStrategy.parse(strategy_raw, key="subjectNameStrategy"))
    record_name = (_option(lowered, "avrorecordname") or "topLevelRecord").strip()
    return {"key_format": formats["key"], "value_format": formats["value"], "registry": registry,
            "subject_name_strategy": strategy,
            "auto_register_schemas": _flag(lowered, "autoregisterschemas"),
            "avro_record_name": record_name,
            "avro_record_namespace": (_option(lowered, "avrorecordnamespace") or "").strip()}


def _column_format(lowered: Mapping[str, tuple[str, str]], column: str) -> ColumnFormat:
    raw = _option(lowered, f"{column}format")
    try:
        record_format = RecordFormat.BYTES if raw is None else RecordFormat(raw.strip().lower())
    except ValueError:
        allowed = ", ".join(f.value for f in RecordFormat)
        raise ConfigError(f"option {column}Format={raw!r} is not valid: use {allowed}",
                          key=f"{column}Format") from None
    schema = _option(lowered, f"{column}schema")
    raw_id = _option(lowered, f"{column}schemaid")
    schema_id, latest = None, False
    if raw_id is not None:
        text = raw_id.strip().lower()
        latest = text == "latest"
        if not latest:
            try:
                schema_id = int(text)
            except ValueError:
                schema_id = -1
            if schema_id < 0:
                raise ConfigError(f"option {column}SchemaId={raw_id!r} is not valid: a registered schema id, or "
                                  "latest (the subject's latest version)", key=f"{column}SchemaId")
    if record_format is RecordFormat.BYTES and (schema is not None or raw_id is not None):
        given = f"{column}Schema" if schema is not None else f"{column}SchemaId"
        raise ConfigError(f"option {given} needs {column}Format=avro, protobuf or json (the {column} column is "
                          "written as plain bytes otherwise)", key=given)
    if schema is not None and raw_id is not None:
        raise ConfigError(f"options {column}Schema and {column}SchemaId both say which schema: give one",
                          key=f"{column}SchemaId")
    if record_format in (RecordFormat.PROTOBUF, RecordFormat.JSON) and schema is None and raw_id is None:
        raise ConfigError(f"option {column}Format={record_format.value} frames bytes already serialized: give the "
                          f"schema they were written with as {column}Schema (or a registered id as "
                          f"{column}SchemaId)", key=f"{column}Schema")
    return ColumnFormat(column, record_format, schema, schema_id, latest)


def _refuse_misspelling(key: str, raw_key: str) -> None:
    close = difflib.get_close_matches(key, list(_CONNECTOR_OPTIONS), n=1, cutoff=0.8)
    if close:
        name = _CONNECTOR_OPTIONS[close[0]]
        raise ConfigError(f"unknown option {raw_key!r}; did you mean {name!r}? (Kafka producer settings take the "
                          f"prefix 'kafka.')", key=raw_key)


def _option(lowered: Mapping[str, tuple[str, str]], key: str) -> str | None:
    entry = lowered.get(key)
    return None if entry is None else entry[1]


def _whole_option(lowered: Mapping[str, tuple[str, str]], key: str, *, minimum: int, what: str) -> int | None:
    """An integer option of at least ``minimum`` (None when not given); anything else is refused, the error saying
    ``what`` the option takes."""
    raw = _option(lowered, key)
    if raw is None:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        value = minimum - 1
    if value < minimum:
        name = _CONNECTOR_OPTIONS[key]
        raise ConfigError(f"option {name}={raw!r} is not valid: {what}", key=name)
    return value


def _topic(lowered: Mapping[str, tuple[str, str]]) -> str | None:
    topic = _option(lowered, "topic")
    if topic is None:
        return None
    if not topic.strip():
        raise ConfigError("option topic is empty: give a topic name, or drop the option to use the topic column",
                          key="topic")
    return topic.strip()


def _timestamp_column(lowered: Mapping[str, tuple[str, str]]) -> str | None:
    column = _option(lowered, "timestampcolumn")
    if column is None:
        return None
    if not column.strip():
        raise ConfigError("option timestampColumn is empty: name a timestamp or long (epoch ms) column, or drop the "
                          "option to give records the send time", key="timestampColumn")
    return column.strip()


def _flag(lowered: Mapping[str, tuple[str, str]], key: str) -> bool:
    """A true/false connector option whose default is true."""
    raw = _option(lowered, key)
    if raw is None:
        return True
    value = raw.strip().lower()
    if value not in ("true", "false"):
        name = _CONNECTOR_OPTIONS[key]
        raise ConfigError(f"option {name}={raw!r} is not valid: use true or false", key=name)
    return value == "true"


def _producer_idle_timeout_ms(lowered: Mapping[str, tuple[str, str]]) -> int:
    value = _whole_option(lowered, "produceridletimeoutms", minimum=0,
                          what="milliseconds >= 0 (0 closes a producer after each task)")
    return DEFAULT_PRODUCER_IDLE_TIMEOUT_MS if value is None else value


def _id_pool_lease_ms(lowered: Mapping[str, tuple[str, str]], id_pool: bool) -> int:
    if _option(lowered, "idpoolleasems") is None:
        return DEFAULT_ID_POOL_LEASE_MS
    if not id_pool:
        raise ConfigError("option idPoolLeaseMs applies only to batch exactly_once writes without "
                          "transactionalIdPrefix (their prefix comes from the pool): drop it", key="idPoolLeaseMs")
    value = _whole_option(lowered, "idpoolleasems", minimum=1,
                          what="milliseconds > 0 (how long a write may hold its pooled transactional id prefix "
                               "before another write may take it over)")
    assert value is not None  # given: checked above
    return value


def _dead_letters(lowered: Mapping[str, tuple[str, str]], topic: str | None) -> DeadLetters:
    raw = _option(lowered, "oninvalidrecord")
    by_name = {p.value.lower(): p for p in InvalidRecordPolicy}
    policy = InvalidRecordPolicy.FAIL if raw is None else by_name.get(raw.strip().lower())
    if policy is None:
        raise ConfigError(f"option onInvalidRecord={raw!r} is not valid: use fail, skip or deadLetter",
                          key="onInvalidRecord")
    dead_topic = _option(lowered, "deadlettertopic")
    if dead_topic is not None:
        dead_topic = dead_topic.strip()
        if policy is not InvalidRecordPolicy.DEAD_LETTER:
            raise ConfigError("option deadLetterTopic needs onInvalidRecord=deadLetter", key="deadLetterTopic")
        if not dead_topic:
            raise ConfigError("option deadLetterTopic is empty: name the dead-letter topic", key="deadLetterTopic")
        if dead_topic == topic:
            raise ConfigError(f"option deadLetterTopic={dead_topic!r} is the topic written to: records it refuses "
                              "cannot go there; name another topic", key="deadLetterTopic")
    elif policy is InvalidRecordPolicy.DEAD_LETTER:
        raise ConfigError("option onInvalidRecord=deadLetter needs deadLetterTopic: the topic invalid records go to",
                          key="deadLetterTopic")
    for key in ("deadlettercontextheaders", "maxinvalidrecords"):
        if _option(lowered, key) is not None and policy is InvalidRecordPolicy.FAIL:
            raise ConfigError(f"option {_CONNECTOR_OPTIONS[key]} needs onInvalidRecord=skip or deadLetter (with "
                              "fail, the first invalid record fails the write)", key=_CONNECTOR_OPTIONS[key])
    if _option(lowered, "deadlettercontextheaders") is not None and policy is not InvalidRecordPolicy.DEAD_LETTER:
        raise ConfigError("option deadLetterContextHeaders needs onInvalidRecord=deadLetter",
                          key="deadLetterContextHeaders")
    max_invalid = _whole_option(lowered, "maxinvalidrecords", minimum=0,
                                what="a count >= 0 (the write fails when more records than this are invalid)")
    return DeadLetters(policy, dead_topic, _flag(lowered, "deadlettercontextheaders"), max_invalid)


def _rate_limit(lowered: Mapping[str, tuple[str, str]]) -> RateLimit:
    """maxRecordsPerSecond, maxBytesPerSecond and rateLimitTasks (needed with either cap: the driver cannot know
    how many of the write's tasks Spark runs at once, and guessing low would let the write exceed its cap)."""
    def whole(key: str, what: str) -> int:
        return _whole_option(lowered, key, minimum=1, what=what) or 0  # 0: not given

    records = whole("maxrecordspersecond", "records a second > 0, for the whole write (drop it for no limit)")
    size = whole("maxbytespersecond", "bytes a second > 0 (of record batches as sent, after compression), for the "
                                      "whole write (drop it for no limit)")
    tasks = whole("ratelimittasks", "how many of the write's tasks run at once, > 0 (the cluster's task slots, "
                                    "e.g. spark.sparkContext.defaultParallelism, or the DataFrame's partitions "
                                    "if fewer)")
    if (records or size) and not tasks:
        given = "maxRecordsPerSecond" if records else "maxBytesPerSecond"
        raise ConfigError(f"option {given} is the whole write's: also set rateLimitTasks, how many of its tasks run "
                          "at once (each gets that share of the cap): the cluster's task slots, e.g. "
                          "spark.sparkContext.defaultParallelism, or the DataFrame's partitions if fewer",
                          key="rateLimitTasks")
    if tasks and not (records or size):
        raise ConfigError("option rateLimitTasks splits maxRecordsPerSecond / maxBytesPerSecond over the tasks: "
                          "set one of them, or drop it", key="rateLimitTasks")
    return RateLimit(records, size, tasks or 1)


def _guarantee(lowered: Mapping[str, tuple[str, str]]) -> DeliveryGuarantee:
    raw = _option(lowered, "deliveryguarantee")
    if raw is None:
        return DeliveryGuarantee.AT_LEAST_ONCE
    try:
        return DeliveryGuarantee(raw.strip().lower())
    except ValueError:
        allowed = " or ".join(g.value for g in DeliveryGuarantee)
        raise ConfigError(f"option deliveryGuarantee={raw!r} is not valid: use {allowed}",
                          key="deliveryGuarantee") from None


def _prefix(lowered: Mapping[str, tuple[str, str]], guarantee: DeliveryGuarantee, streaming: bool) -> str | None:
    raw = _option(lowered, "transactionalidprefix")
    if guarantee is not DeliveryGuarantee.EXACTLY_ONCE:
        if raw is not None:
            raise ConfigError("option transactionalIdPrefix needs deliveryGuarantee=exactly_once "
                              "(at_least_once writes without transactions)", key="transactionalIdPrefix")
        return None
    if raw is not None:
        prefix = raw.strip()
        if not prefix or not set(prefix) <= _PREFIX_CHARS:
            raise ConfigError(f"option transactionalIdPrefix={raw!r} is not valid: use letters, digits, '.', '_' "
                              "and '-'", key="transactionalIdPrefix")
        return prefix
    if streaming:
        checkpoint = _option(lowered, "checkpointlocation")
        if checkpoint is None:
            raise ConfigError("a streaming exactly_once query needs stable transactional ids: set the "
                              "checkpointLocation option of writeStream, or transactionalIdPrefix",
                              key="transactionalIdPrefix")
        return "sks-" + hashlib.sha256(checkpoint.encode()).hexdigest()[:16]
    # A placeholder, unique per write: the driver replaces it with a prefix claimed from the pool (spark.id_pool).
    return "sks-" + uuid.uuid4().hex[:16]


def _write_id(lowered: Mapping[str, tuple[str, str]], guarantee: DeliveryGuarantee) -> int | None:
    raw = _option(lowered, "writeid")
    if raw is None:
        return None
    try:
        write_id = int(raw.strip())
    except ValueError:
        raise ConfigError(f"option writeId={raw!r} is not a whole number (a long, e.g. the foreachBatch batch id)",
                          key="writeId") from None
    if not 0 <= write_id < 2**63:
        raise ConfigError(f"option writeId={raw!r} is out of range: 0 <= writeId < 2^63", key="writeId")
    if guarantee is not DeliveryGuarantee.EXACTLY_ONCE or _option(lowered, "transactionalidprefix") is None:
        raise ConfigError("option writeId needs deliveryGuarantee=exactly_once and a stable transactionalIdPrefix",
                          key="writeId")
    return write_id


def _validated(producer_raw: dict[str, Any], sample_id: str | None, guarantee: DeliveryGuarantee) -> ProducerConfig:
    """Parse with the producer's own config so every kafka.* error is found here, on the driver; for exactly_once
    also as a task's transactional producer (``sample_id``). The config without a transactional.id is returned."""
    config = _parsed(lambda: ProducerConfig.from_dict(producer_raw), guarantee, transactional=False)
    if sample_id is not None:
        _check_transactional(config)
        _parsed(lambda: config.with_overrides({"transactional.id": sample_id}), guarantee, transactional=True)
    return config


def _parsed(parse: Callable[[], ProducerConfig], guarantee: DeliveryGuarantee, *, transactional: bool
            ) -> ProducerConfig:
    try:
        return parse()
    except ConfigError as exc:
        raise _spark_named(exc, guarantee, transactional) from None
    except KafkaError as exc:  # a partitioner or interceptor class that does not import, for instance
        raise ConfigError(f"invalid kafka.* option: {exc}") from None


def _check_transactional(config: ProducerConfig) -> None:
    """exactly_once needs an idempotent producer: name the user's conflicting kafka.* options."""
    problems = [f"{_KAFKA_PREFIX}{conflict}" for conflict in config.idempotence_conflicts()]
    if problems:
        raise ConfigError("deliveryGuarantee=exactly_once writes in Kafka transactions, which need an idempotent "
                          f"producer; these options conflict: {', '.join(problems)}. Remove them, or use "
                          "deliveryGuarantee=at_least_once", key="deliveryGuarantee")


def _spark_named(exc: ConfigError, guarantee: DeliveryGuarantee, transactional: bool) -> ConfigError:
    """Rename the producer's Java keys to the Spark options the user wrote (``linger.ms`` -> ``kafka.linger.ms``);
    an error of the transactional producer, or about idempotence with exactly_once, names deliveryGuarantee."""
    text = str(exc).replace("did you mean '", "did you mean 'kafka.")
    key = exc.key
    if transactional or (guarantee is DeliveryGuarantee.EXACTLY_ONCE and key == "enable.idempotence"):
        text = (f"deliveryGuarantee={guarantee.value} writes in transactions, which need an idempotent producer: "
                f"{text}")
        return ConfigError(text, key="deliveryGuarantee")
    spark_key = f"kafka.{key}" if key and not key.startswith(_KAFKA_PREFIX) else key
    if spark_key and spark_key not in text:
        text = f"option {spark_key}: {text}"
    return ConfigError(text, key=spark_key)
