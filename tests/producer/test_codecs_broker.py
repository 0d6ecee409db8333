"""Every compression codec through the public producer (``send`` and ``send_batch``), idempotent and
transactional, read back byte for byte by librdkafka from the session's broker -- part of the core set that
``make test-versions`` runs against each Kafka release."""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
@pytest.mark.parametrize("transactional", [False, True], ids=["idempotent", "transactional"])
def test_each_codec_reads_back_byte_for_byte(codec: str, transactional: bool, bootstrap: str,
                                             topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, "max.block.ms": 20_000}
    if transactional:
        config["transactional.id"] = f"codec-{topic}"
    singles = [(b"k%d" % i, (b"%s-%d-" % (codec.encode(), i)) * (i % 40)) for i in range(200)]
    table = pa.table({"key": [b"b%d" % i for i in range(500)],
                      "value": [(b"row-%d-" % i) * (i % 30) for i in range(500)]})
    with KafkaProducer(config) as producer:
        if transactional:
            producer.init_transactions()
            producer.begin_transaction()
        for key, value in singles:
            producer.send(topic, value, key=key, headers=[("codec", codec.encode())])
        producer.send_batch(topic, table).result(timeout=60)
        if transactional:
            producer.commit_transaction()
        producer.flush()
    got = readback(topic)
    assert sorted((r.key, r.value) for r in got) == sorted(
        singles + list(zip(table.column("key").to_pylist(), table.column("value").to_pylist(), strict=True)))
    assert sum(1 for r in got if r.headers == (("codec", codec.encode()),)) == len(singles)


@pytest.mark.parametrize(("codec", "option", "level"), [("gzip", "compression.gzip.level", 1),
                                                        ("lz4", "compression.lz4.level", 12),
                                                        ("zstd", "compression.zstd.level", 19)])
def test_a_non_default_level_reaches_the_broker(codec: str, option: str, level: int, kafka: KafkaCluster,
                                                topic_factory: Callable[..., str], readback: Readback) -> None:
    """The same records at the codec's default level and at another: the broker accepts both, librdkafka reads
    both back byte for byte, and the broker's log holds batches of different sizes (topics keep the producer's
    compression), so the level changed what reached it."""
    values = [b"%d-%s-%d" % (i, b"abcdefgh"[: i % 8] * (i % 23), i * 7919) for i in range(3000)]
    stored = {}
    for options in ({}, {option: level}):
        topic = topic_factory(partitions=1)
        settings = {"bootstrap.servers": kafka.bootstrap_servers, "compression.type": codec, "linger.ms": 1000,
                    "batch.size": 1_000_000, "max.block.ms": 20_000, **options}
        with KafkaProducer(settings) as producer:
            producer.send_batch(topic, pa.table({"value": pa.array(values, pa.binary())})).result(30)
        assert [r.value for r in readback(topic)] == values
        node = next(iter(kafka.nodes.values()))
        stored[bool(options)] = sum(f.stat().st_size for f in (node.data_dir / "data" / f"{topic}-0").glob("*.log"))
    print(f"{codec}: {stored[False]} bytes in the broker's log at the default level, {stored[True]} at {level}")
    assert stored[False] > 0 and stored[True] > 0 and stored[True] != stored[False]
