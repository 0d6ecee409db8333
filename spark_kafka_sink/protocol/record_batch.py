"""RecordBatch v2 (magic 2): encode, incremental build, producer-state rewrite, decode. Pure.

    encode_batch(records, *, compression, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 transactional=False, base_offset=0) -> bytes        # the reference encoder, one record at a time
    BatchBuilder(max_bytes, compression, ...)                         # .try_append(...) -> bool, .build() -> bytes
    assemble_batch(records_section, record_count, base_timestamp, max_timestamp, *, compression, ...) -> bytes
    with_producer_state(batch, producer_id, producer_epoch, base_sequence, transactional) -> bytes
    producer_state_header(batch, ...same...) -> bytes    # just the new 61-byte header, for zero-copy sends
    decode_batches(data, *, allow_truncated_tail=True) -> list[DecodedBatch]
    decode_batch(data) -> DecodedBatch                                # exactly one batch, nothing after it

Sizes (``max_bytes``, ``estimated_size``) count the uncompressed records, as an upper bound of what is sent.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import crc32c

from spark_kafka_sink.errors import IllegalStateError, ProtocolError
from spark_kafka_sink.protocol.compression import Codec, codec_id, compress, decompress
from spark_kafka_sink.protocol.primitives import Reader, varint_size, varlong_size, write_varint, write_varlong

__all__ = [
    "HEADER_SIZE",
    "ATTR_COMPRESSION_MASK",
    "ATTR_LOG_APPEND_TIME",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "Header",
    "Record",
    "DecodedRecord",
    "DecodedBatch",
    "BatchBuilder",
    "encode_batch",
    "encode_record",
    "record_size",
    "assemble_batch",
    "with_producer_state",
    "producer_state_header",
    "decode_batches",
    "decode_batch",
]

Header = tuple[str, bytes | None]

# RecordBatch v2 header, big-endian. Declared once: the struct and every field offset derive from this table.
_HEADER_FIELDS: tuple[tuple[str, str], ...] = (
    ("base_offset", "q"),  # baseOffset int64: 0 from a producer; the broker assigns offsets
    ("batch_length", "i"),  # batchLength int32: bytes after this field = total size - 12
    ("partition_leader_epoch", "i"),  # partitionLeaderEpoch int32: -1 from a producer
    ("magic", "b"),  # magic int8: 2
    ("crc", "I"),  # crc uint32: CRC-32C of everything from attributes to the end of the batch
    ("attributes", "h"),  # attributes int16: codec bits 0-2, 0x08 log-append time, 0x10 txn, 0x20 control
    ("last_offset_delta", "i"),  # lastOffsetDelta int32: record count - 1
    ("base_timestamp", "q"),  # baseTimestamp int64: the first record's timestamp
    ("max_timestamp", "q"),  # maxTimestamp int64: the largest record timestamp
    ("producer_id", "q"),  # producerId int64: -1 without idempotence
    ("producer_epoch", "h"),  # producerEpoch int16: -1 without idempotence
    ("base_sequence", "i"),  # baseSequence int32: -1 without idempotence
    ("records_count", "i"),  # recordsCount int32
)  # then the records, compressed as one block when a codec is set (the header itself stays plain)
_HEADER = struct.Struct(">" + "".join(fmt for _, fmt in _HEADER_FIELDS))
_OFFSET = {
    name: struct.calcsize(">" + "".join(fmt for _, fmt in _HEADER_FIELDS[:i]))
    for i, (name, _) in enumerate(_HEADER_FIELDS)
}
HEADER_SIZE = _HEADER.size  # 61
_LOG_OVERHEAD = _OFFSET["partition_leader_epoch"]  # 12: baseOffset + batchLength, not counted in batchLength
_CRC_START = _OFFSET["attributes"]  # 21: the CRC covers attributes..end
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_STATE = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence: adjacent in the header
_MAGIC = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# One record (all varints zigzag, Kafka's ByteUtils):
#   length         varint   bytes of the record after this field
#   attributes     int8     0 (unused)
#   timestampDelta varlong  timestamp - baseTimestamp (may be negative)
#   offsetDelta    varint   index of the record in its batch
#   keyLength      varint   -1 = null key
#   key            bytes
#   valueLength    varint   -1 = null value (a tombstone)
#   value          bytes
#   headerCount    varint
#   headers        per header: keyLength varint, key UTF-8, valueLength varint (-1 = null), value


@dataclass(frozen=True, slots=True)
class Record:
    """One record to encode. Header values may be None; header keys are str (sent as UTF-8)."""

    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    headers: Sequence[Header] = ()


@dataclass(frozen=True, slots=True)
class DecodedRecord:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]


@dataclass(frozen=True, slots=True)
class DecodedBatch:
    base_offset: int
    partition_leader_epoch: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[DecodedRecord, ...]

    @property
    def compression(self) -> Codec:
        return Codec(self.attributes & ATTR_COMPRESSION_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_LOG_APPEND_TIME)

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta


# ------------------------------------------------------------------------------------------------ encoding


def _length_prefixed(data: bytes | None) -> bytes:
    return b"\x01" if data is None else write_varint(len(data)) + data  # 0x01 = zigzag(-1)


def encode_record(
    offset_delta: int, timestamp_delta: int, key: bytes | None, value: bytes | None, headers: Sequence[Header]
) -> bytes:
    """One record, length prefix included (layout above)."""
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
    _HEADER.pack_into(
        header,
        0,
        base_offset,
        HEADER_SIZE - _LOG_OVERHEAD + len(payload),
        -1,  # partitionLeaderEpoch
        _MAGIC,
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
    crc = crc32c.crc32c(payload, crc32c.crc32c(memoryview(header)[_CRC_START:]))
    _CRC.pack_into(header, _OFFSET["crc"], crc)
    return b"".join((header, payload))


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
        self._section = bytearray()
        self._size = HEADER_SIZE  # stays valid after build() releases the section
        self._count = 0
        self._base_ts = 0
        self._max_ts = 0
        self._built: bytes | None = None

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def estimated_size(self) -> int:
        """Header + uncompressed records so far: an upper bound of the built batch's size."""
        return self._size

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


