from __future__ import annotations

import ctypes
import glob
import os
import pickle
from collections import Counter
from typing import Any

import confluent_kafka
import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.errors import ConfigError, PartitionOutOfRangeError
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.partitioner import Partitioner, StickyPartitioner, partition_arrow
from spark_kafka_sink.protocol.murmur2 import murmur2

# Java's Utils.murmur2 on these keys (kafka-clients UtilsTest), as signed int32.
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def rng(seed: int = 7) -> np.random.Generator:
    return np.random.default_rng(seed)


def random_keys(count: int, seed: int = 1) -> list[bytes]:
    gen = np.random.default_rng(seed)
    lengths = gen.integers(0, 65, size=count)
    blob = gen.integers(0, 256, size=int(lengths.sum()), dtype=np.uint8).tobytes()
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    return [blob[offsets[i]:offsets[i + 1]] for i in range(count)]


@pytest.mark.parametrize("key,expected", JAVA_MURMUR2.items())
def test_keyed_partition_matches_java_golden_vectors(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected
    p = Partitioner(16384)
    for n in (1, 3, 7, 1000):
        assert p.partition("t", key, n) == ((expected & 0x7FFFFFFF) % n, False)


# ----------------------------------------------------------------------------- cross-check with confluent-kafka


def _librdkafka_murmur2_random() -> Any:
    """librdkafka's own `murmur2_random` partitioner function, from the library confluent-kafka ships and uses."""
    libs_dir = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    paths = glob.glob(os.path.join(libs_dir, "librdkafka*.so*"))
    # No skip when it is missing: the cross-check is the point of the test (the project runs no skipped tests).
    assert paths, f"confluent-kafka's bundled librdkafka not found in {libs_dir}: install the manylinux wheel"
    fn = ctypes.CDLL(paths[0]).rd_kafka_msg_partitioner_murmur2_random
    fn.restype = ctypes.c_int32
    # (topic handle, key, key length, partition count, topic opaque, message opaque); the topic handle is only
    # read for null keys (random), which we never pass.
    fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int32, ctypes.c_void_p,
                   ctypes.c_void_p]
    return fn


def test_100k_keyed_records_land_where_confluent_kafka_murmur2_random_puts_them() -> None:
    fn = _librdkafka_murmur2_random()
    keys = random_keys(100_000)
    arrow_keys = pa.array(keys, pa.binary())
    p = Partitioner(16384, rng=rng())
    sizes = np.full(len(keys), 10, np.int64)
    for n in (3, 7, 64, 1000):
        theirs = np.array([fn(None, k, len(k), n, None, None) for k in keys], np.int32)
        ours_vectorized = p.partition_arrow("t", arrow_keys, None, sizes, n)
        np.testing.assert_array_equal(ours_vectorized, theirs)
        if n == 7:  # the scalar path too (slower: once is enough)
            ours_scalar = np.array([p.partition("t", k, n).partition for k in keys], np.int32)
            np.testing.assert_array_equal(ours_scalar, theirs)


def test_confluent_kafka_producer_delivery_partitions_agree() -> None:
    """End to end through confluent-kafka's real Producer against its in-process mock cluster (no broker): the
    partition in each delivery report equals ours. The mock auto-creates topics with 4 partitions."""
    producer = confluent_kafka.Producer({"test.mock.num.brokers": 1, "partitioner": "murmur2_random",
                                         "linger.ms": 5, "log_level": 0})
    keys = random_keys(3000, seed=2)
    delivered: dict[bytes, int] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None
        delivered[msg.key()] = msg.partition()

    for k in keys:
        producer.produce("xcheck", key=k, value=b"v", on_delivery=on_delivery)
    assert producer.flush(30) == 0
    n = len(producer.list_topics("xcheck", timeout=10).topics["xcheck"].partitions)
    p = Partitioner(16384)
    assert len(delivered) == len(set(keys))
    assert all(p.partition("xcheck", k, n).partition == part for k, part in delivered.items())


# ----------------------------------------------------------------------------- explicit, custom, ignore keys


def test_explicit_partition_honoured_and_checked() -> None:
    p = Partitioner(16384)
    assert p.partition("t", b"key", 5, explicit=4) == (4, False)
    with pytest.raises(PartitionOutOfRangeError, match=r"5 is not a partition of topic 't' \(it has 5"):
        p.partition("t", b"key", 5, explicit=5)
    with pytest.raises(PartitionOutOfRangeError, match="no partitions"):
        p.partition("t", None, 0)


