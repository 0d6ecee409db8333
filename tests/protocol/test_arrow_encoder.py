"""The vectorized encoder must produce exactly the reference encoder's bytes, batch by batch."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafka_sink.protocol import arrow_encoder
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch, encode_arrow_batches
from spark_kafka_sink.protocol.compression import Codec
from spark_kafka_sink.protocol.record_batch import Record, decode_batch, encode_batch

HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
BINARY = pa.binary()
Row = tuple[bytes | None, bytes | None, int, list[tuple[str, bytes | None]] | None]


def check(rows: list[Row], batches: list[EncodedBatch], max_bytes: int, codec: int = 0) -> None:
    """Batches cover the rows in order, respect max_bytes, and equal encode_batch over their rows."""
    assert [b.first_row for b in batches] == list(np.cumsum([0] + [b.record_count for b in batches[:-1]]))
    assert sum(b.record_count for b in batches) == len(rows)
    for b in batches:
        chunk = rows[b.first_row : b.first_row + b.record_count]
        records = [Record(k, v, ts, h or []) for k, v, ts, h in chunk]
        assert b.data == encode_batch(records, compression=codec)
        assert (b.base_timestamp, b.max_timestamp) == (chunk[0][2], max(r[2] for r in chunk))
        assert b.uncompressed_size <= max_bytes or b.record_count == 1
        if codec == Codec.NONE:
            assert b.uncompressed_size == len(b.data)


def encode(rows: list[Row], max_bytes: int, codec: int = 0, key_type: pa.DataType = BINARY,
           value_type: pa.DataType = BINARY, with_headers: bool = True) -> list[EncodedBatch]:
    return encode_arrow_batches(
        pa.array([r[1] for r in rows], value_type),
        key=pa.array([r[0] for r in rows], key_type),
        timestamp_ms=pa.array([r[2] for r in rows], pa.int64()),
        headers=pa.array([r[3] for r in rows], HEADERS_TYPE) if with_headers else None,
        max_batch_bytes=max_bytes,
        compression=codec,
    )


def random_rows(seed: int, n: int, headers: bool) -> list[Row]:
    rng = random.Random(seed)

    def blob() -> bytes | None:
        r = rng.random()
        if r < 0.1:
            return None
        if r < 0.2:
            return b""
        if r < 0.3:  # lengths around the 1/2/3-byte varint boundaries
            return rng.randbytes(rng.choice([63, 64, 127, 128, 8191, 8192, 16383, 16384, 20000]))
        return rng.randbytes(rng.randrange(40))

    def hdrs() -> list[tuple[str, bytes | None]] | None:
        if not headers or rng.random() < 0.2:
            return None
        keys = ["a", "ключ", "", "日本語", "k" * 200]
        return [(rng.choice(keys), rng.choice([None, b"", rng.randbytes(rng.randrange(300))]))
                for _ in range(rng.randrange(4))]

    base = 1_700_000_000_000
    return [(blob(), blob(), base + rng.randrange(-100_000, 100_000), hdrs()) for _ in range(n)]


@pytest.mark.parametrize("seed", range(12))
def test_random_tables_equal_reference(seed: int) -> None:
    rng = random.Random(seed)
    rows = random_rows(seed, rng.randrange(1, 400), headers=seed % 3 != 0)
    max_bytes = rng.choice([100, 1000, 16384, 1 << 20])
    codec = rng.choice(list(Codec))
    key_type = rng.choice([pa.binary(), pa.large_binary()])
    value_type = rng.choice([pa.binary(), pa.large_binary()])
    check(rows, encode(rows, max_bytes, codec, key_type, value_type), max_bytes, codec)


def test_varint_boundaries_and_huge_values() -> None:
    sizes = [0, 1, 63, 64, 127, 128, 8191, 8192, 16383, 16384, 2097151, 2097152, 1 << 20]
    rows: list[Row] = [(b"k" * (s % 200), b"v" * s, 10, [("h", b"x" * s)]) for s in sizes]
    for max_bytes in (1 << 16, 4 << 20):
        check(rows, encode(rows, max_bytes), max_bytes)


def test_timestamps_negative_deltas_and_wide_span() -> None:
    rows: list[Row] = [(None, b"v", ts, None) for ts in (5000, 4999, 0, -1, 5000, 2**62, -(2**62) + 1, 7)]
    check(rows, encode(rows, 1 << 20), 1 << 20)  # deltas near +-2**62: 10-byte varlongs


def test_null_keys_tombstones_and_string_types() -> None:
    rows: list[Row] = [(None, None, 1, None), (b"", b"", 2, []), (b"key", None, 3, [("h", None)])]
    check(rows, encode(rows, 1000), 1000)
    batches = encode_arrow_batches(
        pa.array(["", None, "väl"], pa.large_string()),
        key=pa.array(["ключ", None, "k"], pa.string()),
        timestamp_ms=np.array([1, 2, 3], np.int64),
        max_batch_bytes=1000,
    )
    records = [Record("ключ".encode(), b"", 1), Record(None, None, 2), Record(b"k", "väl".encode(), 3)]
    assert [b.data for b in batches] == [encode_batch(records)]
    no_key = encode_arrow_batches(pa.array([b"a", b"b"]), timestamp_ms=np.array([1, 1]), max_batch_bytes=100)
    assert no_key[0].data == encode_batch([Record(None, b"a", 1), Record(None, b"b", 1)])


def test_sliced_and_chunked_inputs() -> None:
    rows = random_rows(99, 60, headers=True)
    pad: list[Any] = [None] * 5
    value = pa.array(pad + [r[1] for r in rows], pa.binary()).slice(5)
    key = pa.chunked_array([pa.array([r[0] for r in rows[:20]], pa.binary()),
                            pa.array([r[0] for r in rows[20:]], pa.binary())])
    ts = pa.array([0] * 5 + [r[2] for r in rows], pa.int64()).slice(5)
    headers = pa.array(pad + [r[3] for r in rows], HEADERS_TYPE).slice(5)
    batches = encode_arrow_batches(value, key=key, timestamp_ms=ts, headers=headers, max_batch_bytes=3000)
    check(rows, batches, 3000)


def test_equal_rows_fill_batches() -> None:
    n = 1000
    rows: list[Row] = [(b"k" * 16, b"v" * 100, 42, None)] * n
    batches = encode(rows, 16384, with_headers=False)
    check(rows, batches, 16384)
    for b in batches[:-1]:
        # Full up to one record (126-127 bytes), less the slack of sizing offsetDelta by an upper bound
        # (2 bytes instead of 1 for the first 64 records of a batch).
        assert b.uncompressed_size > 16384 - 127 - 64


def test_timestamp_span_limit() -> None:
    with pytest.raises(ValueError, match="span"):
        encode_arrow_batches(pa.array([b"a", b"b"]), timestamp_ms=np.array([-(2**62), 2**62]), max_batch_bytes=100)


@pytest.mark.parametrize("headers", [True, False])  # without headers each join starts a byte early, ends on a tail
@pytest.mark.parametrize("ordered", [False, True])  # read through ``order`` (above _CONCAT_BYTES: a take per join)
def test_large_types_timestamp_type_and_several_join_groups(headers: bool, ordered: bool) -> None:
    # One join covers at most 4 MiB of records: ~11 MiB in all gives several joins of many small batches each, and
    # a lone 5 MiB record gives a batch larger than a join's budget.
    rows = random_rows(11, 300, headers=headers)
    for i in range(0, 300, 50):
        rows[i] = (rows[i][0], bytes([i % 251]) * (1 << 20), rows[i][2], rows[i][3])
    rows[125] = (rows[125][0], b"\xab" * (5 << 20), rows[125][2], rows[125][3])
    large_headers = pa.array([r[3] for r in rows], pa.large_list(HEADERS_TYPE.value_type))
    when = pa.array([r[2] * 1000 + 999 for r in rows], pa.timestamp("us", "UTC"))  # sub-ms part is dropped
    batches = encode_arrow_batches(
        pa.array([r[1] for r in rows], pa.large_binary()),
        key=pa.array([r[0] for r in rows], pa.binary()).dictionary_encode(),
        timestamp_ms=pa.chunked_array([when]),
        headers=large_headers,
        max_batch_bytes=1500,
        order=list(range(299, -1, -1)) if ordered else None,
    )
    assert len(batches) > 20
    assert sum(b.uncompressed_size for b in batches) > 2 * (4 << 20)
    check(rows[::-1] if ordered else rows, batches, 1500)


@pytest.mark.parametrize("max_bytes", [200, 16384])
def test_segments_force_batch_starts(max_bytes: int) -> None:
    rows: list[Row] = [(b"k" * 16, b"v" * 100, 42, None)] * 500  # equal rows: the fast split path without segments
    segments = [0, 1, 2, 70, 71, 300, 499]
    batches = encode_arrow_batches(pa.array([r[1] for r in rows]), key=pa.array([r[0] for r in rows]),
                                   timestamp_ms=np.full(500, 42), max_batch_bytes=max_bytes,
                                   segment_starts=np.array(segments[::-1]))
    check(rows, batches, max_bytes)
    firsts = {b.first_row for b in batches}
    assert set(segments) <= firsts
    for b in batches:  # no batch crosses a segment start
        assert not any(b.first_row < s < b.first_row + b.record_count for s in segments)
    with pytest.raises(ValueError, match="segment_starts"):
        encode_arrow_batches(pa.array([b"a"]), timestamp_ms=np.array([1]), max_batch_bytes=100, segment_starts=[1])


@pytest.mark.parametrize("max_bytes", [200, 16384])
def test_segments_of_equal_rows_fill_their_batches(max_bytes: int) -> None:
    """Within each segment, equal rows go in batches as full as the greedy split makes them: the same count each,
    only a segment's last batch holds fewer. (Equal rows take a closed-form split; the reference count comes from
    the greedy one, which one longer row at the end brings into play.)"""
    value, key = pa.array([b"v" * 100] * 2000), pa.array([b"k" * 16] * 2000)
    greedy = encode_arrow_batches(pa.array([b"v" * 100] * 2000 + [b"v" * 150]), key=pa.array([b"k" * 16] * 2001),
                                  timestamp_ms=np.full(2001, 42), max_batch_bytes=max_bytes)
    per = greedy[0].record_count
    segments = [0, 1, 70, 71, 300, 1999]
    batches = encode_arrow_batches(value, key=key, timestamp_ms=np.full(2000, 42), max_batch_bytes=max_bytes,
                                   segment_starts=np.array(segments))
    bounds = [*segments, 2000]
    expected = [min(per, end - start) for first, end in zip(bounds, bounds[1:], strict=False)
                for start in range(first, end, per)]
    assert [b.record_count for b in batches] == expected


def test_decodes_back() -> None:
    rows = random_rows(5, 100, headers=True)
    for b in encode(rows, 5000, Codec.LZ4):
        decoded = decode_batch(b.data)
        assert [(r.key, r.value, r.timestamp_ms) for r in decoded.records] == [
            (k, v, ts) for k, v, ts, _ in rows[b.first_row : b.first_row + b.record_count]
        ]


def test_empty_input_and_transactional_flag() -> None:
    assert encode_arrow_batches(pa.array([], pa.binary()), timestamp_ms=np.array([], np.int64),
                                max_batch_bytes=100) == []
    [b] = encode_arrow_batches(pa.array([b"v"]), timestamp_ms=np.array([7]), max_batch_bytes=100,
                               transactional=True)
    assert decode_batch(b.data).is_transactional
    assert b.data == encode_batch([Record(None, b"v", 7)], transactional=True)


def test_invalid_input() -> None:
    v = pa.array([b"a", b"b"])
    with pytest.raises(ValueError, match="null"):
        encode_arrow_batches(v, timestamp_ms=pa.array([1, None], pa.int64()), max_batch_bytes=100)
    with pytest.raises(ValueError, match="shape"):
        encode_arrow_batches(v, timestamp_ms=np.array([1]), max_batch_bytes=100)
    with pytest.raises(ValueError, match="key has"):
        encode_arrow_batches(v, key=pa.array([b"k"]), timestamp_ms=np.array([1, 2]), max_batch_bytes=100)
    with pytest.raises(TypeError, match="value"):
        encode_arrow_batches(pa.array([[1], [2]]), timestamp_ms=np.array([1, 2]), max_batch_bytes=100)
    with pytest.raises(ValueError, match="header key"):
        encode_arrow_batches(v, timestamp_ms=np.array([1, 2]), max_batch_bytes=100,
                             headers=pa.array([[{"key": None, "value": b"x"}], None], HEADERS_TYPE))
    with pytest.raises(TypeError, match="headers"):
        encode_arrow_batches(v, timestamp_ms=np.array([1, 2]), max_batch_bytes=100, headers=pa.array([1, 2]))
    with pytest.raises(ValueError, match="headers has"):
        encode_arrow_batches(v, timestamp_ms=np.array([1, 2]), max_batch_bytes=100,
                             headers=pa.array([None, [], []], HEADERS_TYPE))


row_st = st.tuples(
    st.none() | st.binary(max_size=200),
    st.none() | st.binary(max_size=300),
    st.integers(-(2**40), 2**40),
    st.none() | st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=150)), max_size=3),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(row_st, min_size=1, max_size=40), st.sampled_from([80, 300, 2000, 1 << 20]))
def test_property_equal_reference(rows: list[Row], max_bytes: int) -> None:
    check(rows, encode(rows, max_bytes), max_bytes)


@pytest.fixture(params=["concatenated once", "taken per join"])
def through_order(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The two ways the encoder reads columns through ``order``: a small input concatenated once, a large one
    (above _CONCAT_BYTES, here every one) with each join group's rows taken from its columns."""
    if request.param == "taken per join":
        monkeypatch.setattr(arrow_encoder, "_CONCAT_BYTES", 0)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.usefixtures("through_order")
