"""The task and driver flows against a recording fake producer: order of calls, messages, summary, pickling.

The real producer and broker are exercised in test_sink_*.py; this pins the protocol between the pieces.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import cloudpickle
import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from spark_kafka_sink.errors import KafkaTimeoutError, ProducerFencedError
from spark_kafka_sink.producer import BatchSendResult, PartitionWrite
from spark_kafka_sink.producer.transactions import TransactionIdentity
from spark_kafka_sink.spark import commit as commit_module
from spark_kafka_sink.spark.commit import (
    KafkaCommitMessage,
    TransactionCommitError,
    abort_write,
    commit_write,
    summarize,
)
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.schema import plan_columns
from spark_kafka_sink.spark.sink_producer import SinkProducer
from spark_kafka_sink.spark.writer import KafkaBatchWriter, KafkaStreamWriter, TaskInfo, write_partition

EO = {"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "deliveryGuarantee": "exactly_once",
      "transactionalIdPrefix": "p"}
SCHEMA = StructType([StructField("value", StringType())])


def task(partition_id: int, attempt: int = 0, *, speculation: bool = False) -> TaskInfo:
    """A Spark task's context as ``_task_context`` reports it (monkeypatched in: no Spark here)."""
    return TaskInfo(partition_id=partition_id, attempt=attempt, batch_id=None, speculation=speculation,
                    in_spark=False)


@dataclass
class FakeProducer:
    config: dict[str, Any]
    calls: list[str] = field(default_factory=list)
    offset: int = 0
    fail_send: bool = False

    def start_init_transactions(self) -> None:
        self.calls.append("start-init")

    def init_transactions(self, timeout_s: float | None = None) -> None:
        self.calls.append("init")

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def partitions_for(self, topic: str, needed: int = 0) -> list[int]:
        return [0]

    def send_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> Future[BatchSendResult]:
        self.calls.append(f"send:{topic}:{data.num_rows}")
        return self._sent(topic, data)

    def prepare_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table
                      ) -> tuple[str | None, pa.RecordBatch | pa.Table]:
        self.calls.append(f"prepare:{topic}:{data.num_rows}")
        return topic, data

    def send_prepared(self, prepared: tuple[str | None, pa.RecordBatch | pa.Table]) -> Future[BatchSendResult]:
        topic, data = prepared
        self.calls.append(f"send-prepared:{topic}:{data.num_rows}")
        return self._sent(topic, data)

    def _sent(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> Future[BatchSendResult]:
        if self.fail_send:
            raise KafkaTimeoutError("boom")
        fut: Future[BatchSendResult] = Future()
        written = PartitionWrite(topic or "?", 0, data.num_rows, 10 * data.num_rows, self.offset,
                                 self.offset + data.num_rows - 1)
        fut.set_result(BatchSendResult({(written.topic, written.partition): written}))
        self.offset += data.num_rows
        return fut

    def flush(self, timeout_s: float | None = None) -> None:
        self.calls.append("flush")

    def transaction_identity(self) -> TransactionIdentity:
        return TransactionIdentity(self.config["transactional.id"], 42, 3, transaction_version=2)

    def abort_transaction(self, timeout_s: float | None = None) -> None:
        self.calls.append("abort")

    def close(self, timeout_s: float | None = None, *, abort_open_transaction: bool = True) -> None:
        # The sink leaves a finished task's transaction open for the driver: a close that would abort it shows
        # (close(0) never aborts).
        self.calls.append("close+abort" if abort_open_transaction and timeout_s != 0 else "close")

    def switch_transactional_id(self, transactional_id: str) -> None:
        self.calls.append(f"switch:{transactional_id}")
        self.config["transactional.id"] = transactional_id

    @property
    def usable(self) -> bool:
        return not any(call.startswith("close") for call in self.calls)


if TYPE_CHECKING:  # mypy checks the fake against the Spark adapter's seam (spark.sink_producer)
    _seam: SinkProducer[tuple[str | None, pa.RecordBatch | pa.Table]] = FakeProducer({})


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[FakeProducer]]:
    made: list[FakeProducer] = []

    def factory(config: Mapping[str, Any]) -> FakeProducer:
        made.append(FakeProducer(dict(config)))
        return made[-1]

    import spark_kafka_sink.producer as producer_pkg
    from spark_kafka_sink.spark import producer_cache

    monkeypatch.setattr(producer_pkg, "KafkaProducer", factory, raising=False)
    # A cache of this test's own (the worker's is made once per process, with the real producer class).
    cache = producer_cache.ProducerCache(factory)
    monkeypatch.setattr(producer_cache, "_WORKER_CACHE", cache)
    yield made
    cache.close()


