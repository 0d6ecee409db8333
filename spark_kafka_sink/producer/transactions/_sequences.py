"""Sequence numbers of an idempotent or transactional producer: the producer id/epoch they belong to, each
partition's sequences (:class:`PartitionSequences`, the Java client's ``TopicPartitionEntry``) and the
:class:`SequenceBook` that holds them all with the rules for draining, answers, expiry and epoch bumps (the Java
client's ``TxnPartitionMap`` and the sequence handling of its ``TransactionManager`` and ``RecordAccumulator``).

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

The book's rules (the sender reaches them through the manager: ``should_stop_draining`` + ``stamp`` at drain,
``batch_succeeded`` / ``can_retry`` / ``batch_failed`` with each answer, ``maybe_resolve_sequences`` once per round):

* a new batch gets the partition's next sequence when it is drained, never earlier;
* a retried batch keeps its sequence and goes out only when it is the first unfinished batch of its partition,
  so retries never reorder a partition even with max.in.flight.requests.per.connection = 5;
* OUT_OF_ORDER_SEQUENCE_NUMBER behind an earlier failed batch is just retried; one that shows a real gap (the batch
  is the next the broker should accept) and UNKNOWN_PRODUCER_ID make an idempotent producer request a new epoch,
  after which the partition's unfinished batches are renumbered from 0 (``PartitionSequences.start_at_beginning``);
  a transactional producer makes the transaction abortable instead;
* a sent batch that expires may or may not have been written: the partition is "unresolved" (no new sequences)
  until its in-flight batches finish; if a later one was acknowledged the expired one was written, else the
  sequences restart.

Sequences are int32 and wrap from 2**31 - 1 to 0, as the broker expects. Nothing here locks: the
:class:`~spark_kafka_sink.producer.transactions.TransactionManager` owns the one book of a producer and calls it
only with its lock held.
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from spark_kafka_sink.errors import OutOfOrderSequenceNumberError, UnknownProducerIdError, error_for_code
from spark_kafka_sink.producer.record_metadata import TopicPartition

__all__ = [
    "ProducerIdAndEpoch",
    "NO_PRODUCER_ID_AND_EPOCH",
    "SequencedBatch",
    "StampableBatch",
    "InFlightEntry",
    "PartitionSequences",
    "SequenceBook",
    "increment_sequence",
    "NO_SEQUENCE",
]

_log = logging.getLogger(__name__)

NO_SEQUENCE = -1
_SEQUENCE_MODULUS = 1 << 31


def increment_sequence(sequence: int, increment: int) -> int:
    """``sequence + increment`` in the broker's int32 sequence space (wraps to 0 after 2**31 - 1)."""
    return (sequence + increment) % _SEQUENCE_MODULUS


class ProducerIdAndEpoch(NamedTuple):
    """A producer id and its epoch; ``producer_id == -1`` means "none yet". (A NamedTuple: the sender compares
    one several times per batch, and a dataclass's ``__eq__`` is Python code.)"""

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


class StampableBatch(SequencedBatch, Protocol):
    """A batch the manager stamps at drain (``producer.batch.ProducerBatch`` provides it): its stamped producer
    state, and the two calls that set and forget it."""

    @property
    def producer_id(self) -> int: ...

    @property
    def producer_epoch(self) -> int: ...

    @property
    def base_sequence(self) -> int: ...

    @property
    def has_sequence(self) -> bool: ...

    @property
    def producer_state(self) -> tuple[int, int, int]: ...  # (producer_id, producer_epoch, base_sequence)

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           transactional: bool) -> None: ...

    def reset_producer_state(self) -> None: ...


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



