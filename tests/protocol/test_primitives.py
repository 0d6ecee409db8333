"""Wire primitives: exact bytes, round trips, every truncation, trailing bytes, malformed input."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol import primitives as p
from spark_kafka_sink.protocol.primitives import Reader

INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)

# (writer, reader method name, value, exact encoding)
GOLDEN: list[tuple[Callable[[Any], bytes], str, Any, bytes]] = [
    (p.write_int8, "int8", -1, b"\xff"),
    (p.write_int16, "int16", 0x0102, b"\x01\x02"),  # big-endian
    (p.write_int32, "int32", -2, b"\xff\xff\xff\xfe"),
    (p.write_int64, "int64", 1, b"\x00" * 7 + b"\x01"),
    (p.write_uint16, "uint16", 0xFFFF, b"\xff\xff"),
    (p.write_uint32, "uint32", 0xFFFFFFFE, b"\xff\xff\xff\xfe"),
    (p.write_boolean, "boolean", True, b"\x01"),
    (p.write_uvarint, "uvarint", 0, b"\x00"),
    (p.write_uvarint, "uvarint", 127, b"\x7f"),  # largest 1-byte value
    (p.write_uvarint, "uvarint", 128, b"\x80\x01"),  # low 7 bits first, continuation bit set
    (p.write_uvarint, "uvarint", 16383, b"\xff\x7f"),
    (p.write_uvarint, "uvarint", 16384, b"\x80\x80\x01"),
    (p.write_uvarint, "uvarint", 2**32 - 1, b"\xff\xff\xff\xff\x0f"),  # 5 bytes: the maximum
    (p.write_varint, "varint", 0, b"\x00"),
    (p.write_varint, "varint", -1, b"\x01"),  # zigzag: -1 -> 1
    (p.write_varint, "varint", 1, b"\x02"),  # zigzag: 1 -> 2
    (p.write_varint, "varint", 63, b"\x7e"),
    (p.write_varint, "varint", -64, b"\x7f"),
    (p.write_varint, "varint", 64, b"\x80\x01"),
    (p.write_varint, "varint", 300, b"\xd8\x04"),
    (p.write_varint, "varint", 2**31 - 1, b"\xfe\xff\xff\xff\x0f"),
    (p.write_varint, "varint", -(2**31), b"\xff\xff\xff\xff\x0f"),
    (p.write_varlong, "varlong", -1, b"\x01"),
    (p.write_varlong, "varlong", 2**63 - 1, b"\xfe" + b"\xff" * 8 + b"\x01"),  # 10 bytes
    (p.write_varlong, "varlong", -(2**63), b"\xff" * 9 + b"\x01"),
    (p.write_string, "string", "abc", b"\x00\x03abc"),  # int16 length
    (p.write_string, "string", "é", b"\x00\x02\xc3\xa9"),  # length counts UTF-8 bytes
    (p.write_nullable_string, "nullable_string", None, b"\xff\xff"),
    (p.write_nullable_string, "nullable_string", "", b"\x00\x00"),
    (p.write_compact_string, "compact_string", "abc", b"\x04abc"),  # uvarint length + 1
    (p.write_compact_nullable_string, "compact_nullable_string", None, b"\x00"),
    (p.write_compact_nullable_string, "compact_nullable_string", "", b"\x01"),
    (p.write_bytes, "bytes_", b"\x00\x01", b"\x00\x00\x00\x02\x00\x01"),  # int32 length
    (p.write_nullable_bytes, "nullable_bytes", None, b"\xff\xff\xff\xff"),
    (p.write_compact_bytes, "compact_bytes", b"xy", b"\x03xy"),
    (p.write_compact_nullable_bytes, "compact_nullable_bytes", None, b"\x00"),
    (p.write_uuid, "uuid", uuid.UUID(int=0x0102), b"\x00" * 14 + b"\x01\x02"),
    (p.write_tagged_fields, "tagged_fields", {}, b"\x00"),
    # count 2; tag 0 size 1 data 0x2a; tag 5 size 0 (written in ascending tag order)
    (p.write_tagged_fields, "tagged_fields", {5: b"", 0: b"\x2a"}, b"\x02\x00\x01\x2a\x05\x00"),
]


@pytest.mark.parametrize(("write", "method", "value", "encoded"), GOLDEN)
def test_golden_bytes(write: Callable[[Any], bytes], method: str, value: Any, encoded: bytes) -> None:
    assert write(value) == encoded
    r = Reader(encoded)
    assert getattr(r, method)() == value
    r.expect_end()


@pytest.mark.parametrize(("write", "method", "value", "encoded"), GOLDEN)
def test_every_truncation_raises(write: Callable[[Any], bytes], method: str, value: Any, encoded: bytes) -> None:
    for cut in range(len(encoded)):
        with pytest.raises(ProtocolError):
            getattr(Reader(encoded[:cut]), method)()


@pytest.mark.parametrize(("write", "method", "value", "encoded"), GOLDEN)
def test_trailing_bytes_are_left_unread(write: Callable[[Any], bytes], method: str, value: Any, encoded: bytes) -> None:
    r = Reader(memoryview(encoded + b"\xaa\xbb"))
    assert getattr(r, method)() == value
    assert r.position == len(encoded)
    assert r.remaining() == 2
    with pytest.raises(ProtocolError, match="trailing"):
        r.expect_end()


def test_sizes_match_encodings() -> None:
    for v in (0, 1, 63, 64, 127, 128, 8191, 8192, 16383, 16384, 2**21, 2**28, 2**31 - 1):
        assert p.uvarint_size(v) == len(p.write_uvarint(v))
        assert p.varint_size(v) == len(p.write_varint(v))
        assert p.varint_size(-v - 1) == len(p.write_varint(-v - 1))
    for v in (0, 2**35, 2**62, 2**63 - 1, -(2**63)):
        assert p.varlong_size(v) == len(p.write_varlong(v))


def test_arrays() -> None:
    data = p.write_array([1, -1], p.write_int32) + p.write_compact_array(["a", "b"], p.write_compact_string)
    assert data == b"\x00\x00\x00\x02" b"\x00\x00\x00\x01\xff\xff\xff\xff" b"\x03" b"\x02a\x02b"
    r = Reader(data + p.write_array(None, p.write_int8) + p.write_compact_array(None, p.write_int8))
    assert r.array(r.int32) == [1, -1]
    assert r.compact_array(r.compact_string) == ["a", "b"]
    assert r.array(r.int8) is None  # int32 -1 = null array
    assert r.compact_array(r.int8) is None  # uvarint 0 = null array
    r.expect_end()


def test_array_truncations_raise() -> None:
    data = p.write_compact_array([1, 2, 3], p.write_int16)
    for cut in range(len(data)):
        r = Reader(data[:cut])
        with pytest.raises(ProtocolError):
            r.compact_array(r.int16)


@pytest.mark.parametrize(
    ("method", "data"),
    [
        ("uvarint", b"\x80\x80\x80\x80\x80\x00"),  # six bytes: longer than any uint32
        ("uvarint", b"\xff\xff\xff\xff\x1f"),  # five bytes but above 2**32 - 1
        ("varint", b"\xff\xff\xff\xff\xff\x01"),
        ("varlong", b"\xff" * 10 + b"\x01"),  # eleven bytes
        ("string", b"\xff\xff"),  # null where a string is required
        ("string", b"\xff\xfe"),  # length -2
        ("string", b"\x00\x01\xff"),  # not UTF-8
        ("compact_string", b"\x00"),
        ("compact_string", b"\x02\xc3"),  # truncated UTF-8 sequence
        ("bytes_", b"\xff\xff\xff\xff"),
        ("nullable_bytes", b"\xff\xff\xff\xfe"),
        ("compact_bytes", b"\x00"),
        ("boolean", b"\x02"),
        ("tagged_fields", b"\x7f\x00"),  # 127 fields announced, 1 byte left
    ],
)
def test_malformed_input_raises(method: str, data: bytes) -> None:
    with pytest.raises(ProtocolError):
        getattr(Reader(data), method)()


def test_huge_array_count_raises_without_looping() -> None:
    r = Reader(b"\x7f\xff\xff\xff\x00")  # 2**31 - 1 elements announced, 1 byte present
    with pytest.raises(ProtocolError):
        r.array(r.int8)
    r = Reader(b"\xff\xff\xff\xff\x0f")
    with pytest.raises(ProtocolError):
        r.compact_array(r.int8)
    with pytest.raises(ProtocolError):
        Reader(b"\x80\x80\x80\x80").array(lambda: 0)  # negative count other than -1


def test_reader_raw_skip_and_offset() -> None:
    r = Reader(bytearray(b"abcdef"), offset=1)
    assert r.raw(2) == b"bc"
    r.skip(1)
    assert bytes(r.raw_view(2)) == b"ef"
    with pytest.raises(ProtocolError):
        r.raw(1)
    with pytest.raises(ValueError):
        Reader(b"ab", offset=3)


@pytest.mark.parametrize(
    ("write", "value"),
    [
        (p.write_int8, 128),
        (p.write_int16, -(2**15) - 1),
        (p.write_int32, 2**31),
        (p.write_int64, 2**63),
        (p.write_uint32, -1),
        (p.write_uvarint, 2**32),
        (p.write_uvarint, -1),
        (p.write_varint, 2**31),
        (p.write_varlong, -(2**63) - 1),
        (p.write_uuid, b"short"),
    ],
)
def test_out_of_range_writes_raise_value_error(write: Callable[[Any], bytes], value: Any) -> None:
    with pytest.raises(ValueError):
        write(value)


@settings(deadline=None)  # timing varies on a shared CI machine
@given(INT32)
def test_varint_round_trip(v: int) -> None:
    data = p.write_varint(v)
    assert Reader(data).varint() == v
    assert len(data) == p.varint_size(v)


@settings(deadline=None)  # timing varies on a shared CI machine
@given(INT64)
def test_varlong_round_trip(v: int) -> None:
    r = Reader(p.write_varlong(v))
    assert r.varlong() == v
    r.expect_end()


@settings(deadline=None)  # timing varies on a shared CI machine
@given(st.integers(0, 2**32 - 1))
def test_uvarint_round_trip(v: int) -> None:
    assert Reader(p.write_uvarint(v)).uvarint() == v


@settings(deadline=None)  # timing varies on a shared CI machine
@given(st.text(), st.binary(), st.none() | st.text(), st.dictionaries(st.integers(0, 1000), st.binary(max_size=20)))
def test_mixed_round_trip(s: str, b: bytes, ns: str | None, tags: dict[int, bytes]) -> None:
    data = b"".join(
        [
            p.write_compact_string(s),
            p.write_compact_nullable_string(ns),
            p.write_nullable_string(ns),
            p.write_compact_bytes(b),
            p.write_bytes(b),
            p.write_tagged_fields(tags),
        ]
    )
    r = Reader(data)
    assert r.compact_string() == s
    assert r.compact_nullable_string() == ns
    assert r.nullable_string() == ns
    assert r.compact_bytes() == b
    assert r.bytes_() == b
    assert r.tagged_fields() == tags
    r.expect_end()
    for cut in range(len(data)):  # never a silent short read, whatever the cut
        r = Reader(data[:cut])
        with pytest.raises(ProtocolError):
            r.compact_string()
            r.compact_nullable_string()
            r.nullable_string()
            r.compact_bytes()
            r.bytes_()
            r.tagged_fields()
            r.expect_end()
