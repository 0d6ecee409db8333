"""send_batch encodes a large input in slices of bounded bytes (memory stays near buffer.memory), each slice
handed to the sender as soon as it is queued."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.errors import RecordTooLargeError, SerializationError
from spark_kafka_sink.producer import arrow_send
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.arrow_send import ArrowSender, row_slices
from spark_kafka_sink.producer.batch import ProducerBatch
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.partitioner import Partitioner, PartitionInfo
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch, encode_arrow_batch_groups
from spark_kafka_sink.protocol.record_batch import decode_batch


def _partitions(count: int) -> Callable[[str, int, int], PartitionInfo]:
    """The ArrowSender's metadata seam: every topic has ``count`` partitions, all candidates."""
    return lambda topic, max_block_ms, needed: PartitionInfo(count, None)



def test_row_slices_cover_every_row_in_order_within_the_limit() -> None:
    size = np.array([40, 40, 40, 200, 10, 10, 10, 90], np.int64)
    assert row_slices(size, 100) == [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8)]
    # up to ``whole`` bytes in all (440 here), one range; above it, the slices again
    assert row_slices(size, 100, whole=440) == [(0, 8)]
    assert row_slices(size, 100, whole=439) == [(0, 2), (2, 3), (3, 4), (4, 7), (7, 8)]


def test_small_input_is_one_slice_and_empty_input_too() -> None:
    assert row_slices(np.array([10, 20], np.int64), 100) == [(0, 2)]
    assert row_slices(np.zeros(0, np.int64), 100) == [(0, 0)]


def test_random_sizes_slices_are_contiguous_and_bounded() -> None:
    rng = np.random.default_rng(3)
    size = rng.integers(1, 5000, 10_000).astype(np.int64)
    out = row_slices(size, 64 << 10)
    assert out[0][0] == 0 and out[-1][1] == len(size)
    assert all(a[1] == b[0] for a, b in zip(out, out[1:], strict=False))
    assert all(int(size[lo:hi].sum()) <= 64 << 10 or hi - lo == 1 for lo, hi in out)
    # greedy: adding the next row to a slice would pass the limit
    assert all(int(size[lo:hi + 1].sum()) > 64 << 10 for lo, hi in out[:-1])


def test_the_sender_is_woken_each_time_a_request_worth_of_batches_is_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    # The sender must see a large input's first slices while later ones are still being encoded (overlap), and a
    # table larger than buffer.memory must not wait on a sleeping sender: woken only at the end of the call, the
    # sender slept through it. Woken after every slice, it sent a request per slice, of ~2 partitions' batches.
    monkeypatch.setattr(arrow_send, "_SLICE_BYTES", 64 << 10)
    monkeypatch.setattr(arrow_send, "_WHOLE_BYTES", 64 << 10)
    request = 200_000
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "batch.size": 16384,
                                       "max.request.size": request})
    acc = RecordAccumulator.from_config(config)
    queued_at_wakeup: list[int] = []

    def wakeup() -> None:
        queued_at_wakeup.append(config.buffer_memory - acc.pool.available_memory)

    sender = ArrowSender(config, acc, Partitioner.from_config(config), None, _partitions(3), wakeup)
    n = 6000  # ~0.8 MB of records (100-byte values and 16-byte keys): about 14 slices, 4 requests' worth
    table = pa.table({"key": pa.array([b"%016d" % i for i in range(n)]), "value": pa.array([b"v" * 100] * n)})
    sender.send("t", table)
    total = config.buffer_memory - acc.pool.available_memory
    assert queued_at_wakeup[-1] == total and len(queued_at_wakeup) == 1 + total // request
    seen = [0, *queued_at_wakeup]
    assert all(request <= b - a < request + (64 << 10) for a, b in zip(seen[:-2], seen[1:-1], strict=True))


