"""RecordBatch v2: golden bytes (cross-checked with the Java client), round trips, truncation, corruption."""

from __future__ import annotations

import itertools
import struct

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafka_sink.errors import IllegalStateError, ProtocolError
from spark_kafka_sink.protocol.compression import Codec
from spark_kafka_sink.protocol.record_batch import (
    HEADER_SIZE,
    RECORD_OVERHEAD_BOUND,
    BatchBuilder,
    DecodedRecord,
    Record,
    assemble_batch,
    assemble_batches,
    decode_batch,
    decode_batches,
    encode_batch,
    encode_record,
    producer_state_header,
    record_size,
    record_size_bound,
    with_crc,
    with_producer_state,
)

RECORDS = [Record(b"k", b"v", 1000, [("h", b"x")]), Record(None, None, 999)]

# RECORDS encoded by hand. kafka-clients 4.3.1's MemoryRecordsBuilder writes exactly these bytes.
GOLDEN = bytes.fromhex(
    "0000000000000000"  # baseOffset 0
    "00000045"  # batchLength 69 = 81 bytes - 12
    "ffffffff"  # partitionLeaderEpoch -1
    "02"  # magic 2
    "9244a6ea"  # crc: CRC-32C of the bytes from attributes to the end
    "0000"  # attributes: no codec, create time, not transactional, not control
    "00000001"  # lastOffsetDelta 1
    "00000000000003e8"  # baseTimestamp 1000 (the first record's)
    "00000000000003e8"  # maxTimestamp 1000
    "ffffffffffffffff"  # producerId -1
    "ffff"  # producerEpoch -1
    "ffffffff"  # baseSequence -1
    "00000002"  # recordsCount 2
    # record 0
    "18"  # length 12 (zigzag varint)
    "00"  # attributes
    "00"  # timestampDelta 0
    "00"  # offsetDelta 0
    "026b"  # keyLength 1, "k"
    "0276"  # valueLength 1, "v"
    "02"  # headerCount 1
    "0268"  # header keyLength 1, "h"
    "0278"  # header valueLength 1, "x"
    # record 1
    "0c"  # length 6
    "00"  # attributes
    "01"  # timestampDelta -1 (zigzag): deltas may be negative
    "02"  # offsetDelta 1
    "01"  # keyLength -1: null key
    "01"  # valueLength -1: null value (tombstone)
    "00"  # headerCount 0
)

# The same records as batches written by kafka-clients 4.3.1 with each codec; the CRC of each is pinned here.
JAVA = {
    Codec.GZIP: (0xBC52BDE7, "1f8b08000000000000ff9360606060ca662a6362ca60aae06160646264640000d056e9fd14000000"),
    Codec.SNAPPY: (0x963B669C, "82534e4150505900000000010000000100000016144c18000000026b027602026802780c000102010100"),
    Codec.LZ4: (0x6BB1CB62, "04224d186040821400008018000000026b027602026802780c00010201010000000000"),
    Codec.ZSTD: (0xF1DBE794, "28b52ffd0058a0000018000000026b027602026802780c000102010100010000"),
}
EXPECTED = (
    DecodedRecord(0, 1000, b"k", b"v", (("h", b"x"),)),
    DecodedRecord(1, 999, None, None, ()),
)


def java_batch(codec: Codec) -> bytes:
    crc, payload_hex = JAVA[codec]
    payload = bytes.fromhex(payload_hex)
    header = bytearray(GOLDEN[:HEADER_SIZE])
    struct.pack_into(">i", header, 8, HEADER_SIZE - 12 + len(payload))
    struct.pack_into(">I", header, 17, crc)
    struct.pack_into(">h", header, 21, codec)
    return bytes(header) + payload


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_golden_bytes() -> None:
    assert encode_batch(RECORDS) == GOLDEN
    b = decode_batch(GOLDEN)
    assert b.records == EXPECTED
    assert (b.base_offset, b.partition_leader_epoch, b.crc, b.last_offset) == (0, -1, 0x9244A6EA, 1)
    assert (b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch, b.base_sequence) == (
        1000, 1000, -1, -1, -1)
    assert not (b.is_transactional or b.is_control or b.log_append_time) and b.compression is Codec.NONE


