"""Sequence bookkeeping methods of the TransactionManager (a mixin, split out to keep files small).

The sender calls these for every batch: ``should_stop_draining`` + ``stamp`` at drain (the accumulator's
``before_drain`` hook), ``batch_succeeded`` / ``can_retry`` / ``batch_failed`` with each answer, and
``maybe_resolve_sequences`` once per round. Rules (after the Java client's TransactionManager and
RecordAccumulator):

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

All methods take the manager's ``_lock``; batch methods (which take the batch's own lock) are called outside it.
"""

from __future__ import annotations

import logging

from typing import TYPE_CHECKING, Any

from spark_kafka_sink.errors import KafkaError, error_for_code
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.transactions._sequences import (
    NO_SEQUENCE,
    InFlightEntry,
    PartitionSequences,
    ProducerIdAndEpoch,
    SequencedBatch,
    increment_sequence,
)

__all__ = ["IdempotenceMixin"]

_log = logging.getLogger(__name__)


class IdempotenceMixin:
    """Per-partition sequence handling of :class:`~spark_kafka_sink.producer.transactions.TransactionManager`."""

    if TYPE_CHECKING:  # fields and helpers of TransactionManager used here
        _lock: Any
        transactional_id: str | None
        _producer: ProducerIdAndEpoch
        _partitions: dict[TopicPartition, PartitionSequences]
        _entries: dict[SequencedBatch, InFlightEntry]
        _unresolved: dict[TopicPartition, int]
        _rewrite_on_bump: set[TopicPartition]
        _bump_required: bool
        _txn_partitions: set[TopicPartition]

        @property
        def is_transactional(self) -> bool: ...
        def _abortable(self, error: KafkaError) -> None: ...
        def _maybe_transition_to_error(self, error: BaseException) -> None: ...
        def _has_usable_producer_id(self) -> bool: ...
        def _has_fatal_error(self) -> bool: ...

    def should_stop_draining(self, batch: SequencedBatch) -> bool:
        """True if ``batch`` (the head of its partition's deque) must not be drained now (Java's
        shouldStopDrainBatchesForPartition): no usable producer id, partition not yet in the transaction, an
        epoch change still draining, an unresolved sequence, or an earlier batch of the partition in flight."""
        tp = batch.tp
        with self._lock:
            if not self._has_usable_producer_id():
                return True
            if self.is_transactional and tp not in self._txn_partitions:
                return True
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
                return (seqs.producer != self._producer or tp in self._unresolved
                        or seqs.last_acked_sequence == NO_SEQUENCE)
            # A retry goes out only when it is the partition's first unfinished batch: one at a time, in order.
            return entry is not seqs.in_flight[0]

    def stamp(self, batch: Any) -> None:
        """At drain: give a new batch the next sequence (or restamp a renumbered one) and set its producer
        state. ``batch`` is a ``ProducerBatch`` (``set_producer_state`` / ``reset_producer_state``)."""
        with self._lock:
            entry = self._entries.get(batch)
            if entry is None:
                seqs = self._partitions.get(batch.tp)
                if seqs is None:
                    seqs = self._partitions[batch.tp] = PartitionSequences(producer=self._producer)
                elif seqs.producer != self._producer and not seqs.in_flight:
                    seqs.start_at_beginning(self._producer)  # the older epoch's batches are all finished
                entry = InFlightEntry(batch, seqs.producer, seqs.next_sequence, batch.record_count)
                seqs.next_sequence = increment_sequence(seqs.next_sequence, batch.record_count)
                seqs.add(entry)
                self._entries[batch] = entry
            want = (entry.producer.producer_id, entry.producer.epoch, entry.base_sequence)
        if (batch.producer_id, batch.producer_epoch, batch.base_sequence) != want:
            if batch.has_sequence:
                batch.reset_producer_state()
            batch.set_producer_state(*want, self.is_transactional)

    def batch_succeeded(self, batch: SequencedBatch, base_offset: int) -> None:
        with self._lock:
            entry = self._entries.pop(batch, None)
            if entry is not None:
                self._partitions[batch.tp].acknowledge(entry, base_offset)

    def can_retry(self, batch: SequencedBatch, error_code: int, log_start_offset: int) -> bool:
        """Whether a produce error on a sequenced batch should be retried (Java's TransactionManager.canRetry);
        may request an epoch bump for the partition."""
        retriable = error_for_code(error_code).retriable
        with self._lock:
            entry = self._entries.get(batch)
            seqs = self._partitions.get(batch.tp)
            if entry is None or seqs is None:
                return retriable
            tp = batch.tp
            if error_code == 59:  # UNKNOWN_PRODUCER_ID: the broker lost our state
                if entry.sequence_reset:
                    return True  # answer to the send before our renumbering
                if 0 <= seqs.last_acked_offset < log_start_offset:
                    # Retention deleted the log head and the producer state with it; nothing was lost.
                    if self.is_transactional:
                        seqs.start_at_beginning(self._producer)
                    else:
                        self._request_epoch_bump(tp)
                    return True
                if not self.is_transactional:
                    self._request_epoch_bump(tp)
                    return True
                return False
            if error_code == 45:  # OUT_OF_ORDER_SEQUENCE_NUMBER
                unresolved = tp in self._unresolved
                if seqs.precedes_acknowledged(entry):
                    # A later batch is already in the log: this one can never be accepted in this epoch. Write it
                    # under a new epoch rather than lose it (transactions abort instead).
                    _log.warning("%s: batch with sequence %d was overtaken by acknowledged batches", tp,
                                 entry.base_sequence)
                    if self.is_transactional:
                        return False
                    self._request_epoch_bump(tp)
                    return True
                if not unresolved and (entry.sequence_reset or not seqs.is_next_sequence(entry.base_sequence)):
                    return True  # an earlier batch failed first: this one is retried after it, in order
                if not self.is_transactional:
                    if not unresolved or self._unresolved[tp] == entry.base_sequence:
                        self._request_epoch_bump(tp)  # a real gap
                    return True
                return False
            return retriable

    def batch_failed(self, batch: SequencedBatch, error: BaseException, *, maybe_written: bool) -> None:
        """A batch reached a final failure. ``maybe_written``: it was sent and its fate is unknown (expired)."""
        with self._lock:
            self._maybe_transition_to_error(error)
            entry = self._entries.pop(batch, None)
            if entry is None or self._has_fatal_error():
                return
            seqs = self._partitions[batch.tp]
            seqs.remove(entry)
            if self.is_transactional:
                self._bump_required = True  # renumber everything after the abort
            elif maybe_written:
                following = increment_sequence(entry.base_sequence, entry.record_count)
                self._unresolved[batch.tp] = max(self._unresolved.get(batch.tp, following), following)
            else:
                self._request_epoch_bump(batch.tp)  # the broker did not write it: a gap from here on

    def _forget_abandoned_batches(self) -> None:
        # Caller holds _lock; before EndTxn, when no batch is incomplete. Batches that got a sequence but were
        # then aborted locally (a transaction abort drops retries still queued) may or may not be on the broker:
        # the sequences are unknown from there, so the next epoch must reset them.
        for batch, entry in list(self._entries.items()):
            if batch.is_done:
                del self._entries[batch]
                self._partitions[batch.tp].remove(entry)
                self._bump_required = True

    def maybe_resolve_sequences(self) -> None:
        """Once a partition with an expired sent batch has nothing in flight: if later batches were acknowledged,
        the expired one was written too; otherwise its fate is unknown and the sequences must restart."""
        with self._lock:
            for tp in list(self._unresolved):
                seqs = self._partitions[tp]
                if seqs.in_flight:
                    continue
                del self._unresolved[tp]
                if seqs.is_next_sequence(seqs.next_sequence):
                    continue
                if self.is_transactional:
                    self._bump_required = True
                    self._abortable(KafkaError(
                        f"no acknowledgement for some batches sent to {tp} and they can no longer be retried; "
                        "abort the transaction and continue"))
                else:
                    self._request_epoch_bump(tp)

    def _request_epoch_bump(self, tp: TopicPartition) -> None:
        _log.info("sequence gap on %s: requesting a new producer epoch", tp)
        self._bump_required = True
        self._rewrite_on_bump.add(tp)

    def _set_producer(self, producer: ProducerIdAndEpoch, *, reset_all: bool) -> None:
        # Caller holds _lock. Called with the InitProducerId answer.
        _log.info("%s for %s", producer, self.transactional_id or "idempotent producer")
        self._producer = producer
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
