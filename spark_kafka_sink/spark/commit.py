"""Commit messages (task -> driver) and the driver's side of the write: commit or abort, then one summary line.

A task returns a :class:`KafkaCommitMessage`: its transaction's identity (exactly_once) and what it wrote per
topic-partition. On the driver, Spark calls ``commit(messages)`` once every task succeeded, or ``abort(messages)``
when the job failed (failed tasks' messages are None; Spark also calls abort when commit raised).

exactly_once: :func:`commit_write` ends every task's transaction with EndTxn(commit) from the driver, in parallel,
retrying retriable errors until the commit timeout; if any cannot be committed it raises
:class:`TransactionCommitError` after trying all of them, saying which were committed (those rows are visible:
Kafka has no transaction spanning several producers). :func:`abort_write` aborts the transactions it knows and
fences the deterministic ids of failed tasks (InitProducerId aborts whatever a dead attempt left open), so no
transaction is left to block read_committed consumers. Abort never raises: Spark re-raises the job's own error,
which is the one the user needs; abort problems are logged.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.spark.options import SinkOptions

__all__ = [
    "PartitionWrite", "KafkaCommitMessage", "WriteSummary", "TransactionCommitError", "commit_write",
    "abort_write", "summarize", "LOGGER_NAME",
]

LOGGER_NAME = "spark_kafka_sink.spark"
_log = logging.getLogger(LOGGER_NAME)
_MAX_PARALLEL_END_TXN = 8  # EndTxn round trips overlap; more threads only queue at one coordinator
_RETRY_BACKOFF_S = 0.2
_SUMMARY_PARTITIONS = 20  # one log line stays readable: the rest is counted, not listed


@dataclass(frozen=True)
class PartitionWrite:
    """What one task wrote to one topic-partition (offsets inclusive, as the broker assigned them)."""

    topic: str
    partition: int
    records: int
    bytes: int
    first_offset: int
    last_offset: int


@dataclass(frozen=True)
class KafkaCommitMessage(WriterCommitMessage):
    """One task's result. Plain values only: Spark pickles it to the driver."""

    partition_id: int
    attempt: int
    transactional_id: str | None  # None for at_least_once
    producer_id: int  # -1 unless transactional
    producer_epoch: int
    writes: tuple[PartitionWrite, ...]
    started_at: float  # wall clock, seconds: the summary's duration spans the earliest task start
    batch_id: int | None = None  # the streaming micro-batch

    @property
    def rows(self) -> int:
        return sum(w.records for w in self.writes)

    @property
    def bytes(self) -> int:
        return sum(w.bytes for w in self.writes)

    @property
    def has_transaction(self) -> bool:
        """True when an open transaction holds records (an empty transaction never reached the coordinator)."""
        return self.transactional_id is not None and bool(self.writes)


class TransactionCommitError(KafkaError):
    """The driver could not commit every task's transaction. The message lists which failed and which committed."""


@dataclass(frozen=True)
class WriteSummary:
    guarantee: str
    rows: int
    bytes: int
    seconds: float
    tasks: int
    partitions: tuple[PartitionWrite, ...]  # merged per topic-partition; offsets = lowest first, highest last
    batch_id: int | None = None
    write_id: int | None = None

    @property
    def rows_per_second(self) -> float:
        """The write's own rate: rows over the time from the first task's start to the commit."""
        return self.rows / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        where = f"micro-batch {self.batch_id}: " if self.batch_id is not None else ""
        if self.write_id is not None:
            where += f"writeId {self.write_id}: "
        ranges = ", ".join(f"{p.topic}[{p.partition}] {p.first_offset}-{p.last_offset} ({p.records} rows)"
                           for p in self.partitions[:_SUMMARY_PARTITIONS])
        more = len(self.partitions) - _SUMMARY_PARTITIONS
        if more > 0:
            ranges += f", ... and {more} more topic-partitions"
        return (f"pykafka-sink {where}committed {self.rows} rows, {self.bytes} bytes, {self.guarantee}, "
                f"{self.tasks} tasks, {self.seconds:.1f} s, {self.rows_per_second:,.0f} rows/s; "
                f"offsets: {ranges or 'none'}")


def summarize(options: SinkOptions, messages: Sequence[KafkaCommitMessage], batch_id: int | None = None,
              now: float | None = None) -> WriteSummary:
    merged: dict[tuple[str, int], PartitionWrite] = {}
    for message in messages:
        for w in message.writes:
            seen = merged.get((w.topic, w.partition))
            merged[(w.topic, w.partition)] = w if seen is None else PartitionWrite(
                w.topic, w.partition, seen.records + w.records, seen.bytes + w.bytes,
                min(seen.first_offset, w.first_offset), max(seen.last_offset, w.last_offset))
    start = min((m.started_at for m in messages), default=now or time.time())
    return WriteSummary(
        guarantee=options.guarantee.value,
        rows=sum(m.rows for m in messages),
        bytes=sum(m.bytes for m in messages),
        seconds=max(0.0, (now or time.time()) - start),
        tasks=len(messages),
        partitions=tuple(merged[k] for k in sorted(merged)),
        batch_id=batch_id,
        write_id=options.write_id,
    )


def _log_summary(line: str) -> None:
    # Spark's Python workers configure no logging: without a handler an INFO line would vanish, so the summary gets
    # a stderr handler (which Spark forwards to the driver's log) unless the application configured its own.
    if not _log.hasHandlers():
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        _log.addHandler(handler)
        _log.setLevel(logging.INFO)
    _log.info(line)