@pytest.fixture
def txn_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    calls: list[tuple[Any, ...]] = []
    sessions: list[FakeSession] = []

    class FakeSession:
        """The driver's CoordinatorSession, as commit.py uses it (one per pool thread, closed at the end)."""

        def __init__(self, config: Mapping[str, Any]) -> None:
            self.closed = False
            sessions.append(self)

        def end_transaction(self, identity: Any, commit: bool, timeout_s: float) -> None:
            calls.append(("end", identity.transactional_id, identity.producer_epoch, commit))
            assert identity.transaction_version == 2  # as the task recorded it (_message below): EndTxn v5
            if identity.transactional_id == "p-9":
                raise ProducerFencedError("fenced")

        def fence_transactional_id(self, transactional_id: str, timeout_s: float) -> None:
            calls.append(("fence", transactional_id))

        def close(self) -> None:
            self.closed = True

    monkeypatch.setattr(commit_module, "CoordinatorSession", FakeSession)
    yield calls
    assert all(s.closed for s in sessions)  # the driver leaves no connection behind


def batches(*sizes: int) -> Iterator[pa.RecordBatch]:
    for n in sizes:
        yield pa.RecordBatch.from_pydict({"value": [str(i) for i in range(n)]})


def test_exactly_once_task_does_not_commit(fake: list[FakeProducer]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    msg = write_partition(opts, plan_columns(SCHEMA, "t"), batches(3, 0, 2))
    # The coordinator round trips start first and run while the first rows are encoded; nothing is queued before
    # they ended and the transaction began. Kept, never committed.
    assert fake[0].calls == ["start-init", "prepare:t:3", "init", "begin", "send-prepared:t:3", "send:t:2", "flush"]
    assert fake[0].config["transactional.id"] == "p-0"
    assert (msg.transactional_id, msg.producer_id, msg.producer_epoch) == ("p-0", 42, 3)
    assert msg.transaction_version == 2  # the driver ends it with EndTxn v5
    assert msg.writes == (PartitionWrite("t", 0, 5, 50, 0, 4),) and msg.rows == 5 and msg.new_producer


def test_exactly_once_tasks_of_a_worker_share_a_producer_under_their_own_ids(
        fake: list[FakeProducer], monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_kafka_sink.spark import writer as writer_module

    opts = SinkOptions.parse(EO, streaming=False)
    write_partition(opts, plan_columns(SCHEMA, "t"), batches(2))  # Spark partition 0 (p-0)
    monkeypatch.setattr(writer_module, "_task_context", lambda: task(4))
    msg = write_partition(opts, plan_columns(SCHEMA, "t"), batches(1))
    assert len(fake) == 1 and fake[0].calls[-7:] == ["switch:p-4", "start-init", "prepare:t:1", "init", "begin",
                                                     "send-prepared:t:1", "flush"]
    assert msg.transactional_id == "p-4" and not msg.new_producer
    off = SinkOptions.parse({**EO, "producerReuse": "false"}, streaming=False)
    write_partition(off, plan_columns(SCHEMA, "t"), batches(1))
    assert len(fake) == 2 and fake[1].calls == ["start-init", "prepare:t:1", "init", "begin", "send-prepared:t:1",
                                                "flush", "close"]


def test_failed_task_aborts_its_transaction_and_closes(fake: list[FakeProducer]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)

    def failing() -> Iterator[pa.RecordBatch]:
        yield from batches(2, 3)
        raise RuntimeError("upstream failed")

    with pytest.raises(RuntimeError, match="upstream failed"):
        write_partition(opts, plan_columns(SCHEMA, "t"), failing())
    # The second batch was held to go with the next one (test_input_coalescing) when the input failed: never sent.
    assert fake[0].calls == ["start-init", "prepare:t:2", "init", "begin", "send-prepared:t:2", "abort", "close"]


def test_at_least_once_task_has_no_transaction(fake: list[FakeProducer]) -> None:
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, streaming=False)
    msg = write_partition(opts, plan_columns(SCHEMA, "t"), batches(4))
    assert fake[0].calls == ["send:t:4", "flush"]  # kept open for the worker's next task
    assert "transactional.id" not in fake[0].config
    assert msg.transactional_id is None and msg.rows == 4 and msg.new_producer
    again = write_partition(opts, plan_columns(SCHEMA, "t"), batches(2))
    assert len(fake) == 1 and fake[0].calls == ["send:t:4", "flush", "send:t:2", "flush"] and not again.new_producer
    off = SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t", "producerReuse": "false"},
                            streaming=False)
    write_partition(off, plan_columns(SCHEMA, "t"), batches(1))
    assert len(fake) == 2 and fake[1].calls == ["send:t:1", "flush", "close"]


