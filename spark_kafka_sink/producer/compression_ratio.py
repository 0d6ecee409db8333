"""``CompressionRatioEstimator``: how many uncompressed bytes a compressed batch may hold under batch.size (Java's).

    estimator.records_limit(topic) -> int        header + uncompressed records a new batch of ``topic`` may hold
    estimator.observe(topic, uncompressed_size, compressed_size)   a batch of ``topic`` was built

The Java producer counts a compressed batch against ``batch.size`` by an estimate of its compressed size: its
uncompressed records times the topic's estimated compression ratio times 1.05 (plus the header). The estimate
starts at 1.0 and follows every built batch's ratio (compressed / uncompressed records): when a batch compressed
worse than estimated it rises at once, by at least 0.05 and to at least the observed ratio; when better, it falls
by 0.005 a batch, never below the observed ratio. So with lz4 on JSON that compresses to 0.4, a 16 KiB batch
holds ~38 KiB of records once the estimate has settled, and goes on the wire at about ``batch.size``, as the Java
client's do; without a codec a batch holds ``batch.size`` bytes.

A batch never holds more than ``max.request.size`` bytes of uncompressed records (Java has no such bound; it keeps
the memory a batch's records take before compression, and the work a consumer's decompression does per batch,
bounded however well the data compresses).

One per producer, per topic (Java's is per JVM, topic and codec; a producer has one codec). The caller thread
(``send_batch``; ``send`` when a record closes a batch) and the sender thread (a drain closes a batch) both
update it; dict reads and writes are atomic, and an update lost between the two only delays the estimate by one
batch, so there is no lock.
"""

from __future__ import annotations

from spark_kafka_sink.protocol.compression import Codec, codec_id
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE

__all__ = ["CompressionRatioEstimator"]

_ESTIMATION_FACTOR = 1.05  # the margin on the estimated compressed size (Java's)
_DETERIORATE_STEP = 0.05  # the least rise after a batch compressed worse than estimated
_IMPROVING_STEP = 0.005  # the most fall after a batch compressed better


class CompressionRatioEstimator:
    """Per-topic compression ratio estimates of one producer (see the module docstring)."""

    def __init__(self, compression: int | str, batch_size: int, max_request_size: int) -> None:
        self._compressed = codec_id(compression) is not Codec.NONE
        self._batch_size = batch_size
        self._most = max(batch_size, max_request_size)
        self._ratios: dict[str, float] = {}

    def ratio(self, topic: str) -> float:
        """The current estimate for ``topic`` (1.0 before its first batch, and always without a codec)."""
        return self._ratios.get(topic, 1.0)

    def records_limit(self, topic: str) -> int:
        """Header + uncompressed records bytes a new batch of ``topic`` may hold: ``batch.size`` without a codec;
        with one, what compresses to about ``batch.size`` by the estimate, at most ``max.request.size``."""
        if not self._compressed:
            return self._batch_size
        room = (self._batch_size - HEADER_SIZE) / (self._ratios.get(topic, 1.0) * _ESTIMATION_FACTOR)
        return min(self._most, HEADER_SIZE + max(0, int(room)))

    def observe(self, topic: str, uncompressed_size: int, compressed_size: int) -> None:
        """A batch of ``topic`` was built: ``uncompressed_size`` is its header + records before compression,
        ``compressed_size`` its bytes as sent."""
        records = uncompressed_size - HEADER_SIZE
        if not self._compressed or records <= 0:
            return
        observed = (compressed_size - HEADER_SIZE) / records
        estimate = self._ratios.get(topic, 1.0)
        if observed > estimate:
            estimate = max(estimate + _DETERIORATE_STEP, observed)
        elif observed < estimate:
            estimate = max(estimate - _IMPROVING_STEP, observed)
        self._ratios[topic] = estimate
