"""RecordBatch v2 (magic 2) layout, declared once: the header table, attribute bits, the record layout. Pure.

The encoder, the producer-state rewrite and the decoder all derive their offsets from here; ``check_batch_frame``
is the size/length/magic check that both the rewrite and the decoder apply before touching a batch.
"""

from __future__ import annotations

import struct

from spark_kafka_sink.errors import ProtocolError

__all__ = [
    "Header",
    "HEADER_STRUCT",
    "FIELD_OFFSET",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "CRC_START",
    "CRC_STRUCT",
    "ATTRIBUTES_STRUCT",
    "PRODUCER_STATE_STRUCT",
    "MAGIC",
    "ATTR_COMPRESSION_MASK",
    "ATTR_LOG_APPEND_TIME",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "check_batch_frame",
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
HEADER_STRUCT = struct.Struct(">" + "".join(fmt for _, fmt in _HEADER_FIELDS))
FIELD_OFFSET = {
    name: struct.calcsize(">" + "".join(fmt for _, fmt in _HEADER_FIELDS[:i]))
    for i, (name, _) in enumerate(_HEADER_FIELDS)
}
HEADER_SIZE = HEADER_STRUCT.size  # 61
LOG_OVERHEAD = FIELD_OFFSET["partition_leader_epoch"]  # 12: baseOffset + batchLength, not counted in batchLength
CRC_START = FIELD_OFFSET["attributes"]  # 21: the CRC covers attributes..end
CRC_STRUCT = struct.Struct(">I")
ATTRIBUTES_STRUCT = struct.Struct(">h")
PRODUCER_STATE_STRUCT = struct.Struct(">qhi")  # producerId, producerEpoch, baseSequence: adjacent in the header
MAGIC = 2

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


_BATCH_LENGTH_STRUCT = struct.Struct(">i")
_BATCH_LENGTH_AT = FIELD_OFFSET["batch_length"]
_MAGIC_AT = FIELD_OFFSET["magic"]


def check_batch_frame(batch: bytes | bytearray | memoryview) -> None:
    # Runs for every batch the sender stamps: constants resolved once, not per call.
    if len(batch) < HEADER_SIZE:
        raise ProtocolError(f"a record batch is at least {HEADER_SIZE} bytes, got {len(batch)}")
    (length,) = _BATCH_LENGTH_STRUCT.unpack_from(batch, _BATCH_LENGTH_AT)
    if length + LOG_OVERHEAD != len(batch):
        raise ProtocolError(f"batchLength {length} does not match a {len(batch)}-byte batch")
    if batch[_MAGIC_AT] != MAGIC:
        raise ProtocolError(f"record batch magic {batch[_MAGIC_AT]}, expected {MAGIC}")
