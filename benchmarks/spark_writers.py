"""Python DataSources used only by the Spark benchmarks. Spark's Python workers import this module (the benchmark
puts the repo root on their PYTHONPATH), so it stays small and imports nothing heavy at module level.

- ``bench-noop-arrow``: a ``DataSourceArrowWriter`` that iterates the Arrow batches Spark hands it and counts rows:
  the ceiling of any Python sink (Spark -> Arrow -> Python, nothing else). The driver-side ``commit`` checks the
  total against the ``expectedRows`` option, so a run that lost rows fails instead of looking fast.
- ``bench-lz4-floor``: the do-nothing writer that also joins each row's key and value (one Arrow C++ kernel call
  per batch) and compresses them with lz4 in ``kafka.batch.size`` pieces (the sink's 256 KiB default), by the call
  the producer makes: what any Python sink writing lz4 batches pays at least (Spark's Arrow hand-off, then the
  rows' bytes compressed in Kafka's record order), before it frames, partitions or sends anything. Its client CPU
  per row is a floor under the sink's (Kafka's record framing, ~8 bytes a record, only adds to it).
- ``bench-send-batch``: the same writer, but each batch goes to ``spark_kafka_sink.KafkaProducer.send_batch``:
  the producer without the pykafka-sink adapter, to show what the adapter costs.
- ``bench-send``: per-row ``KafkaProducer.send`` from the same batches (``to_pylist``), the per-record path.
- ``bench-json-events`` (a reader): ``rows`` rows of ``key`` (16-digit row number) and ``value`` (the JSON event
  of ``benchmarks.workload.json_values``) strings in ``partitions`` partitions, made by the Python workers as
  Arrow batches: the Spark JSON workload (mapInArrow would need pandas, which the project does not install).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    InputPartition,
    WriterCommitMessage,
)

__all__ = ["NoopArrowSource", "Lz4FloorSource", "SendBatchSource", "SendSource", "JsonEventsSource", "register_all"]


@dataclass
class RowCount(WriterCommitMessage):
    rows: int


def _check(messages: list[WriterCommitMessage | None], options: Mapping[str, str]) -> None:
    expected = options.get("expectedRows")
    total = sum(m.rows for m in messages if isinstance(m, RowCount))
    if expected is not None and total != int(expected):
        raise RuntimeError(f"writers saw {total} rows, expected {expected}")


class _NoopWriter(DataSourceArrowWriter):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)

    def write(self, iterator: Iterator[Any]) -> RowCount:
        rows = 0
        for batch in iterator:
            rows += batch.num_rows
        return RowCount(rows)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        _check(messages, self.options)


class _Lz4FloorWriter(_NoopWriter):
    def write(self, iterator: Iterator[Any]) -> RowCount:
        import pyarrow.compute as pc

        from spark_kafka_sink.protocol.compression import Codec, compress
        from spark_kafka_sink.protocol.murmur2 import binary_buffers

        piece = int(self.options.get("kafka.batch.size", "262144"))
        rows = 0
        for batch in iterator:
            # Each row's key and value side by side, as in a Kafka record (less its ~8 bytes of varints).
            offsets, data = binary_buffers(pc.binary_join_element_wise(batch.column("key"), batch.column("value"),
                                                                        ""))
            records = data[int(offsets[0]):int(offsets[-1])].data  # a memoryview, no copy
            for start in range(0, len(records), piece):
                compress(Codec.LZ4, records[start:start + piece])
            rows += batch.num_rows
        return RowCount(rows)


def _producer_config(options: Mapping[str, str]) -> dict[str, Any]:
    """``kafka.*`` options, without the prefix, as the producer's Java-named config."""
    return {k[len("kafka."):]: v for k, v in options.items() if k.lower().startswith("kafka.")}


class _SendBatchWriter(_NoopWriter):
    def write(self, iterator: Iterator[Any]) -> RowCount:
        from spark_kafka_sink.producer import KafkaProducer

        rows = 0
        topic = self.options["topic"]
        with KafkaProducer(_producer_config(self.options)) as producer:
            futures = []
            for batch in iterator:
                futures.append(producer.send_batch(topic, batch))
                rows += batch.num_rows
            producer.flush()
            for future in futures:
                future.result()
        return RowCount(rows)


class _SendWriter(_NoopWriter):
    def write(self, iterator: Iterator[Any]) -> RowCount:
        from spark_kafka_sink.producer import KafkaProducer

        rows = 0
        topic = self.options["topic"]
        with KafkaProducer(_producer_config(self.options)) as producer:
            send = producer.send
            for batch in iterator:
                keys = batch.column("key").to_pylist()
                values = batch.column("value").to_pylist()
                for key, value in zip(keys, values, strict=False):
                    send(topic, value.encode() if isinstance(value, str) else value,
                         key=key.encode() if isinstance(key, str) else key)
                rows += batch.num_rows
            producer.flush()
        return RowCount(rows)


class NoopArrowSource(DataSource):
    """A write-only source whose writer is ``writer_class``; the subclasses below change only the two names."""

    source_name = "bench-noop-arrow"
    writer_class: type[_NoopWriter] = _NoopWriter

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def writer(self, schema: Any, overwrite: bool) -> DataSourceArrowWriter:
        return self.writer_class(self.options)


class Lz4FloorSource(NoopArrowSource):
    source_name = "bench-lz4-floor"
    writer_class = _Lz4FloorWriter


class SendBatchSource(NoopArrowSource):
    source_name = "bench-send-batch"
    writer_class = _SendBatchWriter


class SendSource(NoopArrowSource):
    source_name = "bench-send"
    writer_class = _SendWriter


@dataclass
class RowRange(InputPartition):
    start: int
    end: int


class _JsonEventsReader(DataSourceReader):
    def __init__(self, options: Mapping[str, str]) -> None:
        self.rows = int(options["rows"])
        self.partition_count = int(options.get("partitions", "12"))
        self.key_size = int(options.get("keySize", "16"))
        self.value_size = int(options.get("valueSize", "1000"))

    def partitions(self) -> list[InputPartition]:
        bounds = [self.rows * i // self.partition_count for i in range(self.partition_count + 1)]
        return [RowRange(lo, hi) for lo, hi in zip(bounds, bounds[1:], strict=False)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        import numpy as np
        import pyarrow as pa

        from benchmarks.workload import json_values, keys

        assert isinstance(partition, RowRange)
        for lo in range(partition.start, partition.end, 10_000):
            n = min(10_000, partition.end - lo)
            yield pa.record_batch([keys(lo, n, self.key_size).cast(pa.string()),
                                   json_values(np.arange(lo, lo + n), self.value_size)], names=["key", "value"])


class JsonEventsSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return "bench-json-events"

    def schema(self) -> str:
        return "key string, value string"

    def reader(self, schema: Any) -> DataSourceReader:
        return _JsonEventsReader(self.options)


def register_all(spark: Any) -> None:
    for source in (NoopArrowSource, Lz4FloorSource, SendBatchSource, SendSource, JsonEventsSource):
        spark.dataSource.register(source)
