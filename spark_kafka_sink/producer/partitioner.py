"""Choosing partitions, identical to the Java client's default (built-in) partitioner.

* an explicit partition is used as given (it must exist);
* a custom ``partitioner.class`` callable ``(topic, key_bytes, num_partitions) -> int`` decides otherwise (Java's
  RoundRobinPartitioner, named by its class: every partition with a leader in turn, whole batches at once);
* a keyed record goes to ``(murmur2(key) & 0x7fffffff) % num_partitions`` (all partitions, available or not);
* a record without key, or any record with ``partitioner.ignore.keys=true``, is sticky (KIP-480 / KIP-794): it goes
  to the topic's current sticky partition, which changes once batch.size bytes were produced to it. The next one is
  drawn at random among the available partitions, uniformly, or -- with adaptive partitioning and queue sizes fed by
  ``update_partition_load`` -- weighted by ``max_queue + 1 - queue`` as in Java, so slow brokers get less.

Per record: ``Partitioner.partition(...)`` -> ``PartitionChoice``; after appending a sticky record call
``on_sticky_append(topic, partition, appended_bytes, batch_is_full)``. Java's rule: switch after batch.size bytes if
the partition's batch is full (a batch boundary), and after 2 * batch.size bytes regardless.

Per Arrow batch: ``partition_arrow(...)`` does the same for whole columns with numpy. Sticky rows are cut into runs
that each fit one batch (cumulative bytes <= batch.size, at least one row): a run is exactly one full record
batch, so the bulk path never leaves a small leftover batch per switch (decided here; Java has no bulk path).
The one per-row loop left is a user's custom partitioner, which is Python code per record by definition.
"""

from __future__ import annotations

import bisect
import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spark_kafka_sink.errors import PartitionOutOfRangeError
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.java_partitioners import UNIFORM_STICKY, RoundRobinPartitioner
from spark_kafka_sink.protocol.murmur2 import murmur2, partition_for_key, partitions_for_keys

__all__ = ["Partitioner", "PartitionChoice", "PartitionInfo", "StickyPartitioner", "partition_arrow",
           "CustomPartitioner"]

CustomPartitioner = Callable[[str, "bytes | None", int], int]
I32 = npt.NDArray[np.int32]


class PartitionChoice(NamedTuple):
    partition: int
    sticky: bool  # True: report the appended bytes with on_sticky_append


class PartitionInfo(NamedTuple):
    """What the partitioner needs to know of a topic, from the metadata."""

    partition_count: int
    candidates: list[int] | None  # the sticky partitioner's candidates; None: all partitions


@dataclass
class _TopicSticky:
    current: int = -1  # -1: draw one at the next record
    # Bytes appended to ``current`` since it was chosen. Reset under the sticky lock; counted up without it by
    # ``on_append`` until a switch is due. Sending threads racing there may lose a record's count (that run ends
    # a record later) or write the old partition's count over a fresh one's (that run ends early): only where a
    # run ends moves, never which partitions records may go to.
    produced_bytes: int = 0
    queue_sizes: Mapping[int, int] | None = None  # adaptive partitioning input


