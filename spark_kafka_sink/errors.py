"""The one exception hierarchy of spark-kafka-sink.

Every error the package raises is a :class:`KafkaError`. Three class attributes encode policy, so callers decide
what to do without parsing messages:

* ``retriable`` -- the same request may succeed if sent again after a backoff;
* ``invalid_metadata`` -- cached cluster metadata is stale: refresh it before retrying (implies ``retriable``);
* ``fatal`` -- this producer instance cannot continue (fenced, not authorized, misconfigured): close it.

Local failures::

    KafkaError
    ├── ConfigError (also ValueError)   bad option or config value; names the key
    ├── ProtocolError                   bytes that are not valid Kafka protocol
    │   └── UnsupportedVersionError     no API version both sides speak (broker too old)
    ├── KafkaTimeoutError               a local deadline passed (retriable)
    │   ├── BufferExhaustedError        buffer.memory full for max.block.ms
    │   └── DeliveryTimeoutError        not acknowledged within delivery.timeout.ms
    ├── KafkaConnectionError            connecting / talking to a broker failed (retriable)
    ├── SecuritySetupError              TLS / security.protocol setup failed; fatal: fix the configuration
    │   ├── UntrustedCertificateError       the broker's certificate does not chain to a trusted CA
    │   ├── HostnameMismatchError           the certificate does not name the host we connected to
    │   ├── TlsHandshakeError               another lasting TLS failure (client certificate refused ...)
    │   └── SecurityProtocolMismatchError   one side speaks TLS and the other does not
    ├── ProducerClosedError, IllegalStateError, SerializationError
    ├── PartitionOutOfRangeError (also ValueError)   a record's partition is not in [0, partitions)
    ├── RecordTooLargeError (also ValueError)  a record larger than max.request.size or buffer.memory
    ├── TransactionAbortedError         the record's transaction was aborted before it was sent
    └── BrokerError                     a broker answered with an error code (.code, .error_name)

Broker errors: one class per code of :data:`spark_kafka_sink.protocol.error_codes.ERROR_CODES`, named by
``class_name_for`` (``NOT_LEADER_OR_FOLLOWER`` -> ``NotLeaderOrFollowerError``); the class's flags and docstring
come from that table. ``UnknownProducerIdError`` subclasses ``OutOfOrderSequenceNumberError`` (both mean "the broker
lost track of our sequence"), and ``BrokerUnsupportedVersionError`` is also an ``UnsupportedVersionError``.
Codes this client does not know raise :class:`UnknownBrokerError`, which carries the code. These classes, with
``error_for_code`` and ``raise_for_code``, are declared in :mod:`spark_kafka_sink.broker_errors` and re-exported
here: import them from this module.

Instances pickle (Spark ships task failures to the driver): constructor keywords live in ``__dict__`` and the
message is rendered by ``__str__``.
"""

from __future__ import annotations

from typing import ClassVar


__all__ = [
    "KafkaError", "ConfigError", "ProtocolError", "UnsupportedVersionError", "KafkaTimeoutError",
    "KafkaConnectionError", "SecuritySetupError", "UntrustedCertificateError", "HostnameMismatchError",
    "TlsHandshakeError", "SecurityProtocolMismatchError", "BufferExhaustedError", "DeliveryTimeoutError",
    "ProducerClosedError", "IllegalStateError", "SerializationError", "PartitionOutOfRangeError", "RecordTooLargeError",
    "TransactionAbortedError",
]


class KafkaError(Exception):
    """Base class of every error raised by spark-kafka-sink."""

    retriable: ClassVar[bool] = False
    invalid_metadata: ClassVar[bool] = False
    fatal: ClassVar[bool] = False


