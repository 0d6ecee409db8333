"""Record-batch compression codecs, as the Java client writes them. Pure: bytes in, bytes out.

    compress(codec, data, level=None) -> bytes      decompress(codec, data) -> bytes
    codec_id("zstd") -> Codec.ZSTD                  codec_name(4) -> "zstd"

Codec ids are the low three bits of the RecordBatch attributes. ``snappy`` needs ``cramjam`` and ``zstd`` needs
``zstandard`` (optional extras): without them ``compress``/``decompress`` raise ConfigError naming the pip command.
Corrupt or truncated compressed input raises ProtocolError.
"""

from __future__ import annotations

import enum
import gzip
import struct
import zlib
from types import ModuleType

import lz4.frame

from spark_kafka_sink.errors import ConfigError, ProtocolError

__all__ = ["Codec", "codec_id", "codec_name", "compress", "decompress", "require_codec"]


class Codec(enum.IntEnum):
    """Compression codec ids as stored in RecordBatch attributes bits 0-2."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_NAMES = {c: c.name.lower() for c in Codec}
_BY_NAME = {name: c for c, name in _NAMES.items()}

# The Java client's default levels (compression.<codec>.level = -1 / 9 / 3). Java's lz4 default (9) is lz4-java's
# fast compressor, which is lz4's fast mode: level 0 here (python-lz4's levels 3 and up are LZ4-HC). Pass a level to
# override.
_GZIP_LEVEL = 6
_LZ4_LEVEL = 0
_ZSTD_LEVEL = 3

# xerial snappy stream framing, which the Java client writes (SnappyOutputStream):
_XERIAL_MAGIC = b"\x82SNAPPY\x00"  # 8 bytes: 0x82 'SNAPPY' 0x00
_XERIAL_HEADER = struct.Struct(
    ">8s"  # magic, as above
    "i"  # version: 1
    "i"  # minimum compatible version: 1
)
_XERIAL_BLOCK_LENGTH = struct.Struct(">i")  # before each raw snappy block: its compressed length
_XERIAL_BLOCK_INPUT = 32 * 1024  # uncompressed bytes per block (xerial's default block size)


def codec_id(name: str | int) -> Codec:
    """'none' / 'gzip' / 'snappy' / 'lz4' / 'zstd' (any case) or an id 0-4 -> Codec; anything else: ConfigError."""
    if type(name) is Codec:  # already resolved (the hot path: ~3 calls per encoded batch)
        return name
    if isinstance(name, int):
        try:
            return Codec(name)
        except ValueError:
            raise ConfigError(f"unknown compression codec id {name}; known: 0-4") from None
    try:
        return _BY_NAME[name.strip().lower()]
    except KeyError:
        raise ConfigError(
            f"compression.type={name!r} is not one of: {', '.join(_BY_NAME)}"
        ) from None


def codec_name(codec: int) -> str:
    """Codec id -> its Kafka config name."""
    return _NAMES[codec_id(codec)]


def _optional(module: str, extra: str) -> ModuleType:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(
            f"compression.type={extra} needs the optional package {module!r}: "
            f"pip install spark-kafka-sink[{extra}]"
        ) from None


def require_codec(codec: int | str) -> None:
    """ConfigError if ``codec`` needs an optional package that is not installed (zstd: zstandard, snappy: cramjam):
    checked when a producer is configured, not first when the sender thread builds a batch."""
    c = codec_id(codec)
    if c is Codec.ZSTD:
        _optional("zstandard", "zstd")
    elif c is Codec.SNAPPY:
        _optional("cramjam", "snappy")


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress one RecordBatch records section with ``codec``."""
    c = codec_id(codec)
    if c is Codec.NONE:
        return bytes(data)
    if c is Codec.GZIP:
        # mtime=0 keeps the output a function of the input alone (reproducible batches, stable tests).
        return gzip.compress(data, compresslevel=_GZIP_LEVEL if level is None else level, mtime=0)
    if c is Codec.SNAPPY:
        return _xerial_snappy(data)
    if c is Codec.LZ4:
        # Brokers reject linked blocks; Java writes 64 KB independent blocks and no content size or checksum.
        framed: bytes = lz4.frame.compress(
            data,
            compression_level=_LZ4_LEVEL if level is None else level,
            block_size=lz4.frame.BLOCKSIZE_MAX64KB,
            block_linked=False,
            content_checksum=False,
            store_size=False,
        )
        return framed
    zstd = _optional("zstandard", "zstd")
    compressor = zstd.ZstdCompressor(level=_ZSTD_LEVEL if level is None else level)
    out: bytes = compressor.compress(data)
    return out


