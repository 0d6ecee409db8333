from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pytest

from spark_kafka_sink.errors import DeliveryTimeoutError, IllegalStateError, NotLeaderOrFollowerError, ProtocolError
from spark_kafka_sink.producer.batch import BatchState, ProducerBatch, gather_batch_futures
from spark_kafka_sink.producer.record_metadata import BatchMetadata, RecordMetadata, TopicPartition
from spark_kafka_sink.protocol.arrow_encoder import encode_arrow_batches
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, Record, decode_batch, encode_batch, with_crc

TP = TopicPartition("t", 3)


def record_batch(now: int = 1000, batch_size: int = 16384, compression: str = "none") -> ProducerBatch:
    return ProducerBatch.for_records(TP, batch_size, compression, now, allocated_bytes=batch_size)


def bulk_batch(rows: int = 4, first_row_offset: int = 0) -> ProducerBatch:
    values = pa.array([f"v{i}".encode() for i in range(rows)], pa.binary())
    encoded = encode_arrow_batches(values, timestamp_ms=pa.array([5] * rows, pa.int64()), max_batch_bytes=1 << 20)
    assert len(encoded) == 1
    return ProducerBatch.from_encoded(TP, encoded[0], 1000, allocated_bytes=len(encoded[0].data))


def test_appends_then_close_builds_the_same_bytes_as_the_reference_encoder() -> None:
    b = record_batch()
    f1 = b.try_append(10, b"k", b"v1", [("h", b"x")], 1000)
    f2 = b.try_append(12, None, None, [], 1001)
    assert f1 is not None and f2 is not None
    assert (b.state, b.record_count, b.last_append_ms) == (BatchState.OPEN, 2, 1001)
    b.close()
    assert b.state is BatchState.CLOSED
    expected = encode_batch([Record(b"k", b"v1", 10, [("h", b"x")]), Record(None, None, 12)])
    assert b.payload() == expected and b.size_in_bytes == len(expected)


def test_full_batch_refuses_append() -> None:
    b = record_batch(batch_size=100)
    assert b.try_append(0, None, b"x" * 30, [], 0) is not None  # the first record always fits
    assert not b.is_full()
    assert b.try_append(0, None, b"x" * 30, [], 0) is None
    assert b.record_count == 1


def test_done_completes_record_futures_in_order_with_offsets() -> None:
    b = record_batch()
    futures = [b.try_append(100 + i, None, b"v", [], 1000) for i in range(3)]
    order: list[int] = []
    for f in futures:
        assert f is not None
        f.add_done_callback(lambda fut: order.append(fut.result().offset))
    b.close()
    b.mark_in_flight(1001)
    assert b.done(base_offset=40, log_append_time_ms=-1, error=None) is True
    assert b.state is BatchState.SUCCEEDED and b.is_done
    results = [f.result(0) for f in futures if f is not None]
    assert results == [RecordMetadata("t", 3, 40 + i, 100 + i) for i in range(3)]
    assert order == [40, 41, 42]


def test_log_append_time_and_acks_zero_offsets() -> None:
    b = record_batch()
    f = b.try_append(7, None, b"v", [], 0)
    b.close()
    b.mark_in_flight(0)
    b.done(base_offset=-1, log_append_time_ms=99, error=None)
    assert f is not None and f.result(0) == RecordMetadata("t", 3, -1, 99)


def test_failure_sets_exception_on_every_future() -> None:
    b = record_batch()
    futures = [b.try_append(0, None, b"v", [], 0) for _ in range(2)]
    b.close()
    b.mark_in_flight(0)
    err = NotLeaderOrFollowerError()
    assert b.done(-1, -1, err)
    assert b.state is BatchState.FAILED and b.error is err
    assert all(f is not None and f.exception(0) is err for f in futures)


def test_futures_cannot_be_cancelled() -> None:
    b = record_batch()
    f = b.try_append(0, None, b"v", [], 0)
    assert f is not None and f.cancel() is False
    b.close()
    b.mark_in_flight(0)
    b.done(1, -1, None)
    assert f.result(0).offset == 1


