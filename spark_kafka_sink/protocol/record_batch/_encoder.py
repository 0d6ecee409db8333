"""RecordBatch v2 encoding: one record, a whole batch, many batches at once (``assemble_batches``: headers as
one numpy array), or record by record with ``BatchBuilder``. Pure.

Producer id / epoch / sequence are written as -1 here; ``with_producer_state`` sets them at drain time.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import crc32c
import numpy as np
import numpy.typing as npt

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.protocol.compression import Codec, codec_id, compress
from spark_kafka_sink.protocol.primitives import varint_size, varlong_size, write_varint, write_varlong
from spark_kafka_sink.protocol.record_batch._format import (
    ATTR_TRANSACTIONAL,
    CRC_START,
    CRC_STRUCT,
    FIELD_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    MAGIC,
    Header,
    check_batch_frame,
)

__all__ = [
    "Record",
    "BatchBuilder",
    "encode_batch",
    "encode_record",
    "record_size",
    "assemble_batch",
    "assemble_batches",
    "with_crc",
    "crc_header",
]

# The header layout as a numpy record type, derived from HEADER_STRUCT and FIELD_OFFSET (declared in _format):
# assemble_batches fills every batch's header with a few column writes.
_NUMPY_CODE = {"q": ">i8", "i": ">i4", "I": ">u4", "h": ">i2", "b": "i1"}
_HEADER_DTYPE = np.dtype({
    "names": list(FIELD_OFFSET),
    "formats": [_NUMPY_CODE[code] for code in HEADER_STRUCT.format.lstrip(">")],
    "offsets": list(FIELD_OFFSET.values()),
    "itemsize": HEADER_SIZE,
})


@dataclass(frozen=True, slots=True)
class Record:
    """One record to encode. Header values may be None; header keys are str (sent as UTF-8)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: Sequence[Header] = ()


def _length_prefixed(data: bytes | None) -> bytes:
    return b"\x01" if data is None else write_varint(len(data)) + data  # 0x01 = zigzag(-1)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> bytes:
    """One record, length prefix included (layout: the record comment in ``_format``)."""
    parts = [b"\x00", write_varlong(timestamp_delta), write_varint(offset_delta)]
    parts.append(_length_prefixed(key))
    parts.append(_length_prefixed(value))
    parts.append(write_varint(len(headers)))
    for h_key, h_value in headers:
        parts.append(_length_prefixed(h_key.encode("utf-8")))
        parts.append(_length_prefixed(h_value))
    body = b"".join(parts)
    return write_varint(len(body)) + body


def _field_size(n: int | None) -> int:
    return 1 if n is None else varint_size(n) + n


#: A record's bytes besides its key, value and header payloads, at most, wherever it lands in a batch: every varint
#: at its widest -- length 5, attributes 1, timestampDelta 10, offsetDelta 5, keyLength 5, valueLength 5,
#: headerCount 5.
RECORD_OVERHEAD_BOUND = 36
#: One header's bytes besides its key and value, at most: their two length varints.
HEADER_OVERHEAD_BOUND = 10
_Size = TypeVar("_Size", int, npt.NDArray[np.int64])


def record_size_bound(key_bytes: _Size, value_bytes: _Size, header_bytes: _Size | int = 0,
                      header_count: _Size | int = 0) -> _Size:
    """An upper bound of ``record_size`` from the payload sizes alone (a null key or value counts 0 bytes), for
    one record (ints) or many (numpy arrays, element-wise): what ``KafkaProducer.send`` and ``send_batch`` both
    compare with the size limits before measuring a record near them exactly, so both take or refuse the same
    record, and what their sticky partitioning counts."""
    return key_bytes + value_bytes + header_bytes + HEADER_OVERHEAD_BOUND * header_count + RECORD_OVERHEAD_BOUND


