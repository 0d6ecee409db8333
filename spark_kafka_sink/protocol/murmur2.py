"""Murmur2 exactly as the Java client's ``Utils.murmur2`` (the default partitioner's key hash). Pure.

    murmur2(key: bytes) -> int                           # signed int32, equal to Java's return value
    murmur2_array(keys: pa.Array) -> np.ndarray[int32]   # vectorized; null rows: meaningless (check validity)
    partition_for_key(hash, n) -> int                    # (hash & 0x7fffffff) % n
    partitions_for_keys(keys: pa.Array, n) -> np.ndarray[int32]   # -1 where the key is null

Algorithm (all arithmetic mod 2**32): h = seed ^ len; for each little-endian 4-byte word k: k *= m; k ^= k >>> r;
k *= m; h *= m; h ^= k. Tail (1-3 bytes): h ^= b[2] << 16; h ^= b[1] << 8; h ^= b[0]; h *= m.
Final: h ^= h >>> 13; h *= m; h ^= h >>> 15.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = ["murmur2", "murmur2_array", "partition_for_key", "partitions_for_keys", "binary_buffers"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF

# Keys whose word chains are still running once fewer than this many remain are finished in plain Python:
# one numpy round costs microseconds whatever its width, so a few very long keys would otherwise cost a round
# per 4 bytes.
_SCALAR_TAIL_KEYS = 16


# Per word count, the unpacker of that many little-endian uint32 words (keys are rarely longer: others build one).
_WORDS = [struct.Struct(f"<{n}I").unpack_from for n in range(64)]


def murmur2(key: bytes | bytearray | memoryview) -> int:
    """Java's ``Utils.murmur2(key)``: a signed 32-bit int. Called per keyed record by ``send``: the words are read
    by one precompiled unpacker and each word's mix is one expression (the algorithm of the module docstring)."""
    data = key if type(key) is bytes else bytes(key)
    n = len(data)
    h = _SEED ^ n
    n_words = n >> 2
    if n_words:
        for k in (_WORDS[n_words] if n_words < 64 else struct.Struct(f"<{n_words}I").unpack_from)(data):
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ (((k ^ (k >> _R)) * _M) & _MASK)
    tail = n & 3
    if tail:  # Java's switch falls through from the highest tail byte down (xor: the order does not matter)
        if tail == 3:
            h ^= (data[n - 1] << 16) ^ (data[n - 2] << 8) ^ data[n - 3]
        elif tail == 2:
            h ^= (data[n - 1] << 8) ^ data[n - 2]
        else:
            h ^= data[n - 1]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def partition_for_key(hash_: int, num_partitions: int) -> int:
    """The Java default partitioner's choice for a keyed record: ``(hash & 0x7fffffff) % num_partitions``."""
    return (hash_ & 0x7FFFFFFF) % num_partitions


def binary_buffers(arr: pa.Array | pa.ChunkedArray) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.uint8]]:
    """(offsets int64 of len(arr)+1, data uint8) for a binary/string array of any width, without copying data.

    ``data[offsets[i]:offsets[i+1]]`` are row i's bytes (meaningless for a null row). Other types are cast."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    if pa.types.is_string(t) or pa.types.is_binary(t):
        off_type: Any = np.int32
    elif pa.types.is_large_string(t) or pa.types.is_large_binary(t):
        off_type = np.int64
    else:
        return binary_buffers(arr.cast(pa.large_binary()))
    _validity, off_buf, data_buf = arr.buffers()
    offsets = np.frombuffer(off_buf, dtype=off_type, count=len(arr) + 1, offset=arr.offset * off_type().itemsize)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64), data


def murmur2_array(keys: pa.Array | pa.ChunkedArray) -> npt.NDArray[np.int32]:
    """Java murmur2 of every key of a binary/string array, vectorized (no per-key Python loop except for the few
    longest keys, see ``_SCALAR_TAIL_KEYS``). Null keys get a meaningless value: check the array's validity."""
    offsets, data = binary_buffers(keys)
    n = len(offsets) - 1
    if n == 0:
        return np.zeros(0, np.int32)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    m = np.uint32(_M)
    h = np.uint32(_SEED) ^ lengths.astype(np.uint32)
    n_words = lengths // 4

    total_words = int(n_words.sum())
    if total_words:
        # Mix every full word of every key at once: k *= m; k ^= k >>> r; k *= m (independent per word).
        word_base = np.zeros(n + 1, np.int64)
        np.cumsum(n_words, out=word_base[1:])
        k = _words(data, starts, lengths, n_words, word_base[:-1], total_words)
        k *= m
        k ^= k >> np.uint32(_R)
        k *= m
        _chain(h, k, n_words, word_base[:-1])

    # Tail bytes (fall-through order does not matter for xor), then the final mix.
    tail = lengths & 3
    has_tail = tail > 0
    tail_start = starts + 4 * n_words
    for b in (2, 1, 0):
        sel = tail > b
        if sel.any():
            h[sel] ^= data[tail_start[sel] + b].astype(np.uint32) << np.uint32(8 * b)
    h[has_tail] *= m
    h ^= h >> np.uint32(13)
    h *= m
    h ^= h >> np.uint32(15)
    return h.view(np.int32)