def _sender(config: ProducerConfig, acc: RecordAccumulator) -> ArrowSender:
    return ArrowSender(config, acc, Partitioner.from_config(config), None, _partitions(3), lambda: None)


def _chunked(rows_per_chunk: int, chunks: int, value_size: int = 100) -> pa.Table:
    parts = [pa.table({"key": pa.array([b"%016d" % (c * rows_per_chunk + i) for i in range(rows_per_chunk)]),
                       "value": pa.array([b"v" * value_size] * rows_per_chunk)}) for c in range(chunks)]
    return pa.concat_tables(parts)


def test_a_table_of_large_chunks_goes_chunk_by_chunk_without_a_copy() -> None:
    # Combining the chunks copied the whole table (a third of send_batch's time for a 2-chunk 248 MB table).
    table = _chunked(20_000, 3)  # ~2.3 MB a chunk, above the 2 MiB slice
    pieces = arrow_send._input_pieces(table)
    assert [p.num_rows for p in pieces] == [20_000] * 3
    for piece, chunk in zip(pieces, table.column("value").chunks, strict=True):
        assert piece.column(1).buffers()[2].address == chunk.buffers()[2].address  # the input's own bytes


def test_many_tiny_chunks_are_joined_so_batches_still_fill() -> None:
    table = _chunked(10, 1000)  # 10,000 rows in chunks of 10: ~1.2 MB
    pieces = arrow_send._input_pieces(table)
    assert [p.num_rows for p in pieces] == [10_000]
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "batch.size": 16384})
    acc = RecordAccumulator.from_config(config)
    _sender(config, acc).send("t", table)
    # full batches, not one per chunk and partition (~3,000): 10,000 records of ~126 bytes fill ~80 of 16 KiB
    assert 70 < sum(acc.queue_sizes("t").values()) < 100


def test_errors_in_a_later_chunk_name_the_input_row_and_queue_nothing() -> None:
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "max.request.size": 1 << 20})
    acc = RecordAccumulator.from_config(config)
    good = _chunked(20_000, 2)
    big = pa.table({"key": pa.array([b"k"]), "value": pa.array([b"x" * (2 << 20)])})
    with pytest.raises(RecordTooLargeError, match=r"^row 40000 is 2097[0-9]{3} bytes when serialized"):
        _sender(config, acc).send("t", pa.concat_tables([good, big]))
    topics = pa.table({"key": pa.array([b"k"] * 2), "value": pa.array([b"v"] * 2), "topic": pa.array(["a", None])})
    with_topic = pa.concat_tables([good.append_column("topic", pa.array(["a"] * 40_000)), topics])
    with pytest.raises(SerializationError, match=r"column 'topic' is null at row 40001"):
        _sender(config, acc).send(None, with_topic)
    assert not acc.has_incomplete()


def _queued(acc: RecordAccumulator) -> dict[int, list[ProducerBatch]]:
    """Every queued batch, per partition, in queue order."""
    out: dict[int, list[ProducerBatch]] = {}
    while acc.has_undrained():
        for batches in acc.drain(lambda tp: 1, [1], 1 << 30, 0).values():
            for b in batches:
                out.setdefault(b.tp.partition, []).append(b)
    return out


def _kv(n: int, value_size: int) -> pa.Table:
    return pa.table({"key": pa.array([b"%016d" % i for i in range(n)]), "value": pa.array([b"v" * value_size] * n)})


def _part_filled(queued: dict[int, list[ProducerBatch]], batch_size: int) -> int:
    """Batches that are not their partition's last and hold less than 90% of batch.size."""
    for batches in queued.values():
        assert [b.first_row for b in batches] == sorted(b.first_row for b in batches)
    return sum(b.uncompressed_size < 0.9 * batch_size for batches in queued.values() for b in batches[:-1])


