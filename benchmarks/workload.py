"""The records every contender of a comparison sends: same count, same keys, same values.

Keys are 16-byte zero-padded decimal row numbers (distinct, so the murmur2 partitioner spreads them over all
partitions). Values are random uppercase ASCII letters, like Kafka's own ProducerPerformance payloads: lz4 finds
little to remove (about 0.85 of the raw size), so codecs are measured on work, not on a degenerate input.
Generation is numpy, seeded, and happens before any timer starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

__all__ = ["Workload", "arrow_table", "arrow_chunks", "python_chunks", "default_chunk_rows"]

_CHUNK = 1_000_000  # rows generated per numpy step: bounds the temporaries ...
_CHUNK_BYTES = 128 << 20  # ... and so does this, for large values


@dataclass(frozen=True)
class Workload:
    rows: int
    key_size: int = 16
    value_size: int = 100
    partitions: int = 12
    codec: str = "lz4"
    acks: str = "all"
    batch_size: int = 16384  # Java's default batch.size
    linger_ms: int = 5
    topic_partitions: int | None = None  # the written topic's partitions; None: as many as ``partitions``

    @property
    def topic_size(self) -> int:
        return self.partitions if self.topic_partitions is None else self.topic_partitions

    @property
    def record_bytes(self) -> int:
        return self.key_size + self.value_size

    @property
    def total_bytes(self) -> int:
        return self.rows * self.record_bytes

    def with_(self, **changes: Any) -> Workload:
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        return asdict(self)


def _keys(start: int, n: int, key_size: int) -> pa.Array:
    """Zero-padded decimal ``start .. start+n-1``, ``key_size`` bytes each (the low digits if it is short)."""
    rest = np.arange(start, start + n, dtype=np.int64)
    mat = np.full((n, key_size), ord("0"), dtype=np.uint8)
    for col in range(key_size - 1, -1, -1):  # lowest digit last
        rest, digit = np.divmod(rest, 10)
        mat[:, col] += digit.astype(np.uint8)
    offsets = np.arange(0, (n + 1) * key_size, key_size, dtype=np.int32)
    return pa.Array.from_buffers(pa.binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(mat.tobytes())])


def _values(rng: np.random.Generator, n: int, value_size: int) -> pa.Array:
    data = np.frombuffer(rng.bytes(n * value_size), np.uint8) % np.uint8(26) + np.uint8(ord("A"))
    off_type = np.int64 if n * value_size >= 1 << 31 else np.int32
    offsets = np.arange(0, (n + 1) * value_size, value_size, dtype=off_type)
    kind = pa.large_binary() if off_type is np.int64 else pa.binary()
    return pa.Array.from_buffers(kind, n, [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def default_chunk_rows(w: Workload) -> int:
    return max(1, min(_CHUNK, _CHUNK_BYTES // w.record_bytes))


def arrow_chunks(w: Workload, chunk_rows: int | None = None, seed: int = 42) -> Iterator[pa.Table]:
    """The workload as Arrow tables (``key``, ``value`` binary) of at most ``chunk_rows`` rows, generated lazily."""
    rng = np.random.default_rng(seed)
    chunk_rows = chunk_rows or default_chunk_rows(w)
    for start in range(0, w.rows, chunk_rows):
        n = min(chunk_rows, w.rows - start)
        yield pa.table({"key": _keys(start, n, w.key_size), "value": _values(rng, n, w.value_size)})


def arrow_table(w: Workload, seed: int = 42) -> pa.Table:
    """The whole workload as one table (chunked per million rows)."""
    chunks = list(arrow_chunks(w, seed=seed))
    if not chunks:
        return pa.table({"key": pa.array([], pa.binary()), "value": pa.array([], pa.binary())})
    return pa.concat_tables(chunks)


def python_chunks(table: pa.Table, chunk_rows: int = _CHUNK) -> list[tuple[list[bytes], list[bytes]]]:
    """(keys, values) as lists of ``bytes`` per chunk: the natural input of per-record clients, built up front."""
    out = []
    for batch in table.to_batches(max_chunksize=chunk_rows):
        out.append((batch.column(0).to_pylist(), batch.column(1).to_pylist()))
    return out
