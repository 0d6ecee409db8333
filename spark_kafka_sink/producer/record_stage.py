"""``RecordStage``: one open per-record batch's records, held as columns until the batch is due, then built once.

``KafkaProducer.send`` appends a record to its partition's open batch; the batch keeps the record's fields in
plain lists (timestamps, keys, values, headers), its exact encoded size, and its encoding as pieces: the small
varints (length, timestampDelta, offsetDelta, key and value lengths) looked up in a table, beside the key's and
value's own bytes objects, nothing copied. Sizing a record needs the same varints, so making its pieces costs
little more than sizing it did. When the batch closes -- it is full, linger.ms passed, a flush or a transaction
commit wants it, the producer closes -- ``build`` joins the pieces once and ``BatchBuilder`` frames (and
compresses) them; a stage of many rows is encoded by the vectorized Arrow encoder
(:mod:`~spark_kafka_sink.protocol.arrow_encoder`) instead. Both give byte-identical batches, so the choice is
invisible on the wire.

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
_NULL = b"\x01"  # a null key's or value's length: -1, zigzag
_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


class RecordStage:
    """The columns of one batch's records, their encoded pieces and exact encoded size (see the module docstring)."""

    __slots__ = ("max_bytes", "_compression", "_level", "_transactional", "timestamps", "keys", "values",
                 "headers", "estimated_size", "base_timestamp", "max_timestamp", "_pieces", "_built")

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
        # Every staged record's encoding, in order, as the pieces joined at the build (layout: the record comment
        # in ``record_batch._format``): made while sizing each record, from the same varints.
        self._pieces: list[bytes] = []
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
        delta = timestamp_ms - self.base_timestamp
        if headers:
            record = encode_record(count, delta, key, value, headers)
            if count and self.estimated_size + len(record) > self.max_bytes:
                return False
            self.estimated_size += len(record)
            self._pieces.append(record)
        else:
            # attributes, timestampDelta, offsetDelta, key, value, headerCount (0), after the length; the small
            # varints looked up.
            zigzag = _ZIGZAG
            t = zigzag[delta] if 0 <= delta < _SMALL else write_varlong(delta)
            o = zigzag[count] if count < _SMALL else write_varint(count)
            if key is None:
                k, key_bytes = _NULL, b""
            else:
                key_bytes = key
                k = zigzag[len(key)] if len(key) < _SMALL else write_varint(len(key))
            if value is None:
                v, value_bytes = _NULL, b""
            else:
                value_bytes = value
                v = zigzag[len(value)] if len(value) < _SMALL else write_varint(len(value))
            body = 2 + len(t) + len(o) + len(k) + len(key_bytes) + len(v) + len(value_bytes)
            length = zigzag[body] if body < _SMALL else write_varint(body)
            size = len(length) + body
            if count and self.estimated_size + size > self.max_bytes:
                return False
            self.estimated_size += size
            self._pieces.extend((length, b"\x00", t, o, k, key_bytes, v, value_bytes, b"\x00"))
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
        extend = self._pieces.extend
        zigzag = _ZIGZAG
        count = len(staged_values)
        estimated, max_bytes = self.estimated_size, self.max_bytes
        base, latest = (self.base_timestamp, self.max_timestamp) if count else (timestamps[rows[0]],) * 2
        staged = run_bytes = 0
        refused = False
        for row in rows:
            timestamp_ms, key, value = timestamps[row], keys[row], values[row]
            # try_append's pieces, inline.
            delta = timestamp_ms - base
            t = zigzag[delta] if 0 <= delta < _SMALL else write_varlong(delta)
            o = zigzag[count] if count < _SMALL else write_varint(count)
            if key is None:
                k, key_bytes, key_len = _NULL, b"", 0
            else:
                key_bytes, key_len = key, len(key)
                k = zigzag[key_len] if key_len < _SMALL else write_varint(key_len)
            n = len(value)
            v = zigzag[n] if n < _SMALL else write_varint(n)
            body = 2 + len(t) + len(o) + len(k) + key_len + len(v) + n
            length = zigzag[body] if body < _SMALL else write_varint(body)
            size = len(length) + body
            if count and estimated + size > max_bytes:
                refused = True
                break
            estimated += size
            extend((length, b"\x00", t, o, k, key_bytes, v, value, b"\x00"))
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
            self.keys, self.values, self.headers, self._pieces = [], [], None, []
        return self._built

    def _joined(self) -> bytes:
        """The staged records' pieces joined (made as they were staged: see ``try_append``)."""
        return BatchBuilder.of_records(b"".join(self._pieces), len(self.timestamps), self.base_timestamp,
                                       self.max_timestamp, self._compression, transactional=self._transactional,
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
