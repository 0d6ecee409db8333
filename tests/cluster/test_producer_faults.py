"""The producer on a 3-node cluster (replication 3, min.insync.replicas=2) while nodes die, come back and hand
over leadership. What was acknowledged is read back with confluent-kafka (read_committed); each test prints
records lost and duplicated and how long recovery took."""

from __future__ import annotations

import os
import signal
import time
import uuid

import pyarrow as pa
import pytest
from confluent_kafka import Consumer, ElectionType, TopicPartition

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.producer import ConsumerGroupMetadata, end_transaction
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.cluster.faults import (
    PacedWriter,
    admin_for,
    check_ids,
    end_offsets,
    group_coordinator,
    leader_of,
    new_topic,
    partition_state,
    read_all,
    transaction_coordinator,
    wait_full_isr,
)
from tests.conftest import pause_process, wait_for

pytestmark = pytest.mark.cluster

PARTITIONS = 3


@pytest.mark.parametrize("fault", ["SIGKILL", "SIGSTOP"])
@pytest.mark.parametrize(("mode", "rate", "enough"), [("send_batch", 15_000, 5), ("send", 2_000, 200)])
def test_leader_lost_and_back_while_writing(cluster3: KafkaCluster, fault: str, mode: str, rate: float,
                                            enough: int) -> None:
    """Partition 0's leader is lost mid-write and comes back later: SIGKILLed and started again, or frozen with
    SIGSTOP (a long GC pause, a hung VM: its sockets stay open, nothing answers; the requests in flight to it time
    out after request.timeout.ms) and resumed with SIGCONT. The controller elects another leader, the producer
    goes on there, the node rejoins as a follower. Every acknowledged record is there once, in order per
    partition, and no send failed (delivery.timeout.ms outlasts the failover)."""
    topic = new_topic(cluster3, PARTITIONS)
    options = {"request.timeout.ms": 5000} if fault == "SIGSTOP" else {}
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 5,
                              **options})
    writer = PacedWriter(producer, topic, PARTITIONS, mode, rate).start()
    frozen: int | None = None
    try:
        wait_for("the first acknowledgements", lambda: writer.acked_after(0.0) >= enough)
        victim = leader_of(cluster3, topic, 0)
        lost_at = time.monotonic()
        if fault == "SIGKILL":
            cluster3.kill_node(victim)
        else:
            process = cluster3.nodes[victim].process
            assert process is not None
            pause_process(process.pid)
            frozen = process.pid
        election_s = wait_for("a new leader of partition 0",
                              lambda: leader_of(cluster3, topic, 0) not in (victim, -1))
        wait_for("acknowledgements after the fault", lambda: writer.acked_after(lost_at) >= enough)
        recovery_s = writer.recovery_after(lost_at)
        if frozen is None:
            cluster3.start_node(victim)
        else:
            os.kill(frozen, signal.SIGCONT)
            frozen = None
        back_at = time.monotonic()
        rejoin_s = wait_full_isr(cluster3, topic, range(PARTITIONS))
        wait_for("acknowledgements after the node came back", lambda: writer.acked_after(back_at) >= enough)
    finally:
        if frozen is not None:
            os.kill(frozen, signal.SIGCONT)
        writer.stop()
        producer.close()
    assert writer.errors() == [], writer.errors()[:3]
    acked = writer.acked_ids()
    verdict = check_ids(read_all(cluster3, topic), acked, PARTITIONS)
    verdict.report(f"{mode}: leader {victim} lost ({fault}) and back", recovery_s)
    print(f"  new leader elected {election_s:.1f} s after the {fault}, node {victim} back in sync {rejoin_s:.1f} s "
          f"after it came back; {len(acked)} records acknowledged")
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)
    assert verdict.read == len(acked)