class StickyPartitioner:
    """Per-topic sticky partition state, shared by the per-record and Arrow paths. Thread-safe: ``_lock`` guards
    ``_topics`` and every ``_TopicSticky`` in it."""

    def __init__(self, batch_size: int, *, adaptive: bool = True, rng: np.random.Generator | None = None) -> None:
        self.batch_size = max(batch_size, 1)
        self.adaptive = adaptive
        self._rng = rng if rng is not None else np.random.default_rng()
        # One uniform number in [0, 1) from the same generator: a single draw is a bisect over the weights, where
        # Generator.choice costs ~15 us of set-up per call (once per per-record batch). None: a stand-in
        # generator with ``choice`` only (tests), drawn through it.
        self._uniform: Callable[[], float] | None = getattr(self._rng, "random", None)
        self._lock = threading.Lock()
        self._topics: dict[str, _TopicSticky] = {}
        self._candidate_cache: dict[tuple[int, tuple[int, ...] | None], tuple[I32, list[int]]] = {}  # under _lock

    def _state(self, topic: str) -> _TopicSticky:
        # Caller holds _lock.
        state = self._topics.get(topic)
        if state is None:
            state = self._topics[topic] = _TopicSticky()
        return state

    def _candidates(self, num_partitions: int, available: Sequence[int] | None) -> tuple[I32, list[int]]:
        # Caller holds _lock. Per (count, available set): a per-record sticky partition draws one each batch, and
        # building the array each time cost more than the draw.
        key = (num_partitions, tuple(available) if available else None)
        found = self._candidate_cache.get(key)
        if found is None:
            candidates = np.asarray(available if available else range(num_partitions), dtype=np.int32)
            candidates = candidates[candidates < num_partitions]
            if len(candidates) == 0:
                candidates = np.arange(num_partitions, dtype=np.int32)
            if len(self._candidate_cache) >= 64:  # availability sets come and go: keep the recent ones
                self._candidate_cache.clear()
            found = self._candidate_cache[key] = (candidates, candidates.tolist())
        return found

    def _draw(self, state: _TopicSticky, num_partitions: int, available: Sequence[int] | None, count: int) -> I32:
        # Caller holds _lock. ``count`` partitions drawn independently (uniform or load-weighted).
        candidates, listed = self._candidates(num_partitions, available)
        weights: npt.NDArray[np.float64] | list[float] | None = None
        queue_sizes = state.queue_sizes
        if self.adaptive and queue_sizes:
            # Java: shorter queues get proportionally more new records (max + 1 - queue). In Python for a few
            # partitions, where numpy's set-up per call costs more than the loop.
            if len(listed) <= 64:
                sizes = [queue_sizes.get(p, 0) for p in listed]
                top = max(sizes) + 1
                total = top * len(sizes) - sum(sizes)
                weights = [(top - size) / total for size in sizes]
            else:
                array = np.array([queue_sizes.get(p, 0) for p in listed], dtype=np.float64)
                raw = array.max() + 1 - array
                weights = raw / raw.sum()
        return self._rng.choice(candidates, size=count, p=weights).astype(np.int32, copy=False)

    def _draw_one(self, state: _TopicSticky, num_partitions: int, available: Sequence[int] | None) -> int:
        # Caller holds _lock. One partition, drawn as ``_draw`` draws (uniform or load-weighted), without numpy's
        # per-call set-up: the per-record path draws once per batch.
        uniform = self._uniform
        if uniform is None:
            return int(self._draw(state, num_partitions, available, 1)[0])
        listed = self._candidates(num_partitions, available)[1]
        queue_sizes = state.queue_sizes
        if not (self.adaptive and queue_sizes):
            return listed[min(int(uniform() * len(listed)), len(listed) - 1)]
        sizes = [queue_sizes.get(p, 0) for p in listed]  # Java: weights max + 1 - queue, as _draw's
        top = max(sizes) + 1
        cumulative = list(itertools.accumulate(top - size for size in sizes))
        return listed[min(bisect.bisect_right(cumulative, uniform() * cumulative[-1]), len(listed) - 1)]

    def current(self, topic: str, num_partitions: int, available: Sequence[int] | None = None) -> int:
        """The topic's sticky partition, drawing one if there is none (or it no longer exists)."""
        # Per record: read without the lock first (a dict read and an int read are atomic). A switch racing
        # this read only sends the record to the partition being left, which is still a valid partition.
        state = self._topics.get(topic)
        if state is not None and 0 <= state.current < num_partitions:
            return state.current
        with self._lock:
            state = self._state(topic)
            if not 0 <= state.current < num_partitions:
                state.current = self._draw_one(state, num_partitions, available)
                state.produced_bytes = 0
            return state.current

    def on_append(self, topic: str, partition: int, appended_bytes: int, batch_is_full: bool) -> bool:
        """Count bytes appended to the sticky partition; switch per the Java rule (module docstring). True if it
        switched: the next record draws a partition, so that is when ``update_partition_load`` pays off."""
        # Per record, the common case (no switch) without the lock: see ``_TopicSticky.produced_bytes``.
        state = self._topics.get(topic)
        if state is not None and partition == state.current:
            produced = state.produced_bytes + appended_bytes
            if produced < self.batch_size or (not batch_is_full and produced < 2 * self.batch_size):
                state.produced_bytes = produced
                return False
        with self._lock:
            state = self._topics.get(topic) or self._state(topic)
            if partition != state.current:
                return False  # the partition changed meanwhile (another thread switched): nothing to count
            state.produced_bytes += appended_bytes
            if (state.produced_bytes >= self.batch_size and batch_is_full) or \
                    state.produced_bytes >= 2 * self.batch_size:
                state.current = -1  # the next record draws a new one
                state.produced_bytes = 0
                return True
            return False

    def run_budget(self, topic: str, partition: int) -> tuple[int, int]:
        """The bytes ``partition`` (the topic's sticky one) may still take before ``on_append`` switches: at
        once past the second, past the first once its batch is full (the rule of the module docstring). For a
        run of records appended together, which stops where record-by-record appends would have switched."""
        state = self._topics.get(topic)
        produced = state.produced_bytes if state is not None and state.current == partition else 0
        return self.batch_size - produced, 2 * self.batch_size - produced

    def update_partition_load(self, topic: str, queue_sizes: Mapping[int, int]) -> None:
        """Queued batches per partition (e.g. ``RecordAccumulator.queue_sizes``): weights the next draws."""
        with self._lock:
            self._state(topic).queue_sizes = dict(queue_sizes)

    def assign_runs(self, topic: str, sizes: npt.NDArray[np.int64], num_partitions: int,
                    available: Sequence[int] | None = None) -> I32:
        """Sticky partitions for consecutive rows of ``sizes`` bytes: runs of at most batch.size bytes (at least
        one row), the first continuing the current partition's run. One loop step per run, not per row."""
        m = len(sizes)
        if m == 0:
            return np.zeros(0, np.int32)
        cum = np.cumsum(sizes, dtype=np.int64)
        limit = self.batch_size
        with self._lock:
            state = self._state(topic)
            carried = state.produced_bytes if 0 <= state.current < num_partitions else 0
            # Continue the current partition's run if the first row still fits its batch.
            continue_current = 0 <= state.current < num_partitions and int(cum[0]) <= limit - carried
            starts: list[int] = []
            i = 0
            budget = limit - carried if continue_current else limit
            while i < m:
                base = int(cum[i - 1]) if i else 0
                end = max(int(np.searchsorted(cum, base + budget, side="right")), i + 1)
                starts.append(i)
                i = end
                budget = limit
            starts_arr = np.array(starts, dtype=np.int64)
            lengths = np.diff(np.append(starts_arr, m))
            drawn = self._draw(state, num_partitions, available, len(starts) - int(continue_current))
            run_partitions = np.concatenate([[state.current], drawn]).astype(np.int32) if continue_current else drawn
            last_bytes = int(cum[-1]) - (int(cum[starts[-1] - 1]) if starts[-1] else 0)
            if len(starts) == 1 and continue_current:
                last_bytes += carried
            state.current = int(run_partitions[-1])
            state.produced_bytes = last_bytes
            if last_bytes >= limit:  # the last run filled its batch: the next record starts a new one
                state.current, state.produced_bytes = -1, 0
        return np.repeat(run_partitions, lengths).astype(np.int32)


