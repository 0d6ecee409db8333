"""batch.size with a codec counts compressed bytes (Java's estimate): on the broker's log, read by Kafka's own
DumpLogSegments, lz4 batches of compressible records hold several times batch.size of records and take about
batch.size each; without a codec they hold batch.size. All records read back with confluent-kafka."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import broker_lib, require_java
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

BATCH = 16_384
ROWS = 12_000
_BATCH_LINE = re.compile(r"baseOffset: \d+ lastOffset: \d+ count: (\d+) .* size: (\d+) ")


def _value(i: int) -> bytes:
    return b'{"user":"u%06d","page":"/catalog/item/%d","agent":"Mozilla/5.0 (X11; Linux x86_64)","n":%08d}' % (
        i % 977, i % 311, i)


def _dumped_batches(kafka: KafkaCluster, topic: str) -> list[tuple[int, int]]:
    """(records, bytes) of every batch in partition 0's first segment, as Kafka's DumpLogSegments reads it."""
    segment = next(iter(kafka.nodes.values())).data_dir / "data" / f"{topic}-0" / "00000000000000000000.log"
    tool = "org.apache.kafka.tools.DumpLogSegments" if kafka.major >= 4 else "kafka.tools.DumpLogSegments"
    out = subprocess.run([require_java(), "-cp", f"{broker_lib(kafka.version)}/*", tool, "--files", str(segment)],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    return [(int(m[1]), int(m[2])) for m in _BATCH_LINE.finditer(out)]


@pytest.mark.parametrize("codec", ["lz4", "none"])
@pytest.mark.parametrize("path", ["send", "send_batch"])
def test_a_codec_lets_batch_size_count_compressed_bytes(codec: str, path: str, kafka: KafkaCluster, bootstrap: str,
                                                        topic_factory: Callable[..., str],
                                                        readback: Callable[..., list[ConsumedRecord]]) -> None:
    topic = topic_factory(partitions=1)
    values = [_value(i) for i in range(ROWS)]
    config = {"bootstrap.servers": bootstrap, "compression.type": codec, "batch.size": BATCH, "linger.ms": 50}
    with KafkaProducer(config) as producer:
        if path == "send":
            for v in values:
                producer.send(topic, v, partition=0)
        else:
            for start in range(0, ROWS, 1_000):  # as a stream of Arrow batches arrives
                producer.send_batch(topic, pa.table({"value": pa.array(values[start:start + 1_000], pa.binary()),
                                                     "partition": pa.array([0] * 1_000, pa.int32())}))
        producer.flush()
    assert [r.value for r in readback(topic)] == values
    batches = _dumped_batches(kafka, topic)
    assert sum(count for count, _ in batches) == ROWS
    record = len(values[-1]) + 8  # the value and the record's own fields
    most = max(count for count, _ in batches) * record
    if codec == "none":
        assert most <= BATCH
    else:
        # lz4 takes these records to about a quarter; the estimate starts at 1.0 and comes down 0.005 a batch
        # (Java's pace), so the later batches hold well over batch.size of records, each still under batch.size.
        assert most > 1.3 * BATCH
        assert max(size for _, size in batches) <= BATCH