def _check_batch_frame(batch: bytes | bytearray | memoryview) -> None:
    if len(batch) < HEADER_SIZE:
        raise ProtocolError(f"a record batch is at least {HEADER_SIZE} bytes, got {len(batch)}")
    (length,) = struct.unpack_from(">i", batch, _OFFSET["batch_length"])
    if length + _LOG_OVERHEAD != len(batch):
        raise ProtocolError(f"batchLength {length} does not match a {len(batch)}-byte batch")
    if batch[_OFFSET["magic"]] != _MAGIC:
        raise ProtocolError(f"record batch magic {batch[_OFFSET['magic']]}, expected {_MAGIC}")


def producer_state_header(
    batch: bytes | bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    """The 61-byte header ``batch`` gets with this producer state (CRC recomputed over the unchanged records).
    Sending it followed by ``memoryview(batch)[HEADER_SIZE:]`` avoids copying the records."""
    _check_batch_frame(batch)
    header = bytearray(memoryview(batch)[:HEADER_SIZE])
    (attributes,) = _ATTRIBUTES.unpack_from(header, _CRC_START)
    attributes = (attributes | ATTR_TRANSACTIONAL) if transactional else (attributes & ~ATTR_TRANSACTIONAL)
    _ATTRIBUTES.pack_into(header, _CRC_START, attributes)
    _PRODUCER_STATE.pack_into(header, _OFFSET["producer_id"], producer_id, producer_epoch, base_sequence)
    crc = crc32c.crc32c(memoryview(batch)[HEADER_SIZE:], crc32c.crc32c(memoryview(header)[_CRC_START:]))
    _CRC.pack_into(header, _OFFSET["crc"], crc)
    return bytes(header)


def with_producer_state(
    batch: bytes | bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    """Copy of one built batch with producerId/Epoch/baseSequence and the transactional bit set, CRC recomputed."""
    header = producer_state_header(batch, producer_id, producer_epoch, base_sequence, transactional)
    return b"".join((header, memoryview(batch)[HEADER_SIZE:]))


# ------------------------------------------------------------------------------------------------ decoding


def _decode_records(section: bytes, count: int, base_offset: int, base_ts: int, ts_override: int | None
                    ) -> tuple[DecodedRecord, ...]:
    r = Reader(section)
    out = []
    for _ in range(count):
        length = r.varint()
        start = r.position
        if length < 0 or length > r.remaining():
            raise ProtocolError(f"record length {length} at offset {start} runs past the records section")
        r.int8()  # attributes: unused
        ts_delta = r.varlong()
        offset_delta = r.varint()
        key = _nullable(r)
        value = _nullable(r)
        headers = []
        n_headers = r.varint()
        if n_headers < 0 or n_headers > r.remaining():
            raise ProtocolError(f"header count {n_headers} at offset {r.position} is invalid")
        for _ in range(n_headers):
            h_key = _nullable(r)
            if h_key is None:
                raise ProtocolError(f"null header key in a record at offset {start}")
            try:
                h_key_str = h_key.decode("utf-8")
            except UnicodeDecodeError:
                raise ProtocolError(f"header key at offset {start} is not UTF-8") from None
            headers.append((h_key_str, _nullable(r)))
        if r.position - start != length:
            raise ProtocolError(f"record at offset {start} is {r.position - start} bytes, its length says {length}")
        ts = base_ts + ts_delta if ts_override is None else ts_override
        out.append(DecodedRecord(base_offset + offset_delta, ts, key, value, tuple(headers)))
    r.expect_end()
    return tuple(out)


def _nullable(r: Reader) -> bytes | None:
    n = r.varint()
    if n < -1:
        raise ProtocolError(f"negative length {n} at offset {r.position}")
    return None if n == -1 else r.raw(n)


def _decode_one(batch: memoryview) -> DecodedBatch:
    _check_batch_frame(batch)
    (base_offset, _, epoch, _, crc, attributes, last_delta, base_ts, max_ts, pid, p_epoch, base_seq,
     count) = _HEADER.unpack_from(batch)
    actual = crc32c.crc32c(batch[_CRC_START:])
    if actual != crc:
        raise ProtocolError(f"record batch at offset {base_offset}: CRC {actual:#010x} != stored {crc:#010x}")
    if count < 0 or (count and last_delta < count - 1):
        raise ProtocolError(f"record batch at offset {base_offset}: {count} records, lastOffsetDelta {last_delta}")
    codec = attributes & ATTR_COMPRESSION_MASK
    if codec > max(Codec):
        raise ProtocolError(f"record batch at offset {base_offset}: unknown compression codec {codec}")
    section = bytes(batch[HEADER_SIZE:]) if codec == 0 else decompress(codec, batch[HEADER_SIZE:])
    log_append = max_ts if attributes & ATTR_LOG_APPEND_TIME else None
    records = _decode_records(section, count, base_offset, base_ts, log_append)
    return DecodedBatch(base_offset, epoch, crc, attributes, last_delta, base_ts, max_ts, pid, p_epoch, base_seq,
                        records)


def decode_batches(data: bytes | bytearray | memoryview, *, allow_truncated_tail: bool = True
                   ) -> list[DecodedBatch]:
    """Decode concatenated batches (a fetch response's records). A partial batch at the end, which brokers send
    when a fetch hits its size limit, is dropped unless ``allow_truncated_tail`` is False (then ProtocolError).
    A CRC mismatch or malformed batch raises ProtocolError."""
    view = memoryview(data).cast("B")
    out = []
    pos = 0
    while pos < len(view):
        rest = len(view) - pos
        if rest >= _LOG_OVERHEAD:
            (length,) = struct.unpack_from(">i", view, pos + _OFFSET["batch_length"])
            if length < HEADER_SIZE - _LOG_OVERHEAD:
                raise ProtocolError(f"batchLength {length} at offset {pos} is shorter than a batch header")
            if length + _LOG_OVERHEAD <= rest:
                out.append(_decode_one(view[pos : pos + _LOG_OVERHEAD + length]))
                pos += _LOG_OVERHEAD + length
                continue
        if allow_truncated_tail:
            break
        raise ProtocolError(f"truncated record batch at offset {pos}: {rest} bytes left")
    return out


def decode_batch(data: bytes | bytearray | memoryview) -> DecodedBatch:
    """Decode exactly one batch; truncation or trailing bytes raise ProtocolError."""
    batches = decode_batches(data, allow_truncated_tail=False)
    if len(batches) != 1:
        raise ProtocolError(f"expected one record batch, found {len(batches)}")
    return batches[0]
