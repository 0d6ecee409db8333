"""The idempotent producer restarting its sequences against a real broker of each release (issue #17): when a
sent batch's fate is unknown (expired while the broker was paused with SIGSTOP, then resumed or SIGKILLed and
restarted) or the broker answers OUT_OF_ORDER_SEQUENCE_NUMBER, the producer asks for a new producer id/epoch
(InitProducerId carrying its current id and epoch), restarts its sequences at 0 and goes on writing: acknowledged
records are read back once and in order with confluent-kafka. And what a broker does once it has forgotten an idle
producer.

What the brokers do (2.8.2, 3.6.2, 3.7.2, 3.9.2, 4.3.1, 4.4.0 with either transaction.version): InitProducerId
without a transactional.id hands out a NEW producer id with epoch 0 -- the current id and epoch that v3+ carries are
used for transactional ids only. A broker that forgot a producer (producer.id.expiration.ms after its last record)
accepts whatever sequence comes next from it: neither UNKNOWN_PRODUCER_ID nor OUT_OF_ORDER_SEQUENCE_NUMBER, so the
producer just goes on under the same id. The broker's own view of each producer (id, epoch, last sequence) is
read with Kafka's TransactionsCommand describe-producers (the Java admin client), not with our decoder.

One private broker for the module: the SIGSTOP would stall other tests, and it looks for expired producer ids every
500 ms instead of every 10 minutes. Producer ids expire after the default day except while the test that needs them
to expire sets ``EXPIRATION_MS`` (a dynamic setting): a restart that takes longer must not make the broker forget
the producer in the other tests. Before 3.4 there is no such setting, and the broker looks for idle producers
every 10 minutes whatever it is told, so `make test-versions` does not run that test on 2.8.2. Releases before 3.5
lack Kafka's TransactionsCommand; their producers are described with the default release's (the admin client of
4.3 speaks DescribeProducers to them).
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer, RecordMetadata
from spark_kafka_sink.errors import DeliveryTimeoutError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.transactions import ProducerIdAndEpoch
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import PRODUCE
from spark_kafka_sink.protocol.record_batch import Record, encode_batch
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars, release, require_java, tools_lib
from tests.conftest import ConsumedRecord, create_topic, pause_process, read_topic, wait_for

pytestmark = pytest.mark.broker

# Long enough for describe-producers (a JVM start, several seconds on a busy machine) to still see a producer
# right after its last record; short enough to wait for in a test.
EXPIRATION_MS = 20_000
_GRANT = re.compile(r"producer id (\d+) epoch (\d+) for idempotent producer")
_PRODUCER_ID_EXPIRATION_SETTING = (3, 4)  # producer.id.expiration.ms (KIP-854, dynamic) and a settable check interval


@pytest.fixture(scope="module")
def broker() -> Iterator[KafkaCluster]:
    fetch_jars()
    cluster = KafkaCluster(size=1, properties={
        "producer.id.expiration.check.interval.ms": "500",  # an internal setting on every release tested
    }).start()
    try:
        yield cluster
    finally:
        for pid in cluster.pids():
            os.kill(pid, signal.SIGCONT)  # never leave a stopped JVM behind, whatever failed
        cluster.stop()


@contextmanager
def producer_ids_expiring_after(bootstrap: str, expiration_ms: int) -> Iterator[None]:
    """Set producer.id.expiration.ms of the broker (node 1; a dynamic setting on every release tested) until the
    block ends."""
    # Re-exported by confluent_kafka.admin without being listed in its stubs' __all__ (as NewTopic in conftest).
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    name = "producer.id.expiration.ms"
    admin = AdminClient({"bootstrap.servers": bootstrap})

    def alter(op: AlterConfigOpType, value: str | None) -> None:
        node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
            ConfigEntry(name, value, incremental_operation=op)])
        for future in admin.incremental_alter_configs([node]).values():
            future.result(timeout=30)

    alter(AlterConfigOpType.SET, str(expiration_ms))
    try:
        def applied() -> bool:
            (future,) = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")]).values()
            return bool(future.result(timeout=30)[name].value == str(expiration_ms))

        wait_for(f"the broker to apply {name}={expiration_ms}", applied, timeout=60)
        yield
    finally:
        alter(AlterConfigOpType.DELETE, None)


@dataclass(frozen=True)
class BrokerProducer:
    """One row of describe-producers: the partition leader's state for one producer id."""

    producer_id: int
    epoch: int
    last_sequence: int


