"""Request/response framing, sans-IO: length prefix, headers, correlation ids, and a chunk-fed frame decoder.

Every frame on a Kafka connection is ``int32 size`` followed by ``size`` bytes of payload::

    request header v1:  api_key int16, api_version int16, correlation_id int32, client_id nullable string (int16)
    request header v2:  header v1, then a tagged-field section (flexible API versions)
    response header v0: correlation_id int32
    response header v1: correlation_id int32, then a tagged-field section (flexible API versions)

``client_id`` stays a classic int16-length string even in header v2, and responses to ApiVersions always use
response header v0 (a client that has not negotiated anything yet must be able to read them).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any, NamedTuple

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import (
    API_SPECS,
    ApiSpec,
    decode_request_body,
    decode_response_body,
    write_request_body,
)
from spark_kafka_sink.protocol.messages.codec import write_struct
from spark_kafka_sink.protocol.messages.produce import PRODUCE
from spark_kafka_sink.protocol.messages.produce_fast import decode_produce_response, produce_request_parts
from spark_kafka_sink.protocol.primitives import Reader, write_nullable_string

__all__ = [
    "DEFAULT_MAX_FRAME_SIZE",
    "RequestHeader",
    "encode_request",
    "encode_request_parts",
    "decode_response",
    "peek_correlation_id",
    "decode_request",
    "encode_response",
    "FrameDecoder",
]

#: Largest frame FrameDecoder accepts by default: the broker's own socket.request.max.bytes default (100 MiB).
DEFAULT_MAX_FRAME_SIZE = 100 * 1024 * 1024

_SIZE = struct.Struct(">i")
_REQUEST_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_EMPTY_TAGGED_FIELDS = b"\x00"
_API_VERSIONS_KEY = 18


class RequestHeader(NamedTuple):
    """A decoded request header (what a fake broker in tests sees)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


# ------------------------------------------------------------------------------------------------ client side