def test_a_spark_batch_of_1_kb_values_fills_the_batches_of_every_partition() -> None:
    # In slices of 2 MiB of rows in input order, 10,000 rows of 1 KB into 12 partitions went out as ~140-row batches
    # (a batch per partition per slice, ~150 KB), where batch.size holds ~250: 3.6 times the batches, each one a
    # compression call, a sequence stamp and a response to handle.
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "batch.size": 256 << 10,
                                       "buffer.memory": 64 << 20})
    acc = RecordAccumulator.from_config(config)
    sender = ArrowSender(config, acc, Partitioner.from_config(config), None, _partitions(12),
                         lambda: None)
    sender.send("t", _kv(10_000, 1000))
    queued = _queued(acc)
    assert len(queued) == 12 and sum(b.record_count for q in queued.values() for b in q) == 10_000
    assert _part_filled(queued, 256 << 10) == 0
    assert sum(len(q) for q in queued.values()) == 48  # ~833 rows a partition: 4 batches each


def test_an_input_too_large_for_one_step_goes_in_slices_in_partition_order_each_adding_one_part_filled_batch(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_send, "_SLICE_BYTES", 64 << 10)
    monkeypatch.setattr(arrow_send, "_WHOLE_BYTES", 128 << 10)
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "batch.size": 16384})
    acc = RecordAccumulator.from_config(config)
    steps: list[int] = []

    def counting(value: pa.Array, **kwargs: Any) -> Iterator[list[EncodedBatch]]:
        steps.append(len(value))
        return encode_arrow_batch_groups(value, **kwargs)

    monkeypatch.setattr(arrow_send, "encode_arrow_batch_groups", counting)
    sender = ArrowSender(config, acc, Partitioner.from_config(config), None, _partitions(3),
                         lambda: None)
    table = _kv(6000, 100)  # ~0.9 MB of size bound: ~14 slices
    sender.send("t", table)
    assert len(steps) > 10 and sum(steps) == 6000 and max(steps) < 600
    queued = _queued(acc)
    # Cut in input order, each slice ended a part-filled batch in every partition (3 a slice). In partition order
    # a slice is cut where a batch starts by the rows' size bound, which overstates a 100 B record by ~25%: the
    # encoder packs the rows tighter and the slice's last batch comes out part-filled.
    assert _part_filled(queued, 16384) <= len(steps) - 1
    # and the records are the input's, each partition's in input order
    parts = Partitioner.from_config(config).partition_arrow("t", table.column("key").chunk(0), None,
                                                            np.full(6000, 100), 3)
    for p, batches in queued.items():
        keys = [r.key for b in batches for r in decode_batch(b.payload()).records]
        assert keys == [b"%016d" % i for i in np.flatnonzero(parts == p)]


def test_an_input_encoded_in_one_pass_is_queued_whole_so_requests_carry_every_partition() -> None:
    # The encoder gives a one-pass input's batches in partition order, and a Produce request takes one batch per
    # partition: queued a group at a time (and the sender woken per request's worth), the sender drained 1-3
    # batches per request while later partitions were still being encoded. Queued whole, the first drain finds a
    # batch of each of the 12 partitions.
    config = ProducerConfig.from_dict({"bootstrap.servers": "127.0.0.1:9", "batch.size": 256 << 10,
                                       "buffer.memory": 64 << 20})
    acc = RecordAccumulator.from_config(config)
    partitions_at_wakeup: list[int] = []
    sender = ArrowSender(config, acc, Partitioner.from_config(config), None, _partitions(12),
                         lambda: partitions_at_wakeup.append(sum(1 for n in acc.queue_sizes("t").values() if n)))
    sender.send("t", _kv(10_000, 1000))  # 10 MB: one pass (below _WHOLE_BYTES), ~10 requests' worth
    assert partitions_at_wakeup == [12]
    ready = acc.drain(lambda tp: 1, [1], config.max_request_size, 10**12)[1]
    assert len({b.tp.partition for b in ready}) == len(ready) >= 3  # a full request: 3 of the 256 KiB batches
