"""Did this task's input really end, or did Spark fail the task and cut it off?

Why this exists: when a Spark task fails upstream of the writer (a UDF raising, a lost shuffle block), the JVM
stops feeding the writer's Python worker and closes its socket. PySpark's Arrow reader takes that EOF at a message
boundary for a normal end of the stream, so ``write()`` sees a shorter, clean input and returns as if the
partition were complete. The JVM discards that message, but a transactional writer would leave its transaction
open: no retry of the partition may follow to fence it (the job may already be over, and the driver's ``abort()``
may already have run), so read_committed consumers of those partitions would stall for transaction.timeout.ms.

A complete input is followed by PySpark's END_OF_STREAM marker (int32 -4), which the worker reads after the
writer returns; a cut-off one is followed by EOF. :func:`input_was_cut_off` peeks (without consuming) at the
worker's input after the data ended. It depends on PySpark internals (the worker's ``main(infile, outfile)``
frame and its framing), so it fails open: anything it cannot recognise counts as a complete input.
"""

from __future__ import annotations

import struct
import sys
from typing import Any

__all__ = ["input_was_cut_off", "END_OF_STREAM"]

#: pyspark.serializers.SpecialLengths.END_OF_STREAM, as the JVM writes it after a task's whole input.
END_OF_STREAM = struct.pack(">i", -4)
_WORKER_MODULE = "pyspark.worker"


def _worker_infile() -> Any | None:
    """The Python worker's input stream: the ``infile`` argument of ``pyspark.worker.main`` up the call stack."""
    frame = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "main" and frame.f_globals.get("__name__") == _WORKER_MODULE:
            infile = frame.f_locals.get("infile")
            return infile if hasattr(infile, "peek") else None
        frame = frame.f_back  # type: ignore[assignment]
    return None


def input_was_cut_off() -> bool:
    """True only when the worker's input ended in EOF instead of END_OF_STREAM. Call after the data ended.

    Blocks until the JVM sends the marker or closes the socket (it sends the marker right after the data).
    """
    infile = _worker_infile()
    if infile is None:
        return False  # not inside a PySpark worker (or a PySpark we do not know): nothing to tell
    try:
        upcoming = bytes(infile.peek(len(END_OF_STREAM)))
    except (OSError, ValueError):
        return True  # the socket is gone: the JVM ended this task
    return upcoming == b""
