"""Per-partition sequence bookkeeping of an idempotent or transactional producer (after the Java client's
``TransactionManager.TopicPartitionEntry``). Pure data: :class:`~.transactions.TransactionManager` owns every
instance and guards it with its lock.

For each partition the broker accepts a batch only if its base sequence is exactly one past the last sequence it
wrote for that (producer id, epoch); it remembers the last 5 batches, so a resend of one of them is answered with
its original offset (or DUPLICATE_SEQUENCE_NUMBER) instead of being written twice. So, per partition:

* ``next_sequence`` -- the base sequence the next *new* batch gets (assigned at drain, never at append, so a batch
  that never leaves the client never consumes sequence numbers);
* ``in_flight`` -- every batch that got a sequence and has no final answer yet, sorted by base sequence; a retried
  batch keeps its sequence, so its bytes are identical and the broker can deduplicate it;
* ``last_acked_sequence`` / ``last_acked_offset`` -- what the broker has confirmed: tells "this batch is the next one
  the broker expects" (a real gap) from "an earlier batch failed first" (retry), and an UNKNOWN_PRODUCER_ID caused by
  retention deleting the log head from lost data.

Sequences are int32 and wrap from 2**31 - 1 to 0, as the broker expects.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Protocol

from spark_kafka_sink.producer.record_metadata import TopicPartition

__all__ = [
    "ProducerIdAndEpoch",
    "NO_PRODUCER_ID_AND_EPOCH",
    "SequencedBatch",
    "InFlightEntry",
    "PartitionSequences",
    "increment_sequence",
    "NO_SEQUENCE",
]

NO_SEQUENCE = -1
_SEQUENCE_MODULUS = 1 << 31


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` in the broker's int32 sequence space (wraps to 0 after 2**31 - 1)."""
    return (sequence + increment) % _SEQUENCE_MODULUS


@dataclass(frozen=True, slots=True)
class ProducerIdAndEpoch:
    """A producer id and its epoch; ``producer_id == -1`` means "none yet"."""

    producer_id: int = -1
    epoch: int = -1

    @property
    def is_valid(self) -> bool:
        return self.producer_id >= 0

    def __str__(self) -> str:
        return f"producer id {self.producer_id} epoch {self.epoch}"


NO_PRODUCER_ID_AND_EPOCH = ProducerIdAndEpoch()


class SequencedBatch(Protocol):
    """What the bookkeeping needs from a batch (``producer.batch.ProducerBatch`` provides it)."""

    @property
    def tp(self) -> TopicPartition: ...

    @property
    def record_count(self) -> int: ...

    @property
    def is_done(self) -> bool: ...


@dataclass(eq=False, slots=True)
class InFlightEntry:
    """One batch that has a sequence and no final answer. The batch's own stamped state may lag behind this entry
    after a sequence reset (an in-flight batch cannot be re-stamped until its answer arrives); the sender stamps it
    from here at its next drain."""

    batch: SequencedBatch
    producer: ProducerIdAndEpoch
    base_sequence: int
    record_count: int
    # True once the sequence was rewritten by a reset: the answer to the send that carried the old sequence is
    # then expected to fail (the broker saw a gap), and must be retried, not bump the epoch again.
    sequence_reset: bool = False

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.record_count - 1)


@dataclass(slots=True)
class PartitionSequences:
    """Sequence state of one partition (see the module docstring)."""

    producer: ProducerIdAndEpoch = NO_PRODUCER_ID_AND_EPOCH  # the id/epoch the sequences below belong to
    next_sequence: int = 0
    last_acked_sequence: int = NO_SEQUENCE
    last_acked_offset: int = -1
    in_flight: list[InFlightEntry] = field(default_factory=list)  # sorted by base_sequence

    def add(self, entry: InFlightEntry) -> None:
        bisect.insort(self.in_flight, entry, key=lambda e: e.base_sequence)

    def remove(self, entry: InFlightEntry) -> None:
        # Identity, not equality: two entries never compare equal (eq=False), so list.remove is by identity.
        if entry in self.in_flight:
            self.in_flight.remove(entry)

    @property
    def first_in_flight_sequence(self) -> int:
        return self.in_flight[0].base_sequence if self.in_flight else NO_SEQUENCE

    def is_next_sequence(self, sequence: int) -> bool:
        """True if ``sequence`` is the one the broker expects next (one past the last acknowledged)."""
        return increment_sequence(self.last_acked_sequence, 1) == sequence

    def precedes_acknowledged(self, entry: InFlightEntry) -> bool:
        """True if the broker acknowledged a later sequence than ``entry``'s of the same id/epoch."""
        return (entry.producer == self.producer and self.last_acked_sequence != NO_SEQUENCE
                and not _after(entry.base_sequence, self.last_acked_sequence))

    def acknowledge(self, entry: InFlightEntry, base_offset: int) -> None:
        self.remove(entry)
        if entry.producer == self.producer and (
            self.last_acked_sequence == NO_SEQUENCE or _after(entry.last_sequence, self.last_acked_sequence)
        ):
            self.last_acked_sequence = entry.last_sequence
        if base_offset >= 0:
            self.last_acked_offset = max(self.last_acked_offset, base_offset + entry.record_count - 1)

    def start_at_beginning(self, producer: ProducerIdAndEpoch) -> None:
        """Move to ``producer`` and renumber the in-flight batches from sequence 0, in their current order (after an
        epoch bump: the broker expects sequence 0 from a new epoch)."""
        sequence = 0
        for entry in self.in_flight:
            entry.producer = producer
            entry.base_sequence = sequence
            entry.sequence_reset = True
            sequence = increment_sequence(sequence, entry.record_count)
        self.producer = producer
        self.next_sequence = sequence
        self.last_acked_sequence = NO_SEQUENCE


def _after(a: int, b: int) -> bool:
    """``a`` comes after ``b`` in wrapping sequence space (the distance is less than half the space)."""
    return 0 < (a - b) % _SEQUENCE_MODULUS < _SEQUENCE_MODULUS // 2