def test_builder_writes_the_golden_bytes() -> None:
    builder = BatchBuilder(1 << 20, Codec.NONE)
    for r in RECORDS:
        assert builder.try_append(r.timestamp_ms, r.key, r.value, r.headers)
    assert builder.record_count == 2 and builder.estimated_size == len(GOLDEN)
    assert (builder.base_timestamp, builder.max_timestamp) == (1000, 1000)
    assert builder.build() == GOLDEN
    assert builder.build() == GOLDEN  # idempotent
    with pytest.raises(IllegalStateError):
        builder.try_append(0, None, b"late")


def test_assemble_batches_writes_the_golden_bytes_and_java_lz4_batches() -> None:
    # Three batches' records back to back: the golden records section three times.
    section = GOLDEN[HEADER_SIZE:]
    sections = section * 3
    ends = [len(section), 2 * len(section), 3 * len(section)]
    assert assemble_batches(sections, ends, [2, 2, 2], [1000] * 3, [1000] * 3) == [GOLDEN] * 3
    # lz4: byte for byte what kafka-clients writes (the other codecs' frame headers differ from Java's in fields
    # that do not matter: they are checked against assemble_batch below).
    assert assemble_batches(sections, ends, [2, 2, 2], [1000] * 3, [1000] * 3, compression=Codec.LZ4) == (
        [java_batch(Codec.LZ4)] * 3)


def test_assemble_batches_without_checksum_leaves_the_crc_zero_and_with_crc_seals_it() -> None:
    section = GOLDEN[HEADER_SIZE:]
    (unsealed,) = assemble_batches(section, [len(section)], [2], [1000], [1000], checksum=False)
    assert unsealed == GOLDEN[:17] + b"\x00\x00\x00\x00" + GOLDEN[21:]  # the crc field (offset 17) zero
    assert with_crc(unsealed) == GOLDEN and with_crc(GOLDEN) == GOLDEN
    with pytest.raises(ProtocolError):
        with_crc(unsealed[:-1])  # batchLength no longer matches


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("transactional", [False, True])
def test_assemble_batches_equals_assemble_batch_one_by_one(codec: Codec, transactional: bool) -> None:
    sections = [encode_record(0, 0, b"k%d" % i, b"v" * i, []) * (i + 1) for i in range(5)]
    counts, bases, maxes = [i + 1 for i in range(5)], [1000 + i for i in range(5)], [2000 - i for i in range(5)]
    ends = list(itertools.accumulate(len(x) for x in sections))
    expected = [assemble_batch(x, c, b, m, compression=codec, transactional=transactional)
                for x, c, b, m in zip(sections, counts, bases, maxes, strict=True)]
    assert assemble_batches(memoryview(b"".join(sections)), ends, counts, bases, maxes, compression=codec,
                            transactional=transactional) == expected
    assert assemble_batches(b"", [], [], [], []) == []
    with pytest.raises(ValueError):
        assemble_batches(sections[0], [len(sections[0])], [0], [0], [0])


@pytest.mark.parametrize("codec", list(JAVA))
def test_decodes_java_compressed_batches(codec: Codec) -> None:
    b = decode_batch(java_batch(codec))
    assert b.crc == JAVA[codec][0] and b.compression is codec
    assert b.records == EXPECTED


@pytest.mark.parametrize("codec", list(Codec))
def test_round_trip_each_codec(codec: Codec) -> None:
    records = [Record(bytes([i % 256]) * i, b"value-%d" % i * 50, 5000 - i, [("ключ", bytes(i))]) for i in range(300)]
    batch = encode_batch(records, compression=codec, base_offset=100)
    b = decode_batch(batch)
    assert b.compression is codec and b.base_offset == 100 and b.max_timestamp == 5000
    assert [(r.offset, r.key, r.value, r.timestamp_ms, r.headers) for r in b.records] == [
        (100 + i, r.key, r.value, r.timestamp_ms, tuple(r.headers)) for i, r in enumerate(records)
    ]


