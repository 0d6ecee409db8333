"""``ProducerBatch``: one topic-partition's batch, from first append to its one final state.

Two ways to fill one:

* per record: ``ProducerBatch.for_records(...)`` stages records as columns (``RecordStage``), encoded all at once
  when the batch closes; ``try_append`` returns a ``Future[RecordMetadata]`` per record (or None when full), and
  takes an optional completion callback per record, run when the batch completes, after all of its futures;
* bulk: ``ProducerBatch.from_encoded(...)`` holds one batch already encoded by ``protocol.arrow_encoder``; it is
  closed from the start and has ONE ``Future[BatchMetadata]``.

Life cycle (``BatchState`` + ``_TRANSITIONS``; anything else raises IllegalStateError naming both states)::

    OPEN -> CLOSED -> IN_FLIGHT -> SUCCEEDED | FAILED | ABORTED | SPLIT
                        |   ^
                        v   |
                      RETRYING          (any non-final state may also end FAILED or ABORTED)

Splitting (Java's ``ProducerBatch.split``): a batch the broker refused as MESSAGE_TOO_LARGE is re-built by
``split(max_bytes)`` into closed batches of at most ``max_bytes`` (uncompressed) each, in record order, with the
same creation time; its record futures move to them, and a bulk batch's future completes once all of them have,
with one BatchMetadata for its rows (``base_offset`` the smallest, ``split_last_offset`` the largest offset).
``mark_split()`` then ends the batch in SPLIT: final, its memory released, nothing fired. Parts are built outside
the buffer pool, as Java's are.

``done()`` may be called again for a batch that already FAILED or was ABORTED (a broker answer arriving after
delivery.timeout.ms expired it): the late result is ignored and ``done`` returns False, as in the Java client.
Changing a SUCCEEDED batch raises.

Producer state: ``set_producer_state`` stamps producer id / epoch / base sequence at drain time. A retried batch
is re-sent with identical bytes: setting a different state on a batch that has one raises unless
``reset_producer_state()`` was called first (epoch bump / sequence reset).

Threads: appends happen while the accumulator holds the lock of this partition's deque; ``_lock`` guards
``_state`` and the producer-state fields; the sender thread owns ``attempts`` / ``last_attempt_ms`` /
``retry_at_ms`` / ``sent_leader_epoch`` / ``last_error``. Futures are completed outside ``_lock`` (their
callbacks may call back into the producer).
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TypeVar

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.record_future import RecordFuture
from spark_kafka_sink.producer.record_metadata import (
    NO_OFFSET,
    NO_TIMESTAMP,
    BatchMetadata,
    RecordMetadata,
    TopicPartition,
)
from spark_kafka_sink.producer.record_outcomes import LazyRecordFuture, RecordOutcomes, RowPlaces
from spark_kafka_sink.producer.record_stage import RecordStage
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch
from spark_kafka_sink.protocol.record_batch import (
    HEADER_SIZE,
    BatchBuilder,
    Header,
    crc_header,
    decode_batch,
    producer_state_header,
)

__all__ = ["BatchState", "ProducerBatch", "NO_PRODUCER_ID", "NO_SEQUENCE", "gather_batch_futures",
           "RecordCallback"]

_log = logging.getLogger(__name__)
_new_future = object.__new__
_T = TypeVar("_T")
#: Called once per record when its batch completes: ``(metadata, None)`` or ``(None, error)``.
RecordCallback = Callable[[RecordMetadata | None, BaseException | None], object]
NO_PRODUCER_ID = -1
NO_SEQUENCE = -1


class BatchState(enum.Enum):
    OPEN = "open"  # accepting appends
    CLOSED = "closed"  # bytes final, waiting in its deque to be drained
    IN_FLIGHT = "in_flight"  # inside a produce request
    RETRYING = "retrying"  # re-enqueued after a retriable error, waiting out its backoff
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    ABORTED = "aborted"  # abandoned (transaction abort, producer closed / fatal error) without being sent again
    SPLIT = "split"  # refused as too large; its records went on in smaller batches (see the module docstring)

    # Members are singletons compared by identity: hash them so too. Enum's own __hash__ is Python code hashing the
    # name, and every state change looks states up in the frozensets below (~0.1 us a lookup, several a batch).
    __hash__ = object.__hash__

    @property
    def is_final(self) -> bool:
        return self in _FINAL


_OPEN = BatchState.OPEN  # read per record appended: a module global costs one lookup, the member two
_FINAL = frozenset({BatchState.SUCCEEDED, BatchState.FAILED, BatchState.ABORTED, BatchState.SPLIT})
_ENDINGS = frozenset({BatchState.FAILED, BatchState.ABORTED})
_LATE_ANSWER_IGNORED = _ENDINGS | {BatchState.SPLIT}
_TRANSITIONS: dict[BatchState, frozenset[BatchState]] = {
    BatchState.OPEN: frozenset({BatchState.CLOSED}) | _ENDINGS,
    BatchState.CLOSED: frozenset({BatchState.IN_FLIGHT}) | _ENDINGS,
    BatchState.IN_FLIGHT: frozenset({BatchState.RETRYING, BatchState.SUCCEEDED, BatchState.SPLIT}) | _ENDINGS,
    BatchState.RETRYING: frozenset({BatchState.IN_FLIGHT}) | _ENDINGS,
    BatchState.SUCCEEDED: frozenset(),
    BatchState.FAILED: frozenset(),
    BatchState.ABORTED: frozenset(),
    BatchState.SPLIT: frozenset(),
}


def _uncancellable() -> Future[_T]:
    # A record handed to the producer cannot be recalled: the future starts RUNNING so that cancel() returns False
    # (as Java's futures refuse cancellation) and completing it later cannot hit InvalidStateError. RecordFuture
    # also skips the per-future Condition (~1.4 KB) until someone waits: see record_future.py.
    return RecordFuture()


class ProducerBatch:
    """One topic-partition's record batch (see the module docstring)."""

    def __init__(
        self,
        tp: TopicPartition,
        created_ms: int,
        *,
        records: RecordStage | BatchBuilder | None = None,
        encoded: EncodedBatch | None = None,
        allocated_bytes: int = 0,
    ) -> None:
        if (records is None) == (encoded is None):
            raise ValueError("a ProducerBatch wraps either staged records or an EncodedBatch")
        self.tp = tp
        self.created_ms = created_ms
        self.allocated_bytes = allocated_bytes  # buffer-pool bytes to give back when the batch completes
        self._records = records  # a RecordStage while open; a split part's BatchBuilder, built
        self._encoded = encoded
        self._built: bytes | None = None if encoded is None else encoded.data
        # Per-record batches: what their records' futures read once the batch completes (record_outcomes.py),
        # and per record, in append order, its callback (None until one record has one).
        self._outcomes: RecordOutcomes | None = None
        self._record_callbacks: list[RecordCallback | None] | None = None
        self.batch_future: Future[BatchMetadata] | None = None if encoded is None else _uncancellable()
        self.last_append_ms = created_ms
        # Owned by the sender thread (accumulator drain/reenqueue run on it):
        self.attempts = 0  # times re-enqueued for a retry (0 on the first send), as Java's attempts()
        self.last_attempt_ms = created_ms
        self.retry_at_ms = created_ms  # not drained again before this (retry backoff)
        self.sent_leader_epoch = -1  # the partition's leader epoch when last drained (-1: unknown or not yet)
        self.drained_ms = -1
        self.last_error: BaseException | None = None  # why the last attempt failed (named if the batch expires)
        self._lock = threading.Lock()
        # Guarded by _lock:
        self._state = BatchState.OPEN if encoded is None else BatchState.CLOSED
        self._producer_id = NO_PRODUCER_ID
        self._producer_epoch = -1
        self._base_sequence = NO_SEQUENCE
        self._transactional = False
        # The header sent in front of _built's records when it differs from _built's own (producer state stamped,
        # or the CRC the encoder left out); None: _built goes as it is. Cached so that retries send identical bytes.
        self._header: bytes | None = None
        self._error: BaseException | None = None
        # Why building the records failed at close (the batch is then CLOSED with no bytes, and the sender fails it
        # rather than send it); None for a batch built or encoded.
        self._build_error: Exception | None = None
        # True once the futures fired and on_complete ran (so memory is back when a flush returns). The Event is
        # made only when someone waits before that (a flush): building one per batch cost ~10 us of the caller's
        # time on the bulk path, where batches are made by the thousand per second. Both guarded by _lock.
        self._completed = False
        self._completed_event: threading.Event | None = None
        # Called once with this batch when it reaches a final state (the accumulator frees its memory here).
        self.on_complete: Callable[[ProducerBatch], None] | None = None

    @classmethod
    def for_records(
        cls, tp: TopicPartition, batch_size: int, compression: int | str, created_ms: int, *,
        allocated_bytes: int = 0, transactional: bool = False, compression_level: int | None = None,
    ) -> ProducerBatch:
        stage = RecordStage(batch_size, compression, transactional=transactional,
                            compression_level=compression_level)
        batch = cls(tp, created_ms, records=stage, allocated_bytes=allocated_bytes)
        batch._outcomes = RecordOutcomes(tp, stage.timestamps)  # one list for both: kept past the build
        return batch

    @classmethod
    def from_encoded(cls, tp: TopicPartition, encoded: EncodedBatch, created_ms: int, *,
                     allocated_bytes: int = 0) -> ProducerBatch:
        return cls(tp, created_ms, encoded=encoded, allocated_bytes=allocated_bytes)

    def __repr__(self) -> str:
        return (f"ProducerBatch({self.tp}, {self._state.name}, records={self.record_count}, "
                f"bytes={self.size_in_bytes}, attempts={self.attempts})")

    # ------------------------------------------------------------------------------------------ filling

    @property
    def is_bulk(self) -> bool:
        return self._encoded is not None

    @property
    def first_row(self) -> int:
        """Bulk batches: the index of their first row in the caller's input; per-record batches: 0."""
        return 0 if self._encoded is None else self._encoded.first_row

    @property
    def record_count(self) -> int:
        if self._encoded is not None:
            return self._encoded.record_count
        assert self._records is not None
        return self._records.record_count

    @property
    def uncompressed_size(self) -> int:
        """Header + uncompressed records: what counts against batch.size (and a split's ``max_bytes``)."""
        if self._encoded is not None:
            return self._encoded.uncompressed_size
        assert self._records is not None
        return self._records.estimated_size

    @property
    def size_in_bytes(self) -> int:
        """Exact size once closed; before, the builder's upper bound (header + uncompressed records)."""
        if self._built is not None:
            return len(self._built)
        assert self._records is not None
        return self._records.estimated_size

    def try_append(self, timestamp_ms: int, key: bytes | None, value: bytes | None,
                   headers: Sequence[Header], now_ms: int, callback: RecordCallback | None = None
                   ) -> Future[RecordMetadata] | None:
        """Append one record; None when it does not fit (the batch is full). Caller holds the deque lock.
        ``callback``: run on completion, after every future of the batch is set (see ``_fire``)."""
        records = self._records
        if records is None or self._state is not _OPEN:
            raise IllegalStateError(f"append to a {self._state.name} {'bulk ' if self.is_bulk else ''}batch of "
                                    f"{self.tp}")
        if not records.try_append(timestamp_ms, key, value, headers):
            return None
        outcomes = self._outcomes
        assert outcomes is not None  # made with the stage
        index = len(outcomes.timestamps) - 1
        if callback is not None or self._record_callbacks is not None:
            if self._record_callbacks is None:
                self._record_callbacks = [None] * index
            self._record_callbacks.append(callback)
        self.last_append_ms = now_ms
        # LazyRecordFuture(outcomes, index) without the constructor call: its Python __init__ cost more than the
        # rest of this method, once per record sent.
        future = _new_future(LazyRecordFuture)
        future._outcomes = outcomes
        future._index = index
        return future

    def append_run(self, rows: Sequence[int], timestamps: Sequence[int], keys: Sequence[bytes | None],
                   values: Sequence[bytes], callbacks: Sequence[RecordCallback | None] | None, places: RowPlaces,
                   now_ms: int, soft_budget: int, hard_budget: int, queued_behind: bool) -> tuple[int, int, bool]:
        """Append headerless records ``rows`` in order while they fit, as ``try_append`` each, within the budgets
        of ``RecordStage.append_run``; each appended row's place goes to ``places`` and its callback (from
        ``callbacks``, aligned with the columns) is kept. Caller holds the deque lock. Returns what the stage's
        ``append_run`` returns."""
        records = self._records
        if not isinstance(records, RecordStage) or self._state is not _OPEN:
            raise IllegalStateError(f"append to a {self._state.name} {'bulk ' if self.is_bulk else ''}batch of "
                                    f"{self.tp}")
        first = records.record_count
        staged, run_bytes, refused = records.append_run(rows, timestamps, keys, values, soft_budget, hard_budget,
                                                        queued_behind)
        if staged:
            outcomes = self._outcomes
            assert outcomes is not None  # made with the stage
            appended = rows[:staged]
            places.place(appended, outcomes, first)
            if callbacks is not None or self._record_callbacks is not None:
                if self._record_callbacks is None:
                    self._record_callbacks = [None] * first
                self._record_callbacks.extend([None] * staged if callbacks is None
                                              else [callbacks[row] for row in appended])
            self.last_append_ms = now_ms
        return staged, run_bytes, refused

    @property
    def is_open(self) -> bool:
        """Still taking appends (read without the lock: see ``RecordAccumulator._try_append``)."""
        return self._state is _OPEN

    def is_full(self) -> bool:
        """Closed, or its records reached the batch's limit (``batch_size`` of ``for_records``)."""
        if self._state is not BatchState.OPEN:
            return True
        assert self._records is not None  # only per-record batches start OPEN
        return self._records.estimated_size >= self._records.max_bytes

    def close(self) -> None:
        """No more appends; build the bytes (compressing them). Closing a closed batch does nothing.

        If the build raises, the batch is CLOSED all the same, with no bytes and the error in ``build_error``: it
        takes no more records, and the sender fails its futures with that error instead of sending it, so one
        batch that cannot be built never blocks its partition."""
        with self._lock:
            if self._state is not BatchState.OPEN:
                return
            assert self._records is not None  # only per-record batches start OPEN
            try:
                self._built = self._records.build()
            except Exception as exc:  # noqa: BLE001 -- any failure: the sender fails the batch with it
                self._build_error = exc
            self._transition(BatchState.CLOSED)

    @property
    def build_error(self) -> Exception | None:
        """Why :meth:`close` could not build the records (None: built, or not closed yet)."""
        with self._lock:
            return self._build_error

    # ------------------------------------------------------------------------------------------ state

    @property
    def state(self) -> BatchState:
        with self._lock:
            return self._state

    @property
    def is_done(self) -> bool:
        return self.state.is_final

    @property
    def error(self) -> BaseException | None:
        with self._lock:
            return self._error

    def _transition(self, to: BatchState) -> None:
        # Caller holds _lock.
        if to not in _TRANSITIONS[self._state]:
            raise IllegalStateError(f"batch of {self.tp}", from_state=self._state, to_state=to)
        self._state = to

    def mark_in_flight(self, now_ms: int, leader_epoch: int = -1) -> None:
        """Drained into a request (CLOSED or RETRYING -> IN_FLIGHT) for the leader of epoch ``leader_epoch``."""
        with self._lock:
            self._transition(BatchState.IN_FLIGHT)
        self.drained_ms = max(self.drained_ms, now_ms)
        self.sent_leader_epoch = leader_epoch

    def leader_changed_since_sent(self, leader_epoch: int) -> bool:
        """A retry would go to a newer leader than the last attempt did: Java sends it without the backoff."""
        return self.attempts > 0 and leader_epoch > self.sent_leader_epoch  # -1 (unknown) is never newer

    def mark_retrying(self, now_ms: int, backoff_ms: int) -> None:
        """A retriable error: count the attempt and wait ``backoff_ms`` before the next drain."""
        with self._lock:
            self._transition(BatchState.RETRYING)
        self.attempts += 1
        self.last_attempt_ms = now_ms
        self.retry_at_ms = now_ms + backoff_ms

    def has_reached_delivery_timeout(self, now_ms: int, delivery_timeout_ms: int) -> bool:
        return now_ms - self.created_ms >= delivery_timeout_ms

    # ------------------------------------------------------------------------------------------ producer state

    @property
    def producer_id(self) -> int:
        with self._lock:
            return self._producer_id

    @property
    def producer_epoch(self) -> int:
        with self._lock:
            return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        with self._lock:
            return self._base_sequence

    @property
    def producer_state(self) -> tuple[int, int, int]:
        """``(producer_id, producer_epoch, base_sequence)`` as stamped, read together (one lock, not three)."""
        with self._lock:
            return self._producer_id, self._producer_epoch, self._base_sequence

    @property
    def has_sequence(self) -> bool:
        with self._lock:
            return self._base_sequence != NO_SEQUENCE

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int,
                           transactional: bool) -> None:
        """Stamp the producer state (at drain). Same values again: no-op; different values on a stamped batch:
        IllegalStateError -- a retry must resend identical bytes unless ``reset_producer_state`` came first."""
        state = (producer_id, producer_epoch, base_sequence, transactional)
        with self._lock:
            current = (self._producer_id, self._producer_epoch, self._base_sequence, self._transactional)
            if current == state:
                return
            if self._base_sequence != NO_SEQUENCE or self._producer_id != NO_PRODUCER_ID:
                raise IllegalStateError(
                    f"batch of {self.tp} already carries producer id {self._producer_id} epoch "
                    f"{self._producer_epoch} sequence {self._base_sequence}; a retry resends identical bytes "
                    "(call reset_producer_state() after an epoch bump or sequence reset)")
            self._producer_id, self._producer_epoch, self._base_sequence, self._transactional = state
            self._header = None

    def reset_producer_state(self) -> None:
        """Forget the stamped state (the epoch was bumped or sequences reset); the next drain stamps anew."""
        with self._lock:
            if self._state is BatchState.IN_FLIGHT:
                raise IllegalStateError(f"reset the producer state of an in-flight batch of {self.tp}")
            self._producer_id, self._producer_epoch = NO_PRODUCER_ID, -1
            self._base_sequence, self._transactional = NO_SEQUENCE, False
            self._header = None

    def payload(self) -> bytes:
        """The bytes to send, in one piece (a copy of the records unless the built batch goes as it is)."""
        return b"".join(self.payload_parts())  # (the built batch itself when it goes as it is)

    def payload_parts(self) -> tuple[bytes | memoryview, ...]:
        """The bytes to send, as buffers to write one after another: the built batch as it is, or a 61-byte header
        (producer state stamped, CRC computed) and a view of the built batch's records. The records are never
        copied: an in-flight batch holds one copy of them, and the sender writes them to the socket from where
        the encoder put them. Identical on every call."""
        with self._lock:
            return self._parts()

    def _parts(self) -> tuple[bytes | memoryview, ...]:
        # Caller holds _lock.
        built = self._built
        if built is None:
            raise IllegalStateError(f"payload of an {self._state.name} batch of {self.tp}: close it first")
        header = self._header
        if header is None:
            if self._producer_id == NO_PRODUCER_ID and not self._transactional:
                # Bulk batches of an idempotent producer are encoded without a CRC (the stamp computes it); without
                # idempotence nothing stamps them, so the CRC is computed here.
                if self._encoded is None or self._encoded.has_crc:
                    return (built,)
                header = crc_header(built)
            else:
                header = producer_state_header(built, self._producer_id, self._producer_epoch, self._base_sequence,
                                               self._transactional)
            self._header = header
        return header, memoryview(built)[HEADER_SIZE:]

    # ------------------------------------------------------------------------------------------ splitting

    def split(self, max_bytes: int, compression: int | str, compression_level: int | None = None
              ) -> list[ProducerBatch]:
        """This batch's records in closed batches of at most ``max_bytes`` each (see the module docstring). The
        futures move at once; call :meth:`mark_split` once the parts are queued (so a flush never sees neither)."""
        with self._lock:
            if self._built is None or self._state is not BatchState.IN_FLIGHT:
                raise IllegalStateError(f"split a {self._state.name} batch of {self.tp}: only an answered one")
            # What was sent (CRC set: a bulk batch's built bytes may have none yet).
            built, transactional = b"".join(self._parts()), self._transactional
        records = decode_batch(built).records
        parts: list[ProducerBatch] = []
        outcomes, callbacks = self._outcomes, self._record_callbacks
        start = 0
        while start < len(records):
            builder = BatchBuilder(max_bytes, compression, transactional=transactional,
                                   compression_level=compression_level)
            end = start
            while end < len(records):
                r = records[end]
                if not builder.try_append(r.timestamp_ms, r.key, r.value, r.headers):
                    break
                end += 1
            part = ProducerBatch._part(self, builder, start, end - start)
            if outcomes is not None:
                part._outcomes = RecordOutcomes(self.tp, outcomes.timestamps[start:end])
                part._record_callbacks = None if callbacks is None else callbacks[start:end]
            parts.append(part)
            start = end
        if outcomes is not None:  # the records' futures now complete with the parts
            outcomes.redirect([p._outcomes for p in parts if p._outcomes is not None],
                              [p.record_count for p in parts])
        self._outcomes, self._record_callbacks = None, None
        if self.batch_future is not None:
            self._complete_when_parts_do(parts)
        return parts

    @classmethod
    def _part(cls, whole: ProducerBatch, builder: BatchBuilder, start: int, count: int) -> ProducerBatch:
        data = builder.build()
        if whole._encoded is None:
            part = cls(whole.tp, whole.created_ms, records=builder)
            part._built = data
            part._state = BatchState.CLOSED
            return part
        encoded = EncodedBatch(data, count, whole._encoded.first_row + start, builder.base_timestamp,
                               builder.max_timestamp, builder.estimated_size)
        return cls(whole.tp, whole.created_ms, encoded=encoded)

    def _complete_when_parts_do(self, parts: list[ProducerBatch]) -> None:
        whole = self.batch_future
        assert whole is not None
        gathered = gather_batch_futures([p.batch_future for p in parts if p.batch_future is not None])

        def done(f: Future[list[BatchMetadata]]) -> None:
            error = f.exception()
            if error is not None:
                whole.set_exception(error)
                return
            pieces = f.result()
            known = [m for m in pieces if m.base_offset != NO_OFFSET]
            base = min((m.base_offset for m in known), default=NO_OFFSET)
            last = max((m.last_offset for m in known), default=NO_OFFSET)
            whole.set_result(BatchMetadata(self.tp.topic, self.tp.partition, base, self.record_count,
                                           self.first_row, pieces[0].log_append_time_ms, last))

        gathered.add_done_callback(done)

    def mark_split(self) -> None:
        """End this batch in SPLIT once its parts are queued: memory released (``on_complete``), nothing fired."""
        with self._lock:
            self._transition(BatchState.SPLIT)
        if self.on_complete is not None:
            self.on_complete(self)
        with self._lock:
            self._completed = True
            event = self._completed_event
        if event is not None:
            event.set()

    # ------------------------------------------------------------------------------------------ completion

    def done(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> bool:
        """Complete with the broker's answer (``error`` None: SUCCEEDED, else FAILED); fire the futures.
        Returns False, changing nothing, when the batch had already FAILED or been ABORTED."""
        return self._complete(BatchState.SUCCEEDED if error is None else BatchState.FAILED,
                              base_offset, log_append_time_ms, error)

    def abort(self, error: BaseException) -> bool:
        """Abandon the batch without sending it again (ABORTED); its futures fail with ``error``."""
        return self._complete(BatchState.ABORTED, NO_OFFSET, NO_TIMESTAMP, error)

    def _complete(self, final: BatchState, base_offset: int, log_append_time_ms: int,
                  error: BaseException | None) -> bool:
        with self._lock:
            if self._state in _LATE_ANSWER_IGNORED:
                return False  # a late answer for an expired/aborted/split batch (Java ignores it too)
            self._transition(final)
            self._error = error
        try:
            self._fire(base_offset, log_append_time_ms, error)
        finally:
            if self.on_complete is not None:
                self.on_complete(self)
            with self._lock:
                self._completed = True
                event = self._completed_event
            if event is not None:
                event.set()
        return True

    def await_completion(self, timeout_s: float | None = None) -> bool:
        """Block until the batch reached its final state and released its memory; False if ``timeout_s`` passed."""
        with self._lock:
            if self._completed:
                return True
            if self._completed_event is None:
                self._completed_event = threading.Event()
            event = self._completed_event
        return event.wait(timeout_s)

    def _fire(self, base_offset: int, log_append_time_ms: int, error: BaseException | None) -> None:
        topic, partition = self.tp
        if self.batch_future is not None:
            if error is None:
                self.batch_future.set_result(BatchMetadata(topic, partition, base_offset, self.record_count,
                                                           self.first_row, log_append_time_ms))
            else:
                self.batch_future.set_exception(error)
        outcomes, callbacks = self._outcomes, self._record_callbacks
        self._record_callbacks = None  # let them go
        if outcomes is None:
            return
        outcomes.complete(base_offset, log_append_time_ms, error)  # every record's future at once
        if callbacks is not None:
            # Per batch, after every future is set: one pass instead of a done-callback per future.
            for index, callback in enumerate(callbacks):
                if callback is not None:
                    try:
                        callback(None if error is not None else outcomes.metadata(index), error)
                    except Exception:  # a user callback must not break the sender thread or its batch-mates
                        _log.exception("producer callback raised")


def gather_batch_futures(futures: Sequence[Future[BatchMetadata]]) -> Future[list[BatchMetadata]]:
    """One future over many bulk batches (e.g. one ``send_batch`` call): completes when all have, with their
    metadata in the given order, or with the first failure (in that order) if any failed."""
    combined: Future[list[BatchMetadata]] = Future()
    if not futures:
        combined.set_result([])
        return combined
    remaining = [len(futures)]
    lock = threading.Lock()  # guards remaining[0]: callbacks run on whichever thread completes each batch

    def on_done(_: Future[BatchMetadata]) -> None:
        with lock:
            remaining[0] -= 1
            if remaining[0]:
                return
        errors = [f.exception() for f in futures if f.exception() is not None]
        if errors:
            combined.set_exception(errors[0])
        else:
            combined.set_result([f.result() for f in futures])

    for future in futures:
        future.add_done_callback(on_done)
    return combined
