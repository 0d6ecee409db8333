"""Which records of fetched batches a reader sees: never transaction markers, and under read_committed never the
records of aborted transactions. Pure; the rules are the Java consumer's (``CompletedFetch``).

A control batch (attribute bit 0x20) holds one control record written by a transaction coordinator. Its key::

    version  int16   0
    type     int16   0 = ABORT, 1 = COMMIT (other numbers: types a newer broker may add)

and its value (version int16, coordinator epoch int32) is of no use to a reader.

A Fetch response lists, per partition, the aborted transactions that overlap the returned data as
(producer id, first offset) pairs. Walking the batches in offset order, a producer id becomes "aborted" once the
walk reaches its first offset, and stops being aborted at that producer's ABORT marker; a transactional batch of an
aborted producer id is dropped.
"""

from __future__ import annotations

import enum
import heapq
import struct
from collections.abc import Iterable
from typing import NamedTuple

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.record_batch._decoder import DecodedBatch, DecodedRecord

__all__ = ["ControlRecordType", "CONTROL_KEY_STRUCT", "control_record_type", "VisibleRecords", "visible_records"]

CONTROL_KEY_STRUCT = struct.Struct(">hh")  # version int16, type int16 (see the module docstring)


class ControlRecordType(enum.IntEnum):
    """The ``type`` of a control record's key."""

    ABORT = 0
    COMMIT = 1


def control_record_type(key: bytes | None) -> int:
    """The type number in a control record's key (a :class:`ControlRecordType` value, or an unknown number)."""
    if key is None or len(key) < CONTROL_KEY_STRUCT.size:
        raise ProtocolError(f"a control record key is at least {CONTROL_KEY_STRUCT.size} bytes, got {key!r}")
    _version, type_ = CONTROL_KEY_STRUCT.unpack_from(key)
    return int(type_)


class VisibleRecords(NamedTuple):
    """What :func:`visible_records` found: the records, and the offset to fetch from next."""

    records: list[DecodedRecord]
    next_offset: int


def _is_abort_marker(batch: DecodedBatch) -> bool:
    return batch.is_control and bool(batch.records) and (
        control_record_type(batch.records[0].key) == ControlRecordType.ABORT)


def visible_records(batches: Iterable[DecodedBatch], aborted_transactions: Iterable[tuple[int, int]], *,
                    read_committed: bool, start_offset: int, end_offset: int) -> VisibleRecords:
    """The records of ``batches`` (one Fetch response's, in order) at offsets in ``[start_offset, end_offset)``
    that a reader sees, and the offset after the last batch walked (``start_offset`` if none was).

    ``aborted_transactions`` are the response's (producer id, first offset) pairs; they are only used when
    ``read_committed``. Batches wholly before ``start_offset`` still count for the aborted-transaction bookkeeping
    (a fetch returns whole batches, which may begin before the offset asked for); the walk stops at the first
    batch starting at or after ``end_offset``.
    """
    pending = sorted((first_offset, producer_id) for producer_id, first_offset in aborted_transactions)
    heapq.heapify(pending)
    aborted_producers: set[int] = set()
    records: list[DecodedRecord] = []
    next_offset = start_offset
    for batch in batches:
        if batch.base_offset >= end_offset:
            break
        next_offset = max(next_offset, batch.last_offset + 1)
        if read_committed and batch.producer_id >= 0:
            while pending and pending[0][0] <= batch.last_offset:
                aborted_producers.add(heapq.heappop(pending)[1])
            if _is_abort_marker(batch):
                aborted_producers.discard(batch.producer_id)
            elif batch.is_transactional and batch.producer_id in aborted_producers:
                continue  # a record of an aborted transaction
        if batch.is_control:
            continue  # a transaction marker: never a record for the reader
        records.extend(r for r in batch.records if start_offset <= r.offset < end_offset)
    return VisibleRecords(records, next_offset)