def test_custom_partitioner() -> None:
    calls: list[tuple[str, bytes | None, int]] = []

    def by_length(topic: str, key: bytes | None, n: int) -> int:
        calls.append((topic, key, n))
        return len(key or b"") % n

    p = Partitioner(16384, custom=by_length)
    assert p.partition("t", b"abcd", 3) == (1, False)
    assert p.partition("t", b"abcd", 3, explicit=0) == (0, False)  # explicit wins, custom not asked
    assert calls == [("t", b"abcd", 3)]
    out = p.partition_arrow("t", pa.array(["a", None, "abc"]), pa.array([None, 2, None], pa.int32()),
                            np.ones(3, np.int64), 3)
    assert out.tolist() == [1, 2, 0]
    with pytest.raises(PartitionOutOfRangeError, match="partitioner.class chose 7"):
        Partitioner(1, custom=lambda t, k, n: 7).partition("t", None, 3)


def test_from_config() -> None:
    cfg = ProducerConfig.from_dict({"bootstrap.servers": "h:1", "partitioner.ignore.keys": "true",
                                    "batch.size": 500, "partitioner.adaptive.partitioning.enable": "false"})
    p = Partitioner.from_config(cfg)
    assert p.ignore_keys and p.sticky.batch_size == 500 and not p.sticky.adaptive
    assert p.partition("t", b"key", 10).sticky


def test_arrow_mixes_explicit_keyed_and_sticky_rows() -> None:
    n = 8
    keys = pa.array([b"k1", None, b"k2", None, b"k3", None])
    explicit = pa.array([None, None, 6, None, None, 1], pa.int32())
    sizes = np.full(6, 10, np.int64)
    sticky = StickyPartitioner(1000, rng=rng())
    out = partition_arrow(keys, explicit, sizes, n, "t", sticky)
    assert out.dtype == np.int32
    assert out[0] == (murmur2(b"k1") & 0x7FFFFFFF) % n and out[4] == (murmur2(b"k3") & 0x7FFFFFFF) % n
    assert out[2] == 6 and out[5] == 1
    assert out[1] == out[3]  # null keys: one sticky run
    with pytest.raises(PartitionOutOfRangeError, match="row 1: partition 9"):
        partition_arrow(None, pa.array([0, 9]), np.ones(2, np.int64), n, "t", sticky)
    ignoring = partition_arrow(keys, None, sizes, n, "u", StickyPartitioner(1000, rng=rng()), ignore_keys=True)
    assert len(set(ignoring.tolist())) == 1  # keys ignored: all sticky, 60 bytes fit one run


# ----------------------------------------------------------------------------- sticky