def test_order_reads_the_rows_through_it_as_if_taken_first(seed: int) -> None:
    rng = random.Random(seed)
    rows = random_rows(seed, rng.randrange(1, 300), headers=seed % 2 == 0)
    order = rng.sample(range(len(rows)), rng.randrange(1, len(rows) + 1))
    order.sort(key=lambda i: i % 3)  # grouped, as send_batch groups rows by partition
    max_bytes = rng.choice([100, 1000, 16384])
    codec = rng.choice(list(Codec))
    value_type = rng.choice([pa.binary(), pa.large_binary()])
    segments = [0, len(order) // 3]
    batches = encode_arrow_batches(
        pa.array([r[1] for r in rows], value_type),
        key=pa.array([r[0] for r in rows], BINARY),
        timestamp_ms=pa.array([r[2] for r in rows], pa.int64()),
        headers=pa.array([r[3] for r in rows], HEADERS_TYPE),
        max_batch_bytes=max_bytes, compression=codec, order=order, segment_starts=segments)
    check([rows[i] for i in order], batches, max_bytes, codec)
    assert {b.first_row for b in batches} >= set(segments)


def _chunked(values: list[Any], value_type: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    bounds = [0, *cuts, len(values)]
    return pa.chunked_array([pa.array(values[a:b], value_type) for a, b in zip(bounds, bounds[1:], strict=False)],
                            value_type)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.usefixtures("through_order")
def test_chunked_columns_read_through_order(seed: int) -> None:
    """Columns of several chunks (consecutive input batches held together, string as Spark hands them) go into
    the encoder's one concatenation chunk by chunk: the same bytes as the rows taken first, and as one chunk."""
    rng = random.Random(seed)
    rows = random_rows(seed, rng.randrange(3, 300), headers=seed % 2 == 0)
    order = sorted(range(len(rows)), key=lambda i: i % 4)
    cuts = sorted(rng.sample(range(1, len(rows)), 2))
    value_type = pa.string() if seed % 2 else pa.binary()
    values = [None if r[1] is None else r[1].decode("latin-1") if seed % 2 else r[1] for r in rows]
    value = _chunked(values, value_type, cuts)
    key = _chunked([r[0] for r in rows], BINARY, cuts[:1])
    common: dict[str, Any] = {"timestamp_ms": pa.array([r[2] for r in rows], pa.int64()),
                              "headers": pa.array([r[3] for r in rows], HEADERS_TYPE), "max_batch_bytes": 1000,
                              "order": order, "segment_starts": [0, len(order) // 4]}
    batches = encode_arrow_batches(value, key=key, **common)
    assert [b.data for b in batches] == [b.data for b in encode_arrow_batches(
        value.combine_chunks(), key=key.combine_chunks(), **common)]
    if seed % 2 == 0:
        check([rows[i] for i in order], batches, 1000)


def test_order_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="order"):
        encode_arrow_batches(pa.array([b"a", b"b"]), timestamp_ms=pa.array([1, 2], pa.int64()), max_batch_bytes=100,
                             order=[0, 2])
