"""What a reader sees of fetched batches: control records, transaction markers and aborted transactions."""

from __future__ import annotations

import struct

import crc32c
import pytest

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.record_batch import (
    ATTR_CONTROL,
    CONTROL_KEY_STRUCT,
    ControlRecordType,
    DecodedBatch,
    Record,
    control_record_type,
    decode_batch,
    decode_batches,
    encode_batch,
    visible_records,
)

TS = 1_700_000_000_000
PID_A, PID_B = 1000, 2000

# Transaction markers written by kafka-clients 4.3.1 itself (MemoryRecords.withEndTransactionMarker: offset,
# timestamp 1700000000000, leader epoch 0, producer id 1000, epoch 2, coordinator epoch 7), in a throwaway program.
JAVA_COMMIT_AT_5 = bytes.fromhex(
    "0000000000000005000000420000000002809c88c40030000000000000018bcfe568000000018bcfe5680000000000000003e80002"
    "ffffffff000000012000000008000000010c00000000000700"
)
JAVA_ABORT_AT_3 = bytes.fromhex(
    "000000000000000300000042000000000274a25e8c0030000000000000018bcfe568000000018bcfe5680000000000000003e80002"
    "ffffffff000000012000000008000000000c00000000000700"
)


def data(offset: int, *values: bytes, pid: int = -1, txn: bool = False, compression: str = "none") -> bytes:
    """A batch of ``values`` at ``offset`` (a transactional one when ``txn``)."""
    return encode_batch([Record(None, v, TS) for v in values], base_offset=offset, producer_id=pid,
                        producer_epoch=2 if pid >= 0 else -1, base_sequence=0 if pid >= 0 else -1,
                        transactional=txn, compression=compression)


def marker(offset: int, pid: int, kind: ControlRecordType) -> bytes:
    """A transaction marker as the broker writes it: our encoder, then the leader epoch, the control bit and the
    CRC rewritten."""
    value = struct.pack(">hi", 0, 7)  # version 0, coordinator epoch 7
    batch = bytearray(encode_batch([Record(CONTROL_KEY_STRUCT.pack(0, kind), value, TS)], base_offset=offset,
                                   producer_id=pid, producer_epoch=2, base_sequence=-1, transactional=True))
    struct.pack_into(">i", batch, 12, 0)  # partitionLeaderEpoch int32 at byte 12: 0, as the markers above
    (attributes,) = struct.unpack_from(">h", batch, 21)  # attributes int16 at byte 21
    struct.pack_into(">h", batch, 21, attributes | ATTR_CONTROL)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))  # crc uint32 at 17 covers 21..end
    return bytes(batch)


def offsets_and_values(batches: list[DecodedBatch], aborted: list[tuple[int, int]], read_committed: bool,
                       start: int = 0, end: int = 1 << 62) -> tuple[list[tuple[int, bytes | None]], int]:
    found = visible_records(batches, aborted, read_committed=read_committed, start_offset=start, end_offset=end)
    return [(r.offset, r.value) for r in found.records], found.next_offset


# ------------------------------------------------------------------------------------------ control records


@pytest.mark.parametrize(("raw", "kind", "offset", "key"),
                         [(JAVA_COMMIT_AT_5, ControlRecordType.COMMIT, 5, "0000" "0001"),
                          (JAVA_ABORT_AT_3, ControlRecordType.ABORT, 3, "0000" "0000")],
                         ids=["commit", "abort"])
def test_java_markers_decode_as_control_batches(raw: bytes, kind: ControlRecordType, offset: int, key: str) -> None:
    batch = decode_batch(raw)
    assert batch.is_control and batch.is_transactional and (batch.producer_id, batch.producer_epoch) == (1000, 2)
    (record,) = batch.records
    assert record.offset == offset and record.key == bytes.fromhex(key)  # version 0, type
    assert control_record_type(record.key) == kind
    assert record.value == bytes.fromhex("0000" "00000007")  # version 0, coordinator epoch 7
    assert marker(offset, 1000, kind) == raw  # the test helper below builds exactly what Java does


