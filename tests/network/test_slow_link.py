"""A slow link: toxiproxy between the producer and every node adds latency to each answer and caps the bandwidth
of both directions (the kernel here has no netem). At the default settings the write completes, exact; with a
request.timeout.ms below the latency it fails with an error naming the broker and the setting."""

from __future__ import annotations

import dataclasses
import os
import time

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import KafkaError
from tests.cluster.faults import check_ids, new_topic, read_all
from tests.conftest import ConsumedRecord
from tests.network.conftest import NetCluster

pytestmark = pytest.mark.network

PARTITIONS = 3
ROWS = 20_000
VALUE_BYTES = 100


def _slow_down(net: NetCluster, latency_ms: int, rate_kb_s: int) -> None:
    for node_id in net.cluster.nodes:
        net.proxy.slow(f"node{node_id}", latency_ms, rate_kb_s)


def _table(start: int, rows: int) -> pa.Table:
    ids = range(start, start + rows)
    # Random padding: the bytes on the wire are the bytes counted (nothing to compress away).
    return pa.table({"value": pa.array([b"%d " % i + os.urandom(VALUE_BYTES) for i in ids], pa.binary()),
                     "partition": pa.array([i % PARTITIONS for i in ids], pa.int32())})


def test_slow_link_completes_at_the_defaults(net: NetCluster) -> None:
    """300 ms more per answer and 256 KB/s each way: 2 MB of send_batch at the producer's defaults completes, every
    record once, in order per partition."""
    topic = new_topic(net.cluster, PARTITIONS)
    _slow_down(net, latency_ms=300, rate_kb_s=256)
    started = time.monotonic()
    producer = KafkaProducer({"bootstrap.servers": net.proxied_bootstrap})
    try:
        futures = [producer.send_batch(topic, _table(start, 2_000)) for start in range(0, ROWS, 2_000)]
        for future in futures:
            future.result(timeout=300)
    finally:
        producer.close()
    took_s = time.monotonic() - started
    verdict = check_ids(_as_ids(read_all(net.cluster, topic)), set(range(ROWS)), PARTITIONS)
    verdict.report("send_batch over a slow link (300 ms, 256 KB/s), defaults")
    print(f"  the write took {took_s:.1f} s")
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)
    assert verdict.read == ROWS
    # The links were slow for real: a third of over 2 MB through each node's 256 KB/s (toxiproxy's KB: 1000
    # bytes) takes 2.6 s at the least.
    assert took_s >= ROWS * VALUE_BYTES / PARTITIONS / (256 * 1000), took_s


def test_request_timeout_below_the_latency_fails_clearly(net: NetCluster) -> None:
    """Answers 2 s late and request.timeout.ms=1000: no request can complete, and the send fails within max.block.ms
    with an error that names the broker's address and request.timeout.ms."""
    topic = new_topic(net.cluster, PARTITIONS)
    _slow_down(net, latency_ms=2000, rate_kb_s=256)
    producer = KafkaProducer({"bootstrap.servers": net.proxied_bootstrap, "request.timeout.ms": 1000,
                              "max.block.ms": 6_000})
    try:
        with pytest.raises(KafkaError) as raised:
            producer.send_batch(topic, _table(0, 10)).result(timeout=60)
    finally:
        producer.close()
    message = str(raised.value)
    print(f"\n[slow link, request.timeout.ms below the latency] {type(raised.value).__name__}: {message}")
    assert "request.timeout.ms" in message, message
    assert any(f"127.0.0.1:{port}" in message for port in net.network.proxy_ports.values()), message
    assert read_all(net.cluster, topic) == []


def _as_ids(records: list[ConsumedRecord]) -> list[ConsumedRecord]:
    """The values are an id, a space and padding: keep the id, which check_ids reads."""
    return [dataclasses.replace(r, value=(r.value or b"-1").split(b" ", 1)[0]) for r in records]
