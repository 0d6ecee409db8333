"""The Produce fast paths give exactly what the generic codec gives, and fall back for everything else."""

from __future__ import annotations

import re
from typing import Any

import pytest

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.framing import decode_response, encode_request, encode_request_parts, encode_response
from spark_kafka_sink.protocol.messages import PRODUCE, decode_response_body, encode_request_body, encode_response_body
from spark_kafka_sink.protocol.messages.produce_fast import decode_produce_response, produce_request_parts

FLEXIBLE = range(9, PRODUCE.max_version + 1)


def _request(tid: str | None = None, topics: Any = None) -> dict[str, Any]:
    return {"transactional_id": tid, "acks": -1, "timeout_ms": 30_000,
            "topic_data": topics if topics is not None else [
                {"name": "orders", "partition_data": [{"index": 0, "records": b"\x01" * 300},
                                                      {"index": 11, "records": b"x"}]},
                {"name": "t" * 200 + "é", "partition_data": [{"index": 7, "records": None},
                                                            {"index": 2, "records": bytes(range(256)) * 80}]}]}


@pytest.mark.parametrize("version", FLEXIBLE)
@pytest.mark.parametrize("body", [_request(), _request("txn-é"), _request(topics=[]),
                                  {"acks": 1, "timeout_ms": 5, "topic_data": [{"name": "a", "partition_data": []}]}])
def test_request_bytes_equal_the_generic_codec(version: int, body: dict[str, Any]) -> None:
    parts = produce_request_parts(version, body)
    assert parts is not None
    assert b"".join(parts) == encode_request_body(PRODUCE, version, body)


