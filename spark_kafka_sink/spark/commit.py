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
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pyspark.sql.datasource import WriterCommitMessage

from spark_kafka_sink.errors import InvalidTxnStateError, KafkaError, ProducerFencedError
from spark_kafka_sink.producer.arrow_send import PartitionWrite
from spark_kafka_sink.producer.transactions import CoordinatorSession, TransactionIdentity
from spark_kafka_sink.spark.commit_log import CommitLog, Committed, LoggedWrite, PlannedTransaction
from spark_kafka_sink.spark.dead_letters import TooManyInvalidRecordsError, too_many_text
from spark_kafka_sink.spark.digest import EMPTY_DIGEST
from spark_kafka_sink.spark.options import SinkOptions

__all__ = [
    "KafkaCommitMessage", "WriteSummary", "TransactionCommitError", "SharedPrefixError", "commit_write",
    "abort_write", "recover_write", "summarize", "LOGGER_NAME", "COMMIT_STEPS", "CommitHook", "add_commit_hook",
]

LOGGER_NAME = "spark_kafka_sink.spark"
_log = logging.getLogger(LOGGER_NAME)
_MAX_PARALLEL_END_TXN = 8  # EndTxn round trips overlap; more threads only queue at one coordinator
_RETRY_BACKOFF_S = 0.2
_SUMMARY_PARTITIONS = 20  # one log line stays readable: the rest is counted, not listed
#: The steps of a logged commit (a stable writeId) at which hooks (:func:`add_commit_hook`) are called, in order:
#: the plan recorded; before each transaction's EndTxn; after it (once the log recorded it), or instead after it
#: failed; every EndTxn done and the log flushed; the completion recorded.
COMMIT_STEPS = ("after-plan", "before-end-txn", "after-end-txn", "end-txn-failed", "after-commits", "after-complete")
#: ``hook(step, write_id)``: see :func:`add_commit_hook`.
CommitHook = Callable[[str, int], None]
_commit_hooks: list[CommitHook] = []  # changed only by add_commit_hook and its remover (list ops are atomic)


@dataclass(frozen=True, kw_only=True)
class KafkaCommitMessage(WriterCommitMessage):
    """One task's result, built by keyword. Plain values only: Spark pickles it to the driver."""

    partition_id: int
    attempt: int
    transactional_id: str | None  # None for at_least_once
    started_at: float  # wall clock, seconds: the summary's duration spans the earliest task start
    producer_id: int = -1  # -1 unless transactional
    producer_epoch: int = -1
    writes: tuple[PartitionWrite, ...] = ()
    batch_id: int | None = None  # the streaming micro-batch
    digest: str | None = None  # the rows' digest (spark.digest), with a stable writeId
    skipped_rows: int | None = None  # set when an earlier run of the writeId committed this partition: not written
    new_producer: bool = False  # the task made its producer (not taken from its worker's cache)
    # The transaction's protocol (1 classic, 2 KIP-890): the driver's EndTxn must use the same one (v4 / v5).
    transaction_version: int = 1
    coordinator: int = -1  # the transaction coordinator's node id as the task found it (spares the driver a lookup)
    invalid_records: int = 0  # onInvalidRecord=skip|deadLetter: rows left out of ``writes`` as invalid
    dead_letter_writes: tuple[PartitionWrite, ...] = ()  # where those rows went (deadLetter), in the same transaction

    @property
    def rows(self) -> int:
        return sum(w.records for w in self.writes)

    @property
    def skipped(self) -> bool:
        return self.skipped_rows is not None

    @property
    def bytes(self) -> int:
        return sum(w.bytes for w in self.writes)

    @property
    def has_transaction(self) -> bool:
        """True when an open transaction holds records (an empty transaction never reached the coordinator)."""
        return self.transactional_id is not None and bool(self.writes or self.dead_letter_writes)


class TransactionCommitError(KafkaError):
    """The driver could not commit every task's transaction. The message lists which failed and which committed."""


