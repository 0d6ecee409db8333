"""The task side: batch and streaming Arrow writers; ``write()`` writes one Spark partition.

Writers hold only the validated options and column plan (picklable); the producer is made in the task, or taken
from the producers the Python worker kept from earlier tasks (``producer_cache``; ``producerReuse``).

at_least_once: an idempotent producer sends every Arrow batch with ``send_batch`` (vectorized), flushes and waits
for every acknowledgement before the task returns: a returned message means every row is in Kafka.

exactly_once: transactional.id ``<prefix>-<partitionId>`` (a kept producer switches to it). ``init_transactions``
fences any earlier attempt of this partition (its open transaction is aborted) -- started before the first rows
are encoded and waited for before they are queued, so its round trips overlap the encoding -- then one transaction
holds all the partition's rows; the task flushes and returns the transaction's identity WITHOUT committing: the
driver commits all of them in ``commit()``. A task that fails aborts its own transaction on the way out, within
max.block.ms, then closes its producer at once (a killed task, or an abort that timed out, leaves the transaction to
the next attempt's fencing or the driver's ``abort()``). That includes an attempt Spark failed upstream while its
worker still ran: its input ends early but cleanly, which ``task_input`` tells apart from a complete input.

Speculative execution is refused with exactly_once: a speculative copy of a task would fence the original's
transaction after the driver may already have accepted the original's message, so the commit would fail.
at_least_once is safe with speculation (duplicates are within its contract).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import datasource as spark_datasource
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamWriter
from pyspark.sql.types import StructType

from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.producer.arrow_send import BatchSendResult, PartitionWrite, fill_bytes
from spark_kafka_sink.spark.commit import KafkaCommitMessage, abort_write, commit_write
from spark_kafka_sink.spark.commit_log import CommittedWrite
from spark_kafka_sink.spark.dead_letters import DeadLetterRouter
from spark_kafka_sink.spark.digest import RowDigest
from spark_kafka_sink.spark.id_pool import PoolClaim, release_prefix
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.producer_cache import Lease, close_failed, worker_cache
from spark_kafka_sink.spark.row_batches import row_batches
from spark_kafka_sink.spark.schema import ColumnPlan, to_producer_batch
from spark_kafka_sink.spark.sink_producer import PreparedT, SinkProducer
from spark_kafka_sink.spark.task_input import input_was_cut_off
from spark_kafka_sink.spark.worker_heap import freeze_once

__all__ = ["ARROW_STREAM_WRITER", "KafkaBatchWriter", "KafkaStreamWriter", "NonDeterministicInputError",
           "TaskInputCutOffError", "write_partition"]

#: Whether this pyspark hands stream writers Arrow batches: ``DataSourceStreamArrowWriter`` exists since pyspark 4.1.
#: pyspark 4.0 has only the row-based ``DataSourceStreamWriter``, whose Rows KafkaStreamWriter gathers into Arrow.
ARROW_STREAM_WRITER = hasattr(spark_datasource, "DataSourceStreamArrowWriter")
if TYPE_CHECKING:
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as _StreamWriterBase
else:
    _StreamWriterBase = spark_datasource.DataSourceStreamArrowWriter if ARROW_STREAM_WRITER else DataSourceStreamWriter

_log = logging.getLogger(__name__)
_CLOSE_TIMEOUT_S = 30.0
#: A task's first input batch at least this large is sent in two halves (see ``_send_all``); a smaller one is sent
#: whole, as it is acknowledged quickly enough that splitting gains nothing.
_SPLIT_FIRST_BYTES = 512 << 10


class TaskInputCutOffError(KafkaError):
    """Spark failed this task attempt upstream while its writer still ran; the writer stops without committing."""


def _flush_timeout_s(options: SinkOptions) -> float:
    # Every record is acknowledged or failed within delivery.timeout.ms: waiting longer only hides a hang.
    return options.delivery_timeout_ms / 1000 + 30.0


@dataclass(frozen=True)
class TaskInfo:
    """What the sink needs to know of the Spark task it runs in."""

    partition_id: int
    attempt: int
    batch_id: int | None  # the streaming micro-batch, None for a batch write
    speculation: bool  # spark.speculation is on for this job
    in_spark: bool  # False: called outside a Spark task (tests, a plain Python caller); the others are defaults


_OUTSIDE_SPARK = TaskInfo(partition_id=0, attempt=0, batch_id=None, speculation=False, in_spark=False)


def _task_context() -> TaskInfo:
    """The running task's :class:`TaskInfo` (zeros and False outside Spark)."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return _OUTSIDE_SPARK
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    # SQL executions propagate the session's spark.* settings to tasks as local properties.
    speculation = (ctx.getLocalProperty("spark.speculation") or "false").strip().lower() == "true"
    return TaskInfo(partition_id=ctx.partitionId(), attempt=ctx.attemptNumber(),
                    batch_id=None if batch is None else int(batch), speculation=speculation, in_spark=True)


