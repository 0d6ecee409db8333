"""The sink through Spark Connect: a Connect server (its own JVM, its Python workers running a fresh venv with the
project's wheel, as a user installs it) and a client in another process that only names the format. Batch,
streaming and foreachBatch writes land every row once (read back with confluent-kafka at read_committed), and a
bad column's error reaches the client with the sink's own message, with nothing written."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.spark_cluster import (
    CONNECT_CLIENT_DEPENDENCIES,
    SparkConnectServer,
    build_wheel,
    make_venv,
)
from tests.cluster.faults import check_ids, end_offsets, new_topic, read_all

pytestmark = pytest.mark.cluster

CLIENT = Path(__file__).with_name("connect_client.py")
ROWS = 20_000
FILES, ROWS_PER_FILE = 3, 2_000  # the streaming input: one file per micro-batch


@pytest.fixture(scope="module")
def connect_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with the wheel, its dependencies and the Connect client's (foreachBatch runs as a client on
    the server's Python workers)."""
    work = tmp_path_factory.mktemp("connect")
    return make_venv(build_wheel(work / "dist"), work / "env", CONNECT_CLIENT_DEPENDENCIES)


@pytest.fixture(scope="module")
def server(connect_venv: Path) -> Iterator[SparkConnectServer]:
    with SparkConnectServer(python=connect_venv / "bin" / "python") as running:
        yield running


def _client(server: SparkConnectServer, venv: Path, **args: Any) -> dict[str, Any]:
    proc = subprocess.run([str(venv / "bin" / "python"), str(CLIENT), json.dumps(args)], env=server.client_env(),
                          capture_output=True, text=True, timeout=240)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 0 and lines, f"client failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr[-4000:]}"
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _exactly(cluster: KafkaCluster, topic: str, ids: set[int]) -> None:
    verdict = check_ids(read_all(cluster, topic), ids)
    verdict.report(topic)
    assert (verdict.read, verdict.lost, verdict.duplicated, verdict.extra) == (len(ids), 0, 0, 0)


@pytest.mark.parametrize("guarantee,register", [("at_least_once", False), ("exactly_once", True)])
def test_a_batch_write_through_connect(kafka: KafkaCluster, server: SparkConnectServer, connect_venv: Path,
                                       guarantee: str, register: bool) -> None:
    """Without registering anything the server finds the format by its module name; registering the class on the
    client (pickled to the server) works too."""
    topic = new_topic(kafka)
    result = _client(server, connect_venv, case="batch", bootstrap=kafka.bootstrap_servers, topic=topic,
                     rows=ROWS, register=register, options={"deliveryGuarantee": guarantee})
    assert result == {"ok": True}
    _exactly(kafka, topic, set(range(ROWS)))


def test_a_bad_column_fails_on_the_client_with_the_sinks_message(kafka: KafkaCluster, server: SparkConnectServer,
                                                                  connect_venv: Path) -> None:
    topic = new_topic(kafka)
    result = _client(server, connect_venv, case="bad_value_column", bootstrap=kafka.bootstrap_servers,
                     topic=topic, rows=100)
    assert "column 'value' has type bigint; accepted: string or binary" in result.get("error", ""), result
    assert sum(end_offsets(kafka, topic).values()) == 0


@pytest.mark.parametrize("case", ["stream", "foreach_batch"])
def test_a_streaming_query_through_connect_exactly_once(kafka: KafkaCluster, server: SparkConnectServer,
                                                        connect_venv: Path, tmp_path: Path, case: str) -> None:
    """writeStream.format("pykafka-sink"), and foreachBatch writing each micro-batch with its id as writeId (the
    function runs on the server, in a Python worker of the venv)."""
    source = tmp_path / "in"
    source.mkdir()
    for f in range(FILES):
        rows = range(f * ROWS_PER_FILE, (f + 1) * ROWS_PER_FILE)
        (source / f"part-{f}.json").write_text("".join(json.dumps({"id": i}) + "\n" for i in rows))
    topic = new_topic(kafka)
    options = {"deliveryGuarantee": "exactly_once"}
    if case == "foreach_batch":
        options["transactionalIdPrefix"] = f"connect-{topic}"
    result = _client(server, connect_venv, case=case, bootstrap=kafka.bootstrap_servers, topic=topic,
                     input=str(source), checkpoint=str(tmp_path / "checkpoint"), options=options)
    assert result == {"ok": True}
    _exactly(kafka, topic, set(range(FILES * ROWS_PER_FILE)))