def encode_request(
    api: ApiSpec, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """A complete request frame: int32 size, request header (v1 or v2), body."""
    return b"".join(encode_request_parts(api, version, correlation_id, client_id, body))


def encode_request_parts(
    api: ApiSpec, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> list[bytes | bytearray | memoryview]:
    """The same frame as ``encode_request``, as buffers to write one after another: a Produce request's records
    stay where they are (a gathering write sends them without a copy); any other request is one buffer."""
    buf = bytearray(4)  # room for the size prefix, filled in at the end: the body is built in place
    try:
        buf += _REQUEST_HEADER.pack(api.key, version, correlation_id)
    except struct.error:
        raise ValueError(f"version {version} or correlation id {correlation_id} does not fit its field") from None
    buf += write_nullable_string(client_id)
    if api.request_header_version(version) >= 2:
        buf += _EMPTY_TAGGED_FIELDS  # we send no header tags
    parts = produce_request_parts(version, body) if api is PRODUCE and api.supports(version) else None
    if parts is not None:  # the hot path: records are referenced, not copied
        _SIZE.pack_into(buf, 0, len(buf) - 4 + sum(map(len, parts)))
        return [buf, *parts]
    write_request_body(buf, api, version, body)  # checks the version is one we implement
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    return [bytes(buf)]


def peek_correlation_id(payload: bytes | bytearray | memoryview) -> int:
    """The correlation id of a response payload (the first field of every response header)."""
    if len(payload) < 4:
        raise ProtocolError(f"response of {len(payload)} bytes is too short to hold a correlation id")
    value: int = _SIZE.unpack_from(payload, 0)[0]
    return value


def decode_response(
    api: ApiSpec,
    version: int,
    frame_payload: bytes | bytearray | memoryview,
    expected_correlation_id: int | None = None,
) -> tuple[int, dict[str, Any]]:
    """Decode one response payload (the bytes after the size prefix) -> (correlation_id, body).

    Raises ProtocolError on truncated or malformed bytes, trailing bytes, or (when ``expected_correlation_id`` is
    given) a different correlation id -- which means requests and responses got out of step on this connection.
    """
    reader = Reader(frame_payload)
    correlation_id = reader.int32()
    if expected_correlation_id is not None and correlation_id != expected_correlation_id:
        raise ProtocolError(
            f"{api.name} response has correlation id {correlation_id}, expected {expected_correlation_id}: "
            "the connection is out of step and must be closed"
        )
    if api.response_header_version(version) >= 1:
        reader.tagged_fields()  # no response header tags are defined for clients; skip any
    body_bytes = memoryview(frame_payload)[reader.position :]
    if api is PRODUCE and api.supports(version):
        body = decode_produce_response(version, body_bytes)  # None: not the plain shape, decode generically
        if body is not None:
            return correlation_id, body
    try:
        return correlation_id, decode_response_body(api, version, body_bytes)
    except ProtocolError:
        if api.key != _API_VERSIONS_KEY or version == 0:
            raise
        # A broker that does not support our ApiVersions version answers UNSUPPORTED_VERSION in the v0 layout,
        # listing what it does support, so the client can retry with a version it knows.
        fallback = decode_response_body(api, 0, body_bytes)
        if fallback["error_code"] == NO_ERROR:
            raise
        return correlation_id, fallback


# ------------------------------------------------------------------------------------ broker side (for tests)


def decode_request(payload: bytes | bytearray | memoryview) -> tuple[RequestHeader, dict[str, Any]]:
    """Decode one request payload (after the size prefix) -> (header, body). For fake brokers in tests."""
    reader = Reader(payload)
    api_key, api_version, correlation_id = reader.int16(), reader.int16(), reader.int32()
    client_id = reader.nullable_string()
    api = API_SPECS.get(api_key)
    if api is None:
        raise ProtocolError(f"request for API key {api_key}, which this package does not implement")
    if api.request_header_version(api_version) >= 2:
        reader.tagged_fields()
    header = RequestHeader(api_key, api_version, correlation_id, client_id)
    return header, decode_request_body(api, api_version, memoryview(payload)[reader.position :])


def encode_response(api: ApiSpec, version: int, correlation_id: int, body: Mapping[str, Any]) -> bytes:
    """A complete response frame: int32 size, response header (v0 or v1), body. For fake brokers in tests."""
    if not api.supports(version):
        raise ValueError(f"{api.name} v{version} is outside v{api.min_version}-{api.max_version}")
    buf = bytearray(4)
    buf += _SIZE.pack(correlation_id)
    if api.response_header_version(version) >= 1:
        buf += _EMPTY_TAGGED_FIELDS
    write_struct(buf, api.response_schema, version, api.is_flexible(version), body, "")
    _SIZE.pack_into(buf, 0, len(buf) - 4)
    return bytes(buf)


# ------------------------------------------------------------------------------------------- frame decoder


def _diagnose(head: bytes) -> str:
    """A hint for a size prefix that cannot be Kafka: what the peer probably is."""
    if len(head) >= 2 and head[0] in (0x15, 0x16) and head[1] == 0x03:
        return "the peer answered with a TLS record: it expects TLS, set security.protocol=SSL (or SASL_SSL)"
    if head[:4] in (b"HTTP", b"<!DO", b"<htm"):
        return "the peer speaks HTTP: this is not a Kafka listener port"
    return "the peer is probably not a Kafka broker, or a different listener (check host, port and security.protocol)"


class FrameDecoder:
    """Splits a byte stream into frame payloads. Feed it chunks of any size; it never blocks and never reads.

    A size outside ``0..max_frame_size`` raises ProtocolError with a hint (a TLS server answering a plaintext
    client sends bytes that read as a ~350 MB frame). After an error the decoder stays failed: the stream is
    out of step and the connection must be closed.
    """

    __slots__ = ("_buf", "_max", "_error")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE) -> None:
        if max_frame_size < 4:
            raise ValueError(f"max_frame_size must be at least 4, got {max_frame_size}")
        self._buf = bytearray()
        self._max = max_frame_size
        self._error: ProtocolError | None = None

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a complete frame."""
        return len(self._buf)

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes]:
        """Add received bytes; return the payloads of all frames now complete, in order."""
        if self._error is not None:
            raise ProtocolError(f"frame decoder already failed: {self._error}")
        self._buf += data
        frames: list[bytes] = []
        buf = self._buf
        pos = 0
        while len(buf) - pos >= 4:
            size: int = _SIZE.unpack_from(buf, pos)[0]
            if size < 0 or size > self._max:
                head = bytes(buf[pos : pos + 8])
                self._error = ProtocolError(
                    f"frame size {size} is outside 0..{self._max} (first bytes {head.hex()}): {_diagnose(head)}"
                )
                del buf[:pos]
                raise self._error
            end = pos + 4 + size
            if end > len(buf):
                break
            frames.append(bytes(buf[pos + 4 : end]))
            pos = end
        if pos:
            del buf[:pos]
        return frames
