"""``RecordStage``: records staged as columns give the same bytes, sizes and full/not-full answers as
``BatchBuilder`` appending them one by one, on both of its build paths (one by one, and vectorized)."""

from __future__ import annotations

import random

import pytest

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.record_stage import VECTORIZED_MIN_ROWS, RecordStage
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, RECORD_OVERHEAD_BOUND, BatchBuilder, decode_batch


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


@pytest.mark.parametrize("seed", range(20))
def test_a_run_stages_what_one_by_one_appends_stage_and_stops_where_they_would(seed: int) -> None:
    """``append_run`` against ``try_append`` record by record: the same records staged, the same bytes built, the
    same refusal, and the budgets' stop (the sticky partitioner's switch rule) at the same record."""
    rng = random.Random(seed)
    n = rng.randint(1, 400)
    base = 1_700_000_000_000
    timestamps = [base + rng.choice([0, 1, 70, 9000, -5]) for _ in range(n)]
    keys = [None if rng.random() < 0.5 else rng.randbytes(rng.choice([0, 3, 70, 9000])) for _ in range(n)]
    values = [rng.randbytes(rng.choice([0, 10, 100, 200, 9000])) for _ in range(n)]
    max_bytes = rng.choice([1024, 16384, 1 << 20])
    soft, hard = rng.choice([(1 << 62, 1 << 62), (4000, 9000), (1, 2)])
    queued_behind = rng.random() < 0.3
    start = rng.randrange(n)

    run = RecordStage(max_bytes, "lz4")
    staged, run_bytes, refused = run.append_run(range(start, n), timestamps, keys, values, soft, hard, queued_behind)

    single = RecordStage(max_bytes, "lz4")
    count = total = 0
    was_refused = False
    for row in range(start, n):
        if not single.try_append(timestamps[row], keys[row], values[row], ()):
            was_refused = True
            break
        count += 1
        total += HEADER_SIZE + RECORD_OVERHEAD_BOUND + len(values[row]) + len(keys[row] or b"")
        if total >= hard or (total >= soft and (queued_behind or single.is_full())):
            break
    assert (staged, run_bytes, refused) == (count, total, was_refused)
    assert run.estimated_size == single.estimated_size
    assert run.build() == single.build()