def record_size(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> int:
    """``len(encode_record(...))`` without building it."""
    body = 1 + varlong_size(timestamp_delta) + varint_size(offset_delta)
    body += _field_size(None if key is None else len(key)) + _field_size(None if value is None else len(value))
    body += varint_size(len(headers))
    for h_key, h_value in headers:
        body += _field_size(len(h_key.encode("utf-8"))) + _field_size(None if h_value is None else len(h_value))
    return varint_size(body) + body


def _attributes(compression: int, transactional: bool) -> int:
    return int(codec_id(compression)) | (ATTR_TRANSACTIONAL if transactional else 0)


def assemble_batch(
    records_section: bytes | bytearray | memoryview,
    record_count: int,
    base_timestamp: int,
    max_timestamp: int,
    *,
    compression: int | str = Codec.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    base_offset: int = 0,
    compression_level: int | None = None,
) -> bytes:
    """Header + (compressed) already-encoded records -> one complete batch with its CRC.
    ``compression_level``: the codec's level (None: the codec's default, see ``compression.compress``)."""
    if record_count < 1:
        raise ValueError("a record batch holds at least one record")
    codec = codec_id(compression)
    payload = records_section if codec is Codec.NONE else compress(codec, records_section, compression_level)
    header = bytearray(HEADER_SIZE)
    HEADER_STRUCT.pack_into(
        header,
        0,
        base_offset,
        HEADER_SIZE - LOG_OVERHEAD + len(payload),
        -1,  # partitionLeaderEpoch
        MAGIC,
        0,  # crc, filled in below
        _attributes(codec, transactional),
        record_count - 1,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        record_count,
    )
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[CRC_START:]))
    CRC_STRUCT.pack_into(header, FIELD_OFFSET["crc"], crc)
    return b"".join((header, payload))


def assemble_batches(
    records_sections: bytes | bytearray | memoryview,
    section_ends: npt.ArrayLike,
    record_counts: npt.ArrayLike,
    base_timestamps: npt.ArrayLike,
    max_timestamps: npt.ArrayLike,
    *,
    compression: int | str = Codec.NONE,
    transactional: bool = False,
    compression_level: int | None = None,
    checksum: bool = True,
) -> list[bytes]:
    """``assemble_batch`` for many batches whose records sections lie back to back in ``records_sections``
    (batch i's ends at ``section_ends[i]``), byte for byte, producer id / epoch / sequence -1.

    The headers are one numpy array filled column by column; each batch then costs one loop step: its compress
    call (with a codec), its CRC and one copy (header + payload into the returned bytes). ``checksum=False``
    leaves the CRC 0, for a caller that rewrites the header before sending anyway (``with_producer_state``
    computes it then): one pass over the bytes less."""
    ends = np.asarray(section_ends, np.int64)
    counts = np.asarray(record_counts, np.int64)
    if len(counts) and int(counts.min()) < 1:
        raise ValueError("a record batch holds at least one record")
    codec = codec_id(compression)
    headers = np.zeros(len(ends), _HEADER_DTYPE)
    headers["partition_leader_epoch"] = -1
    headers["magic"] = MAGIC
    headers["attributes"] = _attributes(codec, transactional)
    headers["last_offset_delta"] = counts - 1
    headers["base_timestamp"] = base_timestamps
    headers["max_timestamp"] = max_timestamps
    headers["producer_id"] = -1
    headers["producer_epoch"] = -1
    headers["base_sequence"] = -1
    headers["records_count"] = counts
    view = memoryview(records_sections).cast("B")
    bounds = [0, *ends.tolist()]
    sections = [view[lo:hi] for lo, hi in zip(bounds, bounds[1:], strict=False)]
    payloads: Sequence[bytes | memoryview] = (
        sections if codec is Codec.NONE else [compress(codec, s, compression_level) for s in sections])
    headers["batch_length"] = np.fromiter(map(len, payloads), np.int64, len(payloads)) + (HEADER_SIZE - LOG_OVERHEAD)
    raw = headers.view(np.uint8).data  # the headers' bytes, one after the other
    size = HEADER_SIZE
    if checksum:
        headers["crc"] = [crc32c.crc32c(p, crc32c.crc32c(raw[i * size + CRC_START:(i + 1) * size]))
                          for i, p in enumerate(payloads)]
    return [b"".join((raw[i * size:(i + 1) * size], p)) for i, p in enumerate(payloads)]


def crc_header(batch: bytes | bytearray | memoryview) -> bytes:
    """The 61-byte header of a built batch with its CRC computed (for batches assembled with ``checksum=False``).
    Sending it followed by ``memoryview(batch)[HEADER_SIZE:]`` avoids copying the records."""
    check_batch_frame(batch)
    view = memoryview(batch)
    header = bytearray(view[:HEADER_SIZE])
    CRC_STRUCT.pack_into(header, FIELD_OFFSET["crc"],
                         crc32c.crc32c(view[HEADER_SIZE:], crc32c.crc32c(memoryview(header)[CRC_START:])))
    return bytes(header)