class NonDeterministicInputError(ConfigError):
    """A re-run of a writeId got other rows for a Spark partition than the run that committed it."""


def write_partition(options: SinkOptions, plan: ColumnPlan, batches: Iterator[pa.RecordBatch],
                    resume: CommittedWrite | None = None) -> KafkaCommitMessage:
    """Write one Spark partition; returns its commit message once every record is acknowledged.

    ``resume``: what the latest complete run of this prefix committed (exactly_once with a stable writeId). When
    this task runs the same writeId and its partition is there, it sends nothing: it checks that its input has the
    recorded row count and digest (else :class:`NonDeterministicInputError`) and reports the partition skipped.
    """
    from spark_kafka_sink.producer import KafkaProducer

    started_at = time.time()
    task = _task_context()
    partition_id, attempt = task.partition_id, task.attempt
    write_id = options.stable_write_id(task.batch_id)
    if resume is not None and write_id == resume.write_id and partition_id in resume.partitions:
        return _skip(options, plan, batches, resume, task, started_at)
    digest = RowDigest() if write_id is not None else None
    transactional_id = None
    if options.exactly_once:
        if task.speculation:
            raise ConfigError(
                "deliveryGuarantee=exactly_once cannot run with spark.speculation=true: a speculative task copy "
                "would fence the transaction of the copy Spark keeps. Disable speculation for this job, or use "
                "at_least_once", key="deliveryGuarantee")
        transactional_id = options.transactional_id(partition_id)

    batches = iter(batches)
    first = next((b for b in batches if b.num_rows), None)
    if first is None and attempt == 0:
        # Nothing to write and no earlier attempt to fence: skip the producer (and its InitProducerId round trips);
        # after a shuffle most of 200 partitions can be empty.
        return KafkaCommitMessage(partition_id=partition_id, attempt=attempt, transactional_id=transactional_id,
                                  started_at=started_at, batch_id=task.batch_id,
                                  digest=None if digest is None else digest.digest)
    if first is not None:
        batches = _first_then(first, batches)
        del first  # else it stays in memory for the whole task

    if options.worker_gc_freeze and task.in_spark:
        freeze_once()  # the worker's modules leave Spark's per-task gc.collect() (worker_heap)
    lease: Lease[KafkaProducer] | None = None
    if options.producer_reuse:
        # The producer an earlier task of this worker left (see producer_cache); exactly_once: switched to this
        # task's transactional.id, its earlier transaction left to the driver.
        lease = worker_cache().lease(options.producer_config(transactional_id), options.producer_idle_timeout_ms / 1000)
        producer = lease.producer
    else:
        producer = KafkaProducer(options.producer_config(transactional_id))
    finished = False
    try:
        begin: Callable[[], None] | None = None
        if transactional_id is not None:
            # FindCoordinator and InitProducerId (which fences and aborts an earlier attempt of this partition) go
            # out now and run on the sender thread while this thread encodes the task's first rows; those are
            # queued only once they ended and the transaction began (``begin``, called by _send_all).
            producer.start_init_transactions()

            def begin() -> None:
                producer.init_transactions()
                producer.begin_transaction()

        router = DeadLetterRouter(options, partition_id) if options.dead_letters.active else None
        futures, dead_futures = _send_all(producer, options, plan, batches, digest, begin, router)
        if input_was_cut_off():
            # A failed task attempt whose worker still ran: never leave its transaction open (see task_input).
            raise TaskInputCutOffError(
                f"Spark ended task attempt {attempt} of partition {partition_id} before its input was complete "
                "(Spark reports the task's own error); "
                + ("its transaction is aborted" if transactional_id else "rows it sent stay (at_least_once)"))
        producer.flush(_flush_timeout_s(options))
        writes = _collect(futures, _flush_timeout_s(options))
        dead_letter_writes = _collect(dead_futures, _flush_timeout_s(options))
        producer_id, epoch, transaction_version, coordinator = -1, -1, 1, -1
        if transactional_id is not None:
            identity = producer.transaction_identity()
            producer_id, epoch = identity.producer_id, identity.producer_epoch
            transaction_version, coordinator = identity.transaction_version, identity.coordinator
        finished = True
    finally:
        if not finished and transactional_id is not None:
            _abort_quietly(producer, transactional_id)
        if lease is not None:
            worker_cache().give_back(lease, healthy=finished)  # a failed task's producer is closed, never lent
        elif finished:
            producer.close(_CLOSE_TIMEOUT_S, abort_open_transaction=False)  # the driver ends the transaction
        else:
            close_failed(producer)
    return KafkaCommitMessage(partition_id=partition_id, attempt=attempt, transactional_id=transactional_id,
                              producer_id=producer_id, producer_epoch=epoch, writes=writes, started_at=started_at,
                              batch_id=task.batch_id, digest=None if digest is None else digest.digest,
                              new_producer=lease is None or lease.created,
                              transaction_version=transaction_version, coordinator=coordinator,
                              invalid_records=0 if router is None else router.invalid,
                              dead_letter_writes=dead_letter_writes)