def test_late_answer_after_expiry_is_ignored_but_success_is_final() -> None:
    b = record_batch()
    f = b.try_append(0, None, b"v", [], 0)
    b.close()
    b.mark_in_flight(0)
    expired = DeliveryTimeoutError("expired")
    assert b.done(-1, -1, expired)
    assert b.done(5, -1, None) is False  # the broker answered after we gave up: ignored
    assert b.state is BatchState.FAILED and f is not None and f.exception(0) is expired

    ok = record_batch()
    ok.try_append(0, None, b"v", [], 0)
    ok.close()
    ok.mark_in_flight(0)
    ok.done(1, -1, None)
    with pytest.raises(IllegalStateError, match="from SUCCEEDED to FAILED"):
        ok.done(-1, -1, expired)


@pytest.mark.parametrize("steps,bad,names", [
    ([], "mark_in_flight", "from OPEN to IN_FLIGHT"),
    (["close"], "done", "from CLOSED to SUCCEEDED"),
    (["close"], "mark_retrying", "from CLOSED to RETRYING"),
    (["close", "mark_in_flight", "done"], "mark_in_flight", "from SUCCEEDED to IN_FLIGHT"),
])
def test_illegal_transitions_name_both_states(steps: list[str], bad: str, names: str) -> None:
    b = record_batch()
    b.try_append(0, None, b"v", [], 0)
    calls: dict[str, Callable[[], object]] = {"close": lambda: b.close(), "mark_in_flight": lambda: b.mark_in_flight(0),
             "done": lambda: b.done(0, -1, None), "mark_retrying": lambda: b.mark_retrying(0, 10)}
    for step in steps:
        calls[step]()
    with pytest.raises(IllegalStateError, match=names):
        calls[bad]()


def test_retry_cycle_counts_attempts_and_backoff() -> None:
    b = record_batch()
    b.try_append(0, None, b"v", [], 0)
    b.close()
    b.mark_in_flight(100)
    b.mark_retrying(150, backoff_ms=100)
    assert (b.state, b.attempts, b.last_attempt_ms, b.retry_at_ms) == (BatchState.RETRYING, 1, 150, 250)
    b.mark_in_flight(260)
    assert b.state is BatchState.IN_FLIGHT and b.drained_ms == 260


def test_abort_open_batch_fails_futures() -> None:
    b = record_batch()
    f = b.try_append(0, None, b"v", [], 0)
    err = RuntimeError("closing")
    assert b.abort(err) and b.state is BatchState.ABORTED
    assert f is not None and f.exception(0) is err
    assert b.abort(err) is False


def test_delivery_timeout() -> None:
    b = record_batch(now=1000)
    assert not b.has_reached_delivery_timeout(1000 + 119_999, 120_000)
    assert b.has_reached_delivery_timeout(1000 + 120_000, 120_000)


def test_producer_state_applied_at_drain_and_retry_resends_identical_bytes() -> None:
    b = record_batch()
    b.try_append(5, b"k", b"v", [], 0)
    b.close()
    plain = b.payload()
    b.set_producer_state(77, 2, 10, transactional=True)
    stamped = b.payload()
    decoded = decode_batch(stamped)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.base_sequence) == (77, 2, 10)
    assert decoded.is_transactional and stamped != plain
    header, _ = b.payload_parts()
    b.mark_in_flight(0)
    b.mark_retrying(1, 0)
    b.set_producer_state(77, 2, 10, transactional=True)  # the same state again: allowed, no change
    assert b.payload_parts()[0] is header and b.payload() == stamped  # the stamp is kept, not made again
    with pytest.raises(IllegalStateError, match="identical bytes"):
        b.set_producer_state(77, 2, 15, transactional=True)
    b.reset_producer_state()  # epoch bump: sequences are reassigned
    b.set_producer_state(77, 3, 0, transactional=True)
    decoded = decode_batch(b.payload())
    assert (decoded.producer_epoch, decoded.base_sequence) == (3, 0)
    assert b.has_sequence and (b.producer_id, b.producer_epoch, b.base_sequence) == (77, 3, 0)


def test_payload_before_close_is_an_error() -> None:
    b = record_batch()
    b.try_append(0, None, b"v", [], 0)
    with pytest.raises(IllegalStateError, match="close it first"):
        b.payload()


def test_bulk_batch_is_closed_and_has_one_future() -> None:
    b = bulk_batch(rows=4)
    assert b.is_bulk and b.state is BatchState.CLOSED and b.record_count == 4
    with pytest.raises(IllegalStateError, match="bulk"):
        b.try_append(0, None, b"v", [], 0)
    assert b.batch_future is not None
    b.mark_in_flight(0)
    b.done(100, -1, None)
    assert b.batch_future.result(0) == BatchMetadata("t", 3, 100, 4, 0, -1)
    assert b.batch_future.result(0).last_offset == 103


