"""Version negotiation: select_version, ApiVersions parsing, features, and the ApiVersions retry."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import BrokerUnsupportedVersionError, UnsupportedVersionError
from spark_kafka_sink.protocol.framing import decode_response
from spark_kafka_sink.protocol.messages import (
    API_SPECS,
    API_VERSIONS,
    END_TXN,
    FETCH,
    FIND_COORDINATOR,
    LIST_OFFSETS,
    METADATA,
    PRODUCE,
    encode_request_body,
    encode_response_body,
)
from spark_kafka_sink.protocol.versions import (
    BrokerVersions,
    api_versions_request,
    api_versions_retry_version,
    parse_api_versions,
    select_version,
    transaction_version,
)

# What a Kafka 4.1+ broker advertises for the APIs we use (Produce min 0 although v0-2 are gone).
KAFKA_4 = {0: (0, 13), 1: (4, 17), 2: (1, 10), 3: (0, 13), 9: (1, 10), 10: (0, 6), 17: (0, 1), 18: (0, 4),
           19: (2, 7), 22: (0, 6), 24: (0, 5), 25: (0, 4), 26: (0, 5), 28: (0, 5), 32: (1, 4), 36: (0, 2),
           61: (0, 0), 65: (0, 0), 66: (0, 1)}


def test_kafka_4_broker_gets_our_newest_versions() -> None:
    chosen = {api.name: select_version(api, KAFKA_4) for api in API_SPECS.values()}
    assert chosen == {
        "Produce": 12, "Fetch": 12, "ListOffsets": 10, "Metadata": 13, "OffsetFetch": 9, "FindCoordinator": 6,
        "SaslHandshake": 1,
        "ApiVersions": 4, "CreateTopics": 7, "InitProducerId": 5, "AddPartitionsToTxn": 3, "AddOffsetsToTxn": 4,
        "EndTxn": 5, "TxnOffsetCommit": 5, "SaslAuthenticate": 2, "ListTransactions": 1, "DescribeTransactions": 0,
        "DescribeProducers": 0, "DescribeConfigs": 4,
    }


def test_older_broker_caps_the_version() -> None:
    assert select_version(METADATA, {3: (0, 8)}) == 8
    assert select_version(FIND_COORDINATOR, {10: (0, 3)}) == 3  # pre-batching broker
    assert select_version(END_TXN, {26: (0, 4)}) == 4  # no transaction version 2
    assert select_version(FETCH, {1: (0, 13)}) == 12  # Kafka 3.x: v13 would need topic ids
    assert select_version(LIST_OFFSETS, {2: (0, 7)}) == 7  # Kafka 3.0


def test_too_old_broker_names_api_and_both_ranges() -> None:
    with pytest.raises(UnsupportedVersionError) as info:
        select_version(PRODUCE, {0: (0, 2)})
    message = str(info.value)
    assert "Produce" in message and "v3-12" in message and "v0-2" in message and "too old" in message


def test_too_new_broker_and_missing_api() -> None:
    with pytest.raises(UnsupportedVersionError, match="too new"):
        select_version(PRODUCE, {0: (13, 14)})
    with pytest.raises(UnsupportedVersionError, match="does not offer EndTxn \\(API key 26\\)"):
        select_version(END_TXN, {0: (3, 12)})


def _api_versions_response(version: int, body: dict[str, object]) -> dict[str, object]:
    """Encode then decode through the real framing, as the connection would."""
    data = (1).to_bytes(4, "big") + encode_response_body(API_VERSIONS, version, body)
    return decode_response(API_VERSIONS, version, data)[1]


def test_parse_api_versions_with_features() -> None:
    body = _api_versions_response(4, {
        "api_keys": [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in KAFKA_4.items()],
        "supported_features": [{"name": "transaction.version", "min_version": 0, "max_version": 2}],
        "finalized_features_epoch": 42,
        "finalized_features": [{"name": "transaction.version", "min_version_level": 0, "max_version_level": 2},
                               {"name": "metadata.version", "min_version_level": 1, "max_version_level": 27}],
    })
    versions = parse_api_versions(body)
    assert versions.api_versions == KAFKA_4
    assert versions.select(PRODUCE) == 12
    assert versions.supported_features == {"transaction.version": (0, 2)}
    assert versions.finalized_features["metadata.version"] == (1, 27)
    assert versions.finalized_features_epoch == 42
    assert transaction_version(versions) == 2


def test_transaction_version_defaults_to_classic() -> None:
    assert transaction_version(BrokerVersions(KAFKA_4)) == 0
    stale = BrokerVersions(KAFKA_4, finalized_features={"transaction.version": (0, 2)}, finalized_features_epoch=-1)
    assert transaction_version(stale) == 0  # features are only valid with an epoch


def test_v0_response_has_no_features() -> None:
    versions = parse_api_versions(_api_versions_response(0, {"api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2}]}))
    assert versions.api_versions == {18: (0, 2)} and versions.finalized_features == {}


def test_unsupported_api_versions_version_retry() -> None:
    # An old broker answers our v4 ApiVersions in the v0 layout with UNSUPPORTED_VERSION and its own range.
    data = (1).to_bytes(4, "big") + encode_response_body(API_VERSIONS, 0, {"error_code": 35, "api_keys": [
        {"api_key": 18, "min_version": 0, "max_version": 2}]})
    body = decode_response(API_VERSIONS, 4, data)[1]
    assert api_versions_retry_version(body) == 2
    with pytest.raises(BrokerUnsupportedVersionError):
        parse_api_versions(body)
    assert api_versions_retry_version({"error_code": 35, "api_keys": []}) == 0
    assert api_versions_retry_version({"error_code": 0, "api_keys": []}) is None


@pytest.mark.parametrize(("name", "version", "expected"), [
    ("spark-kafka-sink", "0.1.0", ("spark-kafka-sink", "0.1.0")),
    ("my app", "0.1.0+local", ("my-app", "0.1.0-local")),
    ("-x-", "1.", ("x", "1")),
    ("???", "", ("spark-kafka-sink", "unknown")),
])
def test_api_versions_request_cleans_software_fields(name: str, version: str, expected: tuple[str, str]) -> None:
    body = api_versions_request(3, name, version)
    assert (body["client_software_name"], body["client_software_version"]) == expected
    encode_request_body(API_VERSIONS, 3, body)  # and it encodes


def test_api_versions_request_before_v3_is_empty() -> None:
    assert api_versions_request(2, "x", "1") == {}
    assert encode_request_body(API_VERSIONS, 2, {}) == b""
