"""onInvalidRecord: records their topic can never take (too large for its max.message.bytes, a null key on a compacted
topic) are skipped or written to the dead-letter topic, with exactly_once in the task's transaction. Read back with
confluent-kafka at read_committed."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.arrow_send import PartitionWrite
from spark_kafka_sink.spark.commit import KafkaCommitMessage, summarize
from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord
from tests.spark.conftest import end_offsets, write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]

N = 400
NULL_KEY_ROW, LARGE_ROW = 7, 213  # in Spark partitions 0 and 1 (ids 0-199 and 200-399)
# The target refuses for good: null keys (compacted) and batches over 4000 bytes; the dead-letter topic takes both.
TARGET = {"cleanup.policy": "compact", "max.message.bytes": "4000"}


def _rows(spark: Any) -> Any:
    key = F.when(F.col("id") == NULL_KEY_ROW, F.lit(None)).otherwise(F.concat(F.lit("k"), F.col("id")))
    value = F.when(F.col("id") == LARGE_ROW, F.repeat(F.lit("x"), 6000)).otherwise(F.lit("v" * 50))
    headers = F.array(F.struct(F.lit("src").alias("key"), F.col("id").cast("string").cast("binary").alias("value")))
    return spark.range(0, N, 1, 2).select(key.alias("key"), value.alias("value"), headers.alias("headers"))


def _headers(record: ConsumedRecord) -> dict[str, bytes | None]:
    return dict(record.headers)


def test_too_large_and_null_key_records_go_to_the_dead_letter_topic_in_the_transaction(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic, dead = topic_factory(partitions=2, config=TARGET), topic_factory(partitions=1)
    write_df(_rows(spark), bootstrap, topic=topic, deliveryGuarantee="exactly_once", onInvalidRecord="deadLetter",
             deadLetterTopic=dead)
    written = readback(topic)
    expected = sorted(f"k{i}".encode() for i in range(N) if i not in (NULL_KEY_ROW, LARGE_ROW))
    assert sorted(r.key or b"" for r in written) == expected  # each once
    letters = sorted(readback(dead), key=lambda r: _headers(r)[HEADER_PREFIX + "spark.partition"] or b"")
    assert [(r.key, len(r.value or b"")) for r in letters] == [(None, 50), (f"k{LARGE_ROW}".encode(), 6000)]
    null_key, large = (_headers(r) for r in letters)
    assert null_key["src"] == str(NULL_KEY_ROW).encode() and large["src"] == str(LARGE_ROW).encode()
    assert null_key[HEADER_PREFIX + "exception.class.name"] == b"InvalidRecordError"
    assert large[HEADER_PREFIX + "exception.class.name"] == b"RecordTooLargeError"
    assert b"max.message.bytes" in (large[HEADER_PREFIX + "exception.message"] or b"")
    assert b"compact" in (null_key[HEADER_PREFIX + "exception.message"] or b"")
    for headers, partition, row in ((null_key, 0, NULL_KEY_ROW), (large, 1, LARGE_ROW - 200)):
        assert headers[HEADER_PREFIX + "topic"] == topic.encode()
        assert headers[HEADER_PREFIX + "spark.partition"] == str(partition).encode()
        assert headers[HEADER_PREFIX + "spark.row"] == str(row).encode()
    # Both topics' records came from committed transactions (control markers after them), nothing left open.
    assert end_offsets(bootstrap, dead, "read_committed") == end_offsets(bootstrap, dead)


def test_skip_leaves_invalid_records_out_and_context_headers_can_be_turned_off(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    skipped, topic, dead = (topic_factory(partitions=2, config=TARGET), topic_factory(partitions=2, config=TARGET),
                            topic_factory(partitions=1))
    write_df(_rows(spark), bootstrap, topic=skipped, onInvalidRecord="skip")
    assert len(readback(skipped)) == N - 2
    write_df(_rows(spark), bootstrap, topic=topic, onInvalidRecord="deadLetter", deadLetterTopic=dead,
             deadLetterContextHeaders="false")
    assert len(readback(topic)) == N - 2
    letters = readback(dead)
    assert sorted(r.headers for r in letters) == [(("src", str(i).encode()),) for i in (LARGE_ROW, NULL_KEY_ROW)]


def test_more_invalid_records_than_max_invalid_records_fail_the_write_with_nothing_visible(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic, dead = topic_factory(partitions=2, config=TARGET), topic_factory(partitions=1)
    # One invalid record in each of the two tasks: each task is within the limit, the write (2) is not.
    with pytest.raises(Exception, match="maxInvalidRecords=1"):
        write_df(_rows(spark), bootstrap, topic=topic, deliveryGuarantee="exactly_once",
                 onInvalidRecord="deadLetter", deadLetterTopic=dead, maxInvalidRecords=1)
    assert readback(topic, timeout=10) == [] and readback(dead, timeout=10) == []
    assert sum(end_offsets(bootstrap, topic).values()) > 0  # written, then aborted


def test_the_summary_counts_invalid_records_and_dead_letters() -> None:
    options = SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", "onInvalidRecord": "deadLetter",
                                 "deadLetterTopic": "t.dlq"}, streaming=False)
    message = KafkaCommitMessage(partition_id=0, attempt=0, transactional_id=None, started_at=time.time(),
                                 invalid_records=3, dead_letter_writes=(PartitionWrite("t.dlq", 0, 3, 300, 0, 2),))
    assert "3 invalid records (3 dead letters to t.dlq)" in summarize(options, [message]).line()


@pytest.mark.parametrize(("options", "named"), [
    ({"onInvalidRecord": "deadLetter"}, "deadLetterTopic"),
    ({"onInvalidRecord": "ignore"}, "onInvalidRecord"),
    ({"deadLetterTopic": "d"}, "deadLetterTopic"),
    ({"onInvalidRecord": "deadLetter", "deadLetterTopic": "t"}, "deadLetterTopic"),  # the topic written to
    ({"maxInvalidRecords": "5"}, "maxInvalidRecords"),  # fail fails at the first anyway
    ({"onInvalidRecord": "skip", "deadLetterContextHeaders": "false"}, "deadLetterContextHeaders"),
    ({"onInvalidRecord": "skip", "maxInvalidRecords": "-1"}, "maxInvalidRecords"),
])
def test_dead_letter_options_are_checked_on_the_driver(options: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        SinkOptions.parse({"kafka.bootstrap.servers": "h:1", "topic": "t", **options}, streaming=False)


def test_a_row_the_avro_schema_cannot_hold_goes_to_the_dead_letter_topic(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str], schema_registry: TestRegistry,
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic, dead = topic_factory(partitions=1, config=TARGET), topic_factory(partitions=1)
    schema = json.dumps({"type": "record", "name": "Row", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})  # name: no null branch
    name = (F.when(F.col("id") == 5, F.lit(None)).when(F.col("id") == 9, F.repeat(F.lit("x"), 6000))
            .otherwise(F.lit("n")))
    df = spark.range(0, 50, 1, 1).select(F.concat(F.lit("k"), F.col("id")).alias("key"),
                                         F.struct(F.col("id"), name.alias("name")).alias("value"))
    write_df(df, bootstrap, topic=topic, deliveryGuarantee="exactly_once", onInvalidRecord="deadLetter",
             deadLetterTopic=dead, valueFormat="avro", valueSchema=schema,
             **{"schema.registry.url": schema_registry.url})
    assert sorted(r.key or b"" for r in readback(topic)) == sorted(f"k{i}".encode() for i in range(50)
                                                                   if i not in (5, 9))
    letters = {r.key or b"": r for r in readback(dead)}
    assert sorted(letters) == [b"k5", b"k9"]
    unencodable = _headers(letters[b"k5"])
    assert json.loads(letters[b"k5"].value or b"") == {"id": 5, "name": None}
    assert unencodable[HEADER_PREFIX + "exception.class.name"] == b"SerializationError"
    assert b"null" in (unencodable[HEADER_PREFIX + "exception.message"] or b"")
    assert unencodable[HEADER_PREFIX + "spark.row"] == b"5"
    large = _headers(letters[b"k9"])
    assert large[HEADER_PREFIX + "exception.class.name"] == b"RecordTooLargeError"
    assert large[HEADER_PREFIX + "spark.row"] == b"9"
    assert (letters[b"k9"].value or b"")[:1] == b"\x00"  # the Avro frame it would have been written with


def test_a_rerun_of_the_write_id_skips_what_was_committed_dead_letters_included(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic, dead = topic_factory(partitions=2, config=TARGET), topic_factory(partitions=1)
    options = {"topic": topic, "deliveryGuarantee": "exactly_once", "onInvalidRecord": "deadLetter",
               "deadLetterTopic": dead, "transactionalIdPrefix": f"dl-{topic}", "writeId": "7"}
    write_df(_rows(spark), bootstrap, **options)
    write_df(_rows(spark), bootstrap, **options)  # the same input: every Spark partition was committed, skipped
    assert len(readback(topic)) == N - 2 and len(readback(dead)) == 2