def test_preferred_leader_election_during_a_write(cluster3: KafkaCluster) -> None:
    """Leadership moves back to the preferred replicas while records flow: sends acknowledged by the old leader of
    partition 0 before the election, and sends queued only once the election is over acknowledged by the new one
    (the producer follows the metadata; a NOT_LEADER_OR_FOLLOWER answer in between is retried); no send fails."""
    topic, preferred = _topic_led_away_from_its_preferred_replica(cluster3)
    old_leader = leader_of(cluster3, topic, 0)
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 5})
    writer = PacedWriter(producer, topic, PARTITIONS, "send_batch", 20_000).start()
    try:
        wait_for("the first acknowledgements", lambda: writer.acked_after(0.0) >= 5)
        moved_at = time.monotonic()
        acked_by_old_leader = writer.acked_after(0.0)  # every partition, 0 included, in each send_batch unit
        _elect_preferred_leaders(cluster3, topic, preferred)
        elected_at = time.monotonic()  # partition 0 is led by the preferred replica from here on
        wait_for("acknowledgements of sends queued after the election",
                 lambda: writer.acked_after(elected_at) >= 5)
        recovery_s = writer.recovery_after(moved_at)
    finally:
        writer.stop()
        producer.close()
    assert writer.errors() == [], writer.errors()[:3]
    assert old_leader != preferred and acked_by_old_leader >= 5 and writer.acked_after(elected_at) >= 5
    retries = producer.metrics().get("record-retry-total", 0.0)
    verdict = check_ids(read_all(cluster3, topic), writer.acked_ids(), PARTITIONS)
    verdict.report(f"preferred leader election to node {preferred} during send_batch", recovery_s)
    print(f"  records retried by the producer: {retries:.0f}")
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)


def _topic_led_away_from_its_preferred_replica(cluster3: KafkaCluster) -> tuple[str, int]:
    """A new topic whose partition 0 is led by another node than its preferred replica (returned)."""
    topic = new_topic(cluster3, PARTITIONS)
    _, replicas, _ = partition_state(cluster3, topic, 0)
    preferred = replicas[0]
    # A controlled shutdown of the preferred replica moves its leaderships away; they stay away after its restart
    # (the test cluster does not rebalance leaders on its own).
    cluster3.stop_node(preferred)
    cluster3.start_node(preferred)
    wait_full_isr(cluster3, topic, range(PARTITIONS))
    assert leader_of(cluster3, topic, 0) != preferred
    return topic, preferred


def _elect_preferred_leaders(cluster3: KafkaCluster, topic: str, preferred: int) -> None:
    """Move the topic's leaderships back to their preferred replicas; return once partition 0 is led by
    ``preferred``."""
    admin = admin_for(cluster3)  # kept alive until the future completes
    results = admin.elect_leaders(
        ElectionType.PREFERRED, [TopicPartition(topic, p) for p in range(PARTITIONS)]).result(timeout=60)
    assert results[TopicPartition(topic, 0)] is None, results
    wait_for("partition 0 led by its preferred replica", lambda: leader_of(cluster3, topic, 0) == preferred)