@pytest.mark.parametrize("stamped", [False, True], ids=["no-idempotence", "stamped"])
def test_bulk_batch_encoded_without_crc_is_sent_with_the_right_one(stamped: bool) -> None:
    values = pa.array([f"v{i}".encode() for i in range(4)], pa.binary())
    stamps = pa.array([5] * 4, pa.int64())
    (sealed,) = encode_arrow_batches(values, timestamp_ms=stamps, max_batch_bytes=1 << 20)
    (unsealed,) = encode_arrow_batches(values, timestamp_ms=stamps, max_batch_bytes=1 << 20, checksum=False)
    assert sealed.has_crc and not unsealed.has_crc and unsealed.data != sealed.data
    with pytest.raises(ProtocolError, match="CRC"):
        decode_batch(unsealed.data)
    batches = [ProducerBatch.from_encoded(TP, e, 1000) for e in (sealed, unsealed)]
    if stamped:
        for b in batches:
            b.set_producer_state(77, 2, 10, transactional=False)
    first, second = (b.payload() for b in batches)
    assert first == second and decode_batch(second).producer_id == (77 if stamped else -1)
    assert stamped or first is sealed.data  # a batch with its CRC is sent as built
    batches[1].mark_in_flight(0)
    (part,) = batches[1].split(1 << 20, "none")  # refused as too large: re-built from what was sent
    assert part.record_count == 4


@pytest.mark.parametrize("checksum", [True, False], ids=["sealed", "no-crc"])
def test_a_stamped_bulk_batch_sends_the_encoders_records_without_a_copy(checksum: bool) -> None:
    values = pa.array([f"v{i}".encode() for i in range(4)], pa.binary())
    (encoded,) = encode_arrow_batches(values, timestamp_ms=pa.array([5] * 4, pa.int64()), max_batch_bytes=1 << 20,
                                      checksum=checksum)
    b = ProducerBatch.from_encoded(TP, encoded, 1000)
    unstamped = b.payload_parts()
    if checksum:  # sent as built
        assert len(unstamped) == 1 and unstamped[0] is encoded.data
    else:  # the CRC goes in a header of its own, the records are a view of the encoder's bytes
        header, records = unstamped
        assert isinstance(records, memoryview) and records.obj is encoded.data and len(header) == HEADER_SIZE
        assert b.payload() == with_crc(encoded.data)
    b.set_producer_state(77, 2, 10, transactional=False)
    header, records = b.payload_parts()
    assert isinstance(records, memoryview) and records.obj is encoded.data  # the records are not copied
    assert bytes(records) == encoded.data[HEADER_SIZE:] and len(header) == HEADER_SIZE
    stamped = b.payload()
    assert decode_batch(stamped).producer_id == 77
    b.reset_producer_state()
    # unstamped again: the encoder's bytes (with the CRC the encoder left out)
    assert b.payload() == (encoded.data if checksum else with_crc(encoded.data))
    b.reset_producer_state()
    b.set_producer_state(77, 3, 0, transactional=True)
    decoded = decode_batch(b.payload())
    assert (decoded.producer_epoch, decoded.base_sequence, decoded.is_transactional) == (3, 0, True)
    assert decoded.records == decode_batch(stamped).records


def test_gather_batch_futures() -> None:
    batches = [bulk_batch(2), bulk_batch(3)]
    futures = [b.batch_future for b in batches if b.batch_future is not None]
    combined = gather_batch_futures(futures)
    for b, offset in zip(batches, (10, 20), strict=True):
        assert not combined.done()
        b.mark_in_flight(0)
        b.done(offset, -1, None)
    assert [m.base_offset for m in combined.result(0)] == [10, 20]

    failing = [bulk_batch(1), bulk_batch(1)]
    combined = gather_batch_futures([b.batch_future for b in failing if b.batch_future is not None])
    err = RuntimeError("x")
    failing[1].abort(err)
    assert not combined.done()
    failing[0].abort(RuntimeError("y"))
    assert str(combined.exception(0)) == "y"  # the first failure in input order
    assert gather_batch_futures([]).result(0) == []