def _in_pieces(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with each records value as a tuple of buffers (a header, then a view of the rest), as the sender
    hands over a stamped batch."""
    def cut(records: bytes | None) -> Any:
        return records if records is None else (records[:3], memoryview(records)[3:])

    return {**body, "topic_data": [{"name": t["name"], "partition_data": [
        {"index": p["index"], "records": cut(p["records"])} for p in t["partition_data"]]} for t in body["topic_data"]]}


@pytest.mark.parametrize("version", [8, *FLEXIBLE])
def test_records_in_pieces_encode_as_the_joined_bytes_and_are_not_copied(version: int) -> None:
    body = _request("t")
    pieces = _in_pieces(body)
    # Both paths (the generic one at v8) give the bytes of the joined records.
    assert encode_request_body(PRODUCE, version, pieces) == encode_request_body(PRODUCE, version, body)
    assert encode_request(PRODUCE, version, 5, "c", pieces) == encode_request(PRODUCE, version, 5, "c", body)
    frame = encode_request_parts(PRODUCE, version, 5, "c", pieces)
    assert b"".join(frame) == encode_request(PRODUCE, version, 5, "c", body)
    views = [p["records"][1] for t in pieces["topic_data"] for p in t["partition_data"] if p["records"]]
    if version >= 9:  # the fast path references every records piece instead of copying it into the frame
        assert all(any(part is view for part in frame) for view in views)
    else:
        assert len(frame) == 1


@pytest.mark.parametrize("version", FLEXIBLE)
def test_request_frame_equals_the_generic_frame(version: int) -> None:
    body = _request("t")
    generic = bytearray(encode_request(PRODUCE, 8, 5, "client", body))  # v8: generic only
    assert produce_request_parts(8, body) is None
    frame = encode_request(PRODUCE, version, 5, "client", body)
    header_len = len(generic) - 4 - len(encode_request_body(PRODUCE, 8, body))
    expected_header = bytearray(generic[:4 + header_len])
    expected_header[6:8] = version.to_bytes(2, "big")
    expected_header += b"\x00"  # request header v2: empty tags
    expected = expected_header + encode_request_body(PRODUCE, version, body)
    expected[:4] = (len(expected) - 4).to_bytes(4, "big")
    assert frame == bytes(expected)


@pytest.mark.parametrize("body", [
    {**_request(), "extra": 1},
    {"acks": -1, "timeout_ms": 1},  # topic_data missing
    {**_request(), "acks": True},
    {**_request(), "acks": 1 << 15},
    {**_request(), "timeout_ms": 1 << 31},
    {**_request(), "transactional_id": b"bytes"},
    _request(topics=[{"name": "a", "partition_data": [{"index": 0, "records": memoryview(b"x")}]}]),
    _request(topics=[{"name": "a", "partition_data": [{"index": 0, "records": b"x", "more": 1}]}]),
    _request(topics=[{"name": "a", "partition_data": [{"index": 1 << 31, "records": b"x"}]}]),
    _request(topics=[{"name": 1, "partition_data": []}]),
    _request(topics=({"name": "a", "partition_data": []},)),
])
def test_unusual_requests_fall_back_to_the_generic_codec(body: dict[str, Any]) -> None:
    assert produce_request_parts(12, body) is None
    try:
        generic = encode_request_body(PRODUCE, 12, body)
    except ValueError as exc:  # the generic codec's error is what the caller sees
        with pytest.raises(ValueError, match="^" + re.escape(str(exc)) + "$"):
            encode_request(PRODUCE, 12, 1, None, body)
    else:
        assert encode_request(PRODUCE, 12, 1, None, body).endswith(generic)


def _partition(index: int, **extra: Any) -> dict[str, Any]:
    return {"index": index, "error_code": 0, "base_offset": 1 << 40, "log_append_time_ms": -1,
            "log_start_offset": 3, **extra}


PLAIN = {"responses": [{"name": "orders", "partition_responses": [_partition(0), _partition(11)]},
                       {"name": "é" * 100, "partition_responses": [_partition(5, error_code=6)]}],
         "throttle_time_ms": 17}


@pytest.mark.parametrize("version", FLEXIBLE)
@pytest.mark.parametrize("body", [PLAIN, {"responses": [], "throttle_time_ms": 0}])
def test_plain_responses_decode_like_the_generic_codec(version: int, body: dict[str, Any]) -> None:
    data = encode_response_body(PRODUCE, version, body)
    fast = decode_produce_response(version, data)
    assert fast is not None
    assert fast == decode_response_body(PRODUCE, version, data)
    frame = encode_response(PRODUCE, version, 9, body)
    assert decode_response(PRODUCE, version, frame[4:], 9) == (9, fast)


NOT_PLAIN = [
    {"responses": [{"name": "a", "partition_responses": [
        _partition(0, error_code=18, record_errors=[{"batch_index": 2, "batch_index_error_message": "bad"}])]}]},
    {"responses": [{"name": "a", "partition_responses": [_partition(0, error_code=2, error_message="corrupt")]}]},
    {"responses": [{"name": "a", "partition_responses": [
        _partition(0, error_code=6, current_leader={"leader_id": 2, "leader_epoch": 4})]}],
     "node_endpoints": [{"node_id": 2, "host": "h", "port": 9092, "rack": None}]},
]


@pytest.mark.parametrize("body", NOT_PLAIN)
def test_other_responses_take_the_generic_decoder(body: dict[str, Any]) -> None:
    data = encode_response_body(PRODUCE, 12, body)
    assert decode_produce_response(12, data) is None
    frame = encode_response(PRODUCE, 12, 3, body)
    assert decode_response(PRODUCE, 12, frame[4:], 3) == (3, decode_response_body(PRODUCE, 12, data))


def test_truncated_or_padded_responses_are_never_decoded_by_the_fast_path() -> None:
    data = encode_response_body(PRODUCE, 12, PLAIN)
    for cut in range(len(data)):
        assert decode_produce_response(12, data[:cut]) is None
        assert decode_produce_response(12, memoryview(data)[:cut]) is None
    assert decode_produce_response(12, data + b"\x00") is None
    frame = encode_response(PRODUCE, 12, 3, PLAIN)
    with pytest.raises(ProtocolError):  # the generic decoder reports it
        decode_response(PRODUCE, 12, frame[4:-1], 3)
    assert decode_produce_response(8, encode_response_body(PRODUCE, 8, PLAIN)) is None