def test_a_new_leader_named_in_the_produce_answer_is_used_without_waiting_kip_951(cluster3: KafkaCluster) -> None:
    """The old leader answers NOT_LEADER_OR_FOLLOWER naming the new one (Produce v10+): the producer sends the
    retry there at once, although retry.backoff.ms (30 s) holds back both the retry's backoff and the next metadata
    refresh. Before KIP-951 support every unit caught in the move waited ~30 s (twice: 60 s).

    One request in flight per connection: with five, batches sent behind the first to the old leader come back
    after a newer one went to the new leader (which then answers OUT_OF_ORDER_SEQUENCE_NUMBER and waits out the
    backoff, as in Java), and that would be measured instead."""
    topic, preferred = _topic_led_away_from_its_preferred_replica(cluster3)
    # A new cluster answers the first InitProducerId COORDINATOR_NOT_AVAILABLE while it creates its transaction
    # state topic, and a producer waits out its retry backoff before asking again, as Java's does. An idempotent
    # producer with the default backoff gets the cluster past that first, so the measured producer's own
    # InitProducerId is answered at once instead of after one or two 30 s backoffs.
    warm_up = new_topic(cluster3, 1)
    with KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all"}) as first:
        first.send(warm_up, b"creates the transaction state topic").result(timeout=120)
    backoff_ms = 30_000
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 5,
                              "retry.backoff.ms": backoff_ms, "retry.backoff.max.ms": backoff_ms,
                              "max.in.flight.requests.per.connection": 1})
    # The producer's start is not measured: the writer's rows must not queue up behind its InitProducerId.
    producer.send(warm_up, b"warm-up").result(timeout=150)
    writer = PacedWriter(producer, topic, PARTITIONS, "send_batch", 20_000).start()
    try:
        wait_for("the first acknowledgements", lambda: writer.acked_after(0.0) >= 5)
        _elect_preferred_leaders(cluster3, topic, preferred)
        moved = time.monotonic()
        wait_for("acknowledgements after the move", lambda: writer.acked_after(moved) >= 5)
    finally:
        writer.stop()
        producer.close()
    assert writer.errors() == [], writer.errors()[:3]
    retries = producer.metrics().get("record-retry-total", 0.0)
    assert retries > 0, "no record met the old leader: the move was not exercised"
    slowest = max(u.completed_at - u.queued_at for u in writer.snapshot())
    print(f"  records retried: {retries:.0f}; the slowest unit took {slowest:.2f} s (retry.backoff.ms={backoff_ms})")
    assert slowest < backoff_ms / 1000 / 3, f"a unit waited {slowest:.1f} s: the retry waited out its backoff"
    verdict = check_ids(read_all(cluster3, topic), writer.acked_ids(), PARTITIONS)
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)


def test_two_of_three_nodes_down_with_acks_all(cluster3: KafkaCluster) -> None:
    """Two nodes SIGKILLed: acks=all cannot be met. Every send fails after delivery.timeout.ms with an error that
    names it (or NOT_ENOUGH_REPLICAS); everything acknowledged before is there once after the nodes return."""
    topic = new_topic(cluster3, PARTITIONS)
    delivery_timeout_ms = 6000
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "acks": "all", "linger.ms": 0,
                              "request.timeout.ms": 2000, "delivery.timeout.ms": delivery_timeout_ms})
    try:
        before = [producer.send(topic, value=str(i).encode(), partition=i % PARTITIONS) for i in range(300)]
        producer.flush(60)
        assert all(f.exception() is None for f in before)
        survivor = leader_of(cluster3, topic, 0)  # partition 0 keeps its leader, which has no in-sync followers
        victims = [n for n in (1, 2, 3) if n != survivor]
        for node in victims:
            cluster3.kill_node(node)
        sent_at = time.monotonic()
        during = [producer.send(topic, value=str(i).encode(), partition=i % PARTITIONS) for i in range(300, 600)]
        table = pa.table({"value": pa.array([str(i).encode() for i in range(600, 900)], pa.binary()),
                          "partition": pa.array([i % PARTITIONS for i in range(600, 900)], pa.int32())})
        batch_future = producer.send_batch(topic, table)
        wait_for("every send during the outage to complete",
                 lambda: batch_future.done() and all(f.done() for f in during), timeout=delivery_timeout_ms / 1000 + 60)
        failed_after_s = time.monotonic() - sent_at
    finally:
        producer.close(0)
    errors = [f.exception() for f in during] + [batch_future.exception()]
    assert all(e is not None for e in errors), "a send was acknowledged with two of three replicas down"
    messages = {str(e) for e in errors}
    assert all("delivery.timeout.ms" in m or "NOT_ENOUGH_REPLICAS" in m for m in messages), sorted(messages)[:3]
    assert failed_after_s >= delivery_timeout_ms / 1000 * 0.9, "failed before delivery.timeout.ms"
    for node in victims:
        cluster3.start_node(node)
    recovery_s = wait_full_isr(cluster3, topic, range(PARTITIONS))
    failed = set(range(300, 900))
    records = read_all(cluster3, topic)
    verdict = check_ids(records, set(range(300)), PARTITIONS, allowed_extra=failed)
    verdict.report(f"nodes {victims} SIGKILLed, acks=all", recovery_s)
    late = len({int(r.value or b"-1") for r in records} & failed)
    print(f"  all {len(errors)} sends during the outage failed after {failed_after_s:.1f} s "
          f"(delivery.timeout.ms={delivery_timeout_ms}); {late} of the {len(failed)} failed records were written "
          f"anyway once the replicas returned (the at-least-once ambiguity of a timed-out send); e.g. "
          f"{sorted(messages)[0]}")
    assert (verdict.lost, verdict.duplicated, verdict.extra) == (0, 0, 0)