class SequenceBook:
    """Every partition's :class:`PartitionSequences` and every sequenced batch still without a final answer, with
    the rules of the module docstring. It also decides when the producer needs a new epoch
    (``epoch_bump_required``); the manager fetches it and reports it with :meth:`start_epoch`.

    Not thread-safe: the manager's lock guards every call.
    """

    def __init__(self, *, transactional: bool) -> None:
        self._transactional = transactional
        self._partitions: dict[TopicPartition, PartitionSequences] = {}
        self._entries: dict[SequencedBatch, InFlightEntry] = {}  # batches with a sequence, by identity
        self._unresolved: dict[TopicPartition, int] = {}  # partition -> sequence after an expired sent batch
        self._rewrite_on_bump: set[TopicPartition] = set()  # partitions renumbered when the new epoch arrives
        self._bump_required = False

    # ----------------------------------------------------------------------------------------- epochs

    @property
    def has_unanswered_batches(self) -> bool:
        """True while a batch that got a sequence has no final answer (acknowledged or failed)."""
        return bool(self._entries)

    @property
    def epoch_bump_required(self) -> bool:
        """True once the sequences cannot go on under the current epoch (a gap, a lost or abandoned batch)."""
        return self._bump_required

    def epoch_bump_started(self) -> None:
        """The manager asked for the new epoch: the request is no longer pending."""
        self._bump_required = False

    def start_epoch(self, producer: ProducerIdAndEpoch, *, reset_all: bool) -> None:
        """A new producer id/epoch arrived (InitProducerId). ``reset_all`` (transactional producers): forget every
        sequence; else renumber from 0 the partitions that asked for the bump, those that asked after the request
        went out included."""
        if reset_all:
            self._partitions.clear()
            self._entries.clear()
            self._unresolved.clear()
            self._rewrite_on_bump.clear()
            return
        for tp in self._rewrite_on_bump:
            seqs = self._partitions.get(tp)
            if seqs is not None:
                seqs.start_at_beginning(producer)
            self._unresolved.pop(tp, None)
        self._rewrite_on_bump.clear()
        # A partition that asked while this epoch was on its way is renumbered above too: no second bump for it.
        self._bump_required = False

    def _request_epoch_bump(self, tp: TopicPartition) -> None:
        _log.info("sequence gap on %s: requesting a new producer epoch", tp)
        self._bump_required = True
        self._rewrite_on_bump.add(tp)

    # ----------------------------------------------------------------------------------------- drain

    def must_wait(self, batch: SequencedBatch, producer: ProducerIdAndEpoch) -> bool:
        """True if ``batch`` (the head of its partition's queue) must not be drained under ``producer`` yet: an
        epoch change still draining, an unresolved sequence, or an earlier batch of the partition in flight."""
        tp = batch.tp
        entry = self._entries.get(batch)
        seqs = self._partitions.get(tp)
        if seqs is None or not seqs.in_flight:
            return False
        if entry is None:
            # A new batch must wait while the partition still finishes batches of an older id/epoch (else
            # sequence 0 of the new epoch could overtake them) or while a sequence is unresolved. Until the
            # broker acknowledged a first batch of this id/epoch it does not know our producer and accepts ANY
            # sequence from it: a second batch in flight could then be written before a first one that failed
            # retriably (e.g. NOT_LEADER on a new topic). So one batch at a time until the first ack.
            return (seqs.producer != producer or tp in self._unresolved
                    or seqs.last_acked_sequence == NO_SEQUENCE)
        # A retry goes out only when it is the partition's first unfinished batch: one at a time, in order.
        return entry is not seqs.in_flight[0]

    def entry_at_drain(self, batch: SequencedBatch, producer: ProducerIdAndEpoch) -> InFlightEntry:
        """The entry ``batch`` is sent with: a new batch gets the partition's next sequence under ``producer``; a
        retried one keeps its entry (renumbered if its partition started a new epoch)."""
        entry = self._entries.get(batch)
        if entry is None:
            seqs = self._partitions.get(batch.tp)
            if seqs is None:
                seqs = self._partitions[batch.tp] = PartitionSequences(producer=producer)
            elif seqs.producer != producer and not seqs.in_flight:
                seqs.start_at_beginning(producer)  # the older epoch's batches are all finished
            entry = InFlightEntry(batch, seqs.producer, seqs.next_sequence, batch.record_count)
            seqs.next_sequence = increment_sequence(seqs.next_sequence, batch.record_count)
            seqs.add(entry)
            self._entries[batch] = entry
        return entry

    # ----------------------------------------------------------------------------------------- answers

    def acknowledge(self, batch: SequencedBatch, base_offset: int) -> None:
        entry = self._entries.pop(batch, None)
        if entry is not None:
            self._partitions[batch.tp].acknowledge(entry, base_offset)

    def can_retry(self, batch: SequencedBatch, error_code: int, log_start_offset: int,
                  producer: ProducerIdAndEpoch) -> bool:
        """Whether a produce error on a sequenced batch should be retried (Java's TransactionManager.canRetry);
        may request an epoch bump for the partition."""
        retriable = error_for_code(error_code).retriable
        entry = self._entries.get(batch)
        seqs = self._partitions.get(batch.tp)
        if entry is None or seqs is None:
            return retriable
        tp = batch.tp
        if error_code == UnknownProducerIdError.code:  # the broker lost our state
            if entry.sequence_reset:
                return True  # answer to the send before our renumbering
            if 0 <= seqs.last_acked_offset < log_start_offset:
                # Retention deleted the log head and the producer state with it; nothing was lost.
                if self._transactional:
                    seqs.start_at_beginning(producer)
                else:
                    self._request_epoch_bump(tp)
                return True
            if not self._transactional:
                self._request_epoch_bump(tp)
                return True
            return False
        if error_code == OutOfOrderSequenceNumberError.code:
            unresolved = tp in self._unresolved
            if seqs.precedes_acknowledged(entry):
                # A later batch is already in the log: this one can never be accepted in this epoch. Write it
                # under a new epoch rather than lose it (transactions abort instead).
                _log.warning("%s: batch with sequence %d was overtaken by acknowledged batches", tp,
                             entry.base_sequence)
                if self._transactional:
                    return False
                self._request_epoch_bump(tp)
                return True
            if not unresolved and (entry.sequence_reset or not seqs.is_next_sequence(entry.base_sequence)):
                return True  # an earlier batch failed first: this one is retried after it, in order
            if not self._transactional:
                if not unresolved or self._unresolved[tp] == entry.base_sequence:
                    self._request_epoch_bump(tp)  # a real gap
                return True
            return False
        return retriable

    def batch_failed(self, batch: SequencedBatch, *, maybe_written: bool, producer_failed: bool) -> None:
        """A batch reached a final failure. ``maybe_written``: it was sent and its fate is unknown (expired).
        ``producer_failed``: the producer is in a fatal state and will number nothing again."""
        entry = self._entries.pop(batch, None)
        if entry is None or producer_failed:
            return
        seqs = self._partitions[batch.tp]
        seqs.remove(entry)
        if self._transactional:
            self._bump_required = True  # renumber everything after the abort
        elif maybe_written:
            following = increment_sequence(entry.base_sequence, entry.record_count)
            self._unresolved[batch.tp] = max(self._unresolved.get(batch.tp, following), following)
        else:
            self._request_epoch_bump(batch.tp)  # the broker did not write it: a gap from here on

    def split(self, batch: SequencedBatch, parts: Sequence[SequencedBatch]) -> list[InFlightEntry]:
        """``batch`` was refused as too large and goes on as ``parts`` (Java's splitAndReenqueue): they take over
        its sequence range, in order, under the same id/epoch; returns their entries (to stamp them)."""
        entry = self._entries.pop(batch, None)
        if entry is None:
            return []
        seqs = self._partitions[batch.tp]
        seqs.remove(entry)
        sequence = entry.base_sequence
        entries = []
        for part in parts:
            new = InFlightEntry(part, entry.producer, sequence, part.record_count, entry.sequence_reset)
            seqs.add(new)
            self._entries[part] = new
            entries.append(new)
            sequence = increment_sequence(sequence, part.record_count)
        return entries

    def forget_abandoned_batches(self) -> None:
        """Before EndTxn, when no batch is incomplete. Batches that got a sequence but were then aborted locally (a
        transaction abort drops retries still queued) may or may not be on the broker: the sequences are unknown
        from there, so the next epoch must reset them."""
        for batch, entry in list(self._entries.items()):
            if batch.is_done:
                del self._entries[batch]
                self._partitions[batch.tp].remove(entry)
                self._bump_required = True

    def resolve_sequences(self) -> list[TopicPartition]:
        """Once a partition with an expired sent batch has nothing in flight: if later batches were acknowledged,
        the expired one was written too; otherwise its fate is unknown and the sequences must restart (a new
        epoch). Returns, for a transactional producer, the partitions whose batches may be lost: the open
        transaction must be aborted."""
        lost: list[TopicPartition] = []
        for tp in list(self._unresolved):
            seqs = self._partitions[tp]
            if seqs.in_flight:
                continue
            del self._unresolved[tp]
            if seqs.is_next_sequence(seqs.next_sequence):
                continue
            if self._transactional:
                self._bump_required = True
                lost.append(tp)
            else:
                self._request_epoch_bump(tp)
        return lost


def _after(a: int, b: int) -> bool:
    """``a`` comes after ``b`` in wrapping sequence space (the distance is less than half the space)."""
    return 0 < (a - b) % _SEQUENCE_MODULUS < _SEQUENCE_MODULUS // 2
