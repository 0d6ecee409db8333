"""Bad inputs: each write fails before anything reaches Kafka, with a message naming the column or option.

All cases write to one topic, which must still hold no record at all (high watermarks 0: not even aborted ones).
Data-dependent cases (a null topic, a partition out of range, a record too large) use one Spark partition, so
the only task fails on its first batch; driver-side cases fail before any task starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.spark.conftest import end_offsets, write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]


@pytest.fixture(scope="module")
def quiet_topic(bootstrap: str) -> Iterator[str]:
    from tests.conftest import create_topic

    yield create_topic(bootstrap, "sink-errors-must-stay-empty", partitions=2)


def df_of(spark: Any, ddl: str, rows: list[tuple[Any, ...]]) -> Any:
    return spark.createDataFrame(rows, ddl).coalesce(1)


HEADERS_WRONG = "array<struct<name: string, value: binary>>"

# (id, DataFrame ddl, rows, options (topic=None means: no topic option), words the error must contain)
Rows = list[tuple[Any, ...]] | Callable[[str], list[tuple[Any, ...]]]  # a callable gets the topic's name
CASES: list[tuple[str, str, Rows, dict[str, Any], tuple[str, ...]]] = [
    ("missing value", "key string", [("k",)], {}, ("'value'", "string or binary")),
    ("value int", "value int", [(1,)], {}, ("'value'", "int", "string or binary")),
    ("key array", "key array<string>, value string", [(["a"], "v")], {}, ("'key'", "array<string>")),
    ("headers wrong struct", f"value string, headers {HEADERS_WRONG}", [("v", [("h", b"x")])], {},
     ("'headers'", "array<struct<key: string, value: binary>>")),
    ("null header key", "value string, headers array<struct<key: string, value: binary>>",
     [("v", [("h", b"x")]), ("w", [("h", None), (None, b"x")])], {}, ("'headers'", "null key at row 1")),
    ("partition long", "value string, partition long", [("v", 0)], {}, ("'partition'", "int")),
    ("timestampColumn string", "value string, timestamp string", [("v", "now")], {"timestampColumn": "timestamp"},
     ("'timestamp' (option timestampColumn)", "timestamp or long")),
    ("timestampColumn missing", "value string, timestamp timestamp", [("v", None)], {"timestampColumn": "ts"},
     ("timestampColumn names column 'ts'",)),
    ("timestampColumn before 1970", "value string, ts long", [("v", 5), ("w", -1000)], {"timestampColumn": "ts"},
     ("'ts' (option timestampColumn) holds -1000", "1970-01-01 or later")),
    ("topic missing everywhere", "value string", [("v",)], {"topic": None}, ("'topic' option", "'topic' column")),
    ("null topic in a row", "topic string, value string", lambda topic: [(topic, "ok"), (None, "v")],
     {"topic": None}, ("'topic' is null",)),
    ("empty topic in a row", "topic string, value string", lambda topic: [(topic, "ok"), ("", "v")],
     {"topic": None}, ("'topic' holds an empty string in 1 row",)),
    ("two columns of one name", "id int, value string, id long", [(1, "v", 2)], {},
     ("more than one column named 'id'", "Drop or rename")),
    ("partition out of range", "value string, partition int", [("v", 0), ("w", 7)], {},
     ("'partition' holds 7", "2 partition(s)")),
    ("unknown kafka option", "value string", [("v",)], {"kafka.lingr.ms": "5"}, ("kafka.lingr.ms", "kafka.linger.ms")),
    ("key serializer", "value string", [("v",)], {"kafka.key.serializer": "StringSerializer"},
     ("kafka.key.serializer",)),
    ("bad delivery guarantee", "value string", [("v",)], {"deliveryGuarantee": "twice"}, ("deliveryGuarantee",)),
    ("misspelled option", "value string", [("v",)], {"deliveryGuarentee": "exactly_once"},
     ("deliveryguarentee", "deliveryGuarantee")),
    ("prefix without exactly_once", "value string", [("v",)], {"transactionalIdPrefix": "p"},
     ("transactionalIdPrefix", "exactly_once")),
    ("writeId not a number", "value string", [("v",)],
     {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "p", "writeId": "ten"}, ("writeId",)),
    ("transactional id", "value string", [("v",)], {"kafka.transactional.id": "x"}, ("transactionalIdPrefix",)),
    ("exactly_once with acks=1", "value string", [("v",)], {"deliveryGuarantee": "exactly_once", "kafka.acks": "1"},
     ("kafka.acks=1",)),
    ("transaction timeout above the broker's maximum", "value string", [("v",)],
     {"deliveryGuarantee": "exactly_once", "kafka.transaction.timeout.ms": "3600000"},
     ("transaction.timeout.ms", "transaction.max.timeout.ms")),
    ("unreachable bootstrap servers", "value string", [("v",)],
     {"kafka.bootstrap.servers": "127.0.0.1:1", "kafka.max.block.ms": "2000"}, ("kafka.bootstrap.servers",)),
    ("record larger than max.request.size", "value string", [("x" * 5000,)], {"kafka.max.request.size": "2000"},
     ("max.request.size",)),
]


@pytest.mark.parametrize(("ddl", "rows", "options", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_bad_input_fails_before_anything_is_visible(spark: Any, bootstrap: str, quiet_topic: str, ddl: str,
                                                    rows: Any, options: dict[str, Any],
                                                    words: tuple[str, ...]) -> None:
    if callable(rows):
        rows = rows(quiet_topic)
    opts = {"topic": quiet_topic, **options}
    servers = opts.pop("kafka.bootstrap.servers", bootstrap)
    with pytest.raises(Exception) as info:
        write_df(df_of(spark, ddl, rows), servers, **opts)
    text = str(info.value)
    for word in words:
        assert word in text, f"{word!r} not in the error:\n{text[:3000]}"
    assert end_offsets(bootstrap, quiet_topic) == {0: 0, 1: 0}


def test_overwrite_mode_is_refused(spark: Any, bootstrap: str, quiet_topic: str) -> None:
    with pytest.raises(Exception, match=r"cannot overwrite.*mode\(\"append\"\)"):
        write_df(df_of(spark, "value string", [("v",)]), bootstrap, topic=quiet_topic, mode="overwrite")
    assert end_offsets(bootstrap, quiet_topic) == {0: 0, 1: 0}


def test_default_error_if_exists_mode_is_refused_by_spark_itself(spark: Any, bootstrap: str,
                                                                 quiet_topic: str) -> None:
    """pyspark (4.0 to 4.3) refuses ErrorIfExists for every Python data source before the sink is asked (README)."""
    with pytest.raises(Exception, match="ErrorIfExists"):
        (df_of(spark, "value string", [("v",)]).write.format("pykafka-sink")
         .option("kafka.bootstrap.servers", bootstrap).option("topic", quiet_topic).save())
    assert end_offsets(bootstrap, quiet_topic) == {0: 0, 1: 0}


def test_errors_never_show_secrets(spark: Any, bootstrap: str, quiet_topic: str,
                                   readback: Callable[..., Any]) -> None:
    with pytest.raises(Exception) as info:
        write_df(df_of(spark, "value string", [("v",)]), bootstrap, topic=quiet_topic,
                 **{"kafka.security.protocol": "PLAINTEXT", "kafka.sasl.password": "s3cr3t-value"})
    # The error names the option that was set and what to change, and never the password's value.
    assert "sasl.password set but" in str(info.value), info.value
    assert "security.protocol=PLAINTEXT; set " in str(info.value) and "SASL_SSL or SASL_PLAINTEXT" in str(info.value)
    assert "s3cr3t-value" not in str(info.value)