def broker_producers(cluster: KafkaCluster, topic: str, partition: int) -> dict[int, BrokerProducer]:
    """The producers the partition's leader remembers, by id, as Kafka's own TransactionsCommand prints them."""
    proc = subprocess.run(
        [require_java(), "-cp", f"{tools_lib(cluster.version)}/*", "org.apache.kafka.tools.TransactionsCommand",
         "--bootstrap-server", cluster.bootstrap_servers, "describe-producers", "--topic", topic,
         "--partition", str(partition)],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line.split() for line in proc.stdout.splitlines() if line.strip()]
    assert lines and lines[0][:4] == ["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence"], \
        proc.stdout
    return {int(row[0]): BrokerProducer(int(row[0]), int(row[1]), int(row[3])) for row in lines[1:]}


def producer_state(producer: KafkaProducer) -> ProducerIdAndEpoch:
    """The id/epoch the producer sends with now (its transaction manager's; the facade has no accessor)."""
    tm = producer._tm
    assert tm is not None, "idempotence is on by default"
    return tm.producer_id_and_epoch


def grants(caplog: pytest.LogCaptureFixture) -> list[tuple[int, int]]:
    """Every producer id/epoch an InitProducerId answer gave this test's idempotent producers, in order."""
    found = (_GRANT.search(r.getMessage()) for r in caplog.records)
    return [(int(m.group(1)), int(m.group(2))) for m in found if m is not None]


