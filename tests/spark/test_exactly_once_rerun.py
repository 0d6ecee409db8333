"""exactly_once past the driver, in-process: re-runs of a writeId skip what was committed; changed input is refused.

Read back at read_committed with librdkafka (confluent-kafka). Crashes of the driver process itself are in
tests/cluster/test_driver_crash.py (spark-submit, SIGKILL; `make test-cluster`).
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from spark_kafka_sink.spark.commit_log import CommitLog
from spark_kafka_sink.spark.options import DEFAULT_COMMIT_LOG_TOPIC
from tests.conftest import ConsumedRecord
from tests.spark.conftest import end_offsets, write_df

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def rows(spark: Any, n: int, partitions: int = 4, offset: int = 0) -> Any:
    return spark.range(offset, offset + n, 1, partitions).select(
        F.concat(F.lit("k"), (F.col("id") % 31).cast("string")).alias("key"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("value"))


def exactly_once(prefix: str, write_id: int) -> dict[str, Any]:
    return {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": prefix, "writeId": write_id}


def test_same_write_id_twice_writes_once_and_a_new_write_id_appends(
        spark: Any, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=3)
    prefix = f"rerun-{uuid.uuid4().hex[:8]}"
    df = rows(spark, 2000)
    write_df(df, bootstrap, topic=topic, **exactly_once(prefix, 7))
    with CommitLog(DEFAULT_COMMIT_LOG_TOPIC, prefix, {"bootstrap.servers": bootstrap}, 30) as log:
        logged = log.read()
    assert logged is not None and logged.write_id == 7 and logged.complete and not logged.lost
    assert sorted(logged.planned) == [0, 1, 2, 3] and sum(t.rows for t in logged.planned.values()) == 2000
    offsets = end_offsets(bootstrap, topic)
    write_df(df, bootstrap, topic=topic, **exactly_once(prefix, 7))  # the same write again: everything skipped
    assert end_offsets(bootstrap, topic) == offsets  # not a record sent, not even an aborted one
    values = Counter(r.value for r in readback(topic))
    assert len(values) == 2000 and set(values.values()) == {1}

    write_df(rows(spark, 500, offset=2000), bootstrap, topic=topic, **exactly_once(prefix, 8))  # a new write
    values = Counter(r.value for r in readback(topic))
    assert len(values) == 2500 and set(values.values()) == {1}


def test_re_running_an_older_write_id_writes_it_again(spark: Any, bootstrap: str,
                                                      topic_factory: Callable[..., str],
                                                      readback: Callable[..., list[ConsumedRecord]]) -> None:
    """Only the latest writeId of a prefix is remembered: after writeId 2, writeId 1 again is a new write."""
    topic = topic_factory(partitions=2)
    prefix = f"older-{uuid.uuid4().hex[:8]}"
    first, second = rows(spark, 300), rows(spark, 200, offset=300)
    write_df(first, bootstrap, topic=topic, **exactly_once(prefix, 1))
    write_df(second, bootstrap, topic=topic, **exactly_once(prefix, 2))
    write_df(first, bootstrap, topic=topic, **exactly_once(prefix, 1))  # the older writeId again
    values = Counter(r.value for r in readback(topic))
    assert values == Counter({**{f"row-{i}".encode(): 2 for i in range(300)},
                              **{f"row-{i}".encode(): 1 for i in range(300, 500)}})


def test_a_re_run_with_other_input_is_refused(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                                              readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=2)
    prefix = f"changed-{uuid.uuid4().hex[:8]}"
    write_df(rows(spark, 400, partitions=2), bootstrap, topic=topic, **exactly_once(prefix, 1))
    before = end_offsets(bootstrap, topic)
    with pytest.raises(Exception, match=r"Spark partition \d now has other input \(2\d\d rows now, 200 then\)"):
        write_df(rows(spark, 450, partitions=2), bootstrap, topic=topic, **exactly_once(prefix, 1))
    with pytest.raises(Exception, match=r"200 rows both times, but other ones"):
        write_df(rows(spark, 400, partitions=2, offset=1), bootstrap, topic=topic, **exactly_once(prefix, 1))
    assert end_offsets(bootstrap, topic) == before  # refused before anything was sent
    assert len(readback(topic)) == 400


def test_the_same_rows_in_another_order_are_the_same_input(spark: Any, bootstrap: str,
                                                           topic_factory: Callable[..., str],
                                                           readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=2)
    prefix = f"order-{uuid.uuid4().hex[:8]}"
    df = rows(spark, 300, partitions=1)
    write_df(df, bootstrap, topic=topic, **exactly_once(prefix, 3))
    write_df(df.orderBy(F.col("value").desc()).coalesce(1), bootstrap, topic=topic, **exactly_once(prefix, 3))
    assert len(readback(topic)) == 300


def test_batch_writes_with_a_prefix_and_no_write_id_touch_no_commit_log(spark: Any, bootstrap: str,
                                                                        topic_factory: Callable[..., str]) -> None:
    from confluent_kafka.admin import AdminClient

    log_topic = f"log-{uuid.uuid4().hex[:8]}"
    # (Without transactionalIdPrefix the write claims a pooled prefix in the log: tests/spark/test_id_pool.py.)
    write_df(rows(spark, 50), bootstrap, topic=topic_factory(), deliveryGuarantee="exactly_once",
             transactionalIdPrefix=f"np-{uuid.uuid4().hex[:6]}", commitLogTopic=log_topic)
    write_df(rows(spark, 50), bootstrap, topic=topic_factory(), commitLogTopic=log_topic)  # at_least_once
    assert log_topic not in AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).topics


def test_commit_log_topic_is_created_compacted(spark: Any, bootstrap: str, topic_factory: Callable[..., str]) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import ConfigResource  # the admin package does not re-export it for mypy

    log_topic = f"log-{uuid.uuid4().hex[:8]}"
    write_df(rows(spark, 50), bootstrap, topic=topic_factory(), commitLogTopic=log_topic,
             **exactly_once(f"c-{uuid.uuid4().hex[:6]}", 1))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    partitions = admin.list_topics(log_topic, timeout=10).topics[log_topic].partitions
    assert len(partitions) == 50
    # Replication min(3, brokers): 1 on this one-broker session (3 on the 3-node cluster, tests/cluster).
    assert {len(p.replicas) for p in partitions.values()} == {1}
    configs = admin.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, log_topic)])
    [entries] = [f.result(timeout=10) for f in configs.values()]
    assert entries["cleanup.policy"].value == "compact"