def runs(partitions: list[int]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for p in partitions:
        if out and out[-1][0] == p:
            out[-1] = (p, out[-1][1] + 1)
        else:
            out.append((p, 1))
    return out


def test_sticky_per_record_switches_after_batch_size_bytes_at_a_full_batch() -> None:
    p = Partitioner(1000, rng=rng())
    chosen = []
    for _ in range(2000):
        part, sticky = p.partition("t", None, 6)
        assert sticky
        chosen.append(part)
        p.on_sticky_append("t", part, 100, batch_is_full=True)
    # Every 10 records (1000 bytes) a new draw; a draw may repeat the partition, so count switches by position.
    assert all(len(set(chosen[i:i + 10])) == 1 for i in range(0, 2000, 10))
    counts = Counter(chosen)
    assert set(counts) == set(range(6))  # spread over all partitions
    assert max(counts.values()) < 2 * min(counts.values())


def test_sticky_per_record_waits_for_batch_boundary_up_to_twice_batch_size() -> None:
    p = Partitioner(1000, rng=rng())
    first = p.partition("t", None, 50).partition
    for _ in range(19):
        p.on_sticky_append("t", first, 100, batch_is_full=False)
        assert p.partition("t", None, 50).partition == first  # 1900 bytes: not full, below 2 x batch.size
    p.on_sticky_append("t", first, 100, batch_is_full=False)  # 2000 bytes: switch regardless
    p.on_sticky_append("t", first, 100, batch_is_full=True)  # stale report for the old partition: ignored
    nxt = p.partition("t", None, 50).partition
    p.on_sticky_append("t", nxt, 999, batch_is_full=True)
    assert p.partition("t", None, 50).partition == nxt  # 999 < batch.size: stays


class CyclingDraws:
    """Stands in for numpy's Generator: draws candidates in turn, so consecutive runs always differ."""

    def __init__(self) -> None:
        self.next = 0

    def choice(self, candidates: Any, size: int, p: Any = None) -> Any:
        picked = np.asarray(candidates)[(self.next + np.arange(size)) % len(candidates)]
        self.next += size
        return picked


def cycling_sticky(batch_size: int) -> StickyPartitioner:
    return StickyPartitioner(batch_size, rng=CyclingDraws())  # type: ignore[arg-type]


def test_sticky_arrow_runs_fill_batches_and_continue_across_calls() -> None:
    sticky = cycling_sticky(1000)
    out = partition_arrow(None, None, np.full(25, 100, np.int64), 40, "t", sticky)
    assert runs(out.tolist()) == [(0, 10), (1, 10), (2, 5)]
    more = partition_arrow(None, None, np.full(7, 100, np.int64), 40, "t", sticky)
    assert runs(more.tolist()) == [(2, 5), (3, 2)]  # 500 carried + 500 = one full batch, then a new run
    big = partition_arrow(None, None, np.array([5000, 10, 10]), 40, "t", sticky)
    assert runs(big.tolist()) == [(4, 1), (5, 2)]  # 20 carried + 5000 does not fit: a run of its own


def test_sticky_arrow_runs_are_maximal_batches_and_spread_over_all_partitions() -> None:
    batch_size = 16384
    sizes = np.random.default_rng(3).integers(50, 500, size=200_000).astype(np.int64)
    out = partition_arrow(None, None, sizes, 12, "t", cycling_sticky(batch_size))
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(out)) + 1, [len(out)]])
    run_bytes = np.add.reduceat(sizes, bounds[:-1])
    assert (run_bytes <= batch_size).all()
    assert (run_bytes[:-1] + sizes[bounds[1:-1]] > batch_size).all()  # each run stops only when full

    counts = np.bincount(partition_arrow(None, None, sizes, 12, "t", StickyPartitioner(batch_size, rng=rng())),
                         minlength=12)
    assert (counts > 0).all() and counts.max() < 1.5 * counts.min()  # random draws: all partitions, evenly


def test_sticky_draws_only_available_partitions_and_adapts_to_load() -> None:
    sticky = StickyPartitioner(100, rng=rng())
    out = partition_arrow(None, None, np.full(5000, 100, np.int64), 10, "t", sticky, available=[2, 5, 7])
    assert set(out.tolist()) == {2, 5, 7}

    sticky = StickyPartitioner(100, rng=rng())
    sticky.update_partition_load("t", {0: 99, 1: 0})  # partition 0 has a long queue
    out = partition_arrow(None, None, np.full(10_000, 100, np.int64), 2, "t", sticky)
    share_0 = float(np.mean(out == 0))
    assert share_0 < 0.05  # weights 1 : 100

    uniform = StickyPartitioner(100, adaptive=False, rng=rng())
    uniform.update_partition_load("t", {0: 99, 1: 0})
    out = partition_arrow(None, None, np.full(10_000, 100, np.int64), 2, "t", uniform)
    assert 0.4 < float(np.mean(out == 0)) < 0.6


def test_per_record_and_arrow_share_sticky_state() -> None:
    p = Partitioner(1000, rng=CyclingDraws())  # type: ignore[arg-type]
    part = p.partition("t", None, 20).partition
    p.on_sticky_append("t", part, 300, batch_is_full=False)
    out = p.partition_arrow("t", None, None, np.full(7, 100, np.int64), 20)
    assert out.tolist() == [part] * 7  # 300 + 700 bytes fill the batch...
    assert p.partition("t", None, 20).partition != part  # ...so the next record starts a new run


ROUND_ROBIN = "org.apache.kafka.clients.producer.RoundRobinPartitioner"


def java_named(name: str) -> Partitioner:
    return Partitioner.from_config(ProducerConfig.from_dict({"bootstrap.servers": "h:9092", "partitioner.class": name}))


