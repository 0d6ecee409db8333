"""SASL APIs: SaslHandshake (17) picks the mechanism, SaslAuthenticate (36) carries its tokens.

With SaslHandshake v1 the mechanism's tokens travel inside SaslAuthenticate requests (framed Kafka requests),
instead of the raw length-prefixed tokens of v0.
"""

from __future__ import annotations

from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages.schema import ApiSpec, field

__all__ = ["SASL_HANDSHAKE", "SASL_AUTHENTICATE"]

# SaslHandshake: versions 0-1, never flexible.
#   request: mechanism string; response: error_code int16, mechanisms []string

SASL_HANDSHAKE = ApiSpec(
    key=17,
    name="SaslHandshake",
    min_version=0,
    max_version=1,
    flexible_from=None,
    request_schema=(
        field("mechanism", "string", "0+"),  # e.g. PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    ),
    response_schema=(
        field("error_code", "int16", "0+", default=NO_ERROR),  # UNSUPPORTED_SASL_MECHANISM if not enabled
        field("mechanisms", "[]string", "0+", default=[]),  # what the broker enables
    ),
)

# SaslAuthenticate: versions 0-2, flexible from 2.
#   request: auth_bytes bytes; response: error_code, error_message, auth_bytes, session_lifetime_ms (v1+)

SASL_AUTHENTICATE = ApiSpec(
    key=36,
    name="SaslAuthenticate",
    min_version=0,
    max_version=2,
    flexible_from=2,
    request_schema=(
        field("auth_bytes", "bytes", "0+"),  # the mechanism's next client message
    ),
    response_schema=(
        field("error_code", "int16", "0+", default=NO_ERROR),  # SASL_AUTHENTICATION_FAILED on bad credentials
        field("error_message", "string", "0+", nullable="0+", default=None),  # the broker's reason
        field("auth_bytes", "bytes", "0+", default=b""),  # the mechanism's next server message
        field("session_lifetime_ms", "int64", "1+", default=0, ignorable=True),  # 0 = no re-authentication
    ),
)
