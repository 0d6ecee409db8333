"""``RecordStage``: records staged as columns give the same bytes, sizes and full/not-full answers as
``BatchBuilder`` appending them one by one, on both of its build paths (one by one, and vectorized)."""

from __future__ import annotations

import random

import pytest

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.record_stage import VECTORIZED_MIN_ROWS, RecordStage
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, BatchBuilder, decode_batch


@pytest.mark.parametrize("rows", [1, 7, 64, 9000, VECTORIZED_MIN_ROWS - 1, VECTORIZED_MIN_ROWS])
@pytest.mark.parametrize("codec", ["none", "lz4", "gzip"])
def test_staged_records_build_the_bytes_the_builder_builds(rows: int, codec: str) -> None:
    rnd = random.Random(rows)
    stage, builder = RecordStage(1 << 26, codec, transactional=True), BatchBuilder(1 << 26, codec, transactional=True)
    for i in range(rows):
        ts = 1_700_000_000_000 + rnd.randrange(-9000, 90_000)  # deltas of every varint width, negative ones too
        key = None if i % 4 == 0 else rnd.randbytes(rnd.randrange(200))
        value = None if i % 9 == 0 else rnd.randbytes(rnd.choice([0, 60, 100, 9000]))
        headers = [("h", b"x"), ("n", None)] if i % 5 == 0 else []
        assert stage.try_append(ts, key, value, headers) is builder.try_append(ts, key, value, headers) is True
        assert stage.estimated_size == builder.estimated_size  # exact, not a bound
    built = stage.build()
    assert built == builder.build()
    assert stage.record_count == rows == len(decode_batch(built).records)  # the count outlives the columns


def test_a_stage_refuses_the_record_that_would_pass_its_limit_but_takes_a_larger_first_one() -> None:
    stage = RecordStage(HEADER_SIZE + 100, "none")
    assert stage.try_append(0, None, b"x" * 500, [])  # larger than the whole batch: alone, it still goes
    assert stage.is_full()
    assert not stage.try_append(0, None, b"y", [])
    assert stage.record_count == 1
    assert [r.value for r in decode_batch(stage.build()).records] == [b"x" * 500]
    with pytest.raises(IllegalStateError, match="already built"):
        stage.try_append(0, None, b"z", [])
