"""A digest of a Spark partition's rows (keys, values, headers), to tell a deterministic re-run from a changed one.

exactly_once with a stable writeId records, per Spark partition, how many rows it committed and this digest. A
re-run of the same write skips a partition already committed only if its input has the same row count and digest;
otherwise it refuses (the input changed, so skipping would lose rows and writing would duplicate them).

The digest is order-insensitive -- the sum (mod 2**64) of one 64-bit hash per row -- so a re-run that delivers the
same rows in another order (a shuffle without a sort) still matches. Each row's hash mixes Java's murmur2 of the key,
of the value and of every header key and value, with nulls told apart from empty bytes. Timestamps the producer
assigns, topics and partitions are not part of it. Vectorized: numpy over the Arrow buffers, no per-row Python.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from spark_kafka_sink.protocol.murmur2 import murmur2_array

__all__ = ["RowDigest", "EMPTY_DIGEST"]

_U64 = np.uint64
# Odd 64-bit multipliers (from splitmix64 / xxhash): spread each 32-bit murmur2 over all 64 bits, one per field.
_KEY, _VALUE, _HEADER_KEY, _HEADER_VALUE, _HEADERS = (
    _U64(0x9E3779B97F4A7C15), _U64(0xBF58476D1CE4E5B9), _U64(0x94D049BB133111EB), _U64(0xC2B2AE3D27D4EB4F),
    _U64(0x165667B19E3779F9))
_NULL = _U64(0x27D4EB2F165667C5)
#: The digest of no rows.
EMPTY_DIGEST = "0" * 16  # stands for a null field: differs from every murmur2 of bytes once multiplied


def _field_hashes(arr: pa.Array, multiplier: np.uint64) -> npt.NDArray[np.uint64]:
    """murmur2 of each entry spread to 64 bits; nulls get their own value."""
    hashes = murmur2_array(arr).view(np.uint32).astype(_U64) + _U64(1)
    if arr.null_count:
        valid = np.asarray(arr.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        hashes[~valid] = _NULL
    with np.errstate(over="ignore"):
        return hashes * multiplier


class RowDigest:
    """Accumulates rows and the digest over Arrow batches of the producer's input (binary key/value/headers)."""

    def __init__(self) -> None:
        self.rows = 0
        self._sum = _U64(0)

    def add(self, batch: pa.RecordBatch) -> None:
        names = batch.schema.names
        with np.errstate(over="ignore"):
            row = _field_hashes(batch.column("value"), _VALUE)
            if "key" in names:
                row += _field_hashes(batch.column("key"), _KEY)
            if "headers" in names:
                row += _headers_hash(batch.column("headers"))
            self._sum += row.sum(dtype=_U64)
        self.rows += batch.num_rows

    @property
    def digest(self) -> str:
        """16 hex digits: what the commit log records."""
        return f"{int(self._sum):016x}"


def _headers_hash(headers: pa.Array) -> npt.NDArray[np.uint64]:
    """Per row: the sum of its headers' hashes (a header's key and value hashed together), times a field constant."""
    n = len(headers)
    if n == 0:
        return np.zeros(0, _U64)
    lists = headers if isinstance(headers, pa.ListArray) else headers.cast(pa.list_(headers.type.value_type))
    offsets = np.asarray(lists.offsets.to_numpy(), dtype=np.int64)
    items = lists.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    offsets = offsets - offsets[0]
    with np.errstate(over="ignore"):
        per_item = (_field_hashes(items.field("key"), _HEADER_KEY)
                    + _field_hashes(items.field("value"), _HEADER_VALUE)) * _HEADERS
        running = np.zeros(len(per_item) + 1, _U64)
        np.cumsum(per_item, dtype=_U64, out=running[1:])
        per_row = running[offsets[1:]] - running[offsets[:-1]]
    if headers.null_count:
        valid = np.asarray(headers.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        per_row[~valid] = _NULL
    result: npt.NDArray[np.uint64] = per_row
    return result