def test_with_producer_state() -> None:
    stamped = with_producer_state(GOLDEN, 0x0102, 3, 7, True)
    assert stamped[21:23] == b"\x00\x10"  # attributes: transactional bit
    assert stamped[43:57] == bytes.fromhex("0000000000000102" "0003" "00000007")  # producerId, epoch, baseSequence
    assert stamped[:17] == GOLDEN[:17] and stamped[61:] == GOLDEN[61:]
    b = decode_batch(stamped)  # the CRC was recomputed
    assert (b.producer_id, b.producer_epoch, b.base_sequence, b.is_transactional) == (0x0102, 3, 7, True)
    assert with_producer_state(stamped, -1, -1, -1, False) == GOLDEN
    for codec in JAVA:  # the codec bits survive
        assert decode_batch(with_producer_state(java_batch(codec), 1, 0, 0, True)).records == EXPECTED
    with pytest.raises(ProtocolError):
        with_producer_state(GOLDEN[:-1], 1, 0, 0, False)
    assert producer_state_header(memoryview(GOLDEN), 0x0102, 3, 7, True) == stamped[:HEADER_SIZE]


def test_builder_respects_max_bytes() -> None:
    builder = BatchBuilder(150, "gzip", transactional=True)
    assert builder.try_append(1, None, b"x" * 500)  # the first record always fits
    assert not builder.try_append(2, None, b"y")
    assert builder.record_count == 1
    builder = BatchBuilder(HEADER_SIZE + 3 * 20, Codec.NONE)
    accepted = [builder.try_append(10, b"key", b"v" * 10) for _ in range(5)]  # 19-byte records
    assert accepted == [True, True, True, False, False]
    assert builder.estimated_size <= HEADER_SIZE + 60
    assert len(builder.build()) == builder.estimated_size
    with pytest.raises(IllegalStateError):
        BatchBuilder(100).build()


def test_a_builder_of_records_joined_elsewhere_builds_the_same_batch_and_takes_more() -> None:
    records = [encode_record(i, 5 * i, b"k", b"v%d" % i, []) for i in range(3)]
    joined = BatchBuilder.of_records(b"".join(records), 3, 100, 110, "gzip", transactional=True)
    appended = BatchBuilder(1 << 20, "gzip", transactional=True)
    for i in range(3):
        assert appended.try_append(100 + 5 * i, b"k", b"v%d" % i)
    assert (joined.record_count, joined.estimated_size) == (3, appended.estimated_size)
    assert joined.build() == appended.build()
    more = BatchBuilder.of_records(b"".join(records), 3, 100, 110)
    assert not more.try_append(120, b"k", b"v3")  # its limit is what it holds
    assert decode_batch(more.build()).records[2].value == b"v2"


def test_concatenated_batches_and_truncated_tail() -> None:
    batches = [GOLDEN, java_batch(Codec.LZ4), encode_batch(RECORDS, compression="zstd", base_offset=2)]
    data = b"".join(batches)
    assert [b.base_offset for b in decode_batches(data)] == [0, 0, 2]
    bounds = [0, len(batches[0]), len(batches[0]) + len(batches[1]), len(data)]
    for cut in range(len(data) + 1):
        complete = sum(1 for end in bounds[1:] if end <= cut)
        assert len(decode_batches(data[:cut])) == complete  # a broker may cut the last batch short
        if cut in bounds:
            assert len(decode_batches(data[:cut], allow_truncated_tail=False)) == complete
        else:
            with pytest.raises(ProtocolError, match="truncated"):
                decode_batches(data[:cut], allow_truncated_tail=False)


def test_decode_batch_is_strict() -> None:
    for cut in range(len(GOLDEN)):
        with pytest.raises(ProtocolError):
            decode_batch(GOLDEN[:cut])
    with pytest.raises(ProtocolError):
        decode_batch(GOLDEN + b"\x00")
    with pytest.raises(ProtocolError):
        decode_batch(GOLDEN + GOLDEN)


def test_every_covered_byte_flip_is_detected() -> None:
    not_covered = set(range(0, 8)) | set(range(12, 16))  # baseOffset, partitionLeaderEpoch: the broker rewrites them
    for i in range(len(GOLDEN)):
        if i in not_covered:
            continue
        corrupt = bytearray(GOLDEN)
        corrupt[i] ^= 0x40
        with pytest.raises(ProtocolError):
            decode_batch(bytes(corrupt))