class SharedPrefixError(TransactionCommitError):
    """The commit failed because another write used the same transactionalIdPrefix meanwhile (seen in the commit
    log); says how many of this write's rows are visible."""


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
    skipped_partitions: int = 0  # committed by an earlier run of this writeId: not written again
    skipped_rows: int = 0
    new_producers: int = 0  # tasks that made a producer (the others took one their worker kept, or sent nothing)
    rate_limit: str = ""  # maxRecordsPerSecond / maxBytesPerSecond as set (RateLimit.describe); empty: none
    invalid_records: int = 0  # onInvalidRecord=skip|deadLetter: rows not written to their topic
    dead_letters: int = 0  # of those, the ones written to the dead-letter topic
    dead_letter_topic: str | None = None

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
        if self.invalid_records or self.dead_letter_topic is not None:
            where += (f"{self.invalid_records} invalid records ({self.dead_letters} dead letters to "
                      f"{self.dead_letter_topic}); " if self.dead_letter_topic is not None
                      else f"{self.invalid_records} invalid records skipped; ")
        if self.skipped_partitions:
            where += (f"skipped {self.skipped_partitions} Spark partitions ({self.skipped_rows} rows) committed by an "
                      f"earlier run; ")
        return (f"pykafka-sink {where}committed {self.rows} rows, {self.bytes} bytes, {self.guarantee}, "
                f"{self.tasks} tasks ({self.new_producers} new producers), {self.seconds:.1f} s, "
                f"{self.rows_per_second:,.0f} rows/s{'' if not self.rate_limit else ' (' + self.rate_limit + ')'}; "
                f"offsets: {ranges or 'none'}")


def summarize(options: SinkOptions, messages: Sequence[KafkaCommitMessage], batch_id: int | None = None,
              now: float | None = None) -> WriteSummary:
    merged: dict[tuple[str, int], PartitionWrite] = {}
    for message in messages:
        for w in message.writes:
            seen = merged.get((w.topic, w.partition))
            merged[(w.topic, w.partition)] = w if seen is None else seen.merge(w)
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
        skipped_partitions=sum(1 for m in messages if m.skipped),
        skipped_rows=sum(m.skipped_rows or 0 for m in messages),
        new_producers=sum(1 for m in messages if m.new_producer),
        rate_limit=options.rate_limit.describe() if options.rate_limit.active else "",
        invalid_records=sum(m.invalid_records for m in messages),
        dead_letters=sum(w.records for m in messages for w in m.dead_letter_writes),
        dead_letter_topic=options.dead_letters.topic,
    )


class _SummaryHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The summary's own handler: the process's stderr, which Spark forwards to the driver's log."""


def _is_pyspark_capture(handler: logging.Handler) -> bool:
    """True for the root handler pyspark 4.1+ adds while ``spark.sql.pyspark.worker.logging.enabled`` is true: it
    feeds ``python_worker_logs()``, it is not the application's logging configuration."""
    try:
        from pyspark.logger.worker_io import JSONFormatterWithMarker
    except ImportError:  # pyspark 4.0 has no worker logging
        return False
    return isinstance(handler.formatter, JSONFormatterWithMarker)


def _configured_elsewhere() -> bool:
    """True when the application configured logging for this logger or an ancestor (pyspark's capture aside)."""
    logger: logging.Logger | None = _log
    while logger is not None:
        if any(not _is_pyspark_capture(h) and not isinstance(h, _SummaryHandler) for h in logger.handlers):
            return True
        logger = logger.parent if logger.propagate else None
    return False


