"""The README's make targets, run as a user runs them. `make run`: a broker, the bundled job through spark-submit,
a read-back report. `make kafka-up PORT=...` starts a broker on 127.0.0.1 that keeps running after make returns,
and `make kafka-down` stops it and deletes its data. The tests give make a Kafka home of their own (links to the
fetched jars), so a user's own local broker is never touched."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from pathlib import Path

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import free_port
from spark_kafka_sink.testing.broker_jars import REPO_ROOT, kafka_home
from tests.conftest import create_topic

pytestmark = pytest.mark.cluster


def _make(target: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["make", "-s", target, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=300)


def _private_home(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A Kafka home linking to the fetched jars, and the environment naming it."""
    home = tmp_path / "kafka-home"
    home.mkdir()
    for entry in kafka_home().iterdir():
        if entry.name != "local":
            (home / entry.name).symlink_to(entry)
    return home, {**os.environ, "SKS_KAFKA_HOME": str(home)}


def test_make_run_writes_and_reads_back_every_row(tmp_path: Path) -> None:
    _, env = _private_home(tmp_path)
    started = time.monotonic()
    run = _make("run", env, "ROWS=3000")
    print(f"make run with 3000 rows: {time.monotonic() - started:.1f} s")
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    for step in ("[1/4] starting a local Kafka broker", "[2/4] spark-submit jobs/batch_to_kafka.py --rows 3000",
                 "[3/4] reading the topic back with confluent-kafka", "[4/4] stopping the broker"):
        assert step in run.stdout, run.stdout
    assert "missing / duplicate: 0 / 0" in run.stdout
    assert "result             : OK: every row exactly once" in run.stdout


def test_make_kafka_up_then_down(tmp_path: Path) -> None:
    from confluent_kafka import Consumer, TopicPartition

    home, env = _private_home(tmp_path)
    port = free_port()
    started = time.monotonic()
    up = _make("kafka-up", env, f"PORT={port}")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert f"Kafka is up on 127.0.0.1:{port}" in up.stdout, up.stdout
        bootstrap = f"127.0.0.1:{port}"
        topic = create_topic(bootstrap, "kafka-up", 1)
        with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
            producer.send(topic, value=b"hello", key=b"k").result(timeout=30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "kafka-up", "auto.offset.reset": "earliest"})
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = [m for m in consumer.consume(10, timeout=10) if m.error() is None]
        finally:
            consumer.close()
        assert [(m.key(), m.value()) for m in got] == [(b"k", b"hello")]
        assert (home / "local").is_dir()
    finally:
        down = _make("kafka-down", env)
    print(f"kafka-up, a write and kafka-down: {time.monotonic() - started:.1f} s")
    assert down.returncode == 0 and "Kafka stopped" in down.stdout, down.stdout + down.stderr
    assert not (home / "local").exists()  # its data deleted
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