def test_unknown_control_types_are_reported_as_numbers() -> None:
    assert control_record_type(bytes.fromhex("0000" "0005")) == 5  # e.g. a KRaft type, not a transaction marker


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00"])
def test_a_control_key_too_short_is_a_protocol_error(key: bytes | None) -> None:
    with pytest.raises(ProtocolError, match="control record key"):
        control_record_type(key)


# ------------------------------------------------------------------------------------------ visibility

# Two producers interleaved: A's first transaction aborted, B's committed, then A's second transaction committed.
LOG = decode_batches(
    data(0, b"a0", pid=PID_A, txn=True)
    + data(1, b"b1", pid=PID_B, txn=True)
    + data(2, b"a2", pid=PID_A, txn=True)
    + JAVA_ABORT_AT_3
    + data(4, b"a4", pid=PID_A, txn=True)
    + JAVA_COMMIT_AT_5
    + marker(6, PID_B, ControlRecordType.COMMIT)
    + data(7, b"n7")
)
ABORTED = [(PID_A, 0)]  # what the broker lists for this range: A's transaction that began at offset 0


def test_read_committed_drops_aborted_transactions_and_markers() -> None:
    assert offsets_and_values(LOG, ABORTED, read_committed=True) == ([(1, b"b1"), (4, b"a4"), (7, b"n7")], 8)


def test_read_uncommitted_keeps_aborted_records_but_never_markers() -> None:
    expected = [(0, b"a0"), (1, b"b1"), (2, b"a2"), (4, b"a4"), (7, b"n7")]
    assert offsets_and_values(LOG, ABORTED, read_committed=False) == (expected, 8)


def test_an_aborted_transaction_is_only_aborted_from_its_first_offset() -> None:
    # A's transaction listed as beginning at 2: its batch at 0 belonged to an earlier, committed transaction.
    got, _ = offsets_and_values(LOG, [(PID_A, 2)], read_committed=True)
    assert got == [(0, b"a0"), (1, b"b1"), (4, b"a4"), (7, b"n7")]


def test_an_aborted_transaction_begun_before_the_start_offset_still_counts() -> None:
    # A fetch from offset 2 lists A's transaction with its first offset 0, before anything returned.
    tail = decode_batches(data(2, b"a2", pid=PID_A, txn=True) + JAVA_ABORT_AT_3 + data(4, b"a4", pid=PID_A, txn=True))
    assert offsets_and_values(tail, [(PID_A, 0)], read_committed=True, start=2) == ([(4, b"a4")], 5)


def test_start_and_end_cut_inside_a_compressed_batch() -> None:
    batches = decode_batches(data(10, b"10", b"11", b"12", b"13", b"14", compression="lz4") + data(15, b"15"))
    # Records before the start are skipped, records from the end on are not returned; the walk stops before a
    # batch that starts at the end, and the next offset is after the last batch walked.
    assert offsets_and_values(batches, [], read_committed=False, start=12, end=14) == ([(12, b"12"), (13, b"13")], 15)
    assert offsets_and_values(batches, [], read_committed=True, start=12, end=15) == (
        [(12, b"12"), (13, b"13"), (14, b"14")], 15)
    assert offsets_and_values(batches, [], read_committed=True, start=12, end=16)[1] == 16


def test_no_batches_means_no_progress() -> None:
    assert offsets_and_values([], [(PID_A, 0)], read_committed=True, start=9, end=20) == ([], 9)


def test_markers_alone_advance_the_position() -> None:
    batches = decode_batches(JAVA_ABORT_AT_3 + JAVA_COMMIT_AT_5)
    assert offsets_and_values(batches, [(PID_A, 0)], read_committed=True, start=3, end=6) == ([], 6)
