"""Framing: request/response headers, length prefix, correlation ids and the chunk-fed FrameDecoder.

Header bytes marked "Java" were printed by kafka-clients 4.3.1 (RequestHeaderData / ResponseHeaderData
serialized with MessageUtil.toByteBufferAccessor at the given header version) in a throwaway program.
"""

from __future__ import annotations

from typing import Any

import pytest

from spark_kafka_sink.errors import ProtocolError, UnsupportedVersionError
from spark_kafka_sink.protocol.framing import (
    FrameDecoder,
    RequestHeader,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    peek_correlation_id,
)
from spark_kafka_sink.protocol.messages import (
    API_SPECS,
    API_VERSIONS,
    METADATA,
    PRODUCE,
    SASL_HANDSHAKE,
    ApiSpec,
    encode_request_body,
    encode_response_body,
)

# (api, version, correlation_id, client_id, Java's header hex)
JAVA_REQUEST_HEADERS = [
    (METADATA, 8, 1, "spark-kafka-sink", "00030008000000010010737061726b2d6b61666b612d73696e6b"),  # header v1
    (API_VERSIONS, 2, -5, None, "00120002fffffffbffff"),  # header v1, null client id
    (PRODUCE, 12, 2**31 - 1, "c", "0000000c7fffffff00016300"),  # header v2: classic client id, then tags
]


@pytest.mark.parametrize(("api", "version", "cid", "client_id", "header"), JAVA_REQUEST_HEADERS)
def test_request_header_matches_java(api: ApiSpec, version: int, cid: int, client_id: str | None, header: str) -> None:
    body: dict[str, Any] = {"topics": None} if api is METADATA else {}
    if api is PRODUCE:
        body = {"acks": 1, "timeout_ms": 1, "topic_data": []}
    frame = encode_request(api, version, cid, client_id, body)
    payload = bytes.fromhex(header) + encode_request_body(api, version, body)
    assert frame == len(payload).to_bytes(4, "big") + payload


def test_api_versions_v3_request_frame_by_hand() -> None:
    frame = encode_request(API_VERSIONS, 3, 1, "app", {"client_software_name": "sks", "client_software_version": "1"})
    assert frame == bytes.fromhex(
        "00000015"  # size: 21 bytes follow
        "0012" "0003" "00000001"  # api_key 18, version 3, correlation id 1
        "0003" "617070"  # client_id "app": classic int16 length even in header v2
        "00"  # header tagged fields
        "04" "736b73"  # client_software_name: compact "sks"
        "02" "31"  # client_software_version: compact "1"
        "00"  # body tagged fields
    )


def test_response_header_versions() -> None:
    metadata_body = encode_response_body(METADATA, 9, {"brokers": [], "topics": []})
    # Java: response header v1 = correlation id + empty tagged fields ("0000002a00").
    _, body = decode_response(METADATA, 9, bytes.fromhex("0000002a00") + metadata_body)
    assert body["brokers"] == []
    # ApiVersions v3 is flexible, yet its response header is v0 (Java "0000002a"): no tag byte after the id.
    av_body = encode_response_body(API_VERSIONS, 3, {"api_keys": []})
    assert decode_response(API_VERSIONS, 3, bytes.fromhex("0000002a") + av_body) == (
        42, {"error_code": 0, "api_keys": [], "throttle_time_ms": 0, "supported_features": [],
             "finalized_features_epoch": -1, "finalized_features": [], "zk_migration_ready": False})
    with pytest.raises(ProtocolError):
        decode_response(API_VERSIONS, 3, bytes.fromhex("0000002a00") + av_body)


def test_api_versions_falls_back_to_v0_layout_on_unsupported_version() -> None:
    # An old broker answers our v4 request with UNSUPPORTED_VERSION in the v0 layout, listing its range.
    v0_body = encode_response_body(API_VERSIONS, 0, {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2}]})
    cid, body = decode_response(API_VERSIONS, 4, (7).to_bytes(4, "big") + v0_body)
    assert cid == 7 and body["error_code"] == 35 and body["api_keys"][0]["max_version"] == 2
    # A v0-shaped body without an error is not accepted as a v4 answer.
    ok_v0 = encode_response_body(API_VERSIONS, 0, {"api_keys": []})
    with pytest.raises(ProtocolError):
        decode_response(API_VERSIONS, 4, (7).to_bytes(4, "big") + ok_v0)


def test_correlation_id_checks() -> None:
    payload = encode_response(SASL_HANDSHAKE, 1, 99, {"mechanisms": ["PLAIN"]})[4:]
    assert peek_correlation_id(payload) == 99
    assert decode_response(SASL_HANDSHAKE, 1, payload, expected_correlation_id=99)[1]["mechanisms"] == ["PLAIN"]
    with pytest.raises(ProtocolError, match="correlation id 99, expected 98"):
        decode_response(SASL_HANDSHAKE, 1, payload, expected_correlation_id=98)
    with pytest.raises(ProtocolError, match="too short"):
        peek_correlation_id(b"\x00\x00\x01")


