"""Invalid records (``onInvalidRecord=skip|deadLetter``): found before they are sent, then left out or written to the
dead-letter topic by the task's own producer -- with exactly_once in the task's transaction, so they become visible
exactly when the rest of the write does.

A record is invalid when its topic can never take it, which the task can tell before sending:

* too large even alone in a record batch: over the producer's max.request.size (or buffer.memory) or the topic's
  max.message.bytes (DescribeConfigs, :mod:`.topic_limits`);
* a null key on a compacted topic (cleanup.policy=compact), which the broker refuses (INVALID_RECORD).

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

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.producer.arrow_send import oversized_rows
from spark_kafka_sink.spark.options import InvalidRecordPolicy, SinkOptions
from spark_kafka_sink.spark.topic_limits import TopicLimits

__all__ = ["DeadLetterRouter", "Routed", "TooManyInvalidRecordsError", "too_many_text", "HEADER_PREFIX",
           "RECORD_TOO_LARGE", "NULL_KEY_ON_COMPACTED_TOPIC"]

#: Prefix of the context headers (Kafka Connect's are ``__connect.errors.*``).
HEADER_PREFIX = "__pykafka.errors."
#: The error names a dead letter's ``__pykafka.errors.exception.class.name`` header carries.
RECORD_TOO_LARGE = "RecordTooLargeError"
NULL_KEY_ON_COMPACTED_TOPIC = "InvalidRecordError"
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

    def __init__(self, options: SinkOptions, spark_partition: int, limits: TopicLimits | None = None) -> None:
        self._options = options
        self._spark_partition = spark_partition
        self._limits = limits if limits is not None else TopicLimits(options)
        self.invalid = 0  # invalid records of this task so far
        self._rows_seen = 0  # input rows of this task so far (the row numbers in the headers)

    def route(self, records: pa.RecordBatch) -> Routed:
        """``records`` as ``to_producer_batch`` made them (producer columns)."""
        first_row, n = self._rows_seen, records.num_rows
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
        self.invalid += len(reasons)
        settings = self._options.dead_letters
        if settings.max_invalid is not None and self.invalid > settings.max_invalid:
            raise TooManyInvalidRecordsError(too_many_text(
                self.invalid, settings.max_invalid, f"in Spark partition {self._spark_partition} alone"))
        bad = sorted(reasons)
        keep = np.ones(n, bool)
        keep[bad] = False
        valid = records.filter(pa.array(keep))
        if settings.policy is InvalidRecordPolicy.SKIP:
            return Routed(valid, None, len(bad))
        names_of = [names[codes[row]] for row in bad]
        return Routed(valid, self._dead_letters(records, bad, reasons, names_of, first_row), len(bad))

    def _dead_letters(self, records: pa.RecordBatch, bad: list[int], reasons: dict[int, tuple[str, str]],
                      topics: list[str], first_row: int) -> pa.Table:
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
                error, message = reasons[row]
                context = {"topic": topics[i], "spark.partition": str(self._spark_partition),
                           "spark.row": str(first_row + row), "exception.class.name": error,
                           "exception.message": message}
                if partitions[i] is not None:
                    context["partition"] = str(partitions[i])
                entries += [{"key": HEADER_PREFIX + k, "value": v.encode()} for k, v in context.items()]
            headers.append(entries)
        columns["headers"] = pa.array(headers, _HEADERS_TYPE)
        return pa.Table.from_pydict(columns)