@pytest.mark.parametrize("ending", ["commit", "abort"])
def test_transaction_coordinator_sigkilled_mid_transaction(cluster3: KafkaCluster, ending: str) -> None:
    """The node coordinating the producer's transaction dies between its sends. Records go to partitions 3-5 only
    after the kill, so AddPartitionsToTxn needs the new coordinator. Each ending is forced: the commit goes through
    the new coordinator and every record is visible once; the abort (as a user's error handling would call it)
    leaves nothing visible, and a re-run with the same transactional.id then writes every record once. Either way
    nothing is left open."""
    topic = new_topic(cluster3, 6)
    tid = f"coord-kill-{uuid.uuid4().hex[:8]}"
    first = range(0, 30_000)
    second = range(30_000, 60_000)

    def table(ids: range, partitions: list[int]) -> pa.Table:
        return pa.table({"value": pa.array([str(i).encode() for i in ids], pa.binary()),
                         "partition": pa.array([partitions[i % 3] for i in ids], pa.int32())})

    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid})
    try:
        producer.init_transactions(60)  # creates __transaction_state on first use
        coordinator = transaction_coordinator(cluster3, tid)
        producer.begin_transaction()
        producer.send_batch(topic, table(first, [0, 1, 2])).result(60)
        killed_at = time.monotonic()
        cluster3.kill_node(coordinator)
        producer.send_batch(topic, table(second, [3, 4, 5])).result(120)
        if ending == "commit":
            producer.commit_transaction(120)
        else:
            producer.abort_transaction(120)
        recovery_s = time.monotonic() - killed_at
    finally:
        producer.close(0)
    new_coordinator = transaction_coordinator(cluster3, tid)
    assert new_coordinator != coordinator
    open_txn = wait_for("no open transaction (last stable offset = log end offset)", lambda: end_offsets(
        cluster3, topic, "read_committed") == end_offsets(cluster3, topic, "read_uncommitted"), timeout=120)
    records = read_all(cluster3, topic)
    expected = set(first) | set(second)
    if ending == "abort":
        assert records == [], f"an aborted transaction left {len(records)} records visible"
        with KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid}) as rerun:
            rerun.init_transactions(60)
            rerun.begin_transaction()
            rerun.send_batch(topic, table(first, [0, 1, 2])).result(60)
            rerun.send_batch(topic, table(second, [3, 4, 5])).result(60)
            rerun.commit_transaction(60)
        records = read_all(cluster3, topic)
    verdict = check_ids(records, expected)
    verdict.report(f"transaction coordinator {coordinator} SIGKILLed mid-transaction, then {ending}", recovery_s)
    print(f"  new coordinator: node {new_coordinator}; nothing left open {open_txn:.1f} s after the {ending}")
    assert (verdict.lost, verdict.duplicated, verdict.extra) == (0, 0, 0)
    assert verdict.read == len(expected)


