"""DeadLetterRouter on its own (no broker: a fixed table of topic limits): rows of a topic column, explicit
partitions, the threshold within one task, and skip."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pytest

from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX, DeadLetterRouter, TooManyInvalidRecordsError
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.topic_limits import TopicLimit

LIMITS = {"small": TopicLimit(max_message_bytes=500, compacted=False),
          "compacted": TopicLimit(max_message_bytes=1_000_000, compacted=True)}


class _FixedLimits:
    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def of(self, topics: Iterable[str]) -> dict[str, TopicLimit]:
        names = list(topics)
        self.asked.append(names)
        return {t: LIMITS[t] for t in names}


def _options(**extra: str) -> SinkOptions:
    return SinkOptions.parse({"kafka.bootstrap.servers": "h:1", **extra}, streaming=False)


def _records() -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({
        "value": [b"a", b"x" * 1000, b"c", b"d"],
        "key": [b"k0", b"k1", None, b"k3"],
        "topic": ["small", "small", "compacted", "compacted"],
        "partition": [None, 2, 0, None]}, pa.schema([
            ("value", pa.binary()), ("key", pa.binary()), ("topic", pa.string()), ("partition", pa.int32())]))


def test_rows_of_a_topic_column_are_checked_against_their_own_topic() -> None:
    limits = _FixedLimits()
    router = DeadLetterRouter(_options(onInvalidRecord="deadLetter", deadLetterTopic="dlq"), 3, limits)
    router.route(_records())  # rows 0-3
    routed = router.route(_records())  # rows 4-7: the headers count from the task's first row
    assert routed.valid.column("key").to_pylist() == [b"k0", b"k3"] and routed.invalid == 2
    assert routed.dead is not None
    headers = [dict((h["key"], h["value"]) for h in row) for row in routed.dead.column("headers").to_pylist()]
    assert [h[HEADER_PREFIX + "topic"] for h in headers] == [b"small", b"compacted"]
    assert [h[HEADER_PREFIX + "spark.row"] for h in headers] == [b"5", b"6"]
    assert [h[HEADER_PREFIX + "partition"] for h in headers] == [b"2", b"0"]  # the partitions the rows named
    assert all(h[HEADER_PREFIX + "spark.partition"] == b"3" for h in headers)
    assert routed.dead.column("value").to_pylist() == [b"x" * 1000, b"c"]
    assert [sorted(a) for a in limits.asked] == [["compacted", "small"]] * 2  # each batch's own topics
    assert router.invalid == 4


def test_skip_counts_and_max_invalid_records_fails_the_task_past_it() -> None:
    router = DeadLetterRouter(_options(onInvalidRecord="skip", maxInvalidRecords="3"), 0, _FixedLimits())
    routed = router.route(_records())
    assert (routed.valid.num_rows, routed.dead, routed.invalid) == (2, None, 2)
    with pytest.raises(TooManyInvalidRecordsError, match="4 invalid records in Spark partition 0"):
        router.route(_records())
