"""compression.level / compression.<codec>.level reach the compressor on both paths (send and send_batch)."""

from __future__ import annotations

import gzip
import zlib
from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.arrow_send import ArrowSender
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.partitioner import Partitioner, PartitionInfo
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, decode_batch


def _partitions(count: int) -> Callable[[str, int, int], PartitionInfo]:
    """The ArrowSender's metadata seam: every topic has ``count`` partitions, all candidates."""
    return lambda topic, max_block_ms, needed: PartitionInfo(count, None)


TP = TopicPartition("t", 0)
# Compressible, but differently at gzip levels 1 and 9 (checked below, so the test can tell them apart).
VALUES = [(b"order-%06d status=shipped warehouse=%03d " % (i, i % 7)) * 3 for i in range(400)]


def config(**options: object) -> ProducerConfig:
    return ProducerConfig.from_dict({"bootstrap.servers": "localhost:9092", "compression.type": "gzip",
                                     "batch.size": 1_000_000, **options})


def _drain_payloads(acc: RecordAccumulator) -> list[bytes]:
    batches = acc.drain(lambda tp: 1, [1], 100_000_000, 10**12)[1]
    return [b.payload() for b in batches]


def _records_section(batch: bytes) -> bytes:
    return zlib.decompress(batch[HEADER_SIZE:], wbits=31)


@pytest.mark.parametrize("options, level", [
    ({"compression.gzip.level": 1}, 1),
    ({"compression.level": 9, "compression.gzip.level": 1}, 9),
    ({}, 6),  # the Java client's gzip default
])
def test_send_path_compresses_at_the_configured_level(options: dict[str, int], level: int) -> None:
    acc = RecordAccumulator.from_config(config(**options))
    for v in VALUES:
        acc.append(TP, 0, None, v, [], 0, 1_000)
    (payload,) = _drain_payloads(acc)
    section = _records_section(payload)
    assert payload[HEADER_SIZE:] == gzip.compress(section, compresslevel=level, mtime=0)
    assert [r.value for r in decode_batch(payload).records] == VALUES


@pytest.mark.parametrize("options, level", [({"compression.gzip.level": 1}, 1), ({"compression.level": 9}, 9)])
def test_send_batch_path_compresses_at_the_configured_level(options: dict[str, int], level: int) -> None:
    cfg = config(**options)
    acc = RecordAccumulator.from_config(cfg)
    sender = ArrowSender(cfg, acc, Partitioner.from_config(cfg), None, _partitions(1), lambda: None)
    sender.send("t", pa.table({"value": pa.array(VALUES, pa.binary())}))
    (payload,) = _drain_payloads(acc)
    assert payload[HEADER_SIZE:] == gzip.compress(_records_section(payload), compresslevel=level, mtime=0)
    assert [r.value for r in decode_batch(payload).records] == VALUES


def test_levels_differ_on_this_data() -> None:
    data = b"".join(VALUES)
    assert gzip.compress(data, compresslevel=1, mtime=0) != gzip.compress(data, compresslevel=9, mtime=0)


@pytest.mark.parametrize("codec, level", [("gzip", 10), ("gzip", -2), ("lz4", 18), ("lz4", -1)])
def test_a_level_out_of_the_codecs_range_is_refused(codec: str, level: int) -> None:
    with pytest.raises(ConfigError, match=rf"compression.level={level} is out of range for "
                                          rf"compression.type={codec}") as info:
        config(**{"compression.type": codec, "compression.level": level})
    assert info.value.key == "compression.level"


def test_a_level_for_a_codec_without_levels_is_ignored() -> None:
    assert config(**{"compression.type": "snappy", "compression.level": 3}).compression_type == "snappy"


@pytest.mark.parametrize("codec, option, level", [("lz4", "compression.lz4.level", 12),
                                                  ("zstd", "compression.zstd.level", 19)])
def test_lz4_and_zstd_levels_reach_the_compressor(codec: str, option: str, level: int) -> None:
    payloads = {}
    for options in ({}, {option: level}):
        acc = RecordAccumulator.from_config(config(**{"compression.type": codec, **options}))
        for v in VALUES:
            acc.append(TP, 0, None, v, [], 0, 1_000)
        (payload,) = _drain_payloads(acc)
        assert [r.value for r in decode_batch(payload).records] == VALUES
        payloads[bool(options)] = payload
    print(f"{codec}: {len(payloads[False])} bytes at the default level, {len(payloads[True])} at {level}")
    assert payloads[True] != payloads[False]  # the level changed the compressed bytes


def _lz4_payloads(options: dict[str, int]) -> tuple[bytes, bytes]:
    """The compressed records of VALUES with lz4 and ``options``: (the send path's, send_batch's)."""
    cfg = config(**{"compression.type": "lz4", **options})
    acc = RecordAccumulator.from_config(cfg)
    for v in VALUES:
        acc.append(TP, 0, None, v, [], 0, 1_000)
    (sent,) = _drain_payloads(acc)
    acc = RecordAccumulator.from_config(cfg)
    ArrowSender(cfg, acc, Partitioner.from_config(cfg), None, _partitions(1), lambda: None).send(
        "t", pa.table({"value": pa.array(VALUES, pa.binary())}))
    (batched,) = _drain_payloads(acc)
    for payload in (sent, batched):
        assert [r.value for r in decode_batch(payload).records] == VALUES
    return sent[HEADER_SIZE:], batched[HEADER_SIZE:]  # (send_batch stamps the send time into the header)


def test_lz4_level_9_is_the_java_default_fast_mode() -> None:
    """compression.lz4.level=9 is the Java client's default, which Java compresses with lz4-java's fast compressor:
    spelled out in a configuration copied from Java, it gives the bytes of the default here too, not LZ4-HC level 9
    (several times slower). Level 10 is LZ4-HC, and on this data LZ4-HC writes other bytes than the fast mode."""
    default, nine, ten = _lz4_payloads({}), _lz4_payloads({"compression.lz4.level": 9}), \
        _lz4_payloads({"compression.lz4.level": 10})
    assert nine == default
    assert ten[0] != default[0] and ten[1] != default[1]
