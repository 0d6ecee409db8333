"""Compression codecs: names, round trips, framing details, what the Java client writes, errors.

Pinning policy: compressed bytes depend on the library version (zlib, lz4, zstd, snappy implementations), so a
pinned compressed blob or its CRC would break on an upgrade without any bug. Instead we pin
(1) the framing bytes that are ours to choose (xerial header and block layout, LZ4 frame descriptor flags, gzip
    header, zstd magic), and
(2) DECODING of compressed records sections written by the real Java client (kafka-clients 4.3.1), which must
    keep working forever, plus the CRC-32C of the uncompressed section they all decode to,
and round-trip everything we compress. test_record_batch pins the CRC of whole Java-written batches per codec.
"""

from __future__ import annotations

import random
import struct
import sys

import crc32c
import pytest

from spark_kafka_sink.errors import ConfigError, ProtocolError
from spark_kafka_sink.protocol.compression import Codec, codec_id, codec_name, compress, decompress

# Records section of a 2-record batch (key b"k", value b"v", header h=x; then null key and value), as Java
# writes it uncompressed. Every Java vector below decompresses to it.
SECTION = bytes.fromhex("18000000026b027602026802780c000102010100")
SECTION_CRC = 0x955E9DEB  # crc32c(SECTION)

# The same section compressed by kafka-clients 4.3.1 (MemoryRecordsBuilder, default levels).
JAVA = {
    Codec.GZIP: "1f8b08000000000000ff9360606060ca662a6362ca60aae06160646264640000d056e9fd14000000",
    # xerial: 0x82 SNAPPY 0x00, version 1, compat 1, then int32 block length 0x16 and a raw snappy block
    Codec.SNAPPY: "82534e4150505900000000010000000100000016144c18000000026b027602026802780c000102010100",
    # LZ4 frame: magic, FLG 0x60 (v1, independent blocks), BD 0x40 (64 KB), HC; a stored block; end mark 0
    Codec.LZ4: "04224d186040821400008018000000026b027602026802780c00010201010000000000",
    # zstd frame without a content size (zstd-jni streams), as one raw block
    Codec.ZSTD: "28b52ffd0058a0000018000000026b027602026802780c000102010100010000",
}

RNG = random.Random(7)
PAYLOADS = [
    b"",
    b"x",
    SECTION,
    bytes(RNG.randrange(256) for _ in range(5000)),  # incompressible
    b"abc" * 40000,  # 120 KB: several snappy (32 KiB) and lz4 (64 KB) blocks
    bytes(32 * 1024),  # exactly one xerial block
    bytes(32 * 1024 + 1),  # one block and one byte
]


def test_names_and_ids() -> None:
    assert [codec_name(c) for c in range(5)] == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert codec_id("ZSTD") is Codec.ZSTD
    assert codec_id(" lz4 ") is Codec.LZ4
    assert codec_id(1) is Codec.GZIP
    with pytest.raises(ConfigError, match="brotli"):
        codec_id("brotli")
    with pytest.raises(ConfigError):
        codec_id(5)


def test_section_crc_is_pinned() -> None:
    assert crc32c.crc32c(SECTION) == SECTION_CRC


@pytest.mark.parametrize("codec", list(JAVA))
def test_decodes_what_java_writes(codec: Codec) -> None:
    assert decompress(codec, bytes.fromhex(JAVA[codec])) == SECTION


@pytest.mark.parametrize("codec", list(Codec))
@pytest.mark.parametrize("size", range(len(PAYLOADS)))
def test_round_trip(codec: Codec, size: int) -> None:
    data = PAYLOADS[size]
    assert decompress(codec, compress(codec, data)) == data
    assert decompress(codec, compress(codec, memoryview(data))) == data


def test_none_is_identity() -> None:
    assert compress(Codec.NONE, SECTION) == SECTION
    assert decompress(Codec.NONE, SECTION) == SECTION


def test_xerial_snappy_framing() -> None:
    data = bytes(range(256)) * 300  # 76800 bytes -> blocks of 32768, 32768, 11264
    out = compress(Codec.SNAPPY, data)
    assert out[:16] == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    pos, blocks = 16, 0
    while pos < len(out):
        (length,) = struct.unpack_from(">i", out, pos)
        block = out[pos + 4 : pos + 4 + length]
        assert decompress(Codec.SNAPPY, block) == data[blocks * 32768 : (blocks + 1) * 32768]  # plain snappy
        pos += 4 + length
        blocks += 1
    assert pos == len(out) and blocks == 3


def test_lz4_frame_descriptor() -> None:
    out = compress(Codec.LZ4, b"abc" * 40000)
    # magic; FLG 0x60 = version 01, block independence, no block checksum, no content size, no content checksum;
    # BD 0x40 = 64 KB max block size. (Brokers reject dependent blocks.)
    assert out[:6] == bytes.fromhex("04224d18" "60" "40")
    assert out[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum after it


def test_gzip_and_zstd_headers() -> None:
    # gzip: magic, deflate, no flags, mtime 0 (output depends only on the input)
    assert compress(Codec.GZIP, SECTION)[:8] == bytes.fromhex("1f8b0800" "00000000")
    assert compress(Codec.ZSTD, SECTION)[:4] == bytes.fromhex("28b52ffd")


def test_decompress_accepts_what_other_clients_write() -> None:
    import gzip

    import cramjam
    import zstandard

    assert decompress(Codec.SNAPPY, bytes(cramjam.snappy.compress_raw(SECTION))) == SECTION  # unframed snappy
    assert decompress(Codec.GZIP, gzip.compress(b"a") + gzip.compress(b"b")) == b"ab"  # two gzip members
    two_frames = zstandard.ZstdCompressor().compress(b"a") + zstandard.ZstdCompressor().compress(b"b")
    assert decompress(Codec.ZSTD, two_frames) == b"ab"


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_every_truncation_raises(codec: Codec) -> None:
    blob = compress(codec, b"hello kafka " * 50)
    for cut in range(len(blob)):
        if codec is Codec.SNAPPY and cut == 16:
            # The bare xerial header is a complete stream of zero blocks (what compress(b"") writes); a batch
            # cut there fails later, on its record count.
            assert decompress(codec, blob[:cut]) == b""
            continue
        with pytest.raises(ProtocolError):
            decompress(codec, blob[:cut])


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_garbage_raises(codec: Codec) -> None:
    with pytest.raises(ProtocolError):
        decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x05garbage")
    with pytest.raises(ProtocolError):
        decompress(codec, b"definitely not compressed data")


@pytest.mark.parametrize(("codec", "module", "extra"), [(Codec.ZSTD, "zstandard", "zstd"),
                                                        (Codec.SNAPPY, "cramjam", "snappy")])
def test_missing_optional_package_names_the_extra(
    codec: Codec, module: str, extra: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    for fn in (compress, decompress):
        with pytest.raises(ConfigError, match=rf"pip install spark-kafka-sink\[{extra}\]"):
            fn(codec, b"x")


def test_compression_levels() -> None:
    data = b"abc" * 10000
    for codec, level in ((Codec.GZIP, 1), (Codec.LZ4, 9), (Codec.ZSTD, 19)):
        assert decompress(codec, compress(codec, data, level=level)) == data
