"""Helpers for the sink's Spark tests: write through ``pykafka-sink``, and look at a topic's raw offsets."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest

FORMAT = "pykafka-sink"


def pyspark_minor() -> tuple[int, int]:
    """The installed pyspark's (major, minor): ``make test-pyspark`` runs the Spark tests on 4.0 to 4.3."""
    import pyspark

    major, minor = pyspark.__version__.split(".")[:2]
    return int(major), int(minor)


def write_df(df: Any, bootstrap: str, *, fmt: str = FORMAT, mode: str = "append", **options: Any) -> None:
    """``df.write.format(fmt)`` with ``kafka.bootstrap.servers`` and ``options`` (None values are left out)."""
    writer = df.write.format(fmt).option("kafka.bootstrap.servers", bootstrap)
    for key, value in options.items():
        if value is not None:
            writer = writer.option(key, str(value))
    writer.mode(mode).save()


def end_offsets(bootstrap: str, topic: str, isolation: str = "read_uncommitted") -> dict[int, int]:
    """Each partition's high watermark: counts every record ever written, committed, aborted or open. With
    ``isolation="read_committed"``: the last stable offset, which an open transaction holds back (librdkafka reports
    it as the high offset at that isolation)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex}",
                         "isolation.level": isolation})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in sorted(partitions)}
    finally:
        consumer.close()


@pytest.fixture
def offsets(bootstrap: str) -> Callable[[str], dict[int, int]]:
    def get(topic: str) -> dict[int, int]:
        return end_offsets(bootstrap, topic)

    return get


@pytest.fixture
def sent_rows(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The row count of every ``KafkaProducer.send_batch`` call in this test, in call order (the calls still send)."""
    from spark_kafka_sink.producer import KafkaProducer

    sent: list[int] = []
    send_batch = KafkaProducer.send_batch

    def recording(self: KafkaProducer, topic: str | None, data: Any) -> Any:
        sent.append(data.num_rows)
        return send_batch(self, topic, data)

    monkeypatch.setattr(KafkaProducer, "send_batch", recording)
    return sent


def kafka_transactions(kafka: Any, prefix: str) -> dict[str, str]:
    """Transactional id -> coordinator state of every id starting with ``prefix``, as Kafka's own TransactionsCommand
    lists them (the Java admin client's ListTransactions, not ours)."""
    import subprocess

    from spark_kafka_sink.testing.broker_jars import require_java, tools_lib

    proc = subprocess.run(
        [require_java(), "-cp", f"{tools_lib(kafka.version)}/*", "org.apache.kafka.tools.TransactionsCommand",
         "--bootstrap-server", kafka.bootstrap_servers, "list"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    rows = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    assert rows and rows[0][0] == "TransactionalId" and rows[0][3] == "TransactionState", proc.stdout
    return {row[0]: row[3] for row in rows[1:] if row[0].startswith(prefix)}
