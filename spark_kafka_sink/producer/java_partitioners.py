"""The Java client's own ``partitioner.class`` values, so a configuration that names one works unchanged.

    org.apache.kafka.clients.producer.RoundRobinPartitioner            -> RoundRobinPartitioner()
    org.apache.kafka.clients.producer.UniformStickyPartitioner         -> UNIFORM_STICKY (partitioner.ignore.keys)
    org.apache.kafka.clients.producer.internals.DefaultPartitioner     -> None (the built-in partitioner)

``java_partitioner(name)`` maps a name to that value; a name of another Java class (``org.`` / ``com.`` ...) that is
not one of them cannot run here, and ``partitioner.class`` says so. The two deprecated ones are the built-in
partitioner's behaviours: DefaultPartitioner is murmur2 for keys and sticky for the rest, UniformStickyPartitioner
sticky for every record (what ``partitioner.ignore.keys=true`` does since Kafka 3.3).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["RoundRobinPartitioner", "UNIFORM_STICKY", "java_partitioner", "JAVA_PARTITIONERS"]

_PACKAGE = "org.apache.kafka.clients.producer."


class RoundRobinPartitioner:
    """Java's ``RoundRobinPartitioner``: keys ignored, every record to the next partition of its topic in turn,
    among the partitions with a leader when there are any (as Java's ``availablePartitionsForTopic``), else among
    all. One counter per topic, shared by every thread. Records go to every partition in turn, as Java's do since
    KAFKA-17632 (3.9); before it, Java's skipped a partition each time a new batch was created (KAFKA-9965)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._next: dict[str, int] = {}

    def partitions(self, topic: str, count: int, num_partitions: int,
                   available: Sequence[int] | None = None) -> npt.NDArray[np.int32]:
        """The partitions of the topic's next ``count`` records."""
        candidates = np.asarray([p for p in available if p < num_partitions] if available else [], dtype=np.int32)
        if len(candidates) == 0:
            candidates = np.arange(num_partitions, dtype=np.int32)
        with self._lock:
            first = self._next.get(topic, 0)
            self._next[topic] = first + count
        turns = (first + np.arange(count, dtype=np.int64)) % len(candidates)
        return candidates[turns]

    def __call__(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        """The ``partitioner.class`` callable form (all partitions: a callable is not told which have a leader)."""
        return int(self.partitions(topic, 1, num_partitions)[0])

    def __repr__(self) -> str:
        return "RoundRobinPartitioner()"

    def __eq__(self, other: object) -> bool:  # a setting: every one stands for the same Java class
        return isinstance(other, RoundRobinPartitioner)

    def __hash__(self) -> int:
        return hash(RoundRobinPartitioner)

    def __reduce__(self) -> tuple[type[RoundRobinPartitioner], tuple[()]]:
        return RoundRobinPartitioner, ()  # (a Spark task's copy starts its own turns; a lock does not pickle)


class _UniformSticky:
    """Stands for Java's UniformStickyPartitioner: the built-in partitioner with partitioner.ignore.keys=true."""

    def __call__(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        raise TypeError("UNIFORM_STICKY is not called: the partitioner reads it as partitioner.ignore.keys=true")

    def __repr__(self) -> str:
        return "UNIFORM_STICKY"

    def __reduce__(self) -> str:
        return "UNIFORM_STICKY"  # the module's one instance, also in a Spark task (the partitioner checks identity)


UNIFORM_STICKY = _UniformSticky()

#: The Java class names understood (java_partitioner gives each config a RoundRobinPartitioner of its own).
JAVA_PARTITIONERS = (_PACKAGE + "RoundRobinPartitioner", _PACKAGE + "UniformStickyPartitioner",
                     _PACKAGE + "internals.DefaultPartitioner")


def java_partitioner(name: str) -> RoundRobinPartitioner | _UniformSticky | None:
    """What stands for the Java partitioner class ``name`` (one of JAVA_PARTITIONERS)."""
    if name == JAVA_PARTITIONERS[0]:
        return RoundRobinPartitioner()
    if name == JAVA_PARTITIONERS[1]:
        return UNIFORM_STICKY
    if name == JAVA_PARTITIONERS[2]:
        return None
    raise KeyError(name)