def _skip(options: SinkOptions, plan: ColumnPlan, batches: Iterator[pa.RecordBatch], resume: CommittedWrite,
          task: TaskInfo, started_at: float) -> KafkaCommitMessage:
    """This partition was committed by an earlier run of the writeId: check the input is the same, send nothing."""
    partition_id = task.partition_id
    recorded = resume.partitions[partition_id]
    digest = RowDigest()
    # The digest covers the rows the run wrote to their topics: invalid ones (onInvalidRecord) are taken out the
    # same way as then.
    router = DeadLetterRouter(options, partition_id) if options.dead_letters.active else None
    for batch in batches:
        if batch.num_rows and router is None:
            digest.add(to_producer_batch(batch, plan, _no_partition_limit))
        elif batch.num_rows and router is not None:
            digest.add(router.encode(batch, lambda rows: to_producer_batch(rows, plan, _no_partition_limit)).valid)
    if (digest.rows, digest.digest) != (recorded.rows, recorded.digest):
        what = (f"{digest.rows} rows now, {recorded.rows} then" if digest.rows != recorded.rows
                else f"{digest.rows} rows both times, but other ones (digest {digest.digest} now, {recorded.digest} "
                     "then)")
        raise NonDeterministicInputError(
            f"writeId {resume.write_id} was committed before, but Spark partition {partition_id} now has other input "
            f"({what}): skipping it would lose rows and writing it would duplicate the committed ones. Make the "
            "input deterministic (e.g. sort within partitions, no random splits or non-deterministic sources), or "
            "write it as a new write with another writeId", key="writeId")
    return KafkaCommitMessage(partition_id=partition_id, attempt=task.attempt, transactional_id=None,
                              started_at=started_at, batch_id=task.batch_id, digest=recorded.digest,
                              skipped_rows=recorded.rows)


def _no_partition_limit(topic: str, needed: int) -> int:
    return 2**31 - 1  # a skipped partition sends nothing: partition numbers were checked when it was written



