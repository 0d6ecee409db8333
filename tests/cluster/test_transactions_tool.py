"""``python -m spark_kafka_sink transactions``: a driver SIGKILLed mid-commit leaves two planned transactions open
(and a stray open transaction of the prefix that no plan names); the tool lists them joined with the commit log,
its dry run changes nothing, and ``end --execute`` commits the planned ones and aborts the stray one. Checked with
Kafka's TransactionsCommand and read back at read_committed with librdkafka."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.cluster.test_driver_crash import ROWS, assert_nothing_open, kill_when_paused, launch
from tests.conftest import ConsumedRecord
from tests.spark.conftest import kafka_transactions

pytestmark = [pytest.mark.cluster, pytest.mark.spark, pytest.mark.broker]


def _tool(*args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "spark_kafka_sink", "transactions", *args], capture_output=True,
                          text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _rows(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["transactional_id"]: r for r in report["transactions"]}


def test_the_tool_lists_and_ends_a_driver_crash_leftover(
        kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str],
        readback: Callable[..., list[ConsumedRecord]], tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    prefix = f"tool-{uuid.uuid4().hex[:8]}"
    args = ["--bootstrap-servers", bootstrap, "--topic", topic, "--rows", str(ROWS), "--partitions", "3",
            "--guarantee", "exactly_once", "--option", f"transactionalIdPrefix={prefix}", "--option", "writeId=5"]
    proc, marker = launch("batch_to_kafka.py", args, tmp_path, pause="after-first-commit")
    kill_when_paused(proc, marker)  # one partition committed, two planned and still open
    stray = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-7"})
    stray.init_transactions()
    stray.begin_transaction()
    stray.send(topic, b"stray", partition=0)
    stray.flush(30)
    stray.close(30, abort_open_transaction=False)  # a task of a write that never reached its commit
    common = ["--bootstrap-servers", bootstrap, "--prefix", prefix]

    listed = _rows(json.loads(_tool("list", *common, "--json").stdout))
    assert sorted(listed) == [f"{prefix}-{p}" for p in (0, 1, 2, 7)], listed
    planned = [t for t, r in listed.items() if r["commit_log"] == "writeId 5: planned"]
    committed = [t for t, r in listed.items() if r["commit_log"] == "writeId 5: committed"]
    assert len(planned) == 2 and len(committed) == 1, listed
    assert all(listed[t]["state"] == "Ongoing" and listed[t]["action"] == "commit" for t in planned), listed
    assert listed[committed[0]]["state"] == "CompleteCommit" and listed[committed[0]]["action"] == "-"
    assert listed[f"{prefix}-7"]["commit_log"] == "-" and listed[f"{prefix}-7"]["action"] == "abort"
    assert listed[f"{prefix}-7"]["partitions"] == [f"{topic}[0]"]
    # Where each open transaction begins (DescribeProducers): what read_committed consumers wait at.
    for tid in [*planned, f"{prefix}-7"]:
        held = listed[tid]["holds_back_from"]
        assert sorted(held) == sorted(listed[tid]["partitions"]) and all(o >= 0 for o in held.values()), listed
    stray_start = listed[f"{prefix}-7"]["holds_back_from"][f"{topic}[0]"]
    table = _tool("list", *common).stdout  # the readable table names every id and its action
    assert table.startswith("TRANSACTIONAL ID") and all(t in table for t in listed), table
    assert f"{topic}[0] from offset {stray_start}" in table, table

    dry = _tool("end", *common).stdout
    assert "dry run: 3 transaction(s) to end" in dry, dry
    open_before = kafka_transactions(kafka, prefix)
    assert sorted(t for t, s in open_before.items() if s == "Ongoing") == sorted([*planned, f"{prefix}-7"])

    ended = json.loads(_tool("end", *common, "--execute", "--json").stdout)
    assert ended["outcomes"] == {**{t: "committed" for t in planned}, f"{prefix}-7": "aborted"}, ended
    assert "Ongoing" not in kafka_transactions(kafka, prefix).values()
    assert_nothing_open(bootstrap, topic)
    values = [r.value or b"" for r in readback(topic)]
    assert b"stray" not in values
    assert Counter(json.loads(v)["order_id"] for v in values) == Counter(range(ROWS))  # every row exactly once
    # The commit log now says the write is complete: a re-run of writeId 5 would skip every partition.
    after = json.loads(_tool("list", *common, "--json").stdout)
    assert after["loggedWrite"]["complete"] is True and not [r for r in after["transactions"] if r["action"] != "-"]