def test_transaction_coordinator_sigstopped_during_commit(cluster3: KafkaCluster) -> None:
    """The transaction coordinator is frozen with SIGSTOP just before commit_transaction(): the EndTxn request waits
    on a node that answers nothing until request.timeout.ms, then goes to the coordinator elected in its place, and
    the commit completes there. Every record is visible once, nothing is left open, and after SIGCONT the old
    coordinator (which still holds the unanswered EndTxn in its socket) changes nothing."""
    topic = new_topic(cluster3, PARTITIONS)
    tid = f"coord-stop-{uuid.uuid4().hex[:8]}"
    ids = range(0, 30_000)
    table = pa.table({"value": pa.array([str(i).encode() for i in ids], pa.binary()),
                      "partition": pa.array([i % PARTITIONS for i in ids], pa.int32())})
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid,
                              "request.timeout.ms": 5000})
    paused_pid = None
    try:
        producer.init_transactions(60)
        coordinator = transaction_coordinator(cluster3, tid)
        producer.begin_transaction()
        producer.send_batch(topic, table).result(60)
        process = cluster3.nodes[coordinator].process
        assert process is not None
        pause_process(process.pid)
        paused_pid, paused_at = process.pid, time.monotonic()
        producer.commit_transaction(120)
        commit_s = time.monotonic() - paused_at
        new_coordinator = transaction_coordinator(cluster3, tid)
        os.kill(paused_pid, signal.SIGCONT)
        paused_pid = None
    finally:
        if paused_pid is not None:
            os.kill(paused_pid, signal.SIGCONT)
        producer.close(0)
    wait_full_isr(cluster3, topic, range(PARTITIONS))
    open_s = wait_for("no open transaction (last stable offset = log end offset)", lambda: end_offsets(
        cluster3, topic, "read_committed") == end_offsets(cluster3, topic, "read_uncommitted"), timeout=120)
    verdict = check_ids(read_all(cluster3, topic), set(ids), PARTITIONS)
    verdict.report(f"transaction coordinator {coordinator} frozen with SIGSTOP during the commit", commit_s)
    print(f"  the commit completed {commit_s:.1f} s after the pause, on node {new_coordinator}; nothing open "
          f"{open_s:.1f} s after SIGCONT")
    assert new_coordinator != coordinator
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)


def test_end_transaction_from_another_client_with_the_coordinator_sigstopped(cluster3: KafkaCluster) -> None:
    """What the Spark driver does for each task: end a transaction another producer left open, from its own
    client (``end_transaction``), while the coordinator is frozen with SIGSTOP. The EndTxn is abandoned after
    request.timeout.ms, the coordinator looked up again, and the commit lands on the node elected in its place."""
    topic = new_topic(cluster3, PARTITIONS)
    tid = f"end-stop-{uuid.uuid4().hex[:8]}"
    ids = range(0, 20_000)
    table = pa.table({"value": pa.array([str(i).encode() for i in ids], pa.binary()),
                      "partition": pa.array([i % PARTITIONS for i in ids], pa.int32())})
    with KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid}) as task:
        task.init_transactions(60)
        task.begin_transaction()
        task.send_batch(topic, table).result(60)
        identity = task.transaction_identity()
        task.close(abort_open_transaction=False)  # as the sink's tasks: the transaction stays open for the driver
    coordinator = transaction_coordinator(cluster3, tid)
    process = cluster3.nodes[coordinator].process
    assert process is not None
    pause_process(process.pid)
    paused_at = time.monotonic()
    try:
        end_transaction({"bootstrap.servers": cluster3.bootstrap_servers, "request.timeout.ms": 5000}, identity,
                        commit=True, timeout_s=120)
        commit_s = time.monotonic() - paused_at
        new_coordinator = transaction_coordinator(cluster3, tid)
    finally:
        os.kill(process.pid, signal.SIGCONT)
    wait_full_isr(cluster3, topic, range(PARTITIONS))
    verdict = check_ids(read_all(cluster3, topic), set(ids), PARTITIONS)
    verdict.report(f"EndTxn from another client, coordinator {coordinator} frozen with SIGSTOP", commit_s)
    print(f"  committed {commit_s:.1f} s after the pause, on node {new_coordinator}")
    assert new_coordinator != coordinator
    assert (verdict.lost, verdict.duplicated, verdict.out_of_order, verdict.extra) == (0, 0, 0, 0)