def _commit_timeout_s(options: SinkOptions) -> float:
    # A commit may wait for the coordinator to write markers on every partition: allow a request timeout several
    # times over, at least one minute.
    request_ms = int(options.producer_options.get("request.timeout.ms", 30_000))
    return max(60.0, 3 * request_ms / 1000)


# ------------------------------------------------------------------------------------------ commit


def commit_write(options: SinkOptions, messages: Sequence[KafkaCommitMessage | None],
                 batch_id: int | None = None) -> WriteSummary:
    """Make the write visible (exactly_once: end every transaction), then log and return the summary."""
    done = [m for m in messages if m is not None]
    if len(done) != len(messages):
        # Spark calls commit only when every task succeeded; a gap means a protocol change we do not understand.
        missing = [i for i, m in enumerate(messages) if m is None]
        raise TransactionCommitError(f"commit called without the messages of Spark partitions {missing}")
    if options.exactly_once:
        pending = [m for m in done if m.has_transaction]
        failures = _run_all(pending, lambda m: _end(options, m, commit=True))
        if failures:
            raise TransactionCommitError(_commit_failure_text(options, pending, failures))
    summary = summarize(options, done, batch_id)
    _log_summary(summary.line())
    return summary


def _commit_failure_text(options: SinkOptions, pending: Sequence[KafkaCommitMessage],
                         failures: dict[str, BaseException]) -> str:
    committed = [m for m in pending if m.transactional_id not in failures]
    details = "; ".join(f"{tid}: {type(e).__name__}: {e}" for tid, e in sorted(failures.items()))
    timeout_ms = options.producer_options.get("transaction.timeout.ms")
    visible = (f"{len(committed)} were committed: their {sum(m.rows for m in committed)} rows are visible, the "
               f"others' rows are not" if committed else "0 were committed: no row of this write is visible")
    text = (f"{len(failures)} of {len(pending)} Kafka transactions could not be committed ({details}). {visible}. "
            f"A fenced producer or invalid epoch usually means the transaction outlived "
            f"transaction.timeout.ms ({timeout_ms} ms) and the broker aborted it: raise kafka.transaction.timeout.ms "
            f"(at most the broker's transaction.max.timeout.ms) or write less per job.")
    return text


# ------------------------------------------------------------------------------------------ abort


def abort_write(options: SinkOptions, messages: Sequence[KafkaCommitMessage | None],
                batch_id: int | None = None) -> None:
    """Leave no transaction open after a failed write. Logs what it did; never raises."""
    where = f" (micro-batch {batch_id})" if batch_id is not None else ""
    if not options.exactly_once:
        rows = sum(m.rows for m in messages if m is not None)
        _log.warning("pykafka-sink write failed%s: at_least_once keeps the %d rows already acknowledged by "
                     "successful tasks (and any sent by failed ones)", where, rows)
        return
    known = [m for m in messages if m is not None and m.has_transaction]
    aborted = _run_all(known, lambda m: _end(options, m, commit=False))
    failed_ids = [options.transactional_id(i) for i, m in enumerate(messages) if m is None]
    fenced = _run_all(failed_ids, lambda tid: _fence(options, tid))
    for tid, error in {**aborted, **fenced}.items():
        # An abort after a partly failed commit meets committed transactions: nothing is left open there.
        _log.warning("pykafka-sink abort%s: %s: %s: %s", where, tid, type(error).__name__, error)
    _log.warning("pykafka-sink write failed%s: aborted %d transaction(s), fenced %d failed task id(s)%s",
                 where, len(known) - len(aborted), len(failed_ids) - len(fenced),
                 "" if not (aborted or fenced) else "; see the warnings above for the ones that could not be ended")


# ------------------------------------------------------------------------------------------ helpers

_T = TypeVar("_T")


def _run_all(items: Sequence[_T], action: Callable[[_T], None]) -> dict[str, BaseException]:
    """Run ``action`` on every item in parallel; returns {transactional id: error} of those that failed."""
    if not items:
        return {}
    failures: dict[str, BaseException] = {}
    with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL_END_TXN, len(items)),
                            thread_name_prefix="pykafka-sink-endtxn") as pool:
        futures = {_id_of(item): pool.submit(action, item) for item in items}
        for tid, future in futures.items():
            error = future.exception()
            if error is not None:
                failures[tid] = error
    return failures


def _id_of(item: Any) -> str:
    return item if isinstance(item, str) else str(item.transactional_id)


def _retrying(what: Callable[[float], None], timeout_s: float) -> None:
    """Call ``what(remaining_s)`` until it succeeds, a non-retriable error, or the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        remaining = deadline - time.monotonic()
        try:
            what(max(remaining, 1.0))
            return
        except KafkaError as exc:
            if not exc.retriable or deadline - time.monotonic() <= _RETRY_BACKOFF_S:
                raise
        time.sleep(_RETRY_BACKOFF_S)  # backoff between retries of a retriable broker error


def _end(options: SinkOptions, message: KafkaCommitMessage, *, commit: bool) -> None:
    from spark_kafka_sink.producer import TransactionIdentity, end_transaction

    identity = TransactionIdentity(str(message.transactional_id), message.producer_id, message.producer_epoch)
    config = options.producer_config()
    _retrying(lambda remaining: end_transaction(config, identity, commit, remaining), _commit_timeout_s(options))


def _fence(options: SinkOptions, transactional_id: str) -> None:
    from spark_kafka_sink.producer import fence_transactional_id

    config = options.producer_config()
    _retrying(lambda remaining: fence_transactional_id(config, transactional_id, remaining),
              _commit_timeout_s(options))
