"""The row digest that tells a deterministic re-run from a changed one: no Spark, no broker."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.spark.digest import EMPTY_DIGEST, RowDigest

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
