"""The Python worker's long-lived objects, kept out of the per-task garbage collection (``workerGcFreeze``).

A reused Spark Python worker runs a full ``gc.collect()`` after every task (pyspark's ``daemon.py``). A full
collection walks every container object the process holds: pyspark's and pyarrow's modules, ``pyarrow.compute``'s
generated functions, this package's modules and the kept producer: tens of thousands of objects once the sink has
run. Each such collection is on the critical path of the worker's next task and can cost more than the sink's own
work for a small task.

The first sink task in a worker (after its modules are imported, before it takes a producer) collects once and
then freezes what is alive (``gc.freeze()``, Python's remedy for long-lived objects): they move to a permanent
generation the collector no longer walks, so later collections see only what later tasks make. Frozen objects are
still freed by reference counting when they go; only a reference cycle among them would never be collected, and
they are modules, classes and Spark's own per-worker state, which live as long as the worker.
"""

from __future__ import annotations

import gc
import threading

__all__ = ["freeze_once", "frozen"]

_lock = threading.Lock()
_frozen = False  # guarded by _lock


def freeze_once() -> bool:
    """Collect, then freeze every object alive, the first time it is called in this process; True if it froze."""
    global _frozen
    with _lock:
        if _frozen:
            return False
        gc.collect()  # garbage alive now would never be collected once frozen
        gc.freeze()
        _frozen = True
        return True


def frozen() -> bool:
    """Whether this process froze its heap (``freeze_once``)."""
    with _lock:
        return _frozen