def _xerial_snappy(data: bytes | bytearray | memoryview) -> bytes:
    snappy = _optional("cramjam", "snappy").snappy
    view = memoryview(data).cast("B")
    out = bytearray(_XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1))
    for start in range(0, len(view), _XERIAL_BLOCK_INPUT):
        block = bytes(snappy.compress_raw(view[start : start + _XERIAL_BLOCK_INPUT]))
        out += _XERIAL_BLOCK_LENGTH.pack(len(block))
        out += block
    return bytes(out)


def decompress(codec: int, data: bytes | bytearray | memoryview) -> bytes:
    """Inverse of ``compress`` (also accepts what other clients write: multi-member gzip, plain snappy,
    zstd frames without a content size, several zstd frames)."""
    c = codec_id(codec)
    if c is Codec.NONE:
        return bytes(data)
    if not len(data):  # every codec writes at least a header, even for empty input
        raise ProtocolError(f"empty {_NAMES[c]} data in a record batch")
    if c is Codec.SNAPPY:
        return _snappy_decompress(data)
    if c is Codec.ZSTD:
        zstd = _optional("zstandard", "zstd")
        try:
            # A streaming decompressor: zstd-jni (the Java client) omits the content size in the frame header,
            # which the one-shot API requires.
            dctx = zstd.ZstdDecompressor()
            chunks: list[bytes] = []
            rest = bytes(data)
            while True:  # one decompressobj per frame: other clients may write several frames
                dobj = dctx.decompressobj()
                chunks.append(dobj.decompress(rest))
                if not dobj.eof:
                    raise ProtocolError("truncated zstd frame in a record batch")
                rest = dobj.unused_data
                if not rest:
                    return b"".join(chunks)
        except zstd.ZstdError as exc:
            raise ProtocolError(f"corrupt zstd data in a record batch: {exc}") from None
    try:
        if c is Codec.GZIP:
            return gzip.decompress(data)
        dctx = lz4.frame.LZ4FrameDecompressor()
        out: bytes = dctx.decompress(data)
        if not dctx.eof:
            raise ProtocolError("truncated lz4 frame in a record batch")
        return out
    except (OSError, EOFError, zlib.error, RuntimeError, ValueError) as exc:
        # gzip raises BadGzipFile (OSError) / EOFError / zlib.error; lz4 raises RuntimeError.
        raise ProtocolError(f"corrupt {_NAMES[c]} data in a record batch: {exc}") from None


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    snappy = _optional("cramjam", "snappy").snappy
    view = memoryview(data).cast("B")
    try:
        if bytes(view[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
            return bytes(snappy.decompress_raw(view))  # plain (unframed) snappy, as some clients write
        if len(view) < _XERIAL_HEADER.size:
            raise ProtocolError("truncated xerial snappy header in a record batch")
        out = bytearray()
        pos = _XERIAL_HEADER.size
        while pos < len(view):
            if len(view) - pos < _XERIAL_BLOCK_LENGTH.size:
                raise ProtocolError("truncated xerial snappy block length in a record batch")
            (length,) = _XERIAL_BLOCK_LENGTH.unpack_from(view, pos)
            pos += _XERIAL_BLOCK_LENGTH.size
            if length < 0 or length > len(view) - pos:
                raise ProtocolError("truncated xerial snappy block in a record batch")
            out += bytes(snappy.decompress_raw(view[pos : pos + length]))
            pos += length
        return bytes(out)
    except _snappy_error() as exc:
        raise ProtocolError(f"corrupt snappy data in a record batch: {exc}") from None


def _snappy_error() -> type[Exception]:
    """cramjam's decompression error type (cramjam.DecompressionError)."""
    cramjam = _optional("cramjam", "snappy")
    err: type[Exception] = cramjam.DecompressionError
    return err
