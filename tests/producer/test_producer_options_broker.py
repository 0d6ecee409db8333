"""Producer options that steer metadata, connections and metrics, against the session's real broker
(auto.create.topics.enable=true): allow.auto.create.topics, metadata.max.idle.ms, metrics.sample.window.ms,
metrics.num.samples, client.dns.lookup, partitioner.class, connections.max.idle.ms=0 and bootstrap.servers with a
listener scheme. Topics are checked with confluent-kafka's admin client."""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import KafkaTimeoutError
from spark_kafka_sink.testing.broker import free_port
from tests.conftest import ConsumedRecord, wait_for

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


def topic_exists(bootstrap: str, name: str) -> bool:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap, "allow.auto.create.topics": False})
    return name in admin.list_topics(timeout=10).topics


def test_allow_auto_create_topics_false_never_creates_the_topic(bootstrap: str, readback: Readback) -> None:
    missing = f"never-created-{uuid.uuid4().hex[:8]}"
    with KafkaProducer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": "false",
                        "max.block.ms": 1_500}) as producer:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            producer.send(missing, b"v")
        waited = time.monotonic() - started
    print(f"send to a missing topic failed after {waited:.2f} s: {info.value}")
    assert "allow.auto.create.topics=false" in str(info.value) and missing in str(info.value)
    assert "after 1500 ms (max.block.ms=1500)" in str(info.value)
    with KafkaProducer({"bootstrap.servers": bootstrap, "allow.auto.create.topics": "false",
                        "max.block.ms": 1_500}) as producer:
        with pytest.raises(KafkaTimeoutError) as batch_info:
            producer.send_batch(missing, pa.table({"value": [b"v"]}))
    # send_batch spends max.block.ms across its steps: the wait is what was left, the option is named as set.
    assert "(max.block.ms=1500)" in str(batch_info.value), batch_info.value
    assert not topic_exists(bootstrap, missing)
    # The control: the broker does auto-create, so the default (true) creates it and the record arrives.
    created = f"auto-created-{uuid.uuid4().hex[:8]}"
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 30_000}) as producer:
        producer.send(created, b"v").result(timeout=30)
    assert topic_exists(bootstrap, created)
    assert [r.value for r in readback(created)] == [b"v"]


def test_a_topic_not_sent_to_for_metadata_max_idle_ms_is_no_longer_refreshed(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    old, used = topic_factory(partitions=1), topic_factory(partitions=1)
    options: dict[str, Any] = {"bootstrap.servers": bootstrap, "metadata.max.idle.ms": 5_000,
                               "metadata.max.age.ms": 200, "max.block.ms": 30_000}
    with KafkaProducer(options) as producer:
        metadata = producer._metadata  # the producer's cache: which topics each refresh asks for
        producer.send(old, b"once").result(timeout=30)
        started = time.monotonic()
        sent = 0
        deadline = started + 30
        while old in metadata.topics_of_interest():
            assert time.monotonic() < deadline, "the idle topic stayed in the metadata refresh set"
            producer.send(used, b"x").result(timeout=30)  # keeps "used" in use
            sent += 1
        dropped_after = time.monotonic() - started
        assert used in metadata.topics_of_interest()
        producer.send(old, b"again").result(timeout=30)  # a later send adds it back
        assert old in metadata.topics_of_interest()
    print(f"idle topic dropped after {dropped_after:.2f} s (metadata.max.idle.ms=5000); {sent} sends to the other")
    assert dropped_after >= 4.9
    assert [r.value for r in readback(old)] == [b"once", b"again"]
    assert len(readback(used)) == sent


def test_init_transactions_timing_out_names_max_block_ms_and_the_transactional_id() -> None:
    nobody = f"127.0.0.1:{free_port()}"  # no broker listens: the coordinator can never answer
    with KafkaProducer({"bootstrap.servers": nobody, "transactional.id": "tx-unanswered", "max.block.ms": 800}) as p:
        started = time.monotonic()
        with pytest.raises(KafkaTimeoutError) as info:
            p.init_transactions()
        waited = time.monotonic() - started
    message = str(info.value)
    assert "max.block.ms=800" in message and "'tx-unanswered'" in message and "coordinator" in message, message
    assert 0.8 <= waited < 10, waited


def test_metrics_windows_follow_metrics_sample_window_ms_and_num_samples(
        bootstrap: str, topic_factory: Callable[..., str]) -> None:
    """Rates and averages cover metrics.num.samples windows of metrics.sample.window.ms: with one 200 ms window the
    send rate falls back to 0 once no record was sent for a window; at the Java defaults (2 x 30 s) it would hold
    for a minute (the control)."""
    topic = topic_factory(partitions=1)
    options = {"bootstrap.servers": bootstrap, "max.block.ms": 30_000}
    with KafkaProducer({**options, "metrics.sample.window.ms": "200", "metrics.num.samples": "1"}) as short, \
            KafkaProducer(options) as default:
        for producer in (short, default):
            for i in range(20):
                producer.send(topic, b"v%d" % i)
            producer.flush(30)
            assert producer.metrics()["record-send-total"] == 20
            assert producer.metrics()["record-send-rate"] > 0
        waited = wait_for("the one-window send rate to fall to 0", lambda: short.metrics()["record-send-rate"] == 0,
                          timeout=10, interval=0.05)
        print(f"record-send-rate at 0 after {waited:.2f} s with one 200 ms window")
        assert default.metrics()["record-send-rate"] > 0  # the 2 x 30 s windows still hold the 20 records
        assert short.metrics()["record-send-total"] == 20  # totals are not windowed


def test_client_dns_lookup_use_all_dns_ips_tries_the_next_address(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback, monkeypatch: pytest.MonkeyPatch) -> None:
    """use_all_dns_ips (Java's default): a broker name that resolves to two addresses, the
    first refusing connections. The next attempt takes the second address, and the records get through."""
    port = int(bootstrap.rpartition(":")[2])
    refusing = free_port()
    real = socket.getaddrinfo
    resolved: list[str] = []

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host != "kafka-alias.test":
            return real(host, *args, **kwargs)
        resolved.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", refusing)),
                (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("127.0.0.1", port))]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    topic = topic_factory(partitions=1)
    with KafkaProducer({"bootstrap.servers": f"kafka-alias.test:{port}", "client.dns.lookup": "use_all_dns_ips",
                        "max.block.ms": 30_000, "reconnect.backoff.ms": 10}) as producer:
        producer.send(topic, b"through the second address").result(timeout=30)
    assert len(resolved) >= 2  # the refused first address, then the second
    assert [r.value for r in readback(topic)] == [b"through the second address"]


