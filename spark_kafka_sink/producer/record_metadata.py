"""What a completed send returns: ``RecordMetadata`` per record, ``BatchMetadata`` per bulk-appended batch."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

__all__ = ["TopicPartition", "RecordMetadata", "BatchMetadata", "NO_OFFSET", "NO_TIMESTAMP"]

NO_OFFSET = -1  # acks=0, or the broker did not return an offset
NO_TIMESTAMP = -1  # the broker's logAppendTime when the topic uses CreateTime


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    """Where one record was written. ``offset`` is -1 with acks=0. ``timestamp_ms`` is the broker's append time
    for LogAppendTime topics, otherwise the record's own (create) timestamp."""

    topic: str
    partition: int
    offset: int
    timestamp_ms: int


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """Where one bulk-appended record batch was written: rows ``first_row .. first_row + record_count - 1`` of the
    caller's input got offsets ``base_offset ..`` (-1 with acks=0). ``log_append_time_ms`` is -1 for CreateTime."""

    topic: str
    partition: int
    base_offset: int
    record_count: int
    first_row: int
    log_append_time_ms: int
    # A batch split because the broker refused it as too large went out in parts, whose offsets need not be
    # consecutive (another producer may write between them): then the largest, else -1 (base + count - 1).
    split_last_offset: int = NO_OFFSET

    @property
    def last_offset(self) -> int:
        if self.split_last_offset != NO_OFFSET:
            return self.split_last_offset
        return NO_OFFSET if self.base_offset == NO_OFFSET else self.base_offset + self.record_count - 1
