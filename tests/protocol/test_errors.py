"""The exception hierarchy: every broker code mapped once, policy flags, messages, pickling."""

from __future__ import annotations

import pickle

import pytest

import spark_kafka_sink.errors as errors
from spark_kafka_sink.errors import (
    BrokerError,
    BrokerUnsupportedVersionError,
    BufferExhaustedError,
    ConfigError,
    DeliveryTimeoutError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnknownBrokerError,
    UnsupportedVersionError,
    broker_error_classes,
    error_for_code,
    raise_for_code,
)
from spark_kafka_sink.protocol.error_codes import ERROR_CODES, class_name_for

# Codes whose Java exception extends RetriableException / InvalidMetadataException (kafka-clients 4.3.1).
JAVA_RETRIABLE = {2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80, 83, 84, 88, 89,
                  100, 103, 106, 122, 123, 133}
JAVA_INVALID_METADATA = {3, 5, 6, 9, 13, 56, 72, 74, 80, 83, 84, 100, 103}


def test_every_code_from_minus_one_to_133_has_one_class() -> None:
    classes = broker_error_classes()
    assert set(classes) == set(range(-1, 134)) - {0}
    assert len(set(classes.values())) == len(classes)
    for code, cls in classes.items():
        assert cls.code == code and cls.error_name == ERROR_CODES[code].name
        assert cls.__name__ == class_name_for(cls.error_name)
        assert getattr(errors, cls.__name__) is cls and cls.__name__ in errors.__all__
        assert cls.__doc__ and cls.description


def test_flags_match_the_java_client() -> None:
    classes = broker_error_classes()
    assert {c for c, cls in classes.items() if cls.retriable} == JAVA_RETRIABLE
    assert {c for c, cls in classes.items() if cls.invalid_metadata} == JAVA_INVALID_METADATA
    for cls in classes.values():
        assert not (cls.fatal and cls.retriable)


@pytest.mark.parametrize(("name", "retriable", "invalid_metadata", "fatal"), [
    ("NotLeaderOrFollowerError", True, True, False),
    ("UnknownTopicOrPartitionError", True, True, False),
    ("LeaderNotAvailableError", True, True, False),
    ("FencedLeaderEpochError", True, True, False),
    ("KafkaStorageError", True, True, False),
    ("NetworkExceptionError", True, True, False),
    ("UnknownLeaderEpochError", True, False, False),
    ("RequestTimedOutError", True, False, False),
    ("NotEnoughReplicasError", True, False, False),
    ("NotEnoughReplicasAfterAppendError", True, False, False),
    ("ConcurrentTransactionsError", True, False, False),
    ("NotCoordinatorError", True, False, False),
    ("CoordinatorLoadInProgressError", True, False, False),
    ("CoordinatorNotAvailableError", True, False, False),
    ("CorruptMessageError", True, False, False),
    ("DuplicateSequenceNumberError", False, False, False),
    ("OutOfOrderSequenceNumberError", False, False, False),
    ("UnknownProducerIdError", False, False, False),
    ("TransactionAbortableError", False, False, False),
    ("InvalidTxnStateError", False, False, False),
    ("MessageTooLargeError", False, False, False),
    ("RecordListTooLargeError", False, False, False),
    ("TopicAuthorizationFailedError", False, False, False),
    ("TopicAlreadyExistsError", False, False, False),
    ("InvalidRecordError", False, False, False),
    ("ProducerFencedError", False, False, True),
    ("InvalidProducerEpochError", False, False, True),
    ("TransactionalIdAuthorizationFailedError", False, False, True),
    ("ClusterAuthorizationFailedError", False, False, True),
    ("InvalidTransactionTimeoutError", False, False, True),
    ("SaslAuthenticationFailedError", False, False, True),
    ("UnsupportedSaslMechanismError", False, False, True),
    ("IllegalSaslStateError", False, False, True),
])
def test_named_classes_and_policy(name: str, retriable: bool, invalid_metadata: bool, fatal: bool) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, BrokerError)
    assert (cls.retriable, cls.invalid_metadata, cls.fatal) == (retriable, invalid_metadata, fatal)


def test_hierarchy_shortcuts() -> None:
    assert issubclass(errors.UnknownProducerIdError, errors.OutOfOrderSequenceNumberError)
    assert issubclass(BrokerUnsupportedVersionError, UnsupportedVersionError)
    assert issubclass(BrokerUnsupportedVersionError, ProtocolError)
    assert issubclass(UnsupportedVersionError, ProtocolError)
    assert issubclass(ConfigError, ValueError) and issubclass(ConfigError, KafkaError)
    assert issubclass(BufferExhaustedError, KafkaTimeoutError) and BufferExhaustedError.retriable
    assert issubclass(DeliveryTimeoutError, KafkaTimeoutError)
    assert KafkaConnectionError.retriable and not ProtocolError.retriable
    for name in ("ProducerClosedError", "IllegalStateError", "SerializationError", "BrokerError"):
        assert issubclass(getattr(errors, name), KafkaError)


def test_error_for_code_and_unknown_codes() -> None:
    assert error_for_code(6) is errors.NotLeaderOrFollowerError
    assert error_for_code(999) is UnknownBrokerError
    with pytest.raises(ValueError, match="success"):
        error_for_code(0)


def test_raise_for_code() -> None:
    raise_for_code(0)  # success: nothing happens
    with pytest.raises(errors.ProducerFencedError) as info:
        raise_for_code(90, "epoch 3 < 4", context="InitProducerId txn-7")
    text = str(info.value)
    assert text.startswith("PRODUCER_FENCED (error code 90) in InitProducerId txn-7: ")
    assert "close it" in text and "broker says: epoch 3 < 4" in text
    assert info.value.message == "epoch 3 < 4" and info.value.context == "InitProducerId txn-7"
    with pytest.raises(UnknownBrokerError, match="unknown broker error code 4242 in Produce t-0"):
        raise_for_code(4242, context="Produce t-0")


@pytest.mark.parametrize("exc", [
    errors.NotLeaderOrFollowerError("moved", context="Produce t-1"),
    UnknownBrokerError(None, context="x", code=777),
    ConfigError("acks must be all, got 'x'", key="acks"),
    KafkaConnectionError("connection refused", address="127.0.0.1:9092"),
    IllegalStateError("commit without begin", from_state="READY", to_state="COMMITTING"),
    BufferExhaustedError("buffer.memory full for 60000 ms"),
])
def test_errors_pickle_with_their_message(exc: KafkaError) -> None:
    clone = pickle.loads(pickle.dumps(exc))
    assert type(clone) is type(exc) and str(clone) == str(exc)
    assert clone.__dict__ == exc.__dict__


def test_local_error_messages() -> None:
    assert str(KafkaConnectionError("refused", address="h:1")) == "h:1: refused"
    assert str(KafkaConnectionError("h:1 refused", address="h:1")) == "h:1 refused"
    assert str(IllegalStateError(from_state="READY", to_state="COMMITTING")) == (
        "illegal transition from READY to COMMITTING")
    assert str(IllegalStateError()) == "illegal state"
    assert ConfigError("bad", key="linger.ms").key == "linger.ms"


def test_class_names_follow_the_rule() -> None:
    assert class_name_for("NOT_LEADER_OR_FOLLOWER") == "NotLeaderOrFollowerError"
    assert class_name_for("KAFKA_STORAGE_ERROR") == "KafkaStorageError"
    assert class_name_for("NETWORK_EXCEPTION") == "NetworkExceptionError"
    assert class_name_for("UNSUPPORTED_VERSION") == "BrokerUnsupportedVersionError"
