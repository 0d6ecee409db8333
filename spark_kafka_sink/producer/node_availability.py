"""``NodeAvailability``: which brokers have not taken data for partitioner.availability.timeout.ms (KIP-794).

As the Java client's ``RecordAccumulator.NodeLatencyStats``: each sender round, every node with a sendable batch
is recorded as *ready* at ``now_ms``, and also as *drained* when the network client could take a request for it.
A node whose last ready time is more than the timeout past its last drain time -- data waited for it that long,
e.g. its connection is down or its in-flight slots stay full -- is unavailable, and the sticky partitioner leaves
the partitions it leads out of its draws until the node drains again. Keyed records and explicit partitions are
not affected (as Java). 0 turns it off; so does partitioner.adaptive.partitioning.enable=false, as Java documents.

Threads: ``record`` runs on the sender thread, which owns ``_ready_ms`` / ``_drained_ms``; ``unavailable`` is read
by any sending thread. It is a frozenset replaced whole (an atomic reference store) only when it changes, so a
reader may cache what it derived from it while ``unavailable`` stays the same object.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

__all__ = ["NodeAvailability", "sticky_candidates"]


def sticky_candidates(partitions: Sequence[int], leaders: Mapping[int, int | None], unavailable: frozenset[int]
                      ) -> list[int] | None:
    """The partitions a sticky draw may pick: those with a leader, less those whose leader is unavailable; if
    that leaves none, all with a leader (as Java's partitioner falls back). None: every partition qualifies."""
    led = [p for p in partitions if leaders.get(p) is not None]
    usable = [p for p in led if leaders[p] not in unavailable] or led
    return usable if len(usable) < len(partitions) else None


class NodeAvailability:
    """See the module docstring."""

    def __init__(self, timeout_ms: int) -> None:
        self.timeout_ms = timeout_ms  # 0: off
        # Owned by the sender thread:
        self._ready_ms: dict[int, int] = {}
        self._drained_ms: dict[int, int] = {}
        # Written by the sender thread, read by any thread (see the module docstring):
        self.unavailable: frozenset[int] = frozenset()

    @property
    def enabled(self) -> bool:
        return self.timeout_ms > 0

    def record(self, node_id: int, now_ms: int, drained: bool) -> None:
        """``node_id`` had a sendable batch at ``now_ms``; ``drained``: the client could take a request for it."""
        if not self.enabled:
            return
        if drained or node_id not in self._drained_ms:
            self._drained_ms[node_id] = now_ms  # the first sight of a node starts its clock, as Java's
        self._ready_ms[node_id] = now_ms
        stalled = self._ready_ms[node_id] - self._drained_ms[node_id] > self.timeout_ms
        if stalled != (node_id in self.unavailable):
            self.unavailable = self.unavailable | {node_id} if stalled else self.unavailable - {node_id}
