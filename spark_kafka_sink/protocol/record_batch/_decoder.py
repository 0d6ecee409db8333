"""RecordBatch v2 decoding and validation: CRC, lengths, codec, every record's framing. Pure.

Anything malformed raises ProtocolError; nothing is returned from a batch that does not check out whole.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

import crc32c

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.compression import Codec, decompress
from spark_kafka_sink.protocol.primitives import Reader
from spark_kafka_sink.protocol.record_batch._format import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    CRC_START,
    FIELD_OFFSET,
    HEADER_SIZE,
    HEADER_STRUCT,
    LOG_OVERHEAD,
    Header,
    check_batch_frame,
)

__all__ = [
    "DecodedRecord",
    "DecodedBatch",
    "decode_batches",
    "decode_batch",
]


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
    check_batch_frame(batch)
    (base_offset, _, epoch, _, crc, attributes, last_delta, base_ts, max_ts, pid, p_epoch, base_seq,
     count) = HEADER_STRUCT.unpack_from(batch)
    actual = crc32c.crc32c(batch[CRC_START:])
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
        if rest >= LOG_OVERHEAD:
            (length,) = struct.unpack_from(">i", view, pos + FIELD_OFFSET["batch_length"])
            if length < HEADER_SIZE - LOG_OVERHEAD:
                raise ProtocolError(f"batchLength {length} at offset {pos} is shorter than a batch header")
            if length + LOG_OVERHEAD <= rest:
                out.append(_decode_one(view[pos : pos + LOG_OVERHEAD + length]))
                pos += LOG_OVERHEAD + length
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