class ConfigError(KafkaError, ValueError):
    """Local misuse: a bad option or configuration value. The message names the key; fix it and run again."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


class ProtocolError(KafkaError):
    """Bytes that do not parse as the Kafka protocol: malformed, truncated, or an unexpected correlation id."""


class UnsupportedVersionError(ProtocolError):
    """Client and broker share no version of an API; usually the broker is too old for this client."""


class KafkaTimeoutError(KafkaError):
    """A local deadline passed before the operation completed; retrying may succeed."""

    retriable = True


class _AddressedError(KafkaError):
    # Base of the errors about one broker address: keeps it, and puts it in front of a message that lacks it.

    def __init__(self, message: str, *, address: str | None = None) -> None:
        super().__init__(message)
        self.address = address

    def __str__(self) -> str:
        text = super().__str__()
        return text if self.address is None or self.address in text else f"{self.address}: {text}"


class KafkaConnectionError(_AddressedError):
    """Connecting to, or talking with, a broker failed; retriable. The message names the address."""

    retriable = True


class SecuritySetupError(_AddressedError):
    """TLS or security-protocol setup failed in a way retrying cannot fix (``fatal``): change the configuration
    (or the broker's) and restart. The mapping from ``ssl`` failures is in ``net/security_errors.py``; SASL
    failures keep the broker's classes (``SaslAuthenticationFailedError`` ..., also fatal)."""

    fatal = True


class UntrustedCertificateError(SecuritySetupError):
    """The broker's certificate is not signed by a CA this client trusts (set ssl.ca.location)."""


class HostnameMismatchError(SecuritySetupError):
    """The broker's certificate does not name the host this client connected to."""


class TlsHandshakeError(SecuritySetupError):
    """The TLS handshake failed for another lasting reason (client certificate refused, no common protocol...)."""


class SecurityProtocolMismatchError(SecuritySetupError):
    """security.protocol does not match the listener: one side speaks TLS, the other does not."""


class BufferExhaustedError(KafkaTimeoutError):
    """buffer.memory stayed full for max.block.ms: sends outpace the brokers. Raise either setting, or slow down."""


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record was not acknowledged within delivery.timeout.ms; it may or may not have been written."""


class ProducerClosedError(KafkaError):
    """The producer is closed (or closing); create a new one."""


class IllegalStateError(KafkaError):
    """An operation is not allowed in the current state (e.g. commit without begin); a bug in the caller's flow."""

    def __init__(
        self, message: str | None = None, *, from_state: object = None, to_state: object = None
    ) -> None:
        super().__init__(message)
        self.from_state = from_state
        self.to_state = to_state

    def __str__(self) -> str:
        message = self.args[0] if self.args else None
        parts = []
        if self.from_state is not None or self.to_state is not None:
            parts.append(f"illegal transition from {_state_name(self.from_state)} to {_state_name(self.to_state)}")
        if message:
            parts.append(str(message))
        return ": ".join(parts) or "illegal state"


def _state_name(state: object) -> str:
    # Enum members print as their name; anything else as its str().
    name = getattr(state, "name", None)
    return name if isinstance(name, str) else str(state)


class SerializationError(KafkaError):
    """A key, value or header could not be turned into bytes; fix the input data or its column type."""


class PartitionOutOfRangeError(KafkaError, ValueError):
    """A record names (or a custom partitioner chose) a partition the topic does not have; fix the record's
    partition, or add partitions to the topic."""


class RecordTooLargeError(KafkaError, ValueError):
    """A record is larger than max.request.size or buffer.memory and can never be sent; the message names its
    size and the option. Send smaller records or raise the option (and the topic's max.message.bytes)."""


class TransactionAbortedError(KafkaError):
    """The record was never sent: its transaction was aborted (``abort_transaction()``, or after an error)."""


# Imported last, on purpose: broker_errors subclasses KafkaError and UnsupportedVersionError from above. The broker
# classes' names join this module's __all__: spark_kafka_sink.errors stays the one place to import errors from.
from spark_kafka_sink import broker_errors as _broker_errors  # noqa: E402
from spark_kafka_sink.broker_errors import *  # noqa: E402,F401,F403

__all__ += _broker_errors.__all__
