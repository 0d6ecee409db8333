"""A partition leader blackholed mid-write: both its links set down, so no FIN or RST ever reaches the producer.
The requests in flight to it must time out after request.timeout.ms, the producer must move to the leader the
controller elects once metadata shows it, and connects to the dead address must give up after
socket.connection.setup.timeout.ms instead of hanging. Read back with confluent-kafka (read_committed)."""

from __future__ import annotations

import logging
import re
import time

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import KafkaError
from tests.cluster.faults import PacedWriter, check_ids, leader_of, new_topic, read_all
from tests.conftest import wait_for
from tests.network.conftest import NetCluster

pytestmark = pytest.mark.network

PARTITIONS = 3
REQUEST_TIMEOUT_MS = 3000
SETUP_TIMEOUT_MS = 1000


def test_leader_blackholed_mid_write(net: NetCluster, caplog: pytest.LogCaptureFixture) -> None:
    """Idempotent send_batch at acks=all while partition 0's leader vanishes: the requests in flight to it time out
    after request.timeout.ms (the connection log says so), every acknowledged record is read back once, in order
    per partition, no send fails, and the write goes on on the new leader."""
    caplog.set_level(logging.INFO, logger="spark_kafka_sink.net.connection")
    cluster = net.cluster
    topic = new_topic(cluster, PARTITIONS)
    producer = KafkaProducer({
        "bootstrap.servers": net.bootstrap, "acks": "all", "linger.ms": 5,
        "request.timeout.ms": REQUEST_TIMEOUT_MS, "socket.connection.setup.timeout.ms": SETUP_TIMEOUT_MS,
        "socket.connection.setup.timeout.max.ms": 2 * SETUP_TIMEOUT_MS,
    })
    writer = PacedWriter(producer, topic, PARTITIONS, "send_batch", 5_000, batch_rows=250).start()
    try:
        wait_for("the first acknowledgements", lambda: writer.acked_after(0.0) >= 5)
        victim = leader_of(cluster, topic, 0)
        cut_at = time.monotonic()
        net.network.blackhole(victim)
        election_s = wait_for("a new leader of partition 0",
                              lambda: leader_of(cluster, topic, 0) not in (victim, -1))
        wait_for("acknowledgements after the blackhole", lambda: writer.acked_after(cut_at) >= 5)
        recovery_s = writer.recovery_after(cut_at)
    finally:
        writer.stop()
        producer.close()
    try:
        dead_connect_s, dead_error = _connect_to_dead_node(net, victim)
    finally:
        net.network.heal(victim)
    victim_address = cluster.bootstrap_of([victim])
    waited_ms = [int(m.group(1)) for r in caplog.records if victim_address in r.getMessage()
                 for m in [re.search(r"got no response within (\d+) ms \(request\.timeout\.ms\)", r.getMessage())]
                 if m]
    assert writer.errors() == [], writer.errors()[:3]
    acked = writer.acked_ids()
    verdict = check_ids(read_all(cluster, topic), acked, PARTITIONS)
    verdict.report(f"send_batch: leader {victim} blackholed", recovery_s)
    print(f"  requests to node {victim} timed out after {waited_ms} ms (request.timeout.ms={REQUEST_TIMEOUT_MS})")
    print(f"  new leader elected {election_s:.1f} s after the blackhole; a connect to the dead address gave up "
          f"after {dead_connect_s:.1f} s: {dead_error}; {len(acked)} records acknowledged")
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)
    assert verdict.read == len(acked)
    # Timed out by the producer, not ended by the kernel; the slack is the sender's poll loop under load.
    assert waited_ms and all(REQUEST_TIMEOUT_MS <= ms <= REQUEST_TIMEOUT_MS + 5000 for ms in waited_ms), waited_ms
    assert f"within {SETUP_TIMEOUT_MS} ms" in dead_error and "socket.connection.setup.timeout.ms" in dead_error


def _connect_to_dead_node(net: NetCluster, victim: int) -> tuple[float, str]:
    """A producer bootstrapped at the blackholed address alone: its connect attempts must fail after the setup
    timeout (the SYN is dropped, nothing refuses it), so asking for metadata fails within max.block.ms naming the
    address and the setting. Returns the seconds that took and the error's text."""
    address = net.cluster.bootstrap_of([victim])
    producer = KafkaProducer({
        "bootstrap.servers": address, "max.block.ms": 4 * SETUP_TIMEOUT_MS,
        "socket.connection.setup.timeout.ms": SETUP_TIMEOUT_MS,
        "socket.connection.setup.timeout.max.ms": SETUP_TIMEOUT_MS,
    })
    started = time.monotonic()
    try:
        with pytest.raises(KafkaError) as raised:
            producer.partitions_for("any-topic")
        return time.monotonic() - started, str(raised.value)
    finally:
        producer.close()
