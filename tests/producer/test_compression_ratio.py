"""batch.size against compressed bytes, as the Java producer estimates them (CompressionRatioEstimator), and the
accumulator's per-record and bulk batches following the estimate."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.compression_ratio import CompressionRatioEstimator
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.protocol.arrow_encoder import encode_arrow_batches
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE

BATCH = 16_384
ROOM = BATCH - HEADER_SIZE


def observed(estimator: CompressionRatioEstimator, ratio: float, topic: str = "t", records: int = 10_000) -> None:
    estimator.observe(topic, HEADER_SIZE + records, HEADER_SIZE + round(records * ratio))


def test_without_a_codec_a_batch_holds_batch_size_bytes_whatever_was_seen() -> None:
    est = CompressionRatioEstimator("none", BATCH, 1 << 20)
    observed(est, 0.2)
    assert est.records_limit("t") == BATCH and est.ratio("t") == 1.0


def test_the_estimate_starts_at_one_with_a_five_percent_margin() -> None:
    est = CompressionRatioEstimator("lz4", BATCH, 1 << 20)
    assert est.ratio("t") == 1.0
    assert est.records_limit("t") == HEADER_SIZE + int(ROOM / 1.05)


def test_better_compression_lowers_the_estimate_slowly_and_worse_raises_it_at_once() -> None:
    est = CompressionRatioEstimator("lz4", BATCH, 1 << 20)
    observed(est, 0.4)
    assert est.ratio("t") == pytest.approx(0.995)  # one improving step a batch
    for _ in range(200):
        observed(est, 0.4)
    assert est.ratio("t") == pytest.approx(0.4)  # never below what was seen
    assert est.records_limit("t") == HEADER_SIZE + int(ROOM / (est.ratio("t") * 1.05))
    observed(est, 0.42)
    assert est.ratio("t") == pytest.approx(0.45)  # worse: at least one deteriorating step ...
    observed(est, 0.9)
    assert est.ratio("t") == pytest.approx(0.9)  # ... and at least the observed ratio
    assert est.ratio("other") == 1.0  # per topic


def test_a_batch_never_holds_more_than_max_request_size_of_records() -> None:
    est = CompressionRatioEstimator("zstd", BATCH, 100_000)
    for _ in range(300):
        observed(est, 0.01)
    assert est.records_limit("t") == 100_000


def _acc(compression: str) -> RecordAccumulator:
    return RecordAccumulator(batch_size=BATCH, compression=compression, linger_ms=10, retry_backoff_ms=100,
                             retry_backoff_max_ms=1000, delivery_timeout_ms=120_000, pool=BufferPool(1 << 24))


def _json_like(i: int) -> bytes:
    return b'{"user":"u%06d","page":"/catalog/item/%d","agent":"Mozilla/5.0 (X11; Linux x86_64)","n":%d}' % (
        i % 977, i % 311, i)


def test_per_record_batches_grow_as_the_codec_proves_itself() -> None:
    acc = _acc("lz4")
    tp = TopicPartition("t", 0)
    for i in range(40_000):
        acc.append(tp, 0, None, _json_like(i), [], 0, 0)
    queue = list(acc._queues[tp].batches)  # noqa: SLF001 -- the batches as the sender would drain them
    first, settled = queue[0], queue[-2]
    assert first.uncompressed_size <= HEADER_SIZE + int(ROOM / 1.05)
    # lz4 takes these records to a quarter: the estimate comes down 0.005 a batch, and a later batch holds over
    # twice batch.size of them; its bytes stay under batch.size.
    assert settled.uncompressed_size > 2 * BATCH
    assert BATCH * 0.5 < settled.size_in_bytes <= BATCH
    # Until it is built a batch holds its records uncompressed: buffer.memory is charged what it may hold.
    assert settled.allocated_bytes >= settled.uncompressed_size and first.allocated_bytes < BATCH
    assert acc.compression_ratio.ratio("t") < 0.5


def test_bulk_batches_follow_the_estimate_the_accumulator_keeps() -> None:
    acc = _acc("lz4")
    tp = TopicPartition("t", 0)
    values = pa.array([_json_like(i) for i in range(40_000)], pa.binary())
    sizes = []
    for start in range(0, len(values), 2_000):
        encoded = encode_arrow_batches(values.slice(start, 2_000), timestamp_ms=[0] * 2_000,
                                       max_batch_bytes=acc.compression_ratio.records_limit("t"), compression="lz4")
        acc.append_encoded(tp, encoded, 0, 0)
        sizes.append(max(e.uncompressed_size for e in encoded))
    assert sizes[0] <= HEADER_SIZE + int(ROOM / 1.05) < 2 * BATCH < sizes[-1]
    assert acc.compression_ratio.ratio("t") < 0.5
