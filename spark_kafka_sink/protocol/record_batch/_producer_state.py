"""Rewrite a built RecordBatch v2 with a producer's id, epoch, base sequence and transactional bit. Pure.

A batch is built as records are appended, but its base sequence is assigned only when the sender drains it (and
stamped anew after an epoch bump or sequence reset), so this runs afterwards: only the 61-byte header changes, and
the CRC is recomputed over the unchanged records.
"""

from __future__ import annotations

import crc32c

from spark_kafka_sink.protocol.record_batch._format import (
    ATTR_TRANSACTIONAL,
    ATTRIBUTES_STRUCT,
    CRC_START,
    CRC_STRUCT,
    FIELD_OFFSET,
    HEADER_SIZE,
    PRODUCER_STATE_STRUCT,
    check_batch_frame,
)

__all__ = [
    "with_producer_state",
    "producer_state_header",
]

_PRODUCER_STATE_AT = FIELD_OFFSET["producer_id"]  # (producerEpoch and baseSequence follow it)
_CRC_AT = FIELD_OFFSET["crc"]


def producer_state_header(
    batch: bytes | bytearray | memoryview,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    transactional: bool,
) -> bytes:
    """The 61-byte header ``batch`` gets with this producer state (CRC recomputed over the unchanged records).
    Sending it followed by ``memoryview(batch)[HEADER_SIZE:]`` avoids copying the records."""
    check_batch_frame(batch)
    view = memoryview(batch)
    header = bytearray(view[:HEADER_SIZE])
    (attributes,) = ATTRIBUTES_STRUCT.unpack_from(header, CRC_START)
    attributes = (attributes | ATTR_TRANSACTIONAL) if transactional else (attributes & ~ATTR_TRANSACTIONAL)
    ATTRIBUTES_STRUCT.pack_into(header, CRC_START, attributes)
    PRODUCER_STATE_STRUCT.pack_into(header, _PRODUCER_STATE_AT, producer_id, producer_epoch, base_sequence)
    crc = crc32c.crc32c(view[HEADER_SIZE:], crc32c.crc32c(memoryview(header)[CRC_START:]))
    CRC_STRUCT.pack_into(header, _CRC_AT, crc)
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
