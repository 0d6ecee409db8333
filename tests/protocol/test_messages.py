"""Request/response bodies: golden bytes for every API version, decoding, strictness, and the schemas themselves."""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from spark_kafka_sink.errors import ProtocolError, UnsupportedVersionError
from spark_kafka_sink.protocol.messages import (
    API_SPECS,
    API_VERSIONS,
    FETCH,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    ApiSpec,
    Field,
    Schema,
    decode_request_body,
    decode_response_body,
    encode_request_body,
    encode_response_body,
    field,
)
from tests.protocol._message_vectors import GOLDEN, SAMPLES


def prune(schema: Schema, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
    """Keep only the fields ``version`` carries (what a caller would send at that version)."""
    out: dict[str, Any] = {}
    for f in schema:
        if version in f.versions and f.name in body:
            v = body[f.name]
            if f.fields and v is not None:
                v = [prune(f.fields, version, x) for x in v] if f.is_array else prune(f.fields, version, v)
            out[f.name] = v
    return out


def project(decoded: Any, expected: Any) -> Any:
    """``decoded`` restricted to the keys present in ``expected`` (recursively)."""
    if isinstance(expected, dict):
        return {k: project(decoded[k], v) for k, v in expected.items()}
    if isinstance(expected, list):
        return [project(d, e) for d, e in zip(decoded, expected, strict=False)] + decoded[len(expected) :]
    return decoded


def _schema(api: ApiSpec, direction: str) -> Schema:
    return api.request_schema if direction == "req" else api.response_schema


def _case_id(key: tuple[int, int, str, str]) -> str:
    api_key, version, direction, variant = key
    return f"{API_SPECS[api_key].name}-v{version}-{direction}-{variant}"


CASES = sorted(GOLDEN)


def test_golden_vectors_cover_every_version_of_every_api() -> None:
    for api in API_SPECS.values():
        for version in range(api.min_version, api.max_version + 1):
            for direction in ("req", "resp"):
                hexes = [h for (k, v, d, _), h in GOLDEN.items() if (k, v, d) == (api.key, version, direction)]
                assert any(h is not None for h in hexes), (api.name, version, direction)


@pytest.mark.parametrize("key", CASES, ids=[_case_id(k) for k in CASES])
def test_encode_matches_java(key: tuple[int, int, str, str]) -> None:
    api_key, version, direction, variant = key
    api = API_SPECS[api_key]
    body = prune(_schema(api, direction), version, SAMPLES[api_key][direction][variant])
    encode = encode_request_body if direction == "req" else encode_response_body
    expected = GOLDEN[key]
    if expected is None:
        with pytest.raises(ValueError, match="null is not allowed"):
            encode(api, version, body)
    else:
        assert encode(api, version, body).hex() == expected


@pytest.mark.parametrize("key", [k for k in CASES if GOLDEN[k] is not None], ids=_case_id)
def test_decode_java_bytes(key: tuple[int, int, str, str]) -> None:
    api_key, version, direction, variant = key
    api = API_SPECS[api_key]
    data = bytes.fromhex(GOLDEN[key] or "")
    body = prune(_schema(api, direction), version, SAMPLES[api_key][direction][variant])
    decode = decode_request_body if direction == "req" else decode_response_body
    encode = encode_request_body if direction == "req" else encode_response_body
    decoded = decode(api, version, data)
    assert project(decoded, body) == body
    # Every declared field is present, absent ones with their defaults; the full dict re-encodes identically.
    assert set(decoded) == {f.name for f in _schema(api, direction)}
    assert encode(api, version, decoded) == data
    # Truncated anywhere: a ProtocolError, never garbage. Trailing bytes: also an error.
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            decode(api, version, data[:cut])
    with pytest.raises(ProtocolError, match="trailing"):
        decode(api, version, data + b"\x00")


# ------------------------------------------------------------------------------- hand-assembled vectors


def test_produce_v3_request_by_hand() -> None:
    body = {"transactional_id": None, "acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": b"RB"}]}]}
    expected = bytes.fromhex(
        "ffff"  # transactional_id: null (int16 -1)
        "ffff"  # acks: -1
        "00007530"  # timeout_ms: 30000
        "00000001"  # topic_data: 1 topic (int32 count)
        "0001" "74"  # name: "t" (int16 length)
        "00000001"  # partition_data: 1 partition
        "00000000"  # index: 0
        "00000002" "5242"  # records: 2 bytes (int32 length)
    )
    assert encode_request_body(PRODUCE, 3, body) == expected


