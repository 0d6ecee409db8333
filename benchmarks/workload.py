"""The records every contender of a comparison sends: same count, same keys, same values.

Keys are 16-byte zero-padded decimal row numbers (distinct, so the murmur2 partitioner spreads them over all
partitions). Values (``value_kind``):
- ``random``: ``value_size`` random uppercase ASCII letters, like Kafka's own ProducerPerformance payloads: lz4
  finds little to remove (about 0.85 of the raw size), so codecs are measured on work, not on a degenerate input;
- ``json``: JSON text of a click-stream event (ids, a timestamp, user, geo, user agent, page, a cart of three
  items, a free-text note), ~``value_size`` bytes (the note's length varies; 1,000 B on average at the default),
  every field a function of the row number (``json_values``): what Kafka topics commonly carry; lz4 makes
  16 KiB of it about 0.4 of its size.
Generation is numpy/pyarrow, seeded or derived from the row number, and happens before any timer starts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["Workload", "arrow_table", "arrow_chunks", "python_chunks", "default_chunk_rows", "json_values", "keys"]

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
    value_kind: str = "random"  # "random" letters or "json" events (module docstring)

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


def keys(start: int, n: int, key_size: int) -> pa.Array:
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


# Vocabularies of the JSON events. Words are Kafka-ish nouns and verbs; agents are real browser strings.
_EVENT_TYPES = ["page_view", "add_to_cart", "remove_from_cart", "checkout", "purchase", "search", "login",
                "logout"]
_COUNTRIES = ["US", "DE", "FR", "GB", "IN", "BR", "JP", "CA", "AU", "ES", "IT", "NL", "SE", "PL", "MX", "KR"]
_CITIES = ["Berlin", "Paris", "London", "Mumbai", "Sao Paulo", "Tokyo", "Toronto", "Sydney", "Madrid", "Milan",
           "Amsterdam", "Stockholm", "Warsaw", "Mexico City", "Seoul", "New York", "San Francisco", "Chicago",
           "Munich", "Lyon", "Osaka", "Delhi", "Austin", "Seattle"]
_AGENTS = [
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36",
    "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7_1) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 "
    "Safari/605.1.15",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) "
    "Version/18.1 Mobile/15E148 Safari/604.1",
    "Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile "
    "Safari/537.36",
    "Mozilla/5.0 (X11; Linux x86_64; rv:132.0) Gecko/20100101 Firefox/132.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 "
    "Safari/537.36 Edg/131.0.0.0",
]
_CATEGORIES = ["books", "electronics", "garden", "kitchen", "toys", "sports", "music", "fashion", "beauty",
               "outdoor", "office", "pets"]
_WORDS = ("stream broker partition offset replica leader follower topic record batch commit transaction "
          "producer consumer group coordinator segment index retention compaction schema registry connector "
          "sink source task worker cluster node quorum controller metadata fetch produce acknowledge latency "
          "throughput backlog checkpoint window watermark join aggregate shuffle stage executor driver query "
          "table column row filter project sort merge spill cache memory disk network socket buffer frame "
          "header payload codec compress").split()
_HEX = np.frombuffer(b"0123456789abcdef", np.uint8)


def _mix(x: np.ndarray, salt: int) -> np.ndarray:
    """splitmix64 of the row number in stream ``salt``: well-spread, deterministic pseudo-random uint64s."""
    with np.errstate(over="ignore"):
        z = x.astype(np.uint64) + np.uint64(salt + 1) * np.uint64(0x632BE59BD9B4E019)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _hex(h: np.ndarray, digits: int) -> pa.Array:
    n = len(h)
    shifts = np.arange(digits - 1, -1, -1, dtype=np.uint64) * np.uint64(4)
    mat = _HEX[((h[:, None] >> shifts[None, :]) & np.uint64(0xF)).astype(np.intp)]
    offsets = np.arange(0, (n + 1) * digits, digits, dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(mat.tobytes())])


def _pick(words: list[str], h: np.ndarray) -> pa.Array:
    return pa.array(words, pa.string()).take(pa.array((h % np.uint64(len(words))).astype(np.int64)))


def _num(values: np.ndarray) -> pa.Array:
    return pa.array(values.astype(np.int64)).cast(pa.string())


def json_values(rows: npt.NDArray[np.int64], value_size: int = 1000) -> pa.Array:
    """JSON click-stream events for these row numbers (string; see the module docstring): the same row number
    always gives the same text, in any process (Spark's Python workers make the Spark workload's values with it).
    The note's word count makes the average ``value_size``."""
    h = [_mix(rows, salt) for salt in range(8)]
    ms = 1_763_800_000_000 + rows * 37  # 2025-11-22, ~27 events per second
    seconds = ms // 1000
    stamp = pc.strftime(pa.array(seconds, pa.timestamp("s", "UTC")), format="%Y-%m-%dT%H:%M:%S")
    parts: list[Any] = [
        '{"event_id":"', _hex(h[0], 16), _hex(h[1], 16),
        '","event_type":"', _pick(_EVENT_TYPES, h[2]),
        '","ts":"', stamp, ".", pc.utf8_lpad(_num(ms % 1000), 3, "0"), "Z",
        '","trace":{"trace_id":"', _hex(_mix(rows, 20), 16), _hex(_mix(rows, 21), 16),
        '","span_id":"', _hex(_mix(rows, 22), 16), '","sampled":true}',
        ',"user":{"id":', _num(h[3] % np.uint64(2_000_000)),
        ',"session":"', _hex(h[4], 16), '","ip":"', _num(h[4] >> np.uint64(8) & np.uint64(0xFF)), ".",
        _num(h[4] >> np.uint64(16) & np.uint64(0xFF)), ".", _num(h[4] >> np.uint64(24) & np.uint64(0xFF)), ".",
        _num(h[4] >> np.uint64(32) & np.uint64(0xFF)),
        '","country":"', _pick(_COUNTRIES, h[5]), '","city":"', _pick(_CITIES, h[5] >> np.uint64(8)),
        '","agent":"', _pick(_AGENTS, h[6]),
        '"},"page":{"url":"https://shop.example.com/', _pick(_CATEGORIES, h[7]), "/item/",
        _num(h[7] >> np.uint64(16) & np.uint64(0xFFFF)),
        '","referrer":"https://www.example.com/search?q=', _pick(_WORDS, h[2] >> np.uint64(8)), "+",
        _pick(_WORDS, h[3] >> np.uint64(24)), '"},"cart":[',
    ]
    for item in range(3):
        g = _mix(rows, 100 + item)
        parts += [("" if item == 0 else ",") + '{"sku":"SKU-', _num(g % np.uint64(100_000)),
                  '","qty":', _num((g >> np.uint64(20) & np.uint64(3)) + np.uint64(1)),
                  ',"price":', _num(g >> np.uint64(24) & np.uint64(0x3FFF)), ".",
                  pc.utf8_lpad(_num(g >> np.uint64(40) & np.uint64(63)), 2, "0"), "}"]
    parts.append('],"note":"')
    words = max(1, round((value_size - 700) / 7.6))  # the rest is ~700 bytes; a word and its space ~7.6
    for k in range(words):
        parts += [_pick(_WORDS, _mix(rows, 1000 + k)), " " if k + 1 < words else ""]
    parts.append('"}')
    arrays = [p if isinstance(p, pa.Array) else pa.scalar(p, pa.string()) for p in parts]
    joined: pa.Array = pc.binary_join_element_wise(*arrays, "")
    return joined


def default_chunk_rows(w: Workload) -> int:
    return max(1, min(_CHUNK, _CHUNK_BYTES // w.record_bytes))


def arrow_chunks(w: Workload, chunk_rows: int | None = None, seed: int = 42) -> Iterator[pa.Table]:
    """The workload as Arrow tables (``key``, ``value`` binary) of at most ``chunk_rows`` rows, generated lazily."""
    rng = np.random.default_rng(seed)
    chunk_rows = chunk_rows or default_chunk_rows(w)
    for start in range(0, w.rows, chunk_rows):
        n = min(chunk_rows, w.rows - start)
        value = (json_values(np.arange(start, start + n), w.value_size).cast(pa.binary()) if w.value_kind == "json"
                 else _values(rng, n, w.value_size))
        yield pa.table({"key": keys(start, n, w.key_size), "value": value})


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