def _chain(
    h: npt.NDArray[np.uint32],
    k: npt.NDArray[np.uint32],
    n_words: npt.NDArray[np.int64],
    word_base: npt.NDArray[np.int64],
) -> None:
    """h = h * m ^ k over each key's mixed words, in place. The chain is sequential per key, so walk the word index
    j across all keys at once."""
    m = np.uint32(_M)
    lo, hi = int(n_words.min()), int(n_words.max())
    if lo == hi:  # all keys as long (the common case): the words form an (n, hi) matrix
        words = k.reshape(len(h), hi)
        for j in range(hi):
            h *= m
            h ^= words[:, j]
        return
    # Longest keys first: at step j the keys still running are a prefix of that order.
    order = np.argsort(-n_words, kind="stable")
    sorted_words = n_words[order]
    sorted_base = word_base[order]
    hs = h[order]
    running = len(sorted_words) - np.searchsorted(sorted_words[::-1], np.arange(hi), side="right")
    j = 0
    while j < hi and running[j] >= _SCALAR_TAIL_KEYS:
        c = int(running[j])
        hs[:c] = (hs[:c] * m) ^ k[sorted_base[:c] + j]
        j += 1
    if j < hi:
        for i in range(int(running[j])):
            hv = int(hs[i])
            base = int(sorted_base[i])
            for w in k[base + j : base + int(sorted_words[i])].tolist():
                hv = ((hv * _M) & _MASK) ^ w
            hs[i] = hv
    h[order] = hs


def _words(data: npt.NDArray[np.uint8], starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64],
           n_words: npt.NDArray[np.int64], word_base: npt.NDArray[np.int64], total_words: int
           ) -> npt.NDArray[np.uint32]:
    """Every key's full little-endian words, key after key (key i's at ``word_base[i]``)."""
    if int(lengths.min()) == int(lengths.max()):
        # Keys all of one length (ids, hashes, zero-padded numbers) lie back to back: their words are an (n, w)
        # strided view of the data, read in one copy; no per-word positions, no gather.
        length, w = int(lengths[0]), int(n_words[0])
        view = np.ndarray(shape=(len(starts), w), dtype="<u4", buffer=data, offset=int(starts[0]),
                          strides=(length, 4))
        words: npt.NDArray[np.uint32] = view.astype(np.uint32).reshape(-1)
        return words
    word_pos = 4 * np.arange(total_words, dtype=np.int64) + np.repeat(starts - 4 * word_base, n_words)
    return _load_le32(data, word_pos)


def _load_le32(data: npt.NDArray[np.uint8], pos: npt.NDArray[np.int64]) -> npt.NDArray[np.uint32]:
    """Little-endian uint32 at each (possibly unaligned) byte position."""
    if len(data) < 4:
        return np.zeros(len(pos), np.uint32)
    # A little-endian uint32 view starting at every byte (stride 1, unaligned reads): one gather per word.
    windows = np.ndarray(shape=(len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))
    return windows[pos].astype(np.uint32)


def partitions_for_keys(keys: pa.Array | pa.ChunkedArray, num_partitions: int) -> npt.NDArray[np.int32]:
    """``partition_for_key(murmur2(key), n)`` per row; -1 where the key is null (the caller picks sticky)."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    h = murmur2_array(keys)
    parts = ((h & np.int32(0x7FFFFFFF)) % np.int32(num_partitions)).astype(np.int32)
    if keys.null_count:
        parts[np.asarray(keys.is_null())] = -1
    return parts
