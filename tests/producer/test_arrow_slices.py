"""send_batch encodes a large input in slices of bounded bytes (memory stays near buffer.memory)."""

from __future__ import annotations

import numpy as np

from spark_kafka_sink.producer.arrow_send import row_slices


def test_row_slices_cover_every_row_in_order_within_the_limit() -> None:
    size = np.array([40, 40, 40, 200, 10, 10, 10, 90], np.int64)
    assert row_slices(size, 100) == [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8)]


def test_small_input_is_one_slice_and_empty_input_too() -> None:
    assert row_slices(np.array([10, 20], np.int64), 100) == [(0, 2)]
    assert row_slices(np.zeros(0, np.int64), 100) == [(0, 0)]


def test_random_sizes_slices_are_contiguous_and_bounded() -> None:
    rng = np.random.default_rng(3)
    size = rng.integers(1, 5000, 10_000).astype(np.int64)
    out = row_slices(size, 64 << 10)
    assert out[0][0] == 0 and out[-1][1] == len(size)
    assert all(a[1] == b[0] for a, b in zip(out, out[1:], strict=False))
    assert all(int(size[lo:hi].sum()) <= 64 << 10 or hi - lo == 1 for lo, hi in out)
    # greedy: adding the next row to a slice would pass the limit
    assert all(int(size[lo:hi + 1].sum()) > 64 << 10 for lo, hi in out[:-1])