def test_produce_v9_request_by_hand_is_compact() -> None:
    body = {"transactional_id": "x", "acks": 1, "timeout_ms": 5,
            "topic_data": [{"name": "t", "partition_data": [{"index": 1, "records": b"RB"}]}]}
    expected = bytes.fromhex(
        "02" "78"  # transactional_id: compact "x" (length + 1)
        "0001"  # acks: 1
        "00000005"  # timeout_ms
        "02"  # topic_data: compact count 1 (+1)
        "02" "74"  # name "t"
        "02"  # partition_data: 1
        "00000001"  # index
        "03" "5242"  # records: compact length 2 (+1)
        "00"  # partition tagged fields: none
        "00"  # topic tagged fields: none
        "00"  # body tagged fields: none
    )
    assert encode_request_body(PRODUCE, 9, body) == expected


def test_metadata_v12_request_by_hand_carries_topic_ids() -> None:
    topic_id = uuid.UUID("00112233-4455-6677-8899-aabbccddeeff")
    body = {"topics": [{"topic_id": topic_id, "name": None}], "allow_auto_topic_creation": False,
            "include_topic_authorized_operations": False}
    expected = bytes.fromhex(
        "02"  # topics: compact count 1
        "00112233445566778899aabbccddeeff"  # topic_id: 16 raw bytes
        "00"  # name: compact null (allowed from v10)
        "00"  # topic tagged fields
        "00"  # allow_auto_topic_creation: false
        "00"  # include_topic_authorized_operations: false
        "00"  # body tagged fields
    )
    assert encode_request_body(METADATA, 12, body) == expected


def test_fetch_v12_request_by_hand_is_compact_with_a_tagged_cluster_id() -> None:
    body = {"cluster_id": "c", "max_wait_ms": 500, "min_bytes": 1, "isolation_level": 1,
            "topics": [{"topic": "t", "partitions": [{"partition": 2, "fetch_offset": 7,
                                                      "partition_max_bytes": 1024}]}]}
    expected = bytes.fromhex(
        "ffffffff"  # replica_id: -1 (a consumer)
        "000001f4"  # max_wait_ms: 500
        "00000001"  # min_bytes: 1
        "7fffffff"  # max_bytes: default, no limit
        "01"  # isolation_level: read_committed
        "00000000"  # session_id: 0 (no fetch session)
        "ffffffff"  # session_epoch: -1 (full fetch)
        "02" "02" "74"  # topics: compact count 1; topic "t"
        "02"  # partitions: compact count 1
        "00000002"  # partition: 2
        "ffffffff"  # current_leader_epoch: -1 (v9+)
        "0000000000000007"  # fetch_offset: 7
        "ffffffff"  # last_fetched_epoch: -1 (v12+)
        "ffffffffffffffff"  # log_start_offset: -1 (v5+, followers only)
        "00000400"  # partition_max_bytes: 1024
        "00"  # partition tagged fields
        "00"  # topic tagged fields
        "01"  # forgotten_topics_data: compact count 0
        "01"  # rack_id: compact ""
        "01" "00" "02" "02" "63"  # body tagged fields: 1; tag 0 (cluster_id), 2 bytes: compact "c"
    )
    assert encode_request_body(FETCH, 12, body) == expected


def test_fetch_v4_response_by_hand_keeps_records_raw_and_lists_aborted_transactions() -> None:
    data = bytes.fromhex(
        "00000000"  # throttle_time_ms
        "00000001" "0001" "74"  # responses: 1 topic, "t"
        "00000001"  # partitions: 1
        "00000000"  # partition_index: 0
        "0000"  # error_code: NONE
        "000000000000000a"  # high_watermark: 10
        "0000000000000008"  # last_stable_offset: 8
        "00000001" "00000000000003e8" "0000000000000004"  # aborted_transactions: [(pid 1000, first offset 4)]
        "00000003" "616263"  # records: 3 raw bytes, not decoded here
    )
    part = decode_response_body(FETCH, 4, data)["responses"][0]["partitions"][0]
    assert (part["high_watermark"], part["last_stable_offset"]) == (10, 8)
    assert part["aborted_transactions"] == [{"producer_id": 1000, "first_offset": 4}]
    assert part["records"] == b"abc" and part["log_start_offset"] == -1  # v5+ field: its default


