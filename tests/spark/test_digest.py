"""The row digest that tells a deterministic re-run from a changed one: no Spark, no broker."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.spark.digest import EMPTY_DIGEST, RowDigest, ScratchBuffer, bytes_hashes

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def batch(values: list[bytes | None], keys: list[bytes | None] | None = None,
          headers: list[list[dict[str, object]] | None] | None = None) -> pa.RecordBatch:
    columns = {"value": pa.array(values, pa.binary())}
    if keys is not None:
        columns["key"] = pa.array(keys, pa.binary())
    if headers is not None:
        columns["headers"] = pa.array(headers, HEADERS)
    return pa.RecordBatch.from_pydict(columns)


def digest_of(*batches: pa.RecordBatch) -> tuple[int, str]:
    d = RowDigest()
    for b in batches:
        d.add(b)
    return d.rows, d.digest


BASE = batch([b"a", None, b"c", b""], [b"k", b"", None, b"k"],
             [[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]])


def test_no_rows_is_the_empty_digest() -> None:
    assert digest_of() == (0, EMPTY_DIGEST)


def test_order_and_batching_do_not_matter() -> None:
    whole = digest_of(BASE)
    assert whole[0] == 4
    assert digest_of(BASE.slice(2), BASE.slice(0, 2)) == whole
    assert digest_of(*(BASE.slice(i, 1) for i in (3, 1, 0, 2))) == whole


@pytest.mark.parametrize("changed", [
    batch([b"a", None, b"C", b""], [b"k", b"", None, b"k"],
          [[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
    batch([b"a", b"", b"c", b""], [b"k", b"", None, b"k"],  # a null value became empty bytes
          [[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
    batch([b"a", None, b"c", b""], [b"k", None, None, b"k"],  # an empty key became null
          [[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
    batch([b"a", None, b"c", b""], [b"k", b"", None, b"k"],  # a header value changed
          [[{"key": "h", "value": b"z"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
    batch([b"a", None, b"c", b""], [b"k", b"", None, b"k"],  # no headers became an empty list
          [[{"key": "h", "value": b"x"}], [], [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
    batch([b"k", None, b"c", b""], [b"a", b"", None, b"k"],  # key and value swapped
          [[{"key": "h", "value": b"x"}], None, [], [{"key": "h", "value": None}, {"key": "i", "value": b"y"}]]),
])
def test_any_change_of_a_key_value_or_header_changes_the_digest(changed: pa.RecordBatch) -> None:
    rows, digest = digest_of(changed)
    assert rows == 4 and digest != digest_of(BASE)[1]


def test_a_duplicated_row_instead_of_another_changes_the_digest() -> None:
    assert digest_of(batch([b"a", b"a"]))[1] != digest_of(batch([b"a", b"b"]))[1]
    assert digest_of(batch([b"a", b"b"]))[1] == digest_of(batch([b"b", b"a"]))[1]


def test_values_moved_to_other_keys_change_the_digest() -> None:
    # The same keys and the same values, paired otherwise (a join that now matches differently): a digest that only
    # sums per-field hashes over the rows cannot tell; each row's fields are mixed together before the sum.
    assert digest_of(batch([b"v1", b"v2"], [b"k1", b"k2"]))[1] != digest_of(batch([b"v2", b"v1"], [b"k1", b"k2"]))[1]
    with_headers: list[list[dict[str, object]] | None] = [[{"key": "h", "value": b"1"}], [{"key": "h", "value": b"2"}]]
    assert (digest_of(batch([b"v1", b"v2"], [b"k1", b"k2"], with_headers))[1]
            != digest_of(batch([b"v1", b"v2"], [b"k1", b"k2"], with_headers[::-1]))[1])


def test_bytes_hashes_depend_on_the_bytes_only_not_on_the_place_in_the_array() -> None:
    rng = np.random.default_rng(7)
    rows = [rng.bytes(int(n)) for n in rng.integers(0, 200, 300)] + [b"", b"x" * 8, b"y" * 64, b"z" * 65]
    whole = bytes_hashes(pa.array(rows, pa.binary()))
    assert (bytes_hashes(pa.array(rows[::-1], pa.binary()))[::-1] == whole).all()  # other neighbours, other order
    assert (bytes_hashes(pa.array(rows, pa.binary()).slice(5, 50)) == whole[5:55]).all()  # an offset array
    assert (bytes_hashes(pa.array(rows, pa.large_binary())) == whole).all()
    same_length = [b"%016d" % i for i in range(20)]  # the no-sort path (every row as many words)
    assert (bytes_hashes(pa.array(same_length, pa.binary()))
            == bytes_hashes(pa.array(same_length + [b"longer than sixteen bytes"], pa.binary()))[:20]).all()


def test_digests_recorded_by_earlier_versions_still_match() -> None:
    # The commit log keeps digests across runs, so a re-run after an upgrade must compute the same ones: these
    # values were computed by the first release of the digest.
    assert digest_of(BASE) == (4, "edaa0685d8f82cf5")
    rows = [bytes(range(n % 256)) * (1 + n // 256) for n in (0, 1, 7, 8, 9, 63, 64, 65, 100, 300)]
    assert [f"{h:016x}" for h in bytes_hashes(pa.array(rows, pa.binary())).tolist()] == [
        "0a053ccb2daccd20", "3100bf6c0b568236", "3027f50915a4179b", "28eee4a8ba4f8214", "e3d03db75874bcda",
        "dd134001fcab2f84", "fca7739a2f06f489", "a06db0a8594e9383", "584e3ff1c39d78ab", "7cedf9ea2438b8d8"]


def test_a_slice_of_a_large_array_copies_only_its_own_bytes() -> None:
    rows = [b"%0100d" % i for i in range(20_000)]
    whole = pa.array(rows, pa.binary())
    scratch = ScratchBuffer()
    assert (bytes_hashes(whole.slice(10_000, 3), scratch) == bytes_hashes(pa.array(rows[10_000:10_003]))).all()
    assert scratch.size < 1_000  # the slice's 303 bytes and a block, not the array's 2 MB


def test_bytes_left_in_the_scratch_buffer_by_an_earlier_batch_do_not_count() -> None:
    rows = [b"a" * n for n in (1, 63, 64, 65, 130)]
    fresh = bytes_hashes(pa.array(rows, pa.binary()))
    scratch = ScratchBuffer()
    bytes_hashes(pa.array([b"\xff" * 300] * 4, pa.binary()), scratch)  # a longer batch fills the buffer first
    assert (bytes_hashes(pa.array(rows, pa.binary()), scratch) == fresh).all()


@pytest.mark.parametrize("length", [1, 7, 8, 9, 15, 16, 17, 63, 64, 65, 100, 129])
def test_bytes_hashes_tell_every_single_byte_change_apart(length: int) -> None:
    base = bytes(range(1, length + 1))
    changed = [base[:i] + bytes([base[i] ^ 0x01]) + base[i + 1:] for i in range(length)]
    extended = [base + b"\0", b"\0" + base, base[:-1]]  # a zero byte appended or prepended, one byte cut
    hashes = bytes_hashes(pa.array([base, *changed, *extended, b"" if length > 1 else b"\xff"], pa.binary())).tolist()
    assert len(set(hashes)) == len(hashes)