def _first_then(first: pa.RecordBatch, rest: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``first``, then ``rest``, holding ``first`` only until the next batch is asked for (itertools.chain keeps its
    arguments until it is exhausted, which kept a task's first input batch in memory to the end)."""
    yield first
    del first
    yield from rest


def _send_all(producer: SinkProducer[PreparedT], options: SinkOptions, plan: ColumnPlan,
              batches: Iterator[pa.RecordBatch], digest: RowDigest | None, begin: Callable[[], None] | None = None,
              router: DeadLetterRouter | None = None
              ) -> tuple[list[Future[BatchSendResult]], list[Future[BatchSendResult]]]:
    """Send every input batch; returns their futures, and those of the dead letters. ``begin`` (exactly_once: wait
    for init_transactions, begin the transaction) is called once before anything is queued: after the first rows are
    encoded, or at the end if the input has none. ``router`` (onInvalidRecord=skip|deadLetter) takes the invalid rows
    out of each batch; their dead letters are held and sent last, by the same producer (in the same transaction):
    they are few, or maxInvalidRecords fails the task first."""
    counts: dict[str, int] = {}

    def partition_count(topic: str, needed: int = 0) -> int:
        if counts.get(topic, -1) < needed:  # not asked yet, or fewer than needed (partitions may be new)
            counts[topic] = len(producer.partitions_for(topic, needed))
        return counts[topic]

    futures: list[Future[BatchSendResult]] = []
    dead_tables: list[pa.Table] = []
    checked = 0  # futures before this index completed successfully
    first = True
    held: _HeldBatches | None = None  # made once a second input batch shows the task has more than one
    for batch in batches:  # (not enumerate: its reused result tuple held the last batch while the next was read)
        if batch.num_rows == 0:
            continue
        if router is None:
            records = to_producer_batch(batch, plan, partition_count)
            if digest is not None:
                digest.add(records)
        else:
            routed = router.encode(batch, lambda rows: to_producer_batch(rows, plan, partition_count))
            records = routed.valid
            if digest is not None:  # a re-run routes the same rows the same way: the valid ones tell them apart
                digest.add(records)
            if routed.dead is not None:
                dead_tables.append(routed.dead)
            if records.num_rows == 0:
                del batch, records, routed
                continue
            del routed
        if first and records.num_rows > 1 and records.nbytes >= _SPLIT_FIRST_BYTES:
            # The task's first batch goes in two halves: when it is the only one (a small task: Spark hands up to
            # 10,000 rows as one) the broker writes the first half while the second is encoded, so the task waits
            # for half a batch's acknowledgement instead of a whole one (the flush after this). A task of many
            # batches pays one more encoder call and Produce. Nothing is read ahead to know which case it is: a
            # look-ahead would hold a second input batch for the whole task.
            half = records.num_rows // 2
            ready: list[pa.RecordBatch | pa.Table] = [records.slice(0, half), records.slice(half)]
        elif first:
            ready = [records]
        else:
            if held is None:
                topic = options.topic  # with a topic column (rows of any topic) nothing is held
                held = _HeldBatches(0 if topic is None else
                                    fill_bytes(options.batch_size, partition_count(topic)))
            ready = held.add(records)
        if begin is not None:
            prepared = producer.prepare_batch(options.topic, ready.pop(0))  # encoded while the coordinator answers
            begin()
            begin = None
            futures.append(producer.send_prepared(prepared))
            del prepared
        futures.extend(producer.send_batch(options.topic, data) for data in ready)
        first = False
        del batch, records, ready  # hold no more than ``held``, not this one while Spark reads the next
        # Fail fast: a send that already failed (record too large, unknown topic ...) stops the task now.
        while checked < len(futures) and futures[checked].done():
            futures[checked].result()
            checked += 1
    if begin is not None:  # no rows (a retried attempt): still fence the earlier one and open the transaction
        begin()
    if held is not None:
        futures.extend(producer.send_batch(options.topic, data) for data in held.rest())
    dead_topic = options.dead_letters.topic
    dead_futures = [producer.send_batch(dead_topic, table) for table in dead_tables if dead_topic is not None]
    return futures, dead_futures


class _HeldBatches:
    """Consecutive input batches held to go to send_batch together, up to ``limit`` bytes: each call closes its
    batches, so one 10,000-row Spark batch a call made ~100 KB batches into 12 partitions however large batch.size
    was. A batch of half the limit or more goes alone, as before."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._batches: list[pa.RecordBatch] = []
        self._bytes = 0

    def add(self, records: pa.RecordBatch) -> list[pa.Table]:
        """Hold ``records``; returns what to send now, in input order."""
        size = records.nbytes
        out = self.rest() if self._batches and self._bytes + size > self._limit else []
        self._batches.append(records)
        self._bytes += size
        if self._bytes + size > self._limit:
            # Another batch like this one would not fit: send now rather than hold these while Spark reads it
            # (held through the next read, they would add their size to the worker's peak memory).
            out += self.rest()
        return out

    def rest(self) -> list[pa.Table]:
        """What is held, as one table (none if nothing is); holds nothing after."""
        out = [pa.Table.from_batches(self._batches)] if self._batches else []
        self._batches, self._bytes = [], 0
        return out


def _collect(futures: list[Future[BatchSendResult]], timeout_s: float) -> tuple[PartitionWrite, ...]:
    result: BatchSendResult | None = None
    for future in futures:
        batch_result = future.result(timeout=timeout_s)
        result = batch_result if result is None else result.merge(batch_result)
    if result is None:
        return ()
    return tuple(write for _, write in sorted(result.partitions.items()))


def _abort_quietly(producer: SinkProducer[PreparedT], transactional_id: str) -> None:
    # Best effort, so read_committed readers are not held up until the retry or the driver ends the transaction;
    # the task's own error is the one to report.
    try:
        producer.abort_transaction()
    except Exception as exc:  # noqa: BLE001 - any failure here is secondary to the task's error
        _log.info("could not abort %s on the way out (%s: %s); the next attempt or the driver ends it",
                  transactional_id, type(exc).__name__, exc)


class KafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("pykafka-sink")``: one task per Spark partition, committed by the driver."""

    def __init__(self, options: SinkOptions, plan: ColumnPlan, resume: CommittedWrite | None = None,
                 claim: PoolClaim | None = None) -> None:
        self.options = options
        self.plan = plan
        self.resume = resume  # the prefix's latest complete write, from the driver's pre-flight
        self.claim = claim  # the pooled transactional id prefix this write holds (id_pool), given back at the end

    def write(self, iterator: Iterator[pa.RecordBatch]) -> KafkaCommitMessage:
        return write_partition(self.options, self.plan, iterator, self.resume)

    def commit(self, messages: list[Any]) -> None:
        try:
            commit_write(self.options, messages)
        finally:
            release_prefix(self.options, self.claim)

    def abort(self, messages: list[Any]) -> None:
        try:
            abort_write(self.options, messages)
        finally:
            release_prefix(self.options, self.claim)

    def __repr__(self) -> str:
        return f"KafkaBatchWriter({self.options!r})"


class KafkaStreamWriter(_StreamWriterBase):
    """``writeStream.format("pykafka-sink")``: each micro-batch is written and committed like a batch write.

    Its base is pyspark's Arrow stream writer where pyspark has one (4.1+). On pyspark 4.0 the base is the row-based
    stream writer: Spark hands ``write`` Rows, gathered back into Arrow batches (``row_batches``, with the
    DataFrame's ``schema``) for the same ``write_partition``, so the producer still gets whole batches.
    """

    def __init__(self, options: SinkOptions, plan: ColumnPlan, resume: CommittedWrite | None = None, *,
                 schema: StructType | None = None) -> None:
        self.options = options
        self.plan = plan
        self.resume = resume  # the prefix's latest complete write, from the driver's pre-flight
        self.schema = schema  # the DataFrame's: what pyspark 4.0's Rows are turned back into Arrow with

    def write(self, iterator: Iterator[Any]) -> KafkaCommitMessage:
        if ARROW_STREAM_WRITER:
            return write_partition(self.options, self.plan, iterator, self.resume)
        if self.schema is None:
            raise TypeError("KafkaStreamWriter needs schema= (the DataFrame's) on pyspark 4.0, which hands it Rows")
        return write_partition(self.options, self.plan, row_batches(iterator, self.schema, self.plan), self.resume)

    def commit(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        commit_write(self.options, messages, batchId)

    def abort(self, messages: list[Any], batchId: int) -> None:  # noqa: N803 - Spark's parameter name
        abort_write(self.options, messages, batchId)

    def __repr__(self) -> str:
        return f"KafkaStreamWriter({self.options!r})"
