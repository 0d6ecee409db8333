"""``RecordStage``: one open per-record batch's records, held as columns until the batch is due, then encoded once.

``KafkaProducer.send`` appends a record to its partition's open batch; the batch keeps the record's fields in
plain lists (timestamps, keys, values, headers) and its exact encoded size, and encodes nothing. When the batch
closes -- it is full, linger.ms passed, a flush or a transaction commit wants it, the producer closes -- ``build``
encodes every staged record at once: with the vectorized Arrow encoder
(:mod:`~spark_kafka_sink.protocol.arrow_encoder`) when the stage holds enough rows to amortise its fixed set-up,
else in one pass joining each record's pieces (its small varints looked up in a table) and assembled by
``BatchBuilder``. Both give byte-identical batches, so the choice is invisible on the
wire; the per-record caller pays only for list appends and a few integer comparisons.

Sizes are exact: a record's encoded size is computed from its field lengths and its two batch-relative fields
(offsetDelta, timestampDelta), so ``estimated_size`` and the full/not-full decision match ``BatchBuilder``'s.

Owned by one thread at a time: the accumulator appends under the partition's lock, and ``build`` runs under the
batch's lock after the last append.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.protocol.arrow_encoder import encode_arrow_batches
from spark_kafka_sink.protocol.compression import codec_id
from spark_kafka_sink.protocol.primitives import write_varint, write_varlong
from spark_kafka_sink.protocol.record_batch import (
    HEADER_SIZE,
    RECORD_OVERHEAD_BOUND,
    BatchBuilder,
    Header,
    encode_record,
    record_size,
)

__all__ = ["RecordStage", "VECTORIZED_MIN_ROWS", "RECORD_BOUND"]

#: From this many staged records on, ``build`` uses the vectorized encoder: below it, its fixed cost per call
#: (numpy and Arrow set-up) exceeds what encoding the records one by one costs.
VECTORIZED_MIN_ROWS = 2048

#: A headerless record's bound beyond its key and value bytes, as ``KafkaProducer.send`` counts it for the sticky
#: partitioner: a batch header and the record's overhead bound.
RECORD_BOUND = HEADER_SIZE + RECORD_OVERHEAD_BOUND

# Every staged record fitted the stage's own limit: encode them as one batch, whatever that limit was.
_ONE_BATCH = 1 << 40
# The zigzag varint bytes of 0 .. _SMALL - 1 (one or two bytes each): what most offsetDeltas, timestampDeltas,
# lengths and record sizes are, looked up rather than encoded per record.
_SMALL = 8192
_ZIGZAG = [write_varint(n) for n in range(_SMALL)]
_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _signed_varint_size(v: int) -> int:
    z = v << 1 if v >= 0 else ~(v << 1)
    if z < 0x80:
        return 1
    if z < 0x4000:
        return 2
    return (z.bit_length() + 6) // 7


class RecordStage:
    """The columns of one batch's records and their exact encoded size (see the module docstring)."""

    __slots__ = ("max_bytes", "_compression", "_level", "_transactional", "timestamps", "keys", "values",
                 "headers", "estimated_size", "base_timestamp", "max_timestamp", "_built")

    def __init__(self, max_bytes: int, compression: int | str, *, transactional: bool = False,
                 compression_level: int | None = None) -> None:
        self.max_bytes = max_bytes  # header + uncompressed records at most (a first larger record still fits)
        self._compression = codec_id(compression)
        self._level = compression_level
        self._transactional = transactional
        self.timestamps: list[int] = []
        self.keys: list[bytes | None] = []
        self.values: list[bytes | None] = []
        # Per record its headers; None until a record has some (then earlier records get empty tuples).
        self.headers: list[Sequence[Header]] | None = None
        self.estimated_size = HEADER_SIZE  # header + the exact size of every staged record
        self.base_timestamp = 0
        self.max_timestamp = 0
        self._built: bytes | None = None

    @property
    def record_count(self) -> int:
        return len(self.timestamps)  # (kept past the build, which releases the other columns)

    def try_append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[Header]) -> bool:
        """Stage one record; False (nothing staged) if it would take the batch past ``max_bytes``. The first
        record always fits."""
        if self._built is not None:
            raise IllegalStateError("append to a record batch that was already built")
        count = len(self.values)
        if count == 0:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        if headers:
            size = record_size(count, timestamp_ms - self.base_timestamp, key, value, headers)
        else:
            # attributes, timestampDelta, offsetDelta, key, value, headerCount (0: one byte), then the length.
            # Small fields inline (zigzag varints: one byte below 64, two below 8192), the rest by the helpers.
            delta = timestamp_ms - self.base_timestamp
            body = (2 + (1 if 0 <= delta < 64 else _signed_varint_size(delta))
                    + (1 if count < 64 else 2 if count < 8192 else _signed_varint_size(count)))
            if key is not None:
                n = len(key)
                body += n + (1 if n < 64 else 2 if n < 8192 else _signed_varint_size(n))
            else:
                body += 1
            if value is not None:
                n = len(value)
                body += n + (1 if n < 64 else 2 if n < 8192 else _signed_varint_size(n))
            else:
                body += 1
            size = body + (1 if body < 64 else 2 if body < 8192 else _signed_varint_size(body))
        if count and self.estimated_size + size > self.max_bytes:
            return False
        self.estimated_size += size
        self.timestamps.append(timestamp_ms)
        self.keys.append(key)
        self.values.append(value)
        if headers or self.headers is not None:
            if self.headers is None:
                self.headers = [()] * count
            self.headers.append(headers)
        if timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        return True

    def append_run(self, rows: Sequence[int], timestamps: Sequence[int], keys: Sequence[bytes | None],
                   values: Sequence[bytes], soft_budget: int, hard_budget: int, queued_behind: bool
                   ) -> tuple[int, int, bool]:
        """Stage ``rows`` (indexes into the three columns; headerless records) in order, as ``try_append`` each,
        stopping after the record whose bound bytes (``RECORD_BOUND``'s, the sticky partitioner's measure) bring
        the run's total to ``hard_budget``, or to ``soft_budget`` once the batch is full (``queued_behind``: a
        batch waits ahead of this one, which counts as full). Returns (records staged, their bound bytes, whether
        the next row was refused for lack of room)."""
        if self._built is not None:
            raise IllegalStateError("append to a record batch that was already built")
        stamps, staged_keys, staged_values, headers = self.timestamps, self.keys, self.values, self.headers
        count = len(staged_values)
        estimated, max_bytes = self.estimated_size, self.max_bytes
        base, latest = (self.base_timestamp, self.max_timestamp) if count else (timestamps[rows[0]],) * 2
        staged = run_bytes = 0
        refused = False
        for row in rows:
            timestamp_ms, key, value = timestamps[row], keys[row], values[row]
            # try_append's size, inline: attributes, timestampDelta, offsetDelta, key, value, no headers.
            delta = timestamp_ms - base
            body = (2 + (1 if 0 <= delta < 64 else _signed_varint_size(delta))
                    + (1 if count < 64 else 2 if count < 8192 else _signed_varint_size(count)))
            key_len = 0
            if key is not None:
                key_len = len(key)
                body += key_len + (1 if key_len < 64 else 2 if key_len < 8192 else _signed_varint_size(key_len))
            else:
                body += 1
            n = len(value)
            body += n + (1 if n < 64 else 2 if n < 8192 else _signed_varint_size(n))
            size = body + (1 if body < 64 else 2 if body < 8192 else _signed_varint_size(body))
            if count and estimated + size > max_bytes:
                refused = True
                break
            estimated += size
            stamps.append(timestamp_ms)
            staged_keys.append(key)
            staged_values.append(value)
            if headers is not None:
                headers.append(())
            if timestamp_ms > latest:
                latest = timestamp_ms
            count += 1
            staged += 1
            run_bytes += RECORD_BOUND + n + key_len
            if run_bytes >= hard_budget or (run_bytes >= soft_budget and (queued_behind or estimated >= max_bytes)):
                break
        self.estimated_size = estimated
        self.base_timestamp, self.max_timestamp = base, latest
        return staged, run_bytes, refused

    def is_full(self) -> bool:
        return self.estimated_size >= self.max_bytes

    def build(self) -> bytes:
        """The complete batch (producer id/epoch/sequence -1, stamped at drain). Idempotent; releases the columns."""
        if self._built is None:
            count = len(self.values)
            if not count:
                raise IllegalStateError("build an empty record batch")
            self._built = self._vectorized() if count >= VECTORIZED_MIN_ROWS else self._joined()
            self.keys, self.values, self.headers = [], [], None
        return self._built

    def _joined(self) -> bytes:
        """The records' bytes joined in one pass (layout: the record comment in ``record_batch._format``)."""
        zigzag, small = _ZIGZAG, _SMALL
        base, headers = self.base_timestamp, self.headers
        parts: list[bytes] = []
        extend = parts.extend
        for i, (ts, key, value) in enumerate(zip(self.timestamps, self.keys, self.values, strict=True)):
            if headers is not None and headers[i]:
                parts.append(encode_record(i, ts - base, key, value, headers[i]))
                continue
            delta = ts - base
            t = zigzag[delta] if 0 <= delta < small else write_varlong(delta)
            o = zigzag[i] if i < small else write_varint(i)
            if key is None:
                k, key = b"\x01", b""  # length -1: null
            else:
                k = zigzag[len(key)] if len(key) < small else write_varint(len(key))
            if value is None:
                v, value = b"\x01", b""
            else:
                v = zigzag[len(value)] if len(value) < small else write_varint(len(value))
            body = 2 + len(t) + len(o) + len(k) + len(key) + len(v) + len(value)  # + attributes, headerCount
            extend((zigzag[body] if body < small else write_varint(body), b"\x00", t, o, k, key, v, value, b"\x00"))
        return BatchBuilder.of_records(b"".join(parts), len(self.timestamps), base, self.max_timestamp,
                                       self._compression, transactional=self._transactional,
                                       compression_level=self._level).build()

    def _vectorized(self) -> bytes:
        headers = None
        if self.headers is not None:
            headers = pa.array([[{"key": k, "value": v} for k, v in row] for row in self.headers], _HEADERS_TYPE)
        (encoded,) = encode_arrow_batches(
            pa.array(self.values, pa.binary()), key=pa.array(self.keys, pa.binary()),
            timestamp_ms=np.array(self.timestamps, np.int64), headers=headers,
            max_batch_bytes=_ONE_BATCH, compression=self._compression,
            transactional=self._transactional, compression_level=self._level)
        return encoded.data