def with_crc(batch: bytes | bytearray | memoryview) -> bytes:
    """A copy of a built batch with its CRC computed (for batches assembled with ``checksum=False``)."""
    return b"".join((crc_header(batch), memoryview(batch)[HEADER_SIZE:]))


def encode_batch(
    records: Iterable[Record],
    *,
    compression: int | str = Codec.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    transactional: bool = False,
    base_offset: int = 0,
    compression_level: int | None = None,
) -> bytes:
    """The reference encoder: one batch holding ``records`` in order (at least one)."""
    records = list(records)
    if not records:
        raise ValueError("a record batch holds at least one record")
    base_ts = records[0].timestamp_ms
    section = b"".join(
        encode_record(i, r.timestamp_ms - base_ts, r.key, r.value, r.headers) for i, r in enumerate(records)
    )
    return assemble_batch(
        section,
        len(records),
        base_ts,
        max(r.timestamp_ms for r in records),
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        transactional=transactional,
        base_offset=base_offset,
        compression_level=compression_level,
    )


class BatchBuilder:
    """Appends records one by one into a batch of at most ``max_bytes`` (uncompressed), then builds it once.

    Owned by one thread at a time (the caller's lock, e.g. the accumulator's, guards it)."""

    __slots__ = ("_max_bytes", "_compression", "_level", "_transactional", "_section", "_size", "_count",
                 "_base_ts", "_max_ts", "_built")

    def __init__(self, max_bytes: int, compression: int | str = Codec.NONE, *, transactional: bool = False,
                 compression_level: int | None = None) -> None:
        self._max_bytes = max_bytes
        self._compression = codec_id(compression)
        self._level = compression_level
        self._transactional = transactional
        self._section: bytearray | bytes = bytearray()
        self._size = HEADER_SIZE  # stays valid after build() releases the section
        self._count = 0
        self._base_ts = 0
        self._max_ts = 0
        self._built: bytes | None = None

    @classmethod
    def of_records(cls, section: bytes, record_count: int, base_timestamp: int, max_timestamp: int,
                   compression: int | str = Codec.NONE, *, transactional: bool = False,
                   compression_level: int | None = None) -> BatchBuilder:
        """A builder already holding ``record_count`` records encoded back to back in ``section`` (offsetDeltas
        from 0, timestampDeltas from ``base_timestamp``), e.g. joined by a caller in one pass: ``build()`` next.
        It is full: its limit is what it holds."""
        builder = cls(HEADER_SIZE + len(section), compression, transactional=transactional,
                      compression_level=compression_level)
        builder._section = section
        builder._size += len(section)
        builder._count = record_count
        builder._base_ts, builder._max_ts = base_timestamp, max_timestamp
        return builder

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Header + uncompressed records so far: an upper bound of the built batch's size."""
        return self._size

    @property
    def max_bytes(self) -> int:
        """The most header + uncompressed records bytes it takes (a first larger record still fits)."""
        return self._max_bytes

    @property
    def base_timestamp(self) -> int:
        return self._base_ts

    @property
    def max_timestamp(self) -> int:
        return self._max_ts

    def try_append(
        self, timestamp_ms: int, key: bytes | None, value: bytes | None, headers: Sequence[Header] = ()
    ) -> bool:
        """Append one record; False (and nothing appended) if it would pass max_bytes. The first always fits."""
        if self._built is not None:
            raise IllegalStateError("append to a record batch that was already built")
        if self._count == 0:
            self._base_ts = self._max_ts = timestamp_ms
        record = encode_record(self._count, timestamp_ms - self._base_ts, key, value, headers)
        if self._count and self.estimated_size + len(record) > self._max_bytes:
            return False
        self._section += record
        self._size += len(record)
        self._count += 1
        self._max_ts = max(self._max_ts, timestamp_ms)
        return True

    def build(self) -> bytes:
        """The complete batch (producer id/epoch/sequence -1: see ``with_producer_state``). Idempotent."""
        if self._built is None:
            if not self._count:
                raise IllegalStateError("build an empty record batch")
            self._built = assemble_batch(
                self._section,
                self._count,
                self._base_ts,
                self._max_ts,
                compression=self._compression,
                transactional=self._transactional,
                compression_level=self._level,
            )
            self._section = bytearray()
        return self._built
