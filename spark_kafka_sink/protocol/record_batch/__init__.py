"""RecordBatch v2 (magic 2): encode, incremental build, producer-state rewrite, decode. Pure.

    encode_batch(records, *, compression, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                 transactional=False, base_offset=0) -> bytes        # the reference encoder, one record at a time
    BatchBuilder(max_bytes, compression, ...)                         # .try_append(...) -> bool, .build() -> bytes
    assemble_batch(records_section, record_count, base_timestamp, max_timestamp, *, compression, ...) -> bytes
    assemble_batches(records_sections, section_ends, record_counts, base_timestamps, max_timestamps, ...)
        -> list[bytes]                                                # many at once: the Arrow encoder's path
    with_crc(batch) -> bytes                                          # one assembled with checksum=False, sealed
    crc_header(batch) -> bytes                           # just its sealed 61-byte header, for zero-copy sends
    record_size(offset_delta, timestamp_delta, key, value, headers) -> int      # one encoded record's exact size
    record_size_bound(key_bytes, value_bytes, header_bytes, header_count)      # an upper bound, ints or arrays
    with_producer_state(batch, producer_id, producer_epoch, base_sequence, transactional) -> bytes
    producer_state_header(batch, ...same...) -> bytes    # just the new 61-byte header, for zero-copy sends
    decode_batches(data, *, allow_truncated_tail=True) -> list[DecodedBatch]
    decode_batch(data) -> DecodedBatch                                # exactly one batch, nothing after it
    visible_records(batches, aborted_transactions, *, read_committed, start_offset, end_offset)
        -> VisibleRecords(records, next_offset)    # what a reader sees: no markers, no aborted transactions

Sizes (``max_bytes``, ``estimated_size``) count the uncompressed records, as an upper bound of what is sent.
"""

from __future__ import annotations

from spark_kafka_sink.protocol.record_batch._decoder import DecodedBatch, DecodedRecord, decode_batch, decode_batches
from spark_kafka_sink.protocol.record_batch._encoder import (
    RECORD_OVERHEAD_BOUND,
    BatchBuilder,
    Record,
    assemble_batch,
    assemble_batches,
    crc_header,
    encode_batch,
    encode_record,
    record_size,
    record_size_bound,
    with_crc,
)
from spark_kafka_sink.protocol.record_batch._format import (
    ATTR_COMPRESSION_MASK,
    ATTR_CONTROL,
    ATTR_LOG_APPEND_TIME,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    Header,
)
from spark_kafka_sink.protocol.record_batch._producer_state import producer_state_header, with_producer_state
from spark_kafka_sink.protocol.record_batch._visibility import (
    CONTROL_KEY_STRUCT,
    ControlRecordType,
    VisibleRecords,
    control_record_type,
    visible_records,
)

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
    "record_size_bound",
    "RECORD_OVERHEAD_BOUND",
    "assemble_batch",
    "assemble_batches",
    "with_crc",
    "crc_header",
    "with_producer_state",
    "producer_state_header",
    "decode_batches",
    "decode_batch",
    "CONTROL_KEY_STRUCT",
    "ControlRecordType",
    "control_record_type",
    "VisibleRecords",
    "visible_records",
]
