"""partitioner.availability.timeout.ms (KIP-794): a node that took no data for that long is left out of sticky
draws. Deterministic: the sender is stepped against the scripted client with explicit ``now_ms``."""

from __future__ import annotations

from typing import Any

import numpy as np

from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.node_availability import NodeAvailability, sticky_candidates
from spark_kafka_sink.producer.partitioner import Partitioner
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.sender import Sender
from tests.producer.fake_client import FakeClient

LEADERS = {("t", 0): 1, ("t", 1): 2, ("t", 2): 1, ("t", 3): 2}


def sender_with_node_2_down(**options: Any) -> tuple[Sender, RecordAccumulator]:
    config = ProducerConfig.from_dict({"bootstrap.servers": "broker1:9001", "linger.ms": 0,
                                       "enable.idempotence": False, **options})
    client = FakeClient(LEADERS)
    client.down.add(2)  # its connection never comes up: data for its partitions waits
    acc = RecordAccumulator.from_config(config)
    return Sender(client, acc, config), acc


def test_a_node_that_takes_no_data_for_the_timeout_becomes_unavailable() -> None:
    sender, acc = sender_with_node_2_down(**{"partitioner.availability.timeout.ms": 200})
    for tp in (TopicPartition("t", 0), TopicPartition("t", 1)):
        acc.append(tp, 0, None, b"v", (), 0, 1000)
    sender.run_once(0)
    assert sender.node_availability.unavailable == frozenset()
    sender.run_once(200)  # waited exactly the timeout: not yet (Java: more than the timeout)
    assert sender.node_availability.unavailable == frozenset()
    sender.run_once(201)
    assert sender.node_availability.unavailable == frozenset({2})
    print("node 2 left out of sticky draws 201 ms after its data started waiting (timeout 200 ms)")


def test_off_by_default_and_without_adaptive_partitioning() -> None:
    for options in ({}, {"partitioner.availability.timeout.ms": 200,
                         "partitioner.adaptive.partitioning.enable": False}):
        sender, acc = sender_with_node_2_down(**options)
        acc.append(TopicPartition("t", 1), 0, None, b"v", (), 0, 1000)
        sender.run_once(0)
        sender.run_once(10_000)
        assert sender.node_availability.unavailable == frozenset(), options


def test_a_node_that_drains_again_is_available_again() -> None:
    nodes = NodeAvailability(100)
    nodes.record(1, 0, drained=True)
    nodes.record(1, 101, drained=False)
    stalled = nodes.unavailable
    assert stalled == frozenset({1})
    nodes.record(1, 102, drained=False)
    assert nodes.unavailable is stalled  # replaced only when it changes (readers cache by identity)
    nodes.record(1, 150, drained=True)
    assert nodes.unavailable == frozenset()


def test_sticky_candidates_leave_out_unavailable_leaders_and_fall_back_to_all_led() -> None:
    leaders: dict[int, int | None] = {0: 1, 1: 2, 2: 1, 3: 2, 4: None}
    assert sticky_candidates([0, 1, 2, 3, 4], leaders, frozenset({2})) == [0, 2]
    assert sticky_candidates([0, 1, 2, 3, 4], leaders, frozenset({1, 2})) == [0, 1, 2, 3]  # none left: all led
    assert sticky_candidates([0, 1, 2, 3], leaders, frozenset()) is None  # every partition qualifies


def test_sticky_draws_never_pick_an_excluded_partition() -> None:
    partitioner = Partitioner(100, rng=np.random.default_rng(7))
    available = sticky_candidates([0, 1, 2, 3], {p: LEADERS[("t", p)] for p in range(4)}, frozenset({2}))
    chosen = set()
    for _ in range(200):
        choice = partitioner.partition("t", None, 4, available=available)
        chosen.add(choice.partition)
        partitioner.on_sticky_append("t", choice.partition, 200, True)  # a full batch: the next record redraws
    sizes = np.full(1000, 60, dtype=np.int64)
    chosen |= set(partitioner.partition_arrow("t", None, None, sizes, 4, available).tolist())
    assert chosen == {0, 2}
