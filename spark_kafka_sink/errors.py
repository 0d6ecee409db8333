"""The one exception hierarchy of spark-kafka-sink.

Every error the package raises is a :class:`KafkaError`. Three class attributes encode policy so callers
never parse messages:

* ``retriable`` -- the same request may succeed if sent again (after backoff);
* ``invalid_metadata`` -- cached cluster metadata is stale: refresh it before retrying;
* ``fatal`` -- the producer cannot continue (e.g. fenced by a newer instance); close it.

Broker error codes are declared once (see the broker table below); local failures have their own classes.
"""

from __future__ import annotations

__all__ = [
    "KafkaError",
    "ConfigError",
    "ProtocolError",
    "UnsupportedVersionError",
    "KafkaTimeoutError",
    "KafkaConnectionError",
    "BufferExhaustedError",
    "DeliveryTimeoutError",
    "ProducerClosedError",
    "IllegalStateError",
    "SerializationError",
    "BrokerError",
]


class KafkaError(Exception):
    """Base class of every error raised by spark-kafka-sink."""

    retriable: bool = False
    invalid_metadata: bool = False
    fatal: bool = False


class ConfigError(KafkaError, ValueError):
    """Local misuse: a bad option or configuration value. The message names the key; fix it and rerun."""


class ProtocolError(KafkaError):
    """Bytes that do not parse as the Kafka protocol: malformed, truncated, or an unexpected correlation id."""


class UnsupportedVersionError(ProtocolError):
    """Client and broker share no version of an API (usually: the broker is too old)."""


class KafkaTimeoutError(KafkaError):
    """A local deadline passed; retrying may succeed."""

    retriable = True


class KafkaConnectionError(KafkaError):
    """Connecting to or talking with a broker failed; the message names the address. Retriable."""

    retriable = True


class BufferExhaustedError(KafkaTimeoutError):
    """buffer.memory stayed full for max.block.ms: the producer outpaces the brokers. Raise either, or slow down."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within delivery.timeout.ms; it was not (knowingly) written."""


class ProducerClosedError(KafkaError):
    """The producer was closed; create a new one."""


class IllegalStateError(KafkaError):
    """An operation was called in a state that does not allow it (e.g. commit without begin)."""


class SerializationError(KafkaError):
    """A key, value or header could not be turned into bytes; fix the input data."""


class BrokerError(KafkaError):
    """Base class of errors a broker reports with an error code."""

    code: int = -1
    error_name: str = "UNKNOWN_SERVER_ERROR"