def _check_range(partition: int, num_partitions: int, topic: str, what: str) -> int:
    if not 0 <= partition < num_partitions:
        raise PartitionOutOfRangeError(
            f"{what} {partition} is not a partition of topic {topic!r} (it has {num_partitions}: 0..."
            f"{num_partitions - 1})")
    return partition


class Partitioner:
    """The producer's partitioner (module docstring). Thread-safe."""

    def __init__(self, batch_size: int, *, ignore_keys: bool = False, custom: CustomPartitioner | None = None,
                 adaptive: bool = True, rng: np.random.Generator | None = None) -> None:
        self.ignore_keys = ignore_keys
        self.custom = custom
        self.sticky = StickyPartitioner(batch_size, adaptive=adaptive, rng=rng)

    @classmethod
    def from_config(cls, config: ProducerConfig, rng: np.random.Generator | None = None) -> Partitioner:
        custom = config.partitioner_class
        uniform_sticky = custom is UNIFORM_STICKY  # Java's UniformStickyPartitioner: the built-in, keys ignored
        return cls(config.batch_size, ignore_keys=config.partitioner_ignore_keys or uniform_sticky,
                   custom=None if uniform_sticky else custom,
                   adaptive=config.partitioner_adaptive_partitioning_enable, rng=rng)

    def partition(self, topic: str, key: bytes | None, num_partitions: int, explicit: int | None = None,
                  available: Sequence[int] | None = None) -> PartitionChoice:
        """The partition for one record. ``available``: partitions with a known leader (for sticky draws)."""
        if num_partitions <= 0:
            raise PartitionOutOfRangeError(f"topic {topic!r} has no partitions in the metadata")
        if explicit is not None:
            return PartitionChoice(_check_range(explicit, num_partitions, topic, "partition"), False)
        if isinstance(self.custom, RoundRobinPartitioner):  # told which partitions have a leader, as in Java
            return PartitionChoice(int(self.custom.partitions(topic, 1, num_partitions, available)[0]), False)
        if self.custom is not None:
            chosen = self.custom(topic, key, num_partitions)
            return PartitionChoice(_check_range(int(chosen), num_partitions, topic, "partitioner.class chose"),
                                   False)
        if key is not None and not self.ignore_keys:
            return PartitionChoice(partition_for_key(murmur2(key), num_partitions), False)
        return PartitionChoice(self.sticky.current(topic, num_partitions, available), True)

    def on_sticky_append(self, topic: str, partition: int, appended_bytes: int, batch_is_full: bool) -> bool:
        return self.sticky.on_append(topic, partition, appended_bytes, batch_is_full)

    def update_partition_load(self, topic: str, queue_sizes: Mapping[int, int]) -> None:
        self.sticky.update_partition_load(topic, queue_sizes)

    def partition_arrow(self, topic: str, keys: pa.Array | pa.ChunkedArray | None,
                        explicit: pa.Array | pa.ChunkedArray | None, value_sizes: npt.NDArray[np.integer],
                        num_partitions: int, available: Sequence[int] | None = None) -> I32:
        """``partition`` for every row of an Arrow batch at once (see :func:`partition_arrow`)."""
        if self.custom is None:
            return partition_arrow(keys, explicit, value_sizes, num_partitions, topic, self.sticky,
                                   ignore_keys=self.ignore_keys, available=available)
        # A custom partitioner is Python code per record (the one per-row loop); explicit partitions still win.
        n = len(value_sizes)
        out = np.full(n, -1, dtype=np.int32)
        given = _apply_explicit(out, explicit, num_partitions, topic) if explicit is not None else np.zeros(n, bool)
        rows = np.flatnonzero(~given)
        if isinstance(self.custom, RoundRobinPartitioner):  # Java's round robin: the rows' turns at once
            out[rows] = self.custom.partitions(topic, len(rows), num_partitions, available)
            return out
        key_list = keys.take(pa.array(rows)).to_pylist() if keys is not None else [None] * len(rows)
        chosen = np.fromiter((self.custom(topic, _as_bytes(k), num_partitions) for k in key_list), np.int64,
                             len(rows))
        bad = (chosen < 0) | (chosen >= num_partitions)
        if bad.any():
            _check_range(int(chosen[np.argmax(bad)]), num_partitions, topic, "partitioner.class chose")
        out[rows] = chosen
        return out