@pytest.mark.parametrize(
    ("section", "count"),
    [
        (GOLDEN[61:], 3),  # fewer records than recordsCount
        (GOLDEN[61:], 1),  # bytes left after recordsCount records
        (b"\x1a" + GOLDEN[62:], 2),  # record length 13, body is 12
        (b"\x7f" + GOLDEN[62:], 2),  # record length past the section
        (GOLDEN[61:65] + b"\x03" + GOLDEN[66:], 2),  # keyLength -2
        (GOLDEN[61:69] + b"\x7f" + GOLDEN[70:], 2),  # header count past the section
        (GOLDEN[61:70] + b"\x01" + GOLDEN[71:], 2),  # null header key
        (GOLDEN[61:71] + b"\xff" + GOLDEN[72:], 2),  # header key not UTF-8
    ],
)
def test_malformed_records_with_valid_crc(section: bytes, count: int) -> None:
    with pytest.raises(ProtocolError):
        decode_batch(assemble_batch(section, count, 1000, 1000))


def test_malformed_headers() -> None:
    with pytest.raises(ProtocolError, match="magic"):
        decode_batch(recrc(bytearray(GOLDEN[:16]) + b"\x01" + bytearray(GOLDEN[17:])))
    with pytest.raises(ProtocolError, match="codec"):
        decode_batch(recrc(bytearray(GOLDEN[:21]) + b"\x00\x07" + bytearray(GOLDEN[23:])))
    with pytest.raises(ProtocolError, match="shorter"):
        decode_batches(bytes(8) + b"\x00\x00\x00\x05" + bytes(60))
    with pytest.raises(ValueError):
        encode_batch([])


def test_attribute_bits() -> None:
    log_append = bytearray(GOLDEN)
    log_append[22] |= 0x08 | 0x20  # log-append time + control
    log_append[35:43] = struct.pack(">q", 5555)  # maxTimestamp: the broker's append time
    b = decode_batch(recrc(log_append))
    assert b.log_append_time and b.is_control
    assert [r.timestamp_ms for r in b.records] == [5555, 5555]


headers_st = st.lists(st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3)
record_st = st.builds(
    Record,
    key=st.none() | st.binary(max_size=300),
    value=st.none() | st.binary(max_size=20000),
    timestamp_ms=st.integers(-(2**40), 2**40),
    headers=headers_st,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(record_st, min_size=1, max_size=5), st.sampled_from(list(Codec)))
def test_round_trip_property(records: list[Record], codec: Codec) -> None:
    b = decode_batch(encode_batch(records, compression=codec))
    assert b.max_timestamp == max(r.timestamp_ms for r in records)
    assert [(r.key, r.value, r.timestamp_ms, r.headers) for r in b.records] == [
        (r.key, r.value, r.timestamp_ms, tuple(r.headers)) for r in records
    ]


@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**31 - 1), st.integers(-(2**63), 2**63 - 1), record_st)
def test_record_size_matches_encoding(offset_delta: int, ts_delta: int, r: Record) -> None:
    assert record_size(offset_delta, ts_delta, r.key, r.value, r.headers) == len(
        encode_record(offset_delta, ts_delta, r.key, r.value, r.headers)
    )


@pytest.mark.parametrize(("offset_delta", "timestamp_delta"), [(0, 0), (2**31 - 1, -(2**63)), (2**31 - 1, 2**63 - 1)])
@pytest.mark.parametrize("headers", [(), (("h", b"x"), ("\u00e9t\u00e9", None))])
@pytest.mark.parametrize(("key", "value"), [(None, None), (b"k", b"v" * 200), (b"", b"\x00" * (1 << 21))])
def test_record_size_bound_holds_wherever_the_record_lands(
        offset_delta: int, timestamp_delta: int, headers: tuple[tuple[str, bytes | None], ...], key: bytes | None,
        value: bytes | None) -> None:
    """send and send_batch compare this one bound with the limits (then measure near them): it must never be less
    than the record's exact size, for the widest deltas a batch can give it."""
    header_bytes = sum(len(k.encode("utf-8")) + len(v or b"") for k, v in headers)
    bound = record_size_bound(len(key or b""), len(value or b""), header_bytes, len(headers))
    exact = record_size(offset_delta, timestamp_delta, key, value, headers)
    assert exact <= bound <= exact + RECORD_OVERHEAD_BOUND + 10 * len(headers)