def test_a_failed_at_least_once_task_closes_its_producer(fake: list[FakeProducer]) -> None:
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, streaming=False)
    write_partition(opts, plan_columns(SCHEMA, "t"), batches(1))
    fake[0].fail_send = True
    with pytest.raises(KafkaTimeoutError):
        write_partition(opts, plan_columns(SCHEMA, "t"), batches(1))
    assert fake[0].calls[-1] == "close"  # never lent again
    fake[0].fail_send = False
    msg = write_partition(opts, plan_columns(SCHEMA, "t"), batches(3))
    assert len(fake) == 2 and msg.new_producer and msg.rows == 3  # the retry runs on a fresh producer


def _message(pid: int, rows: int, tid: str | None = None) -> KafkaCommitMessage:
    writes = (PartitionWrite("t", pid % 2, rows, rows * 10, 100 * pid, 100 * pid + rows - 1),) if rows else ()
    return KafkaCommitMessage(partition_id=pid, attempt=0, transactional_id=tid, producer_id=7 if tid else -1,
                              producer_epoch=1 if tid else -1, writes=writes, started_at=1000.0,
                              transaction_version=2 if tid else 1)


def test_commit_ends_every_transaction_with_records(txn_calls: list[tuple[Any, ...]]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    summary = commit_write(opts, [_message(0, 5, "p-0"), _message(1, 0, "p-1"), _message(2, 3, "p-2")])
    assert sorted(txn_calls) == [("end", "p-0", 1, True), ("end", "p-2", 1, True)]  # p-1 has no transaction
    assert summary.rows == 8 and summary.bytes == 80 and summary.tasks == 3
    assert [(p.partition, p.first_offset, p.last_offset) for p in summary.partitions] == [(0, 0, 202)]


def test_a_commit_without_task_messages_names_the_continuous_trigger() -> None:
    """pyspark commits a continuous-processing query's epochs without messages (its Python writers never run)."""
    opts = SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, streaming=True)
    with pytest.raises(TransactionCommitError, match=r"partitions \[0, 1\]: a continuous-processing query "
                                                     r"\(trigger\(continuous=\.\.\.\)\).*micro-batch trigger"):
        commit_write(opts, [None, None], batch_id=3)
    with pytest.raises(TransactionCommitError, match=r"partitions \[1\]$"):  # a batch write: no trigger
        commit_write(opts, [_message(0, 5), None])