def _as_bytes(key: object) -> bytes | None:
    return key.encode("utf-8") if isinstance(key, str) else key  # type: ignore[return-value]


def _apply_explicit(out: I32, explicit: pa.Array | pa.ChunkedArray, num_partitions: int, topic: str
                    ) -> npt.NDArray[np.bool_]:
    """Write the non-null explicit partitions into ``out``; returns the mask of rows that had one."""
    if isinstance(explicit, pa.ChunkedArray):
        explicit = explicit.combine_chunks()
    given = np.asarray(explicit.is_valid())
    if given.any():
        values = np.asarray(explicit.fill_null(0).cast(pa.int64()))
        bad = given & ((values < 0) | (values >= num_partitions))
        if bad.any():
            _check_range(int(values[np.argmax(bad)]), num_partitions, topic, f"row {int(np.argmax(bad))}: partition")
        out[given] = values[given]
    return given


def partition_arrow(keys: pa.Array | pa.ChunkedArray | None, explicit: pa.Array | pa.ChunkedArray | None,
                    value_sizes: npt.NDArray[np.integer], num_partitions: int, topic: str,
                    sticky_state: StickyPartitioner, *, ignore_keys: bool = False,
                    available: Sequence[int] | None = None) -> I32:
    """Vectorized built-in partitioner for one Arrow batch: explicit partitions (non-null ``explicit``) as given,
    keyed rows by murmur2, the rest sticky by cumulative ``value_sizes`` (bytes each row adds; pass full record
    sizes when known). No per-row Python loop. Returns int32 partitions, one per row."""
    n = len(value_sizes)
    if num_partitions <= 0:
        raise PartitionOutOfRangeError(f"topic {topic!r} has no partitions in the metadata")
    out = np.full(n, -1, dtype=np.int32)
    if explicit is not None:
        if len(explicit) != n:
            raise ValueError(f"partition column has {len(explicit)} rows, value sizes {n}")
        given = _apply_explicit(out, explicit, num_partitions, topic)
    else:
        given = np.zeros(n, dtype=bool)
    if keys is not None and not ignore_keys:
        if len(keys) != n:
            raise ValueError(f"key column has {len(keys)} rows, value sizes {n}")
        hashed = partitions_for_keys(keys, num_partitions)  # -1 where the key is null
        keyed = ~given & (hashed >= 0)
        out[keyed] = hashed[keyed]
    sticky_rows = np.flatnonzero(out < 0)
    if len(sticky_rows):
        sizes = np.asarray(value_sizes, dtype=np.int64)[sticky_rows]
        out[sticky_rows] = sticky_state.assign_runs(topic, sizes, num_partitions, available)
    return out
