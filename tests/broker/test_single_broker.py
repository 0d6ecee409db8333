"""The session broker works, checked with two independent clients: confluent-kafka and Spark's Kafka source."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from chispa import assert_df_equality
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_probe import metadata_broker_ids
from tests.conftest import ConsumedRecord, spark_read_topic

pytestmark = pytest.mark.broker


def test_broker_answers_metadata(kafka: KafkaCluster) -> None:
    node = kafka.nodes[1]
    assert metadata_broker_ids("127.0.0.1", node.port) == [1]


def test_topic_with_three_partitions(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(partitions=3)
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    assert sorted(md.topics[topic].partitions) == [0, 1, 2]


def test_produce_and_consume_with_confluent_kafka(
    bootstrap: str, topic_factory: Callable[..., str], readback: Callable[..., list[ConsumedRecord]]
) -> None:
    topic = topic_factory(partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    producer.produce(topic, value=b"hello", key=b"k1", partition=2, headers=[("h", b"x")], timestamp=1_700_000_000_000)
    assert producer.flush(30) == 0
    [record] = readback(topic)
    assert (record.partition, record.offset, record.key, record.value) == (2, 0, b"k1", b"hello")
    assert record.headers == (("h", b"x"),)
    assert record.timestamp_ms == 1_700_000_000_000


@pytest.mark.spark
def test_spark_reads_back_with_its_own_kafka_source(
    spark: Any, bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(partitions=3)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    rows = [(f"k{i}".encode(), f"v{i}".encode(), i % 3) for i in range(30)]
    for key, value, partition in rows:
        producer.produce(topic, value=value, key=key, partition=partition)
    assert producer.flush(30) == 0

    actual = spark_read_topic(spark, bootstrap, topic).selectExpr("key", "value", "partition")
    expected = spark.createDataFrame(rows, "key binary, value binary, partition int")
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
