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
    ├── SchemaRegistryError             the schema registry refused a request (.status, .error_code, .subject)
    │   ├── IncompatibleSchemaError         a schema its subject's compatibility level refuses (409)
    │   └── SchemaRegistryUnavailableError  the registry did not answer, after retries (retriable)
    └── BrokerError                     a broker answered with an error code (.code, .error_name)

Broker errors: one class per code of :data:`spark_kafka_sink.protocol.error_codes.ERROR_CODES`, named by
``class_name_for`` (``NOT_LEADER_OR_FOLLOWER`` -> ``NotLeaderOrFollowerError``); the class's flags and docstring
come from that table. ``UnknownProducerIdError`` subclasses ``OutOfOrderSequenceNumberError`` (both mean "the broker
lost track of our sequence"), and ``BrokerUnsupportedVersionError`` is also an ``UnsupportedVersionError``.
Codes this client does not know raise :class:`UnknownBrokerError`, which carries the code. ``error_for_code`` and
``raise_for_code`` turn a code into its class or exception.

Code sets that more than one layer handles alike are declared once, at the end of this module (``FENCED_CODES``
...), from the classes' ``.code``: no bare error-code numbers outside the table.

Instances pickle (Spark ships task failures to the driver): constructor keywords live in ``__dict__`` and the
message is rendered by ``__str__``.
"""

from __future__ import annotations

from typing import Any, ClassVar, NoReturn

from spark_kafka_sink.protocol.error_codes import ERROR_CODES, class_name_for

__all__ = [
    "KafkaError", "ConfigError", "ProtocolError", "UnsupportedVersionError", "KafkaTimeoutError",
    "KafkaConnectionError", "SecuritySetupError", "UntrustedCertificateError", "HostnameMismatchError",
    "TlsHandshakeError", "SecurityProtocolMismatchError", "BufferExhaustedError", "DeliveryTimeoutError",
    "ProducerClosedError", "IllegalStateError", "SerializationError", "PartitionOutOfRangeError", "RecordTooLargeError",
    "TransactionAbortedError", "SchemaRegistryError", "IncompatibleSchemaError", "SchemaRegistryUnavailableError",
    "BrokerError", "UnknownBrokerError", "error_for_code", "raise_for_code", "broker_error_classes",
    "UnknownServerError", "OffsetOutOfRangeError", "CorruptMessageError", "UnknownTopicOrPartitionError",
    "InvalidFetchSizeError", "LeaderNotAvailableError", "NotLeaderOrFollowerError", "RequestTimedOutError",
    "BrokerNotAvailableError", "ReplicaNotAvailableError", "MessageTooLargeError", "StaleControllerEpochError",
    "OffsetMetadataTooLargeError", "NetworkExceptionError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "NotCoordinatorError", "InvalidTopicExceptionError",
    "RecordListTooLargeError", "NotEnoughReplicasError", "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError", "IllegalGenerationError", "InconsistentGroupProtocolError",
    "InvalidGroupIdError", "UnknownMemberIdError", "InvalidSessionTimeoutError", "RebalanceInProgressError",
    "InvalidCommitOffsetSizeError", "TopicAuthorizationFailedError", "GroupAuthorizationFailedError",
    "ClusterAuthorizationFailedError", "InvalidTimestampError", "UnsupportedSaslMechanismError",
    "IllegalSaslStateError", "BrokerUnsupportedVersionError", "TopicAlreadyExistsError",
    "InvalidPartitionsError", "InvalidReplicationFactorError", "InvalidReplicaAssignmentError",
    "InvalidConfigError", "NotControllerError", "InvalidRequestError", "UnsupportedForMessageFormatError",
    "PolicyViolationError", "OutOfOrderSequenceNumberError", "DuplicateSequenceNumberError",
    "InvalidProducerEpochError", "InvalidTxnStateError", "InvalidProducerIdMappingError",
    "InvalidTransactionTimeoutError", "ConcurrentTransactionsError", "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError", "SecurityDisabledError", "OperationNotAttemptedError",
    "KafkaStorageError", "LogDirNotFoundError", "SaslAuthenticationFailedError", "UnknownProducerIdError",
    "ReassignmentInProgressError", "DelegationTokenAuthDisabledError", "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError", "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError", "DelegationTokenExpiredError", "InvalidPrincipalTypeError",
    "NonEmptyGroupError", "GroupIdNotFoundError", "FetchSessionIdNotFoundError",
    "InvalidFetchSessionEpochError", "ListenerNotFoundError", "TopicDeletionDisabledError",
    "FencedLeaderEpochError", "UnknownLeaderEpochError", "UnsupportedCompressionTypeError",
    "StaleBrokerEpochError", "OffsetNotAvailableError", "MemberIdRequiredError",
    "PreferredLeaderNotAvailableError", "GroupMaxSizeReachedError", "FencedInstanceIdError",
    "EligibleLeadersNotAvailableError", "ElectionNotNeededError", "NoReassignmentInProgressError",
    "GroupSubscribedToTopicError", "InvalidRecordError", "UnstableOffsetCommitError",
    "ThrottlingQuotaExceededError", "ProducerFencedError", "ResourceNotFoundError", "DuplicateResourceError",
    "UnacceptableCredentialError", "InconsistentVoterSetError", "InvalidUpdateVersionError",
    "FeatureUpdateFailedError", "PrincipalDeserializationFailureError", "SnapshotNotFoundError",
    "PositionOutOfRangeError", "UnknownTopicIdError", "DuplicateBrokerRegistrationError",
    "BrokerIdNotRegisteredError", "InconsistentTopicIdError", "InconsistentClusterIdError",
    "TransactionalIdNotFoundError", "FetchSessionTopicIdError", "IneligibleReplicaError",
    "NewLeaderElectedError", "OffsetMovedToTieredStorageError", "FencedMemberEpochError",
    "UnreleasedInstanceIdError", "UnsupportedAssignorError", "StaleMemberEpochError",
    "MismatchedEndpointTypeError", "UnsupportedEndpointTypeError", "UnknownControllerIdError",
    "UnknownSubscriptionIdError", "TelemetryTooLargeError", "InvalidRegistrationError",
    "TransactionAbortableError", "InvalidRecordStateError", "ShareSessionNotFoundError",
    "InvalidShareSessionEpochError", "FencedStateEpochError", "InvalidVoterKeyError", "DuplicateVoterError",
    "VoterNotFoundError", "InvalidRegularExpressionError", "RebootstrapRequiredError",
    "StreamsInvalidTopologyError", "StreamsInvalidTopologyEpochError", "StreamsTopologyFencedError",
    "ShareSessionLimitReachedError",
    "FENCED_CODES", "COORDINATOR_MOVED_CODES", "COORDINATOR_BUSY_CODES", "TXN_ABORTABLE_CODES", "TOO_LARGE_CODES",
    "PRODUCE_FATAL_CODES",
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
    """A key, value, header, timestamp, partition or topic cannot go into a record (not bytes or str, a timestamp
    before 1970, a topic that is not a str, a column of the wrong type), or an offset or group id cannot go into
    an offset commit; fix the input data or its column type."""


class PartitionOutOfRangeError(KafkaError, ValueError):
    """A record names (or a custom partitioner chose) a partition the topic does not have; fix the record's
    partition, or add partitions to the topic."""


class RecordTooLargeError(KafkaError, ValueError):
    """A record is larger than max.request.size or buffer.memory and can never be sent; the message names its
    size and the option. Send smaller records or raise the option (and the topic's max.message.bytes)."""


class TransactionAbortedError(KafkaError):
    """The record was never sent: its transaction was aborted (``abort_transaction()``, or after an error)."""


class SchemaRegistryError(KafkaError):
    """The schema registry refused a request: ``.status`` (HTTP), ``.error_code`` (the registry's), ``.subject``.
    The message carries the registry's own; fix the schema, the subject or the registry settings it names."""

    def __init__(self, message: str, *, status: int | None = None, error_code: int | None = None,
                 subject: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.subject = subject


class IncompatibleSchemaError(SchemaRegistryError):
    """The subject's compatibility level refuses the schema (HTTP 409): the message gives the level and the
    registry's reason. Make the change compatible (e.g. a new field with a default) or register under another
    subject; nothing was written."""


class SchemaRegistryUnavailableError(SchemaRegistryError):
    """The registry did not answer (connection refused, timeout, 5xx) after the retries; try again later."""

    retriable = True


# Broker errors ----------------------------------------------------------------------------------------------------

_BY_CODE: dict[int, type[BrokerError]] = {}


class BrokerError(KafkaError):
    """A broker answered with an error code. ``code`` and ``error_name`` identify it; the docstring says what to do.

    ``BrokerError(message=None, *, context=None)``: ``message`` is the broker's error message if it sent one,
    ``context`` says where it happened (e.g. ``"Produce topic-0"``).
    """

    code: ClassVar[int] = -1
    error_name: ClassVar[str] = "UNKNOWN_SERVER_ERROR"
    description: ClassVar[str] = "The broker reported an error."

    def __init_subclass__(cls, code: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if code is None:
            return  # an intermediate class: keeps what it inherits
        entry = ERROR_CODES[code]
        expected = class_name_for(entry.name)
        if cls.__name__ != expected or code in _BY_CODE:
            # Names are derived from the table so nobody has to guess them; catch drift at import time.
            raise TypeError(f"code {code} ({entry.name}) must be declared once, as {expected}")
        cls.code = code
        cls.error_name = entry.name
        cls.retriable = entry.retriable
        cls.invalid_metadata = entry.invalid_metadata
        cls.fatal = entry.fatal
        cls.description = entry.description
        cls.__doc__ = f"{entry.name} ({code}): {entry.description}"
        _BY_CODE[code] = cls

    def __init__(self, message: str | None = None, *, context: str | None = None) -> None:
        super().__init__(message)
        self.context = context

    @property
    def message(self) -> str | None:
        """The broker's own error message, if it sent one."""
        value = self.args[0] if self.args else None
        return None if value is None else str(value)

    def __str__(self) -> str:
        where = f" in {self.context}" if self.context else ""
        detail = f" (broker says: {self.message})" if self.message else ""
        return f"{self.error_name} (error code {self.code}){where}: {self.description}{detail}"


class UnknownBrokerError(BrokerError):
    """The broker sent an error code this client does not know; treated as not retriable."""

    description = "an error code this client does not know; check the broker version and its log."

    def __init__(self, message: str | None = None, *, context: str | None = None, code: int = -1) -> None:
        super().__init__(message, context=context)
        self.unknown_code = code

    def __str__(self) -> str:
        where = f" in {self.context}" if self.context else ""
        detail = f" (broker says: {self.message})" if self.message else ""
        return f"unknown broker error code {self.unknown_code}{where}: {self.description}{detail}"


# One class per broker error code, in code order. Flags and docstrings come from ERROR_CODES.
# fmt: off
class UnknownServerError(BrokerError, code=-1): ...
class OffsetOutOfRangeError(BrokerError, code=1): ...
class CorruptMessageError(BrokerError, code=2): ...
class UnknownTopicOrPartitionError(BrokerError, code=3): ...
class InvalidFetchSizeError(BrokerError, code=4): ...
class LeaderNotAvailableError(BrokerError, code=5): ...
class NotLeaderOrFollowerError(BrokerError, code=6): ...
class RequestTimedOutError(BrokerError, code=7): ...
class BrokerNotAvailableError(BrokerError, code=8): ...
class ReplicaNotAvailableError(BrokerError, code=9): ...
class MessageTooLargeError(BrokerError, code=10): ...
class StaleControllerEpochError(BrokerError, code=11): ...
class OffsetMetadataTooLargeError(BrokerError, code=12): ...
class NetworkExceptionError(BrokerError, code=13): ...
class CoordinatorLoadInProgressError(BrokerError, code=14): ...
class CoordinatorNotAvailableError(BrokerError, code=15): ...
class NotCoordinatorError(BrokerError, code=16): ...
class InvalidTopicExceptionError(BrokerError, code=17): ...
class RecordListTooLargeError(BrokerError, code=18): ...
class NotEnoughReplicasError(BrokerError, code=19): ...
class NotEnoughReplicasAfterAppendError(BrokerError, code=20): ...
class InvalidRequiredAcksError(BrokerError, code=21): ...
class IllegalGenerationError(BrokerError, code=22): ...
class InconsistentGroupProtocolError(BrokerError, code=23): ...
class InvalidGroupIdError(BrokerError, code=24): ...
class UnknownMemberIdError(BrokerError, code=25): ...
class InvalidSessionTimeoutError(BrokerError, code=26): ...
class RebalanceInProgressError(BrokerError, code=27): ...
class InvalidCommitOffsetSizeError(BrokerError, code=28): ...
class TopicAuthorizationFailedError(BrokerError, code=29): ...
class GroupAuthorizationFailedError(BrokerError, code=30): ...
class ClusterAuthorizationFailedError(BrokerError, code=31): ...
class InvalidTimestampError(BrokerError, code=32): ...
class UnsupportedSaslMechanismError(BrokerError, code=33): ...
class IllegalSaslStateError(BrokerError, code=34): ...
class BrokerUnsupportedVersionError(BrokerError, UnsupportedVersionError, code=35): ...
class TopicAlreadyExistsError(BrokerError, code=36): ...
class InvalidPartitionsError(BrokerError, code=37): ...
class InvalidReplicationFactorError(BrokerError, code=38): ...
class InvalidReplicaAssignmentError(BrokerError, code=39): ...
class InvalidConfigError(BrokerError, code=40): ...
class NotControllerError(BrokerError, code=41): ...
class InvalidRequestError(BrokerError, code=42): ...
class UnsupportedForMessageFormatError(BrokerError, code=43): ...
class PolicyViolationError(BrokerError, code=44): ...
class OutOfOrderSequenceNumberError(BrokerError, code=45): ...
class DuplicateSequenceNumberError(BrokerError, code=46): ...
class InvalidProducerEpochError(BrokerError, code=47): ...
class InvalidTxnStateError(BrokerError, code=48): ...
class InvalidProducerIdMappingError(BrokerError, code=49): ...
class InvalidTransactionTimeoutError(BrokerError, code=50): ...
class ConcurrentTransactionsError(BrokerError, code=51): ...
class TransactionCoordinatorFencedError(BrokerError, code=52): ...
class TransactionalIdAuthorizationFailedError(BrokerError, code=53): ...
class SecurityDisabledError(BrokerError, code=54): ...
class OperationNotAttemptedError(BrokerError, code=55): ...
class KafkaStorageError(BrokerError, code=56): ...
class LogDirNotFoundError(BrokerError, code=57): ...
class SaslAuthenticationFailedError(BrokerError, code=58): ...
class UnknownProducerIdError(OutOfOrderSequenceNumberError, code=59): ...
class ReassignmentInProgressError(BrokerError, code=60): ...
class DelegationTokenAuthDisabledError(BrokerError, code=61): ...
class DelegationTokenNotFoundError(BrokerError, code=62): ...
class DelegationTokenOwnerMismatchError(BrokerError, code=63): ...
class DelegationTokenRequestNotAllowedError(BrokerError, code=64): ...
class DelegationTokenAuthorizationFailedError(BrokerError, code=65): ...
class DelegationTokenExpiredError(BrokerError, code=66): ...
class InvalidPrincipalTypeError(BrokerError, code=67): ...
class NonEmptyGroupError(BrokerError, code=68): ...
class GroupIdNotFoundError(BrokerError, code=69): ...
class FetchSessionIdNotFoundError(BrokerError, code=70): ...
class InvalidFetchSessionEpochError(BrokerError, code=71): ...
class ListenerNotFoundError(BrokerError, code=72): ...
class TopicDeletionDisabledError(BrokerError, code=73): ...
class FencedLeaderEpochError(BrokerError, code=74): ...
class UnknownLeaderEpochError(BrokerError, code=75): ...
class UnsupportedCompressionTypeError(BrokerError, code=76): ...
class StaleBrokerEpochError(BrokerError, code=77): ...
class OffsetNotAvailableError(BrokerError, code=78): ...
class MemberIdRequiredError(BrokerError, code=79): ...
class PreferredLeaderNotAvailableError(BrokerError, code=80): ...
class GroupMaxSizeReachedError(BrokerError, code=81): ...
class FencedInstanceIdError(BrokerError, code=82): ...
class EligibleLeadersNotAvailableError(BrokerError, code=83): ...
class ElectionNotNeededError(BrokerError, code=84): ...
class NoReassignmentInProgressError(BrokerError, code=85): ...
class GroupSubscribedToTopicError(BrokerError, code=86): ...
class InvalidRecordError(BrokerError, code=87): ...
class UnstableOffsetCommitError(BrokerError, code=88): ...
class ThrottlingQuotaExceededError(BrokerError, code=89): ...
class ProducerFencedError(BrokerError, code=90): ...
class ResourceNotFoundError(BrokerError, code=91): ...
class DuplicateResourceError(BrokerError, code=92): ...
class UnacceptableCredentialError(BrokerError, code=93): ...
class InconsistentVoterSetError(BrokerError, code=94): ...
class InvalidUpdateVersionError(BrokerError, code=95): ...
class FeatureUpdateFailedError(BrokerError, code=96): ...
class PrincipalDeserializationFailureError(BrokerError, code=97): ...
class SnapshotNotFoundError(BrokerError, code=98): ...
class PositionOutOfRangeError(BrokerError, code=99): ...
class UnknownTopicIdError(BrokerError, code=100): ...
class DuplicateBrokerRegistrationError(BrokerError, code=101): ...
class BrokerIdNotRegisteredError(BrokerError, code=102): ...
class InconsistentTopicIdError(BrokerError, code=103): ...
class InconsistentClusterIdError(BrokerError, code=104): ...
class TransactionalIdNotFoundError(BrokerError, code=105): ...
class FetchSessionTopicIdError(BrokerError, code=106): ...
class IneligibleReplicaError(BrokerError, code=107): ...
class NewLeaderElectedError(BrokerError, code=108): ...
class OffsetMovedToTieredStorageError(BrokerError, code=109): ...
class FencedMemberEpochError(BrokerError, code=110): ...
class UnreleasedInstanceIdError(BrokerError, code=111): ...
class UnsupportedAssignorError(BrokerError, code=112): ...
class StaleMemberEpochError(BrokerError, code=113): ...
class MismatchedEndpointTypeError(BrokerError, code=114): ...
class UnsupportedEndpointTypeError(BrokerError, code=115): ...
class UnknownControllerIdError(BrokerError, code=116): ...
class UnknownSubscriptionIdError(BrokerError, code=117): ...
class TelemetryTooLargeError(BrokerError, code=118): ...
class InvalidRegistrationError(BrokerError, code=119): ...
class TransactionAbortableError(BrokerError, code=120): ...
class InvalidRecordStateError(BrokerError, code=121): ...
class ShareSessionNotFoundError(BrokerError, code=122): ...
class InvalidShareSessionEpochError(BrokerError, code=123): ...
class FencedStateEpochError(BrokerError, code=124): ...
class InvalidVoterKeyError(BrokerError, code=125): ...
class DuplicateVoterError(BrokerError, code=126): ...
class VoterNotFoundError(BrokerError, code=127): ...
class InvalidRegularExpressionError(BrokerError, code=128): ...
class RebootstrapRequiredError(BrokerError, code=129): ...
class StreamsInvalidTopologyError(BrokerError, code=130): ...
class StreamsInvalidTopologyEpochError(BrokerError, code=131): ...
class StreamsTopologyFencedError(BrokerError, code=132): ...
class ShareSessionLimitReachedError(BrokerError, code=133): ...
# fmt: on


def error_for_code(code: int) -> type[BrokerError]:
    """The exception class for a non-zero broker error code; :class:`UnknownBrokerError` for codes we do not know."""
    if code == 0:
        raise ValueError("error code 0 (NONE) means success; it has no exception class")
    return _BY_CODE.get(code, UnknownBrokerError)


def raise_for_code(code: int, message: str | None = None, context: str | None = None) -> None:
    """Return if ``code`` is 0 (NONE); else raise its :class:`BrokerError` with the broker's message and context."""
    if code == 0:
        return
    _raise(code, message, context)


def _raise(code: int, message: str | None, context: str | None) -> NoReturn:
    cls = error_for_code(code)
    if cls is UnknownBrokerError:
        raise UnknownBrokerError(message, context=context, code=code)
    raise cls(message, context=context)


def broker_error_classes() -> dict[int, type[BrokerError]]:
    """A copy of the code -> class map (every declared broker error)."""
    return dict(_BY_CODE)


# Code sets handled alike in more than one place -----------------------------------------------------------------

#: The producer's epoch is stale: another producer with the same transactional id (or a newer epoch) took over.
FENCED_CODES = frozenset({InvalidProducerEpochError.code, ProducerFencedError.code})
#: The transaction coordinator moved or is not there yet: look it up again (FindCoordinator).
COORDINATOR_MOVED_CODES = frozenset({CoordinatorNotAvailableError.code, NotCoordinatorError.code})
#: The coordinator is busy (loading its log, or finishing the previous transaction): retry after a backoff.
COORDINATOR_BUSY_CODES = frozenset({CoordinatorLoadInProgressError.code, ConcurrentTransactionsError.code})
#: The open transaction cannot commit any more; it can still be aborted.
TXN_ABORTABLE_CODES = frozenset(
    {InvalidProducerIdMappingError.code, UnknownProducerIdError.code, TransactionAbortableError.code}
)
#: A batch or request is larger than the broker accepts.
TOO_LARGE_CODES = frozenset({MessageTooLargeError.code, RecordListTooLargeError.code})
#: Produce answers that stop a producer, transactional or not (as the Java client's maybeTransitionToErrorState).
PRODUCE_FATAL_CODES = frozenset({
    ClusterAuthorizationFailedError.code, BrokerUnsupportedVersionError.code, InvalidProducerEpochError.code,
    TransactionalIdAuthorizationFailedError.code, ProducerFencedError.code,
})
