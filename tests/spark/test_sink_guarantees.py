"""Task failures under both guarantees, with Spark's real retries (the session runs local[2,3]: 3 attempts).

The rows are computed by a UDF that raises on a task's first attempt after that partition already handed
thousands of rows to the sink, so the failed attempt has sent records: under exactly_once they sit in an open
transaction that the retry fences; under at_least_once they stay.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from tests.conftest import ConsumedRecord
from tests.spark.conftest import write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS = 40_000
PARTITIONS = 2  # spark.range splits 0..ROWS-1 into two halves; the second half holds FAIL_AT
FAIL_AT = 35_000  # 15,000 rows into the second partition
BATCH_ROWS = "1000"  # small Arrow batches: the sink has sent many batches before the UDF fails
VALUE_BYTES = 200


def value_of(i: int) -> str:
    return f"value-{i}-".ljust(VALUE_BYTES, "x")


def failing_values(spark: Any, bootstrap: str, topic: str, always: bool) -> Any:
    """The rows, computed by a UDF that fails at row FAIL_AT (on the first attempt only, or always).

    Before raising, the UDF waits until records of its own partition reached the topic, so the failing attempt has
    really sent some. (The large values make the UDF worker's output leave its buffer while it waits.)
    """

    def compute(i: int) -> str:
        from pyspark import TaskContext

        context = TaskContext.get()
        if i == FAIL_AT and (always or (context is not None and context.attemptNumber() == 0)):
            from tests.spark.conftest import end_offsets

            deadline = time.monotonic() + 60
            # More records than the other Spark partition holds: some come from this partition's writer.
            while sum(end_offsets(bootstrap, topic).values()) <= ROWS // PARTITIONS and time.monotonic() < deadline:
                time.sleep(0.05)  # polling interval of the condition: this attempt's records arrived
            raise RuntimeError(f"injected failure at row {i}")
        return value_of(i)

    udf = F.udf(compute, "string", useArrow=False)  # Arrow UDFs need pandas, which the package does not use
    return spark.range(0, ROWS, 1, PARTITIONS).select(udf("id").alias("value"))


@pytest.fixture
def small_batches(spark: Any) -> Any:
    old = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", BATCH_ROWS)
    yield
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", old)


def values(records: list[ConsumedRecord]) -> Counter[bytes | None]:
    return Counter(r.value for r in records)


EXPECTED = Counter(value_of(i).encode() for i in range(ROWS))


@pytest.mark.usefixtures("small_batches")
def test_exactly_once_survives_a_retried_task(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                              readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=3)
    write_df(failing_values(spark, bootstrap, topic, always=False), bootstrap, topic=topic,
             deliveryGuarantee="exactly_once")
    assert values(readback(topic, "read_committed")) == EXPECTED  # every row exactly once
    # The failed attempt really had sent rows before it died: read_uncommitted still shows its aborted records.
    assert len(readback(topic, "read_uncommitted")) > ROWS


@pytest.mark.usefixtures("small_batches")
def test_at_least_once_keeps_every_row_through_a_retry(spark: Any, bootstrap: str,
                                                       topic_factory: Callable[..., str],
                                                       readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=3)
    write_df(failing_values(spark, bootstrap, topic, always=False), bootstrap, topic=topic)
    seen = values(readback(topic, "read_committed"))
    assert set(seen) == set(EXPECTED)  # nothing lost
    assert sum(seen.values()) > ROWS  # the failed attempt's rows stay: duplicates are at_least_once's price


@pytest.mark.usefixtures("small_batches")
def test_exactly_once_job_failing_every_attempt_leaves_nothing_open(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=3)
    with pytest.raises(Exception, match="injected failure at row 35000"):
        write_df(failing_values(spark, bootstrap, topic, always=True), bootstrap, topic=topic,
                 deliveryGuarantee="exactly_once")
    assert readback(topic, "read_committed") == []  # the successful partition's transaction was aborted too
    assert len(readback(topic, "read_uncommitted")) > 0  # ... and records had been sent

    # No transaction is left open: the next write's rows are visible to read_committed at once. An open
    # transaction would pin the last stable offset below them for transaction.timeout.ms (15 minutes).
    follow_up = spark.createDataFrame([(f"next-{i}",) for i in range(30)], "value string")
    write_df(follow_up, bootstrap, topic=topic, deliveryGuarantee="exactly_once")
    assert values(readback(topic, "read_committed", timeout=20.0)) == Counter(f"next-{i}".encode() for i in range(30))
