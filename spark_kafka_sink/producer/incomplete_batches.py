"""``IncompleteBatches``: the batches an accumulator created that have not reached a final state yet.

A batch joins when it is queued (``add``) and leaves when it completes (``remove``, from its ``on_complete`` hook,
on whichever thread completes it: the sender, an expiry, an abort). A flush waits for a copy of the set taken
when it starts, and aborting every incomplete batch walks a copy too (as the Java client's IncompleteBatches):
batches completed meanwhile are simply already done.

Threads: appending threads add, any thread removes or copies; ``_lock`` guards ``_batches``. It is a leaf lock:
nothing else is taken while holding it.
"""

from __future__ import annotations

import threading

from spark_kafka_sink.producer.batch import ProducerBatch

__all__ = ["IncompleteBatches"]


class IncompleteBatches:
    """A thread-safe set of the batches not yet SUCCEEDED, FAILED or ABORTED (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._batches: set[ProducerBatch] = set()  # guarded by _lock

    def add(self, batch: ProducerBatch) -> None:
        with self._lock:
            self._batches.add(batch)

    def remove(self, batch: ProducerBatch) -> None:
        """Forget a completed batch (a batch that is not in the set is ignored)."""
        with self._lock:
            self._batches.discard(batch)

    def copy_all(self) -> list[ProducerBatch]:
        """The batches incomplete now, to wait for or abort outside the lock."""
        with self._lock:
            return list(self._batches)

    def is_empty(self) -> bool:
        with self._lock:
            return not self._batches
