"""Kafka request/response bodies, declared once as data (like Kafka's JSON message definitions).

Bodies are plain dicts keyed by snake_case field names. Each :class:`ApiSpec` carries the versions this client
implements and both schemas; :func:`encode_request` / :func:`decode_response` (and the reverse pair, for fake
brokers in tests) run the one generic codec in :mod:`.codec`. Framing (headers, length prefix) lives in
:mod:`spark_kafka_sink.protocol.framing`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from spark_kafka_sink.errors import ProtocolError, UnsupportedVersionError
from spark_kafka_sink.protocol.messages.cluster import (
    API_VERSIONS,
    CREATE_TOPICS,
    DESCRIBE_CONFIGS,
    METADATA,
    TOPIC_RESOURCE,
)
from spark_kafka_sink.protocol.messages.codec import decode_struct, write_struct
from spark_kafka_sink.protocol.messages.fetch import FETCH, LIST_OFFSETS
from spark_kafka_sink.protocol.messages.produce import PRODUCE
from spark_kafka_sink.protocol.messages.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from spark_kafka_sink.protocol.messages.schema import ApiSpec, Field, Schema, Versions, field
from spark_kafka_sink.protocol.messages.transactions import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    OFFSET_FETCH,
    TXN_OFFSET_COMMIT,
)
from spark_kafka_sink.protocol.messages.txn_admin import DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS

__all__ = [
    "ApiSpec",
    "Field",
    "Schema",
    "Versions",
    "field",
    "PRODUCE",
    "FETCH",
    "LIST_OFFSETS",
    "METADATA",
    "OFFSET_FETCH",
    "FIND_COORDINATOR",
    "SASL_HANDSHAKE",
    "API_VERSIONS",
    "CREATE_TOPICS",
    "DESCRIBE_CONFIGS",
    "TOPIC_RESOURCE",
    "INIT_PRODUCER_ID",
    "ADD_PARTITIONS_TO_TXN",
    "ADD_OFFSETS_TO_TXN",
    "END_TXN",
    "TXN_OFFSET_COMMIT",
    "SASL_AUTHENTICATE",
    "LIST_TRANSACTIONS",
    "DESCRIBE_TRANSACTIONS",
    "DESCRIBE_PRODUCERS",
    "API_SPECS",
    "encode_request_body",
    "write_request_body",
    "decode_response_body",
    "encode_response_body",
    "decode_request_body",
]

#: Every API this client speaks, by API key.
API_SPECS: dict[int, ApiSpec] = {
    spec.key: spec
    for spec in (
        PRODUCE,
        FETCH,
        LIST_OFFSETS,
        METADATA,
        OFFSET_FETCH,
        FIND_COORDINATOR,
        SASL_HANDSHAKE,
        API_VERSIONS,
        CREATE_TOPICS,
        DESCRIBE_CONFIGS,
        INIT_PRODUCER_ID,
        ADD_PARTITIONS_TO_TXN,
        ADD_OFFSETS_TO_TXN,
        END_TXN,
        TXN_OFFSET_COMMIT,
        SASL_AUTHENTICATE,
        LIST_TRANSACTIONS,
        DESCRIBE_TRANSACTIONS,
        DESCRIBE_PRODUCERS,
    )
}


def _check(api: ApiSpec, version: int) -> None:
    if not api.supports(version):
        raise UnsupportedVersionError(
            f"{api.name} v{version} is not implemented by this client (it speaks v{api.min_version}-"
            f"{api.max_version})"
        )


def write_request_body(buf: bytearray, api: ApiSpec, version: int, body: Mapping[str, Any]) -> None:
    """Append the request body to ``buf`` (framing uses this to build a whole frame in one buffer)."""
    _check(api, version)
    write_struct(buf, api.request_schema, version, api.is_flexible(version), body, "")


def encode_request_body(api: ApiSpec, version: int, body: Mapping[str, Any]) -> bytes:
    """The request body alone (no header, no length prefix)."""
    buf = bytearray()
    write_request_body(buf, api, version, body)
    return bytes(buf)


def encode_response_body(api: ApiSpec, version: int, body: Mapping[str, Any]) -> bytes:
    """The response body alone; for fake brokers in tests."""
    _check(api, version)
    buf = bytearray()
    write_struct(buf, api.response_schema, version, api.is_flexible(version), body, "")
    return bytes(buf)


def _decode(
    api: ApiSpec, version: int, schema: Schema, what: str, data: bytes | bytearray | memoryview
) -> dict[str, Any]:
    _check(api, version)
    try:
        return decode_struct(schema, version, api.is_flexible(version), data)
    except ProtocolError as exc:
        raise ProtocolError(f"{api.name} v{version} {what}: {exc}") from None


def decode_response_body(api: ApiSpec, version: int, data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Decode exactly ``data`` as the response body; every declared field is present (defaults for absent ones)."""
    return _decode(api, version, api.response_schema, "response", data)


def decode_request_body(api: ApiSpec, version: int, data: bytes | bytearray | memoryview) -> dict[str, Any]:
    """Decode a request body; for fake brokers in tests."""
    return _decode(api, version, api.request_schema, "request", data)