def _group_coordinated_elsewhere(cluster3: KafkaCluster, tid: str, node: int) -> str:
    """A consumer group id whose coordinator is not ``node``. Earlier tests on this cluster may have left every
    ``__consumer_offsets`` leadership on one node (it does not rebalance leaders on its own): if no group of 60
    draws is coordinated elsewhere, the offsets topic's leaderships go back to their preferred replicas first."""
    groups = [f"g-{tid}-{i}" for i in range(60)]  # 50 offsets partitions: 60 draws reach nearly every one
    found: list[str] = []

    def elsewhere() -> bool:
        found[:] = [g for g in groups if group_coordinator(cluster3, g) != node][:1]
        return bool(found)

    if not elsewhere():
        admin = admin_for(cluster3)  # kept alive until the future completes
        offsets = admin.list_topics("__consumer_offsets", timeout=10).topics["__consumer_offsets"]
        admin.elect_leaders(ElectionType.PREFERRED, [TopicPartition("__consumer_offsets", p)
                                                     for p in offsets.partitions]).result(timeout=60)
        wait_for(f"a consumer group coordinated by a node other than {node}", elsewhere, timeout=60)
    return found[0]


def test_the_group_coordinator_sigkilled_before_send_offsets_to_transaction(cluster3: KafkaCluster) -> None:
    """The node coordinating a consumer group dies between two transactions that commit the group's offsets (its
    coordinator was found and remembered in the first). The second's TxnOffsetCommit meets the dead node, looks the
    group's coordinator up again and lands on the node elected in its place; the commit makes both transactions'
    records and the second's offsets visible (read with confluent-kafka), and nothing is left open."""
    source, sink = new_topic(cluster3, 3), new_topic(cluster3, 3)
    tid = f"offsets-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer({"bootstrap.servers": cluster3.bootstrap_servers, "transactional.id": tid,
                              "request.timeout.ms": 5000})
    try:
        producer.init_transactions(60)
        producer.begin_transaction()  # creates __consumer_offsets on first use
        producer.send_offsets_to_transaction({(source, 0): 1}, f"warm-up-{tid}", 60)
        producer.commit_transaction(60)
        txn_coordinator = transaction_coordinator(cluster3, tid)
        group = _group_coordinated_elsewhere(cluster3, tid, txn_coordinator)  # only the group's coordinator dies
        producer.begin_transaction()
        producer.send_batch(sink, pa.table({"value": [b"first-%d" % i for i in range(100)]})).result(60)
        producer.send_offsets_to_transaction({(source, p): 100 + p for p in range(3)}, ConsumerGroupMetadata(group))
        producer.commit_transaction(60)
        coordinator = group_coordinator(cluster3, group)
        producer.begin_transaction()
        producer.send_batch(sink, pa.table({"value": [b"second-%d" % i for i in range(100)]})).result(60)
        killed_at = time.monotonic()
        cluster3.kill_node(coordinator)
        producer.send_offsets_to_transaction({(source, p): 200 + p for p in range(3)}, group, 120)
        producer.commit_transaction(120)
        recovery_s = time.monotonic() - killed_at
    finally:
        producer.close(0)
    new_coordinator = group_coordinator(cluster3, group)
    consumer = Consumer({"bootstrap.servers": cluster3.bootstrap_servers, "group.id": group,
                         "isolation.level": "read_committed"})
    try:
        committed = consumer.committed([TopicPartition(source, p) for p in range(3)], timeout=60)
    finally:
        consumer.close()
    values = sorted(r.value or b"" for r in read_all(cluster3, sink))
    print(f"\n[group coordinator {coordinator} SIGKILLed before send_offsets_to_transaction] offsets and commit "
          f"landed {recovery_s:.1f} s after the kill, on node {new_coordinator}")
    assert new_coordinator != coordinator
    assert {tp.partition: tp.offset for tp in committed} == {0: 200, 1: 201, 2: 202}
    assert values == sorted([b"first-%d" % i for i in range(100)] + [b"second-%d" % i for i in range(100)])
    wait_for("no open transaction", lambda: end_offsets(cluster3, sink, "read_committed") == end_offsets(
        cluster3, sink, "read_uncommitted"), timeout=60)