def test_list_offsets_v2_request_by_hand() -> None:
    body = {"isolation_level": 1, "topics": [{"name": "t", "partitions": [
        {"partition_index": 0, "timestamp": -1}]}]}
    expected = bytes.fromhex(
        "ffffffff"  # replica_id: -1 (a consumer)
        "01"  # isolation_level: read_committed (v2+)
        "00000001" "0001" "74"  # topics: 1, name "t"
        "00000001"  # partitions: 1
        "00000000"  # partition_index: 0
        "ffffffffffffffff"  # timestamp: -1 = latest
    )
    assert encode_request_body(LIST_OFFSETS, 2, body) == expected
    # v1 has no isolation level: asking it for read_committed would silently read uncommitted data.
    with pytest.raises(UnsupportedVersionError, match="isolation_level=1 cannot be sent at version 1"):
        encode_request_body(LIST_OFFSETS, 1, body)


def test_api_versions_v3_response_tagged_features_by_hand() -> None:
    data = bytes.fromhex(
        "0000"  # error_code
        "02" "0012" "0000" "0004" "00"  # api_keys: [ApiVersions 0-4], element tagged fields
        "00000000"  # throttle_time_ms
        "01"  # one tagged field
        "02" "1a"  # tag 2 (finalized_features), 26 bytes
        "02" "14" + b"transaction.version".hex() + "0002" "0000" "00"  # [name, max_level 2, min_level 0]
    )
    body = decode_response_body(API_VERSIONS, 3, data)
    assert body["finalized_features"] == [
        {"name": "transaction.version", "max_version_level": 2, "min_version_level": 0}
    ]
    assert body["supported_features"] == [] and body["finalized_features_epoch"] == -1


def test_unknown_tagged_fields_are_skipped() -> None:
    data = bytes.fromhex("0000" "01" "00000000" "02" "07" "03" "aabbcc" "01" "08" "0000000000000009")
    # error_code, no api_keys, throttle, 2 tags: unknown tag 7 (3 bytes) then tag 1 = epoch 9
    body = decode_response_body(API_VERSIONS, 3, data)
    assert body["finalized_features_epoch"] == 9 and body["api_keys"] == []


def test_absent_fields_get_their_defaults() -> None:
    data = encode_response_body(PRODUCE, 3, {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 5, "log_append_time_ms": -1}]}], "throttle_time_ms": 0})
    part = decode_response_body(PRODUCE, 3, data)["responses"][0]["partition_responses"][0]
    assert part["log_start_offset"] == -1 and part["record_errors"] == [] and part["error_message"] is None
    assert part["current_leader"] == {"leader_id": -1, "leader_epoch": -1}


def test_decoded_defaults_are_fresh_objects() -> None:
    a = decode_response_body(PRODUCE, 3, bytes.fromhex("00000000" "00000000"))
    b = decode_response_body(PRODUCE, 3, bytes.fromhex("00000000" "00000000"))
    a["node_endpoints"].append("x")
    assert b["node_endpoints"] == []


# ------------------------------------------------------------------------------------------- strictness

_PRODUCE_BODY = {"acks": -1, "timeout_ms": 1, "topic_data": []}