def test_javas_round_robin_partitioner_by_its_class_name() -> None:
    """Keys ignored, every partition in turn per topic, over the record path and whole Arrow batches alike;
    explicit partitions still win; only partitions with a leader when the caller knows them (as Java's)."""
    p = java_named(ROUND_ROBIN)
    keys = pa.array([b"same-key"] * 6)
    assert p.partition_arrow("t", keys, None, np.full(6, 10), 4).tolist() == [0, 1, 2, 3, 0, 1]
    assert [p.partition("t", b"same-key", 4).partition for _ in range(3)] == [2, 3, 0]
    assert p.partition("other", b"k", 4).partition == 0  # a counter per topic
    explicit = pa.array([None, 3, None, None], pa.int32())
    assert p.partition_arrow("t", keys.slice(0, 4), explicit, np.full(4, 10), 4).tolist() == [1, 3, 2, 3]
    assert p.partition_arrow("t", None, None, np.full(4, 10), 4, available=[1, 3]).tolist() == [1, 3, 1, 3]
    assert p.partition("t", None, 4, available=[2]).partition == 2


def test_javas_deprecated_partitioners_by_their_class_names() -> None:
    """UniformStickyPartitioner: sticky for keyed records too (partitioner.ignore.keys=true since Kafka 3.3);
    DefaultPartitioner: the built-in (murmur2 for keys)."""
    sticky = java_named("org.apache.kafka.clients.producer.UniformStickyPartitioner")
    assert sticky.ignore_keys and sticky.custom is None
    keyed = pa.array([b"a", b"b", b"c", b"d"])
    assert len(set(sticky.partition_arrow("t", keyed, None, np.full(4, 10), 12).tolist())) == 1
    default = java_named("org.apache.kafka.clients.producer.internals.DefaultPartitioner")
    assert not default.ignore_keys and default.custom is None
    assert default.partition("t", b"a", 12).partition == (murmur2(b"a") & 0x7FFFFFFF) % 12


def test_another_java_partitioner_class_is_refused_with_what_to_do() -> None:
    with pytest.raises(ConfigError, match="looks like a Java class, which cannot run here: give a Python object"
                       ) as info:
        java_named("com.acme.kafka.RegionPartitioner")
    assert info.value.key == "partitioner.class" and "RoundRobinPartitioner" in str(info.value)


def test_java_partitioners_survive_the_trip_to_a_spark_task() -> None:
    """The sink pickles its producer options to the executors: the stand-ins come back as what they stand for."""
    for name in (ROUND_ROBIN, "org.apache.kafka.clients.producer.UniformStickyPartitioner"):
        config = ProducerConfig.from_dict({"bootstrap.servers": "h:9092", "partitioner.class": name})
        back = pickle.loads(pickle.dumps(config))
        assert back == config
        assert Partitioner.from_config(back).ignore_keys == Partitioner.from_config(config).ignore_keys


def test_the_per_record_draw_is_uniform_over_the_available_or_weighted_by_load() -> None:
    """``current`` draws one partition per batch (without numpy's choice): the same law as the Arrow path's draws."""

    def draws(sticky: StickyPartitioner, partitions: int, available: list[int] | None = None) -> list[int]:
        picked = []
        for _ in range(6000):
            picked.append(sticky.current("t", partitions, available))
            sticky.on_append("t", picked[-1], 1000, batch_is_full=True)  # a full batch: the next record draws
        return picked

    spread = np.bincount(draws(StickyPartitioner(100, rng=rng()), 12, [2, 5, 7]), minlength=12)
    assert set(np.flatnonzero(spread).tolist()) == {2, 5, 7} and spread.max() < 1.2 * spread[spread > 0].min()

    weighted = StickyPartitioner(100, rng=rng())
    weighted.update_partition_load("t", {0: 99, 1: 0})  # partition 0 has a long queue: weights 1 : 100
    assert float(np.mean(np.array(draws(weighted, 2)) == 0)) < 0.03

    uniform = StickyPartitioner(100, adaptive=False, rng=rng())
    uniform.update_partition_load("t", {0: 99, 1: 0})
    assert 0.45 < float(np.mean(np.array(draws(uniform, 2)) == 0)) < 0.55