def _sample_frames() -> list[tuple[ApiSpec, int, bytes]]:
    """One response frame per API at its newest version, from a small valid body."""
    bodies: dict[int, dict[str, Any]] = {
        0: {"responses": [{"name": "t", "partition_responses": [{"index": 0, "base_offset": 5}]}]},
        1: {"responses": [{"topic": "t", "partitions": [{"partition_index": 0, "high_watermark": 3, "records": b""}]}]},
        2: {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 5}]}]},
        3: {"brokers": [{"node_id": 1, "host": "h", "port": 9092}], "topics": []},
        18: {"api_keys": [{"api_key": 0, "min_version": 3, "max_version": 12}]},
        19: {"topics": [{"name": "t"}]},
        22: {"producer_id": 1, "producer_epoch": 0},
        10: {"coordinators": [{"key": "k", "node_id": 1, "host": "h", "port": 1}]},
        24: {"results_by_topic_v3_and_below": []},
        28: {"topics": []},
        32: {"results": []},
        17: {"mechanisms": ["PLAIN"]},
        36: {},
    }
    out = []
    for key, api in API_SPECS.items():
        version = api.max_version
        out.append((api, version, encode_response(api, version, 1000 + key, bodies.get(key, {}))))
    return out


@pytest.mark.parametrize(
    ("api", "version", "frame"), _sample_frames(), ids=lambda x: getattr(x, "name", None)
)
def test_response_frames_truncated_whole_and_with_trailing_bytes(api: ApiSpec, version: int, frame: bytes) -> None:
    payload = frame[4:]
    cid, body = decode_response(api, version, payload)
    assert cid == 1000 + api.key
    assert encode_response(api, version, cid, body) == frame
    for cut in range(len(payload)):
        with pytest.raises(ProtocolError):
            decode_response(api, version, payload[:cut])
    with pytest.raises(ProtocolError):
        decode_response(api, version, payload + b"\x00")


def test_request_round_trip_through_decode_request() -> None:
    body = {"transactional_id": "t", "acks": -1, "timeout_ms": 9,
            "topic_data": [{"name": "x", "partition_data": [{"index": 1, "records": b"abc"}]}]}
    for version in range(PRODUCE.min_version, PRODUCE.max_version + 1):
        frame = encode_request(PRODUCE, version, 5, None, body)
        header, decoded = decode_request(frame[4:])
        assert header == RequestHeader(0, version, 5, None)
        assert decoded == body


def test_encode_request_refuses_versions_we_do_not_implement() -> None:
    with pytest.raises(UnsupportedVersionError):
        encode_request(PRODUCE, 2, 1, None, {"acks": 1, "timeout_ms": 1, "topic_data": []})
    with pytest.raises(ValueError, match="does not fit"):
        encode_request(PRODUCE, 3, 2**31, None, {"acks": 1, "timeout_ms": 1, "topic_data": []})


# -------------------------------------------------------------------------------------------- FrameDecoder


def _stream() -> tuple[bytes, list[bytes]]:
    frames = [f for _, _, f in _sample_frames()] + [b"\x00\x00\x00\x00"]  # includes an empty frame
    return b"".join(frames), [f[4:] for f in frames]


def test_frame_decoder_whole_stream() -> None:
    stream, payloads = _stream()
    decoder = FrameDecoder()
    assert decoder.feed(stream) == payloads
    assert decoder.buffered == 0


def test_frame_decoder_byte_by_byte() -> None:
    stream, payloads = _stream()
    decoder = FrameDecoder()
    got: list[bytes] = []
    for i in range(len(stream)):
        got += decoder.feed(stream[i : i + 1])
    assert got == payloads


@pytest.mark.parametrize("chunk", [2, 3, 7, 64])
def test_frame_decoder_odd_chunks_and_partial_tail(chunk: int) -> None:
    stream, payloads = _stream()
    decoder = FrameDecoder()
    got: list[bytes] = []
    for i in range(0, len(stream) - 3, chunk):  # the last 3 bytes never arrive
        got += decoder.feed(memoryview(stream)[i : min(i + chunk, len(stream) - 3)])
    assert got == payloads[:-1]
    assert decoder.buffered == 1  # the empty frame's size prefix, incomplete


def test_frame_decoder_refuses_tls_answer_with_hint() -> None:
    decoder = FrameDecoder()
    alert = bytes.fromhex("15030300020228")  # a TLS alert record, as a TLS listener answers plaintext
    with pytest.raises(ProtocolError, match="security.protocol=SSL"):
        decoder.feed(alert)
    with pytest.raises(ProtocolError, match="already failed"):
        decoder.feed(b"\x00\x00\x00\x00")


@pytest.mark.parametrize(("data", "hint"), [
    (b"HTTP/1.1 400 Bad Request\r\n", "HTTP"),
    (b"\xff\xff\xff\xfe", "not a Kafka broker"),
    ((2001).to_bytes(4, "big"), "outside 0..2000"),
])
def test_frame_decoder_refuses_impossible_sizes(data: bytes, hint: str) -> None:
    with pytest.raises(ProtocolError, match=hint):
        FrameDecoder(max_frame_size=2000).feed(data)


def test_frame_decoder_accepts_frame_at_the_limit() -> None:
    decoder = FrameDecoder(max_frame_size=10)
    assert decoder.feed((10).to_bytes(4, "big") + b"x" * 10) == [b"x" * 10]
    with pytest.raises(ValueError):
        FrameDecoder(max_frame_size=1)