def test_optional_fields_default_when_omitted() -> None:
    assert encode_request_body(PRODUCE, 3, _PRODUCE_BODY) == bytes.fromhex("ffff" "ffff" "00000001" "00000000")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ({"acks": -1, "topic_data": []}, "timeout_ms: required"),
        ({**_PRODUCE_BODY, "timeout": 1}, "unknown field"),
        ({**_PRODUCE_BODY, "acks": True}, "expected an int"),
        ({**_PRODUCE_BODY, "acks": 70000}, "does not fit int16"),
        ({**_PRODUCE_BODY, "transactional_id": b"x"}, "expected a str"),
        ({**_PRODUCE_BODY, "topic_data": {"name": "t"}}, "expected a list"),
        ({**_PRODUCE_BODY, "topic_data": [{"name": None, "partition_data": []}]}, "topic_data\\[0\\].name: null"),
        ({**_PRODUCE_BODY, "topic_data": [{"name": "t", "partition_data": [{"index": 0}]}]}, "records: required"),
        ({**_PRODUCE_BODY, "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": "s"}]}]},
         "expected bytes"),
    ],
)
def test_encoding_refuses_bad_bodies(body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        encode_request_body(PRODUCE, 3, body)


def test_field_the_version_cannot_carry_is_refused_unless_ignorable() -> None:
    from spark_kafka_sink.protocol.messages import FIND_COORDINATOR

    with pytest.raises(UnsupportedVersionError, match="key_type=1 cannot be sent at version 0"):
        encode_request_body(FIND_COORDINATOR, 0, {"key": "txn", "key_type": 1})
    with pytest.raises(UnsupportedVersionError, match="coordinator_keys"):
        encode_request_body(FIND_COORDINATOR, 3, {"key": "txn", "key_type": 1, "coordinator_keys": ["a"]})
    # Ignorable fields are dropped silently (the broker would not use them anyway), default values too.
    assert encode_request_body(METADATA, 9, {"topics": [{"topic_id": uuid.uuid4(), "name": "t"}]}) == \
        encode_request_body(METADATA, 9, {"topics": [{"name": "t"}]})


@pytest.mark.parametrize("version", [2, 13])
def test_versions_outside_the_spec_are_refused(version: int) -> None:
    with pytest.raises(UnsupportedVersionError, match="Produce v.* is not implemented"):
        encode_request_body(PRODUCE, version, _PRODUCE_BODY)
    with pytest.raises(UnsupportedVersionError):
        decode_response_body(PRODUCE, version, b"")


def test_huge_array_count_is_refused_before_looping() -> None:
    with pytest.raises(ProtocolError, match="cannot fit"):
        decode_response_body(PRODUCE, 3, bytes.fromhex("7fffffff" "00000000"))


def test_invalid_utf8_and_negative_lengths_are_protocol_errors() -> None:
    with pytest.raises(ProtocolError):
        decode_response_body(PRODUCE, 3, bytes.fromhex("00000001" "0001" "ff" "00000000" "00000000"))
    with pytest.raises(ProtocolError, match="invalid length -2"):
        decode_response_body(PRODUCE, 3, bytes.fromhex("00000001" "fffe"))


# ------------------------------------------------------------------------------------------ the schemas

EXPECTED_RANGES = {
    "ApiVersions": (18, 0, 4, 3), "Metadata": (3, 0, 13, 9), "Produce": (0, 3, 12, 9),
    "InitProducerId": (22, 0, 5, 2), "FindCoordinator": (10, 0, 6, 3), "AddPartitionsToTxn": (24, 0, 3, 3),
    "EndTxn": (26, 0, 5, 3), "AddOffsetsToTxn": (25, 0, 4, 3), "TxnOffsetCommit": (28, 0, 5, 3),
    "OffsetFetch": (9, 1, 9, 6), "SaslHandshake": (17, 0, 1, None), "SaslAuthenticate": (36, 0, 2, 2),
    "CreateTopics": (19, 2, 7, 5),
    "DescribeConfigs": (32, 4, 4, 4), "Fetch": (1, 4, 12, 12), "ListOffsets": (2, 1, 11, 6),
    "ListTransactions": (66, 0, 2, 0), "DescribeTransactions": (65, 0, 0, 0), "DescribeProducers": (61, 0, 0, 0),
}


def test_api_specs_table() -> None:
    got = {s.name: (s.key, s.min_version, s.max_version, s.flexible_from) for s in API_SPECS.values()}
    assert got == EXPECTED_RANGES
    assert all(key == spec.key for key, spec in API_SPECS.items())


def _walk(schema: Schema, path: str = "") -> list[tuple[str, Schema]]:
    out = [(path, schema)]
    for f in schema:
        if f.fields:
            out += _walk(f.fields, f"{path}.{f.name}")
    return out


@pytest.mark.parametrize("api", list(API_SPECS.values()), ids=lambda a: a.name)
def test_schemas_are_well_formed(api: ApiSpec) -> None:
    for schema in (api.request_schema, api.response_schema):
        for path, struct in _walk(schema):
            names = [f.name for f in struct]
            assert len(names) == len(set(names)), path
            assert all(re.fullmatch(r"[a-z][a-z0-9_]*", n) for n in names), path
            tags = [f.tag for f in struct if f.tag is not None]
            assert len(tags) == len(set(tags)), path
            for f in struct:
                assert f.nullable.lo > f.nullable.hi or (f.nullable.lo >= f.versions.lo), (path, f.name)
                if f.tag is not None:
                    assert api.flexible_from is not None and f.tagged.lo >= api.flexible_from


def test_field_declarations_are_validated() -> None:
    with pytest.raises(ValueError, match="unknown type"):
        field("x", "int128", "0+")
    with pytest.raises(ValueError, match="needs its fields"):
        field("x", "[]", "0+")
    with pytest.raises(ValueError, match="tag"):
        field("x", "int32", "0+", tag=0)
    assert isinstance(field("x", "[]int32", "0+"), Field)