def losses(records: list[ConsumedRecord], acked: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    """(acknowledged values missing from the topic, values in the topic more than once)."""
    counts = Counter(r.value for r in records)
    return [v for v in acked if counts[v] == 0], sorted(v for v, n in counts.items() if v is not None and n > 1)


def assert_in_send_order(records: list[ConsumedRecord], sent: list[bytes]) -> None:
    """Per partition, the records of ``sent`` appear in the order they were sent (others are ignored)."""
    position = {v: i for i, v in enumerate(sent)}
    for partition in {r.partition for r in records}:
        seen = [position[r.value] for r in records if r.partition == partition and r.value in position]
        assert seen == sorted(seen), f"partition {partition} is out of send order"


@pytest.mark.parametrize("resume", ["sigcont", "sigkill-and-restart"])
def test_batches_expired_on_a_paused_broker_restart_the_sequences_under_a_new_producer_id(
        broker: KafkaCluster, caplog: pytest.LogCaptureFixture, resume: str) -> None:
    """``sigcont``: the broker goes on and also writes what it had not read yet, so the expired records land after
    all. ``sigkill-and-restart``: what the paused broker had not read is gone, so going on under the old id would
    leave a sequence gap (OUT_OF_ORDER_SEQUENCE_NUMBER on every later batch): only the new id gets through."""
    bootstrap = broker.bootstrap_servers
    topic = create_topic(bootstrap, f"expired-{uuid.uuid4().hex[:8]}", partitions=2)
    (pid,) = broker.pids()
    caplog.set_level(logging.INFO, logger="spark_kafka_sink")
    options = {"bootstrap.servers": bootstrap, "linger.ms": 0, "request.timeout.ms": 1_500,
               "delivery.timeout.ms": 6_000, "retry.backoff.ms": 100, "max.block.ms": 30_000}
    n = 200
    with KafkaProducer(options) as producer:
        for future in [producer.send(topic, b"before-%d" % i, key=b"%d" % i) for i in range(n)]:
            future.result(timeout=30)
        first = producer_state(producer)
        pause_process(pid)
        during: list[Future[RecordMetadata]] = [producer.send(topic, b"during-%d" % i, key=b"%d" % i)
                                                for i in range(n)]
        errors: list[DeliveryTimeoutError] = []
        for future in during:
            with pytest.raises(DeliveryTimeoutError) as info:
                future.result(timeout=60)
            errors.append(info.value)
        still_paused = producer_state(producer)
        if resume == "sigcont":
            os.kill(pid, signal.SIGCONT)
        else:
            broker.kill_node(1)
            broker.start_node(1)
        resumed_at = time.monotonic()
        after = [producer.send(topic, b"after-%d" % i, key=b"%d" % i) for i in range(n)]
        acked_after = [f.result(timeout=60) for f in after]
        recovered_s = time.monotonic() - resumed_at
        second = producer_state(producer)
    after_per_partition = Counter(md.partition for md in acked_after)
    state = {p: broker_producers(broker, topic, p) for p in after_per_partition}
    records = read_topic(bootstrap, topic)

    acked = [b"before-%d" % i for i in range(n)] + [b"after-%d" % i for i in range(n)]
    lost, duplicated = losses(records, acked)
    maybe_written = sum(1 for e in errors if "may have been written" in str(e))
    landed = sum(1 for r in records if (r.value or b"").startswith(b"during-"))
    print(f"Kafka {broker.version}, {resume}: producer {first} -> {second} (InitProducerId answers: "
          f"{grants(caplog)}); {len(errors)} records expired while paused, {maybe_written} of them reported 'may have "
          f"been written', {landed} landed after all; lost {len(lost)} acknowledged, {len(duplicated)} duplicated; "
          f"all {n} later records acknowledged {recovered_s:.2f} s after the broker was back; broker's view: {state}")
    assert len(errors) == n and maybe_written > 0  # batches were in flight when they expired
    assert still_paused == first  # nothing could answer while paused
    # A second InitProducerId went out and its answer is what the producer now sends with: the broker gives an
    # idempotent producer a new id, epoch 0, whatever id/epoch the request carried.
    assert grants(caplog) == [(first.producer_id, first.epoch), (second.producer_id, second.epoch)]
    assert second.producer_id != first.producer_id and second.epoch == 0
    for partition, count in after_per_partition.items():
        # The leader's own record: the new id wrote exactly the later records, sequences 0 .. count - 1.
        assert state[partition][second.producer_id] == BrokerProducer(second.producer_id, 0, count - 1)
    assert not lost and not duplicated
    assert_in_send_order(records, acked)


def test_a_broker_that_forgot_an_idle_producer_accepts_its_next_sequence(
        broker: KafkaCluster, caplog: pytest.LogCaptureFixture) -> None:
    assert release(broker.version) >= _PRODUCER_ID_EXPIRATION_SETTING, (
        f"Kafka {broker.version} has no producer.id.expiration.ms and looks for idle producers every 10 minutes (a "
        "constant before 3.4): this test cannot make it forget one in time; `make test-versions` deselects it there")
    bootstrap = broker.bootstrap_servers
    topic = create_topic(bootstrap, f"forgotten-{uuid.uuid4().hex[:8]}", partitions=1)
    caplog.set_level(logging.INFO, logger="spark_kafka_sink")
    n = 50
    with producer_ids_expiring_after(bootstrap, EXPIRATION_MS), \
            KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        for future in [producer.send(topic, b"first-%d" % i) for i in range(n)]:
            future.result(timeout=30)
        first = producer_state(producer)
        remembered = broker_producers(broker, topic, 0)
        idle_from = time.monotonic()
        deadline = idle_from + EXPIRATION_MS / 1000 + 60
        while first.producer_id in broker_producers(broker, topic, 0):
            assert time.monotonic() < deadline, "the broker never expired the idle producer"
        forgotten_after_s = time.monotonic() - idle_from
        resumed_at = time.monotonic()
        for future in [producer.send(topic, b"second-%d" % i) for i in range(n)]:
            future.result(timeout=30)
        resumed_s = time.monotonic() - resumed_at
        metrics = producer.metrics()
        second = producer_state(producer)
    state = broker_producers(broker, topic, 0)
    records = read_topic(bootstrap, topic)
    acked = [b"first-%d" % i for i in range(n)] + [b"second-%d" % i for i in range(n)]
    lost, duplicated = losses(records, acked)
    print(f"Kafka {broker.version}: {first} remembered as {remembered}, forgotten {forgotten_after_s:.1f} s after "
          f"its last record; the next {n} records took {resumed_s:.2f} s with {metrics['record-retry-total']:.0f} "
          f"retries and {metrics['record-error-total']:.0f} errors; producer now {second}; broker's view: {state}; "
          f"lost {len(lost)}, duplicated {len(duplicated)}")
    assert remembered[first.producer_id] == BrokerProducer(first.producer_id, first.epoch, n - 1)
    # Sequence n under the same id/epoch, for a producer the broker no longer knows: accepted as is -- no
    # UNKNOWN_PRODUCER_ID, no OUT_OF_ORDER_SEQUENCE_NUMBER, so no retry and no new epoch.
    assert metrics["record-retry-total"] == 0 and metrics["record-error-total"] == 0
    assert second == first and grants(caplog) == [(first.producer_id, first.epoch)]
    assert state[first.producer_id] == BrokerProducer(first.producer_id, first.epoch, 2 * n - 1)
    assert not lost and not duplicated and [r.value for r in records] == acked


def forge_batch(bootstrap: str, topic: str, producer: ProducerIdAndEpoch, sequence: int, value: bytes) -> int:
    """Write one record as ``producer`` with ``sequence`` from another connection -- another writer using the
    same producer id (the broker only knows ids, not connections). -> the error code of the answer."""
    forger = ProducerConfig.from_dict({"bootstrap.servers": bootstrap, "client.id": "forger"})
    with NetworkClient(forger.net_config()) as net:
        net.fetch_metadata([topic], timeout_ms=30_000)
        leader = net.metadata.leader_for(topic, 0)
        assert leader is not None
        batch = encode_batch([Record(None, value, int(time.time() * 1000))], producer_id=producer.producer_id,
                             producer_epoch=producer.epoch, base_sequence=sequence)
        answer = net.request(leader, PRODUCE, {"transactional_id": None, "acks": -1, "timeout_ms": 30_000,
                                               "topic_data": [{"name": topic, "partition_data": [
                                                   {"index": 0, "records": batch}]}]}, 30_000)
    code: int = answer["responses"][0]["partition_responses"][0]["error_code"]
    return code


def test_out_of_order_sequence_from_the_broker_restarts_the_sequences_under_a_new_producer_id(
        broker: KafkaCluster, caplog: pytest.LogCaptureFixture) -> None:
    bootstrap = broker.bootstrap_servers
    topic = create_topic(bootstrap, f"out-of-order-{uuid.uuid4().hex[:8]}", partitions=1)
    caplog.set_level(logging.INFO, logger="spark_kafka_sink")
    rows, batches = 10, 5

    def table(prefix: str, b: int) -> pa.Table:
        # One batch of `rows` records to partition 0: more than one record, so the broker cannot take it for a
        # resend of the forged one-record batch (same first and last sequence) and answer DUPLICATE_SEQUENCE.
        return pa.table({"value": [b"%s-%d-%d" % (prefix.encode(), b, i) for i in range(rows)],
                         "partition": pa.array([0] * rows, pa.int32())})

    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        for b in range(batches):
            producer.send_batch(topic, table("first", b)).result(timeout=30)
        first = producer_state(producer)
        last_sequence = broker_producers(broker, topic, 0)[first.producer_id].last_sequence
        # The broker's sequence for this id moves one past what the producer has sent: its next batch is out of
        # order -- the same answer a broker gives when it has records of this producer that the producer lost.
        forged = forge_batch(bootstrap, topic, first, last_sequence + 1, b"forged")
        resumed_at = time.monotonic()
        for b in range(batches):
            producer.send_batch(topic, table("second", b)).result(timeout=30)
        recovered_s = time.monotonic() - resumed_at
        metrics = producer.metrics()
        second = producer_state(producer)
    state = broker_producers(broker, topic, 0)
    records = read_topic(bootstrap, topic)
    acked = [b"%s-%d-%d" % (p, b, i) for p in (b"first", b"second") for b in range(batches) for i in range(rows)]
    lost, duplicated = losses(records, acked)
    out_of_order = [r.getMessage() for r in caplog.records if "OUT_OF_ORDER_SEQUENCE_NUMBER" in r.getMessage()]
    print(f"Kafka {broker.version}: broker had {first} at sequence {last_sequence}, forged sequence "
          f"{last_sequence + 1} (answer {forged}); the producer saw {len(out_of_order)} OUT_OF_ORDER answer(s), "
          f"{metrics['record-retry-total']:.0f} records retried, moved {first} -> {second} (InitProducerId answers: "
          f"{grants(caplog)}) and wrote the next {batches * rows} records in {recovered_s:.2f} s; broker's view: "
          f"{state}; lost {len(lost)}, duplicated {len(duplicated)}")
    assert last_sequence == batches * rows - 1 and forged == NO_ERROR
    assert out_of_order and metrics["record-retry-total"] >= rows and metrics["record-error-total"] == 0
    assert grants(caplog) == [(first.producer_id, first.epoch), (second.producer_id, second.epoch)]
    assert second.producer_id != first.producer_id and second.epoch == 0
    assert state[second.producer_id] == BrokerProducer(second.producer_id, 0, batches * rows - 1)  # from 0
    assert not lost and not duplicated
    assert [r.value for r in records] == acked[:batches * rows] + [b"forged"] + acked[batches * rows:]
