"""The driver-crash tests' fault injection, loaded by every Python process of a job they launch (``launch`` puts this
folder on the job's PYTHONPATH; Spark passes it on to its Python workers, where the data source's commit runs).

With ``DRIVER_CRASH_PAUSE_AT=<point>:<marker file>`` in the environment, it registers a commit hook
(``spark_kafka_sink.spark.commit.add_commit_hook``) that stops the driver's commit at ``point``, writes
"<pid> <writeId>" to the marker and waits there to be killed (the test SIGKILLs the driver), or until the test
creates ``<marker>.go``: then the commit goes on. Points: after-plan, after-first-commit (exactly one EndTxn done:
the hook lets one EndTxn run at a time, and one that fails lets the next go), after-commits, after-complete.
The package has no switch of its own: without this module nothing is registered.

With ``LATE_ATTEMPT_HOLD=<partition>:<folder>``, the Python worker writing attempt 0 of that Spark partition stops
before its InitProducerId (a stalled worker): it creates ``<folder>/held`` and waits for ``<folder>/go``; once its
InitProducerId has been answered it creates ``<folder>/fenced``. If ``<folder>/hold-retry`` exists, attempt 1 of
the partition (Spark's retry) stops before its second ``send_batch``, creates ``<folder>/retry-writing`` and waits
for ``<folder>/fenced``: it is still writing when the first attempt's InitProducerId fences it.

With ``HOLD_AFTER_FLUSH=<folder>``, every task of the job stops once its records are flushed (its transaction open,
its commit message not yet returned): it creates ``<folder>/flushed-<partition>`` and waits for ``<folder>/go``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

PAUSE_ENV = "DRIVER_CRASH_PAUSE_AT"
HOLD_ENV = "LATE_ATTEMPT_HOLD"
HOLD_AFTER_FLUSH_ENV = "HOLD_AFTER_FLUSH"
PAUSE_LIMIT_S = 600.0  # nobody killed the process by then: the commit fails instead of hanging the job


class PauseAt:
    """A commit hook that stops the commit at one point (see the module docstring)."""

    def __init__(self, point: str, marker: Path) -> None:
        self.point = point
        self.marker = marker
        self._one_at_a_time = threading.Lock()  # held from each EndTxn's start to its end

    def __call__(self, step: str, write_id: int) -> None:
        if self.point == "after-first-commit" and step == "before-end-txn":
            self._one_at_a_time.acquire()
        elif self.point == "after-first-commit" and step == "end-txn-failed":
            self._one_at_a_time.release()  # the next EndTxn may be the first to succeed
        elif self.point == "after-first-commit" and step == "after-end-txn":
            try:
                self._pause(write_id)
            finally:
                self._one_at_a_time.release()
        elif step == self.point:
            self._pause(write_id)

    def _pause(self, write_id: int) -> None:
        self.marker.write_text(f"{os.getpid()} {write_id}")
        go = self.marker.with_name(self.marker.name + ".go")
        deadline = time.monotonic() + PAUSE_LIMIT_S
        while time.monotonic() < deadline:
            if go.exists():
                return
            time.sleep(0.05)  # poll interval of a condition wait
        raise RuntimeError(f"{PAUSE_ENV}: nobody killed the driver at {self.point} within {PAUSE_LIMIT_S:g} s")


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + PAUSE_LIMIT_S
    while not path.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{path} did not appear within {PAUSE_LIMIT_S:g} s")
        time.sleep(0.05)  # poll interval of a condition wait


def _hold_late_attempt(partition: int, folder: Path) -> None:
    """Patch the producer so that attempt 0 of ``partition`` stalls before its InitProducerId (module docstring)."""
    from pyspark import TaskContext

    from spark_kafka_sink.producer import KafkaProducer

    def attempt_of_partition() -> int | None:
        ctx = TaskContext.get()
        return ctx.attemptNumber() if ctx is not None and ctx.partitionId() == partition else None

    def held() -> bool:
        return attempt_of_partition() == 0

    start, init, send_batch = (KafkaProducer.start_init_transactions, KafkaProducer.init_transactions,
                               KafkaProducer.send_batch)
    retry_calls = [0]  # send_batch calls of the retry in this worker

    def held_send_batch(self: KafkaProducer, *args: Any, **kwargs: Any) -> Any:
        if attempt_of_partition() == 1 and (folder / "hold-retry").exists():
            retry_calls[0] += 1
            if retry_calls[0] == 1:
                (folder / "retry-writing").touch()
                _wait_for(folder / "fenced")
        return send_batch(self, *args, **kwargs)

    def start_init_transactions(self: KafkaProducer) -> None:
        if held():
            (folder / "held").write_text(str(os.getpid()))
            _wait_for(folder / "go")
        start(self)

    def init_transactions(self: KafkaProducer, timeout_s: float | None = None) -> None:
        init(self, timeout_s)
        if held():
            (folder / "fenced").touch()

    KafkaProducer.start_init_transactions = start_init_transactions  # type: ignore[method-assign]
    KafkaProducer.init_transactions = init_transactions  # type: ignore[method-assign]
    KafkaProducer.send_batch = held_send_batch  # type: ignore[method-assign]


def _hold_after_flush(folder: Path) -> None:
    from pyspark import TaskContext

    from spark_kafka_sink.producer import KafkaProducer

    flush = KafkaProducer.flush

    def held_flush(self: KafkaProducer, *args: Any, **kwargs: Any) -> Any:
        flushed = flush(self, *args, **kwargs)
        ctx = TaskContext.get()
        if ctx is not None:  # a task's producer, not the driver's commit log
            (folder / f"flushed-{ctx.partitionId()}").touch()
            _wait_for(folder / "go")
        return flushed

    KafkaProducer.flush = held_flush  # type: ignore[method-assign]


def _install() -> None:
    after_flush = os.environ.get(HOLD_AFTER_FLUSH_ENV)
    if after_flush:
        _hold_after_flush(Path(after_flush))
    hold = os.environ.get(HOLD_ENV)
    if hold:
        partition, _, folder = hold.partition(":")
        _hold_late_attempt(int(partition), Path(folder))
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    from spark_kafka_sink.spark.commit import add_commit_hook

    point, _, marker = spec.partition(":")
    add_commit_hook(PauseAt(point, Path(marker)))


_install()