def test_commit_failure_names_ids_and_committed_rows(txn_calls: list[tuple[Any, ...]]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    with pytest.raises(TransactionCommitError) as info:
        commit_write(opts, [_message(0, 5, "p-0"), _message(9, 3, "p-9")])
    text = str(info.value)
    assert "1 of 2" in text and "p-9: ProducerFencedError" in text and "5 rows are visible" in text
    assert "transaction.timeout.ms (900000 ms)" in text


def test_abort_ends_known_and_fences_failed_ids(txn_calls: list[tuple[Any, ...]]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    abort_write(opts, [_message(0, 5, "p-0"), None, _message(2, 0, "p-2"), None])
    assert sorted(txn_calls) == [("end", "p-0", 1, False), ("fence", "p-1"), ("fence", "p-3")]


def test_abort_swallows_errors(txn_calls: list[tuple[Any, ...]]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    abort_write(opts, [_message(9, 5, "p-9"), None])  # p-9's EndTxn raises: logged, not raised
    assert ("fence", "p-1") in txn_calls


def test_retriable_errors_are_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    attempts = []

    def flaky(remaining: float) -> None:
        attempts.append(remaining)
        if len(attempts) < 3:
            raise KafkaTimeoutError("coordinator busy")

    monkeypatch.setattr(commit_module, "_RETRY_BACKOFF_S", 0.0)
    commit_module._retrying(flaky, 10.0)
    assert len(attempts) == 3
    with pytest.raises(ProducerFencedError):
        commit_module._retrying(lambda r: (_ for _ in ()).throw(ProducerFencedError("x")), 10.0)


def test_summary_line_lists_ranges_and_caps_length() -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    many = [_message(i, 1, f"p-{i}") for i in range(2)]
    line = summarize(opts, many, batch_id=4, now=1002.5).line()
    assert line == ("pykafka-sink micro-batch 4: committed 2 rows, 20 bytes, exactly_once, 2 tasks (0 new producers), "
                    "2.5 s, 1 rows/s; offsets: t[0] 0-0 (1 rows), t[1] 100-100 (1 rows)")
    with_write_id = SinkOptions.parse({**EO, "writeId": "12"}, streaming=False)
    assert summarize(with_write_id, many, now=1001.0).line().startswith("pykafka-sink writeId 12: committed 2 rows")
    wide = [KafkaCommitMessage(partition_id=0, attempt=0, transactional_id=None, started_at=1000.0,
                               writes=tuple(PartitionWrite("t", p, 1, 1, 0, 0) for p in range(30)))]
    assert summarize(opts, wide, now=1001.0).line().endswith("... and 10 more topic-partitions")


def test_writers_and_messages_survive_cloudpickle() -> None:
    secret_opts = {**EO, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.username": "u",
                   "kafka.sasl.password": "pw-123"}
    opts = SinkOptions.parse(secret_opts, streaming=False)
    plan = plan_columns(SCHEMA, "t")
    for writer in (KafkaBatchWriter(opts, plan), KafkaStreamWriter(opts, plan)):
        back = cloudpickle.loads(cloudpickle.dumps(writer))
        assert type(back) is type(writer) and back.options == opts and back.plan == plan
        assert "pw-123" not in repr(back)
    msg = _message(3, 5, "p-3")
    assert pickle.loads(cloudpickle.dumps(msg)) == msg
    assert pickle.loads(pickle.dumps(msg)) == msg  # Spark ships messages with plain pickle


def test_empty_first_attempt_creates_no_producer(fake: list[FakeProducer]) -> None:
    opts = SinkOptions.parse(EO, streaming=False)
    msg = write_partition(opts, plan_columns(SCHEMA, "t"), batches(0, 0))
    assert fake == [] and msg.writes == () and not msg.has_transaction


def test_empty_retry_still_fences_earlier_attempts(fake: list[FakeProducer], monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_kafka_sink.spark import writer as writer_module

    monkeypatch.setattr(writer_module, "_task_context", lambda: task(5, 1))
    msg = write_partition(SinkOptions.parse(EO, streaming=False), plan_columns(SCHEMA, "t"), batches(0))
    assert fake[0].calls == ["start-init", "init", "begin", "flush"] and msg.transactional_id == "p-5"
    assert not msg.has_transaction  # nothing to commit: the driver sends no EndTxn for it


def test_speculation_refused_with_exactly_once_only(fake: list[FakeProducer], monkeypatch: pytest.MonkeyPatch) -> None:
    from spark_kafka_sink.errors import ConfigError
    from spark_kafka_sink.spark import writer as writer_module

    monkeypatch.setattr(writer_module, "_task_context", lambda: task(0, speculation=True))
    with pytest.raises(ConfigError, match="spark.speculation"):
        write_partition(SinkOptions.parse(EO, streaming=False), plan_columns(SCHEMA, "t"), batches(1))
    alo = SinkOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:1", "topic": "t"}, streaming=False)
    assert write_partition(alo, plan_columns(SCHEMA, "t"), batches(1)).rows == 1


def test_summary_counts_partitions_an_earlier_run_committed() -> None:
    options = SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", "deliveryGuarantee": "exactly_once",
                                 "transactionalIdPrefix": "p", "writeId": "4"}, streaming=False)
    skipped = KafkaCommitMessage(partition_id=0, attempt=0, transactional_id=None, started_at=1000.0,
                                 digest="0" * 16, skipped_rows=120)
    assert skipped.skipped and skipped.rows == 0 and not skipped.has_transaction
    line = summarize(options, [skipped, skipped], now=1001.0).line()
    assert "writeId 4: skipped 2 Spark partitions (240 rows) committed by an earlier run; committed 0 rows" in line


class RecordingLog:
    """The commit log as ``_commit_logged`` uses it, recording its calls beside the hook's."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    def __enter__(self) -> RecordingLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.events.append("log-closed")

    def append_plan(self, write_id: int, planned: Mapping[int, Any], carried: Mapping[int, Any]) -> int:
        self.events.append(f"plan:{write_id}:{sorted(planned)}")
        return 0

    def append_committed(self, write_id: int, partition: int) -> None:
        self.events.append(f"committed:{partition}")

    def flush(self) -> None:
        self.events.append("flush")

    def append_complete(self, write_id: int, lost: frozenset[int] = frozenset()) -> None:
        self.events.append("complete")

    def entries(self, start_offset: int = 0) -> list[Any]:
        return []  # no other write of the prefix: a failed EndTxn is the usual commit error


def test_commit_hooks_see_each_step_of_a_logged_commit(txn_calls: list[tuple[Any, ...]],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    events: list[str] = []
    monkeypatch.setattr(commit_module, "_commit_log", lambda options: RecordingLog(events))
    opts = SinkOptions.parse({**EO, "writeId": "6"}, streaming=False)
    one = [_message(0, 5, "p-0")]
    commit_write(opts, one)  # no hook registered: the log's calls only
    assert events == ["plan:6:[0]", "committed:0", "flush", "complete", "log-closed"]
    events.clear()
    remove = commit_module.add_commit_hook(lambda step, write_id: events.append(f"{step}@{write_id}"))
    try:
        commit_write(opts, one)
    finally:
        remove()
    assert events == ["plan:6:[0]", "after-plan@6", "before-end-txn@6", "committed:0", "after-end-txn@6", "flush",
                      "after-commits@6", "complete", "after-complete@6", "log-closed"]
    assert [e for e in events if "@" in e] == [f"{step}@6" for step in commit_module.COMMIT_STEPS
                                               if step != "end-txn-failed"]
    assert not commit_module._commit_hooks


def test_commit_hooks_see_a_failed_end_txn(txn_calls: list[tuple[Any, ...]], monkeypatch: pytest.MonkeyPatch) -> None:
    """A failed EndTxn reaches ``end-txn-failed`` instead of ``after-end-txn`` (a hook holding something from
    ``before-end-txn`` lets it go there), and the commit fails without recording that partition or completing."""
    events: list[str] = []
    monkeypatch.setattr(commit_module, "_commit_log", lambda options: RecordingLog(events))
    opts = SinkOptions.parse({**EO, "writeId": "6"}, streaming=False)
    remove = commit_module.add_commit_hook(lambda step, write_id: events.append(f"{step}@{write_id}"))
    try:
        with pytest.raises(TransactionCommitError, match="p-9: ProducerFencedError"):
            commit_write(opts, [_message(9, 3, "p-9")])
    finally:
        remove()
    assert events == ["plan:6:[9]", "after-plan@6", "before-end-txn@6", "end-txn-failed@6", "log-closed"]