def _log_summary(line: str) -> None:
    # Spark's Python workers configure no logging, and pyspark 4.1+'s worker logging adds only a root handler under
    # root's WARNING level: an INFO line would vanish in both. Unless the application configured logging itself,
    # the summary logger gets INFO and a stderr handler (stderr reaches the driver's log) and still propagates, so
    # pyspark's capture handler, when present, puts the same record in python_worker_logs().
    if not any(isinstance(h, _SummaryHandler) for h in _log.handlers) and not _configured_elsewhere():
        # sys.__stderr__, not sys.stderr: while pyspark captures, sys.stderr is its wrapper, which would also turn
        # the line into a second, ERROR-level record; and the wrapper is gone after the commit while the handler
        # stays for the next commit of a reused worker.
        handler = _SummaryHandler(sys.__stderr__ or sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        _log.addHandler(handler)
        if _log.level == logging.NOTSET:
            _log.setLevel(logging.INFO)
    _log.info(line)


def _commit_timeout_s(options: SinkOptions) -> float:
    # The driver's EndTxn (commit or abort) blocks like Java's commitTransaction: up to max.block.ms. A commit may
    # wait for the coordinator to write markers on every partition, so never less than a request timeout several
    # times over.
    return max(options.max_block_ms, 3 * options.request_timeout_ms) / 1000


# ------------------------------------------------------------------------------------------ commit


def commit_write(options: SinkOptions, messages: Sequence[KafkaCommitMessage | None],
                 batch_id: int | None = None) -> WriteSummary:
    """Make the write visible (exactly_once: end every transaction), then log and return the summary.

    With a stable writeId (streaming, or the writeId option) the commit is recorded in the commit log first (the
    plan), then each EndTxn, then its completion, so a driver that dies anywhere in between is finished by the next
    run's :func:`recover_write` instead of leaving a half-visible write behind.
    """
    done = [m for m in messages if m is not None]
    if len(done) != len(messages):
        # A micro-batch or batch write is committed only when every task returned its message. A continuous-
        # processing query commits epochs whose Python writers never ran: their input never ends. (Spark logs this
        # error and goes on, with nothing written.)
        missing = [i for i, m in enumerate(messages) if m is None]
        hint = "" if batch_id is None else (
            ": a continuous-processing query (trigger(continuous=...)) does that, and pyspark cannot run a Python "
            "data source's writer on a continuous input, so nothing is written. Use a micro-batch trigger (the "
            "default, or trigger(processingTime=...))")
        raise TransactionCommitError(f"commit called without the messages of Spark partitions {missing}{hint}")
    limit = options.dead_letters.max_invalid
    invalid = sum(m.invalid_records for m in done)
    if limit is not None and invalid > limit:
        # Raised before any transaction is ended: Spark then calls abort(), and exactly_once leaves nothing visible.
        raise TooManyInvalidRecordsError(too_many_text(invalid, limit, f"in {len(done)} tasks"))
    if options.exactly_once:
        pending = [m for m in done if m.has_transaction]
        write_id = options.stable_write_id(batch_id)
        if write_id is None or not pending:
            failures = _run_all(options, pending, lambda m, session: _end(options, m, session, commit=True))
        else:
            failures = _commit_logged(options, write_id, done, pending)
        if failures:
            raise TransactionCommitError(_commit_failure_text(options, pending, failures, write_id))
    summary = summarize(options, done, batch_id)
    _log_summary(summary.line())
    return summary


def _commit_logged(options: SinkOptions, write_id: int, done: Sequence[KafkaCommitMessage],
                   pending: Sequence[KafkaCommitMessage]) -> dict[str, BaseException]:
    planned = {m.partition_id: PlannedTransaction(str(m.transactional_id), m.producer_id, m.producer_epoch,
                                                  m.transaction_version, m.rows, str(m.digest)) for m in pending}
    carried = {m.partition_id: Committed(m.skipped_rows if m.skipped_rows is not None else m.rows,
                                         m.digest or EMPTY_DIGEST)
               for m in done if not m.has_transaction}
    with _commit_log(options) as log:
        plan_offset = log.append_plan(write_id, planned, carried)
        _at_step("after-plan", write_id)

        def end(message: KafkaCommitMessage, session: CoordinatorSession) -> None:
            _at_step("before-end-txn", write_id)
            try:
                _end(options, message, session, commit=True)
                log.append_committed(write_id, message.partition_id)
            except BaseException:
                _at_step("end-txn-failed", write_id)
                raise
            _at_step("after-end-txn", write_id)

        failures = _run_all(options, pending, end)
        if failures:
            _check_not_shared(options, log, write_id, plan_offset, pending)
        else:
            log.flush()
            _at_step("after-commits", write_id)
            log.append_complete(write_id)
            _at_step("after-complete", write_id)
    return failures


def _check_not_shared(options: SinkOptions, log: CommitLog, write_id: int, plan_offset: int,
                      pending: Sequence[KafkaCommitMessage]) -> None:
    """After a failed EndTxn: raise :class:`SharedPrefixError` if the commit log shows another write of this prefix
    since this write's plan (its pre-flight took this write's driver for dead and finished the commit)."""
    later = [e for e in log.entries(start_offset=plan_offset + 1) if e.value is not None]
    others = sorted({int(e.value["writeId"]) for e in later if e.kind == "plan" and e.value is not None})
    finished = [e.value for e in later if e.kind == "complete" and e.value is not None
                and int(e.value["writeId"]) == write_id]
    if not others and not finished:
        return  # nothing in the log says the prefix is shared: the usual commit error follows
    total = sum(m.rows for m in pending)
    if finished:
        lost = {int(p) for p in finished[0].get("lost", [])}
        visible = sum(m.rows for m in pending if m.partition_id not in lost)
        outcome = (f"another write's pre-flight took this one for a write whose driver died and committed its "
                   f"transactions: {visible} of this write's {total} rows are visible")
    else:
        outcome = f"0 of this write's {total} rows are visible"
    started = f" (writeId {', '.join(map(str, others))})" if others else ""
    raise SharedPrefixError(
        f"transactionalIdPrefix {options.transactional_id_prefix!r} is used by another write running at the same "
        f"time: while this write (writeId {write_id}) was committing, another write{started} started with the same "
        f"prefix, and its producers fenced this write's. {outcome}. Give each write that may run while another "
        "does its own transactionalIdPrefix (or leave the option out: a batch write then takes a prefix of its "
        "own from the pool). Do not re-run this writeId under this prefix: only a prefix's latest writeId is "
        "remembered, so a re-run would write the visible rows again")


def recover_write(options: SinkOptions) -> LoggedWrite | None:
    """Before a write with a stable writeId: finish the latest logged write of this prefix if its driver died while
    committing, and return it (None when the log has none).

    Each planned transaction not recorded as committed gets EndTxn(commit) with the producer id and epoch the log
    holds -- never InitProducerId, which would abort it. The broker answers NONE for a transaction it committed
    before, so a lost commit record costs one round trip. A transaction the broker aborted meanwhile (its
    transaction.timeout.ms passed, or a failed job's abort() ended it) answers PRODUCER_FENCED or INVALID_TXN_STATE:
    that partition is recorded as lost, and a re-run of the same writeId writes it again.
    """
    with _commit_log(options) as log:
        logged = log.read()
        if logged is None or logged.complete:
            return logged
        unfinished = {t.transactional_id: p for p, t in sorted(logged.planned.items()) if p not in logged.committed}
        lost: set[int] = set()

        def finish(planned: PlannedTransaction, session: CoordinatorSession) -> None:
            partition = unfinished[planned.transactional_id]
            try:
                _end_identity(options, TransactionIdentity(planned.transactional_id, planned.producer_id,
                                                           planned.producer_epoch, planned.transaction_version),
                              session, commit=True)
            except (ProducerFencedError, InvalidTxnStateError) as exc:
                _log.warning("pykafka-sink recovery of writeId %d: Spark partition %d's transaction was aborted by "
                             "the broker (%s); it will be written again", logged.write_id, partition,
                             type(exc).__name__)
                lost.add(partition)
                return
            log.append_committed(logged.write_id, partition)

        failures = _run_all(options, [logged.planned[p] for p in unfinished.values()], finish)
        if failures:
            details = "; ".join(f"{tid}: {type(e).__name__}: {e}" for tid, e in sorted(failures.items()))
            raise TransactionCommitError(
                f"could not finish the commit of writeId {logged.write_id} (prefix "
                f"{options.transactional_id_prefix!r}) that an earlier driver left unfinished: {details}. Nothing "
                "new was written; run the write again")
        log.append_complete(logged.write_id, frozenset(lost))
        _log.warning("pykafka-sink recovered writeId %d of prefix %r: its driver died while committing; %d "
                     "transaction(s) committed now, %d aborted by the broker (written again)", logged.write_id,
                     options.transactional_id_prefix, len(unfinished) - len(lost), len(lost))
        return replace(logged, committed=frozenset(logged.planned) - lost, complete=True, lost=frozenset(lost))


def _commit_log(options: SinkOptions) -> CommitLog:
    return CommitLog(options.commit_log_topic, str(options.transactional_id_prefix), options.producer_config(),
                     _commit_timeout_s(options))


def add_commit_hook(hook: CommitHook) -> Callable[[], None]:
    """Have ``hook(step, write_id)`` called at each step of this process's logged commits (:data:`COMMIT_STEPS`);
    returns the function that removes it. A seam for observers and fault injection (the driver-crash tests stop the
    commit at a step and kill the driver there): with no hook registered, nothing is called. A hook runs on the
    committing thread: the EndTxn steps on the commit's pool threads, several at once; what it raises fails the
    commit like an EndTxn error."""
    _commit_hooks.append(hook)
    return lambda: _commit_hooks.remove(hook)


def _at_step(step: str, write_id: int) -> None:
    for hook in tuple(_commit_hooks):
        hook(step, write_id)


def _commit_failure_text(options: SinkOptions, pending: Sequence[KafkaCommitMessage],
                         failures: dict[str, BaseException], write_id: int | None = None) -> str:
    committed = [m for m in pending if m.transactional_id not in failures]
    committed_ids = sorted(m.partition_id for m in committed)
    failed_ids = sorted(m.partition_id for m in pending if m.transactional_id in failures)
    details = "; ".join(f"{tid}: {type(e).__name__}: {e}" for tid, e in sorted(failures.items()))
    timeout_ms = options.transaction_timeout_ms
    # Timeouts and lost connections only: the coordinators were out of reach for the whole commit, and the
    # transactions they hold stay open until a re-run commits them or transaction.timeout.ms aborts them. An open
    # transaction holds back read_committed consumers on every partition it wrote, committed rows included.
    out_of_reach = all(isinstance(e, KafkaError) and e.retriable for e in failures.values())
    text = f"{len(failures)} of {len(pending)} Kafka transactions could not be committed ({details}). "
    if not committed:
        text += f"0 were committed: no row of this write is visible (Spark partitions {failed_ids}). "
    elif out_of_reach:
        text += (f"Spark partitions {committed_ids} were committed and partitions {failed_ids} were not; the "
                 f"committed {sum(m.rows for m in committed)} rows become visible to read_committed consumers once "
                 f"the transactions left open end. ")
    else:
        text += (f"Spark partitions {committed_ids} were committed: their {sum(m.rows for m in committed)} rows are "
                 f"visible; partitions {failed_ids} were not: their rows are not. ")
    if not out_of_reach:
        text += (f"A fenced producer or invalid epoch usually means the transaction outlived "
                 f"transaction.timeout.ms ({timeout_ms} ms) and the broker aborted it: raise "
                 f"kafka.transaction.timeout.ms (at most the broker's transaction.max.timeout.ms) or write less per "
                 f"job. Otherwise another write with transactionalIdPrefix {options.transactional_id_prefix!r} ran "
                 f"at the same time and its producers fenced this write's (give each write that may run while "
                 f"another does its own prefix), or a late attempt of a failed task of this write started its "
                 f"producer after Spark's retry of it had finished (a stalled Python worker).")
        if write_id is not None:
            text += (f" Run the same writeId ({write_id}) again: it skips the committed partitions and writes the "
                     "others.")
        return text
    text += (f"Their transaction coordinators could not be reached within the commit's "
             f"{_commit_timeout_s(options):.0f} s: check the network between the Spark driver and the brokers. ")
    if write_id is not None:
        return text + (f"Run the write again with the same writeId ({write_id}) and transactionalIdPrefix within "
                       f"transaction.timeout.ms ({timeout_ms} ms): it commits the rest from the commit log.")
    return text + (f"The brokers abort them after transaction.timeout.ms ({timeout_ms} ms); with a writeId, a re-run "
                   f"would finish such a commit instead.")


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
    aborted = _run_all(options, known, lambda m, session: _end(options, m, session, commit=False))
    failed_ids = [options.transactional_id(i) for i, m in enumerate(messages) if m is None]
    fenced = _run_all(options, failed_ids, lambda tid, session: _fence(options, tid, session))
    for tid, error in {**aborted, **fenced}.items():
        # An abort after a partly failed commit meets committed transactions: nothing is left open there.
        _log.warning("pykafka-sink abort%s: %s: %s: %s", where, tid, type(error).__name__, error)
    _log.warning("pykafka-sink write failed%s: aborted %d transaction(s), fenced %d failed task id(s)%s",
                 where, len(known) - len(aborted), len(failed_ids) - len(fenced),
                 "" if not (aborted or fenced) else "; see the warnings above for the ones that could not be ended")


# ------------------------------------------------------------------------------------------ helpers

_T = TypeVar("_T")


def _run_all(options: SinkOptions, items: Sequence[_T],
             action: Callable[[_T, CoordinatorSession], None]) -> dict[str, BaseException]:
    """Run ``action`` on every item in parallel; returns {transactional id: error} of those that failed. Each pool
    thread keeps one :class:`CoordinatorSession` for all its items (connections, ApiVersions and Metadata once
    per thread, not per transaction: with 200 tasks that was most of the driver's commit time)."""
    if not items:
        return {}
    failures: dict[str, BaseException] = {}
    local = threading.local()
    sessions: list[CoordinatorSession] = []  # every thread's, closed at the end (list.append is atomic)

    def run(item: _T) -> None:
        session: CoordinatorSession | None = getattr(local, "session", None)
        if session is None:
            session = local.session = CoordinatorSession(options.producer_config())
            sessions.append(session)
        action(item, session)

    try:
        with ThreadPoolExecutor(max_workers=min(_MAX_PARALLEL_END_TXN, len(items)),
                                thread_name_prefix="pykafka-sink-endtxn") as pool:
            futures = {_id_of(item): pool.submit(run, item) for item in items}
            for tid, future in futures.items():
                error = future.exception()
                if error is not None:
                    failures[tid] = error
    finally:
        for session in sessions:
            session.close()
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


def _end(options: SinkOptions, message: KafkaCommitMessage, session: CoordinatorSession, *, commit: bool) -> None:
    identity = TransactionIdentity(str(message.transactional_id), message.producer_id, message.producer_epoch,
                                   message.transaction_version, message.coordinator)
    _end_identity(options, identity, session, commit=commit)


def _end_identity(options: SinkOptions, identity: TransactionIdentity, session: CoordinatorSession, *,
                  commit: bool) -> None:
    _retrying(lambda remaining: session.end_transaction(identity, commit, remaining), _commit_timeout_s(options))


def _fence(options: SinkOptions, transactional_id: str, session: CoordinatorSession) -> None:
    _retrying(lambda remaining: session.fence_transactional_id(transactional_id, remaining),
              _commit_timeout_s(options))