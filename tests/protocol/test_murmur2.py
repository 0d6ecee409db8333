"""murmur2: Java-identical golden values, scalar and vectorized, partition choice."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.protocol.murmur2 import (
    binary_buffers,
    murmur2,
    murmur2_array,
    partition_for_key,
    partitions_for_keys,
)

# org.apache.kafka.common.utils.Utils.murmur2(key) from kafka-clients 4.3.1, computed once with a tiny Java
# program (the tests never run Java). "21" -> -973932308 is also the commonly published value.
JAVA: list[tuple[bytes, int]] = [
    (b"21", -973932308),
    (b"", 275646681),  # an empty key is hashed, unlike a null one
    (b"a", -1563381124),
    (b"ab", 316155434),
    (b"abc", 479470107),
    (b"abcd", -1323649548),
    (b"abcde", 461995741),
    (b"\x80", 857690492),  # tail bytes are unsigned (Java masks with 0xff)
    (b"\xff\xfe\xfd", 998637092),
    (b"\xff\xff\xff\xff\xff", -363838622),
    ("héllo-wörld".encode(), 1388409540),
    (b"key-0", 29210041),
    (b"key-1", 193331640),
    (b"user:12345", 1192617008),
] + list(
    zip(
        (bytes(range(n)) for n in range(21)),  # every tail length, several word counts
        [
            275646681, 375494588, -2112343979, 51419311, 1916244640, -1916494074, 1749926848, -1488168820,
            970650281, 1671170726, -921386178, 328738907, 1099094776, -1626330841, 380567246, 1766418092,
            -1038035159, 1100346375, 1520027994, 409298138, 424957063,
        ],
        strict=True,
    )
) + list(
    zip(
        (bytes((i * i * 31 + i * 7 + n) % 256 for i in range(n)) for n in (7, 16, 31, 64, 100, 257, 1000)),
        [884095102, -2066405406, -1771395877, 825463036, 2104555029, 1562015532, 652165370],
        strict=True,
    )
)
KEYS = [k for k, _ in JAVA]
HASHES = [h for _, h in JAVA]


def reference(key: bytes) -> int:
    """The documented algorithm, written as plainly as possible (independent of the module's code)."""
    m, mask = 0x5BD1E995, 0xFFFFFFFF
    h = 0x9747B28C ^ len(key)
    i = 0
    while len(key) - i >= 4:
        k = int.from_bytes(key[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> 24
        k = (k * m) & mask
        h = ((h * m) & mask) ^ k
        i += 4
    rest = len(key) - i
    if rest == 3:
        h ^= key[i + 2] << 16
    if rest >= 2:
        h ^= key[i + 1] << 8
    if rest >= 1:
        h ^= key[i]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h >= 1 << 31 else h


@pytest.mark.parametrize(("key", "expected"), JAVA)
def test_scalar_matches_java(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    assert reference(key) == expected


@pytest.mark.parametrize("type_", [pa.binary(), pa.large_binary()])
def test_vectorized_matches_java(type_: pa.DataType) -> None:
    assert murmur2_array(pa.array(KEYS, type_)).tolist() == HASHES
    assert murmur2_array(pa.array(KEYS * 3, type_)).tolist() == HASHES * 3


def test_vectorized_string_sliced_and_chunked() -> None:
    texts = ["21", "", "a", "héllo-wörld", "user:12345"]
    expected = [murmur2(t.encode()) for t in texts]
    for type_ in (pa.string(), pa.large_string()):
        assert murmur2_array(pa.array(texts, type_)).tolist() == expected
    assert murmur2_array(pa.array(["x"] + texts).slice(1)).tolist() == expected  # non-zero array offset
    chunked = pa.chunked_array([pa.array(texts[:2]), pa.array(texts[2:])])
    assert murmur2_array(chunked).tolist() == expected
    assert murmur2_array(pa.array([], pa.binary())).tolist() == []


def test_equal_length_keys_fast_path() -> None:
    keys = [bytes([i]) * 16 for i in range(200)]
    assert murmur2_array(pa.array(keys)).tolist() == [reference(k) for k in keys]
    for length in (3, 4, 6, 16, 21):  # no whole word, words only, words and tail bytes
        texts = [f"{i:0{length}d}"[-length:] for i in range(300)]
        expected = [reference(t.encode()) for t in texts]
        assert murmur2_array(pa.array(texts)).tolist() == expected
        assert murmur2_array(pa.array(["x" * length] + texts).slice(1)).tolist() == expected  # array offset
        assert murmur2_array(pa.array(texts, pa.large_binary())).tolist() == expected


def test_few_very_long_keys_finish_in_scalar_tail() -> None:
    keys = [b"k%d" % i for i in range(40)] + [bytes([i]) * (5000 + i) for i in range(3)] + [b"\x01" * 301]
    assert murmur2_array(pa.array(keys)).tolist() == [reference(k) for k in keys]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.binary(max_size=70), max_size=80))
def test_vectorized_equals_scalar(keys: list[bytes]) -> None:
    assert murmur2_array(pa.array(keys, pa.binary())).tolist() == [murmur2(k) for k in keys]


def test_partition_choice() -> None:
    assert partition_for_key(-973932308, 12) == 1173551340 % 12  # -973932308 & 0x7fffffff = 1173551340
    assert partition_for_key(murmur2(b""), 1) == 0
    keys = pa.array([b"21", None, b"", b"user:12345", None])
    parts = partitions_for_keys(keys, 7)
    assert parts.dtype == np.int32
    assert parts.tolist() == [partition_for_key(-973932308, 7), -1, partition_for_key(275646681, 7),
                              partition_for_key(1192617008, 7), -1]
    assert partitions_for_keys(pa.array(["21"]), 7).tolist() == [partition_for_key(-973932308, 7)]


def test_binary_buffers() -> None:
    arr = pa.array([b"ab", None, b"cde"], pa.large_binary()).slice(1)
    offsets, data = binary_buffers(arr)
    assert offsets.dtype == np.int64 and len(offsets) == 3
    assert bytes(data[offsets[1] : offsets[2]]) == b"cde" and offsets[1] == offsets[0]
    fixed = pa.array([b"ab", b"cd"], pa.binary(2))  # other types are cast
    offsets, data = binary_buffers(fixed)
    assert bytes(data[offsets[0] : offsets[2]]) == b"abcd"
