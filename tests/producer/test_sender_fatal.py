"""A connection error that reconnecting cannot fix (wrong SASL password, untrusted certificate ...) stops the
producer at once: Sender.run_once stepped against the scripted network client, no broker, no threads."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    KafkaConnectionError,
    KafkaError,
    SaslAuthenticationFailedError,
    UntrustedCertificateError,
)
from spark_kafka_sink.producer.transactions import TxnState
from spark_kafka_sink.protocol.messages import FIND_COORDINATOR, INIT_PRODUCER_ID
from tests.producer.test_sender import T0, T1, Rig, init_transactional


def auth_failed() -> SaslAuthenticationFailedError:
    # What the SASL handshake raises: the broker's message names the mechanism, never the password.
    return SaslAuthenticationFailedError("Authentication failed during authentication due to invalid credentials "
                                         "with SASL mechanism SCRAM-SHA-512",
                                         context="SASL/SCRAM-SHA-512 authentication of user 'alice' with broker1:9001")


def assert_fails_with(future: Future[Any], expected: KafkaError) -> None:
    error = future.exception(0)
    assert type(error) is type(expected) and str(error) == str(expected), repr(error)


@pytest.mark.parametrize("options", [{}, {"enable.idempotence": "false", "acks": "1"}],
                         ids=["idempotent", "plain"])
def test_a_fatal_connection_error_fails_every_pending_record_with_it(options: dict[str, Any]) -> None:
    rig = Rig(options)
    if rig.tm is not None:
        rig.init_idempotent()
    queued = [rig.send(T0, b"a"), rig.send(T1, b"b")]
    error = auth_failed()
    rig.client.fail_connection(1, error)  # the leader of t-0; t-1's leader (2) is fine
    rig.step()
    for future in queued:
        assert_fails_with(future, error)
    assert not rig.client.produce_requests()  # t-1 was not sent either: the producer stopped as a whole
    if rig.tm is not None:
        assert rig.tm.state is TxnState.FATAL_ERROR and rig.tm.last_error is error
        with pytest.raises(SaslAuthenticationFailedError, match="invalid credentials"):
            rig.tm.fail_if_not_ready_for_send()
    # A record that slipped in afterwards (a send racing with the failure) fails the same way, and the sender
    # never tries to connect again: no reconnect storm until max.block.ms.
    attempts = len(rig.client.attempts)
    late = rig.send(T1, b"late")
    rig.step(1_000, rounds=3)
    assert_fails_with(late, error)
    assert len(rig.client.attempts) == attempts and not rig.client.produce_requests()
    assert not rig.sender.has_pending_work()  # so close() returns at once


def test_a_fatal_error_on_a_node_the_sender_never_asked_for_still_stops_it() -> None:
    # E.g. the metadata refresh to a bootstrap address met an untrusted certificate: the network client makes
    # that connection itself, and reports it only on the metadata.
    rig = Rig()
    rig.init_idempotent()
    pending = rig.send(T0, b"x")
    error = UntrustedCertificateError("certificate verify failed: set ssl.ca.location", address="broker9:9009")
    rig.client.metadata.set_fatal_error(error)
    rig.step()
    assert_fails_with(pending, error)
    assert str(pending.exception(0)).startswith("broker9:9009: certificate verify failed")


def test_a_retriable_connection_error_does_not_stop_the_producer() -> None:
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"x")
    rig.client.fail_connection(1, KafkaConnectionError("broker1:9001 closed the connection"))
    rig.step()
    assert not future.done() and rig.client.metadata.fatal_error is None
    rig.client.down.discard(1)  # the broker is back
    rig.step(100)
    rig.answer(rig.produce(), offsets={("t", 0): 3})
    rig.step()
    assert future.result(0).offset == 3


def test_init_transactions_fails_with_the_fatal_error() -> None:
    rig = Rig(transactional=True)
    assert rig.tm is not None
    initialized = rig.tm.initialize_transactions()
    rig.step()
    rig.client.take(FIND_COORDINATOR)  # in flight when the coordinator's connection fails
    error = auth_failed()
    rig.client.fail_connection(2, error)
    rig.step()
    assert_fails_with(initialized, error)
    assert rig.tm.state is TxnState.FATAL_ERROR
    with pytest.raises(SaslAuthenticationFailedError):
        rig.tm.initialize_transactions()  # a second call says the same, it does not start over
    assert not any(r.api is INIT_PRODUCER_ID for r in rig.client.sent)


def test_commit_fails_with_the_fatal_error() -> None:
    rig = Rig(transactional=True)
    init_transactional(rig)
    assert rig.tm is not None
    rig.tm.begin_transaction()
    sent = rig.send(T0, b"a")
    committing = rig.tm.begin_commit()
    error = auth_failed()
    rig.client.fail_connection(2, error)
    rig.step()
    assert_fails_with(committing, error)
    assert_fails_with(sent, error)


def test_a_request_failing_with_a_fatal_error_is_not_retried() -> None:
    # TLS 1.3: the broker refuses our client certificate only after the handshake, so the alert fails the
    # requests in flight; each gets the fatal error itself, and it must not be resent.
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"x")
    rig.step()
    request = rig.produce()
    error = UntrustedCertificateError("the broker refused the TLS client certificate", address="broker1:9001")
    rig.client.fail(request, error)
    rig.step()
    assert_fails_with(future, error)
    rig.step(1_000)
    assert rig.client.produce_requests() == [request]