def test_javas_round_robin_partitioner_spreads_one_key_over_every_partition(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    """partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner, as a Java configuration names it:
    records of one key go to every partition in turn, one at a time (send) and a table at once (send_batch).
    Read back by confluent-kafka: each of the 4 partitions holds 3 + 3 of the 24 records, in turn."""
    import pyarrow as pa

    topic = topic_factory(partitions=4)
    with KafkaProducer({"bootstrap.servers": bootstrap, "max.block.ms": 30_000,
                        "partitioner.class": "org.apache.kafka.clients.producer.RoundRobinPartitioner"}) as producer:
        for i in range(12):
            producer.send(topic, b"one %d" % i, key=b"the same key").result(timeout=30)
        table = pa.table({"key": pa.array([b"the same key"] * 12), "value": [b"bulk %d" % i for i in range(12)]})
        producer.send_batch(topic, table).result(timeout=30)
    records = readback(topic)
    by_partition = {p: [r.value for r in records if r.partition == p] for p in range(4)}
    assert by_partition == {p: [b"one %d" % i for i in range(p, 12, 4)] + [b"bulk %d" % i for i in range(p, 12, 4)]
                            for p in range(4)}


def test_connections_max_idle_ms_zero_closes_idle_connections_and_still_sends(
        bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    """connections.max.idle.ms=0 (Java: close what is idle for more than 0 ms). A connection that became ready closed
    in the same poll, before the Metadata request could go out on it: no send ever got metadata (KafkaTimeoutError
    after max.block.ms). Now it closes between requests, as Java's, and every record is written."""
    topic = topic_factory(partitions=1)
    with KafkaProducer({"bootstrap.servers": bootstrap, "connections.max.idle.ms": 0, "max.block.ms": 10_000,
                        "linger.ms": 20}) as producer:
        offsets = [producer.send(topic, b"%d" % i).result(20).offset for i in range(5)]
    assert offsets == [0, 1, 2, 3, 4]
    assert [r.value for r in readback(topic)] == [b"0", b"1", b"2", b"3", b"4"]


def test_bootstrap_servers_with_a_listener_scheme_connects(bootstrap: str, readback: Readback) -> None:
    """bootstrap.servers copied from a broker's listeners (PLAINTEXT://host:port): Java and librdkafka ignore the
    scheme; it was refused as 'not host:port'."""
    topic = f"scheme-{uuid.uuid4().hex[:8]}"
    with KafkaProducer({"bootstrap.servers": f"PLAINTEXT://{bootstrap}", "max.block.ms": 30_000}) as producer:
        producer.send(topic, b"v").result(timeout=30)
    assert [r.value for r in readback(topic)] == [b"v"]
