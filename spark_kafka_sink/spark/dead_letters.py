"""Invalid records (``onInvalidRecord=skip|deadLetter``): found before they are sent, then left out or written to the
dead-letter topic by the task's own producer -- with exactly_once in the task's transaction, so they become visible
exactly when the rest of the write does.

A record is invalid when its topic can never take it, which the task can tell before sending:

* too large even alone in a record batch: over the producer's max.request.size (or buffer.memory) or the topic's
  max.message.bytes (DescribeConfigs, :mod:`.topic_limits`);
* a null key on a compacted topic (cleanup.policy=compact), which the broker refuses (INVALID_RECORD);
* a row the key's or value's serializer refuses (a row a given Avro schema cannot hold): found by encoding halves of
  the batch again until the refused rows are alone, so rows that encode cost one call per half; its dead letter
  carries the key and value as JSON, since it has no record bytes.

Found before sending because a broker refusal inside a transaction leaves the whole transaction abortable. A refusal
only the broker can make (a broker-side policy, KIP-467 record errors) still fails the task in every mode: the
broker refuses the whole batch, so there is no single record to route.

Finding them is vectorized (sizes from the column offsets, null masks); per-row Python runs only for the rows found
invalid (their context headers), and for rows whose size bound comes near a limit (measured exactly).

Dead letters keep the record's key, value (as it would have been written: Avro framed when valueFormat=avro),
timestamp and headers; with ``deadLetterContextHeaders`` (the default) headers naming the error follow, as Kafka
Connect's ``errors.deadletterqueue.context.headers.enable``, under :data:`HEADER_PREFIX`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.errors import KafkaError, SerializationError
from spark_kafka_sink.producer.arrow_send import oversized_rows
from spark_kafka_sink.spark.options import InvalidRecordPolicy, SinkOptions
from spark_kafka_sink.spark.topic_limits import TopicLimits, TopicLimitSource

__all__ = ["DeadLetterRouter", "Routed", "TooManyInvalidRecordsError", "too_many_text", "HEADER_PREFIX",
           "RECORD_TOO_LARGE", "NULL_KEY_ON_COMPACTED_TOPIC", "UNENCODABLE"]

#: Prefix of the context headers (Kafka Connect's are ``__connect.errors.*``).
HEADER_PREFIX = "__pykafka.errors."
#: The error names a dead letter's ``__pykafka.errors.exception.class.name`` header carries.
RECORD_TOO_LARGE = "RecordTooLargeError"
NULL_KEY_ON_COMPACTED_TOPIC = "InvalidRecordError"
UNENCODABLE = "SerializationError"  # a row the key's or value's schema (keyFormat/valueFormat=avro) cannot hold
_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class TooManyInvalidRecordsError(KafkaError):
    """More records were invalid than maxInvalidRecords allows: the write fails (exactly_once: nothing visible)."""


def too_many_text(count: int, limit: int, where: str) -> str:
    return (f"{count} invalid records {where}, more than maxInvalidRecords={limit}: the write fails (with "
            "exactly_once none of it becomes visible). Fix the input, or raise maxInvalidRecords")


@dataclass(frozen=True)
class Routed:
    """One input batch split: the rows to write, and the dead letters (None when there are none, or with skip)."""

    valid: pa.RecordBatch
    dead: pa.Table | None
    invalid: int  # rows left out of ``valid``


class DeadLetterRouter:
    """One task's invalid records: finds them in each producer input batch, counts them. Task thread only."""

    def __init__(self, options: SinkOptions, spark_partition: int, limits: TopicLimitSource | None = None) -> None:
        self._options = options
        self._spark_partition = spark_partition
        self._limits: TopicLimitSource = limits if limits is not None else TopicLimits(options)
        self.invalid = 0  # invalid records of this task so far
        self._rows_seen = 0  # input rows of this task so far (the row numbers in the headers)

    def encode(self, batch: pa.RecordBatch, to_records: Callable[[pa.RecordBatch], pa.RecordBatch]) -> Routed:
        """One input batch made into producer records (``to_records``: ``to_producer_batch``), its invalid rows
        taken out: rows the key's or value's serializer refuses (a row a given Avro schema cannot hold), then
        :meth:`route`'s."""
        try:
            return self.route(to_records(batch))
        except SerializationError:
            pass  # a row the schema cannot hold: find which (below), then the rest goes on as usual
        first_row = self._rows_seen
        bad = self._unencodable(batch, to_records, 0)
        keep = np.ones(batch.num_rows, bool)
        keep[sorted(bad)] = False
        self._count(len(bad))
        self._rows_seen += batch.num_rows
        rest = self.route(to_records(batch.filter(pa.array(keep))), first_row + np.flatnonzero(keep))
        if self._options.dead_letters.policy is InvalidRecordPolicy.SKIP:
            return Routed(rest.valid, None, rest.invalid + len(bad))
        letters = self._unencoded_letters(batch, bad, first_row)
        dead = letters if rest.dead is None else pa.concat_tables([rest.dead, letters], promote_options="permissive")
        return Routed(rest.valid, dead, rest.invalid + len(bad))

    def _unencodable(self, batch: pa.RecordBatch, to_records: Callable[[pa.RecordBatch], pa.RecordBatch],
                     offset: int) -> dict[int, str]:
        """The rows of ``batch`` (numbered from ``offset``) the serializers refuse, with the error: halves that
        encode are done with in one call each, so only the refused rows cost a call per halving."""
        try:
            to_records(batch)
            return {}
        except SerializationError as exc:
            if batch.num_rows == 1:
                return {offset: str(exc).replace(", row 0:", ":")}
        half = batch.num_rows // 2
        return {**self._unencodable(batch.slice(0, half), to_records, offset),
                **self._unencodable(batch.slice(half), to_records, offset + half)}

    def _unencoded_letters(self, batch: pa.RecordBatch, bad: dict[int, str], first_row: int) -> pa.Table:
        """Dead letters of rows that have no record bytes: their key and value as JSON (strings and bytes as they
        are), the error in the headers."""
        rows = batch.take(pa.array(sorted(bad), pa.int64())).to_pylist()
        columns: dict[str, list[bytes | None]] = {"value": [_json_bytes(r.get("value")) for r in rows]}
        if "key" in batch.schema.names:
            columns["key"] = [_json_bytes(r.get("key")) for r in rows]
        table = pa.Table.from_pydict(columns, pa.schema([(name, pa.binary()) for name in columns]))
        topic = self._options.topic
        headers = []
        for row, values in zip(sorted(bad), rows, strict=True):
            entries = [{"key": e["key"], "value": e["value"]} for e in values.get("headers") or []]
            if self._options.dead_letters.context_headers:
                entries += self._context(topic if topic is not None else str(values.get("topic")),
                                         values.get("partition"), first_row + row, UNENCODABLE, bad[row])
            headers.append(entries)
        return table.append_column("headers", pa.array(headers, _HEADERS_TYPE))

    def _context(self, topic: str, partition: object, row: int, error: str, message: str) -> list[dict[str, object]]:
        context = {"topic": topic, "spark.partition": str(self._spark_partition), "spark.row": str(row),
                   "exception.class.name": error, "exception.message": message}
        if partition is not None:
            context["partition"] = str(partition)
        return [{"key": HEADER_PREFIX + k, "value": v.encode()} for k, v in context.items()]

    def _count(self, invalid: int) -> None:
        self.invalid += invalid
        settings = self._options.dead_letters
        if settings.max_invalid is not None and self.invalid > settings.max_invalid:
            raise TooManyInvalidRecordsError(too_many_text(
                self.invalid, settings.max_invalid, f"in Spark partition {self._spark_partition} alone"))

    def route(self, records: pa.RecordBatch, numbers: npt.NDArray[np.int64] | None = None) -> Routed:
        """``records`` as ``to_producer_batch`` made them (producer columns); ``numbers``: each one's row number in
        the task's input (None: the rows that follow the last batch's)."""
        n = records.num_rows
        if numbers is None:
            numbers = np.arange(self._rows_seen, self._rows_seen + n, dtype=np.int64)
            self._rows_seen += n
        topic_option = self._options.topic
        if topic_option is not None:
            names, codes = [topic_option], np.zeros(n, np.intp)
        else:
            encoded = pc.dictionary_encode(records.column("topic").cast(pa.string()))
            names, codes = encoded.dictionary.to_pylist(), np.asarray(encoded.indices).astype(np.intp)
        limits = self._limits.of(names)
        batch_limit = np.array([min(self._options.max_record_batch, limits[t].max_message_bytes) for t in names],
                               np.int64)
        reasons: dict[int, tuple[str, str]] = {}
        compacted = np.array([limits[t].compacted for t in names], bool)[codes]
        if compacted.any():
            key = records.column("key") if "key" in records.schema.names else None
            null_key = np.ones(n, bool) if key is None else np.asarray(key.is_null())
            for row in np.flatnonzero(compacted & null_key).tolist():
                reasons[row] = (NULL_KEY_ON_COMPACTED_TOPIC,
                                f"topic {names[codes[row]]!r} is compacted (cleanup.policy=compact) and refuses "
                                "records without a key")
        for row in oversized_rows(records, topic_option, batch_limit[codes]).tolist():
            limit = int(batch_limit[codes[row]])
            which = ("max.request.size" if limit == self._options.max_record_batch
                     else f"the max.message.bytes of topic {names[codes[row]]!r}")
            reasons[row] = (RECORD_TOO_LARGE, f"the record is larger than {which} ({limit} bytes with its record "
                                              "batch header)")
        if not reasons:
            return Routed(records, None, 0)
        self._count(len(reasons))
        settings = self._options.dead_letters
        bad = sorted(reasons)
        keep = np.ones(n, bool)
        keep[bad] = False
        valid = records.filter(pa.array(keep))
        if settings.policy is InvalidRecordPolicy.SKIP:
            return Routed(valid, None, len(bad))
        names_of = [names[codes[row]] for row in bad]
        return Routed(valid, self._dead_letters(records, bad, reasons, names_of, numbers), len(bad))

    def _dead_letters(self, records: pa.RecordBatch, bad: list[int], reasons: dict[int, tuple[str, str]],
                      topics: list[str], numbers: npt.NDArray[np.int64]) -> pa.Table:
        rows = records.take(pa.array(bad, pa.int64()))
        columns: dict[str, pa.Array] = {"value": rows.column("value")}
        for name in ("key", "timestamp"):
            if name in rows.schema.names:
                columns[name] = rows.column(name)
        own = (rows.column("headers").to_pylist() if "headers" in rows.schema.names else [None] * len(bad))
        partitions = (rows.column("partition").to_pylist() if "partition" in rows.schema.names
                      else [None] * len(bad))
        headers = []
        for i, row in enumerate(bad):
            entries = [{"key": e["key"], "value": e["value"]} for e in own[i] or []]
            if self._options.dead_letters.context_headers:
                entries += self._context(topics[i], partitions[i], int(numbers[row]), *reasons[row])
            headers.append(entries)
        columns["headers"] = pa.array(headers, _HEADERS_TYPE)
        return pa.Table.from_pydict(columns)


def _json_bytes(value: object) -> bytes | None:
    """A key or value the serializer refused, as bytes: strings and bytes as they are, anything else as JSON."""
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value, default=str, sort_keys=True).encode()
