"""The named exceptions the producer reports for broker answers: :func:`broker_error` (the class of an error
code, carrying where it happened) and :func:`fenced_error` (one error for "a newer producer epoch owns this
transactional.id", whichever of the two fencing codes said it, in a coordinator answer or a Produce answer)."""

from __future__ import annotations

from spark_kafka_sink.errors import BrokerError, ProducerFencedError, UnknownBrokerError, error_for_code

__all__ = ["broker_error", "fenced_error"]


def broker_error(code: int, context: str, message: str | None = None) -> BrokerError:
    """The named exception for a broker error code."""
    cls = error_for_code(code)
    if cls is UnknownBrokerError:
        return UnknownBrokerError(message, context=context, code=code)
    return cls(message, context=context)


def fenced_error(cause: BaseException | None, context: str) -> ProducerFencedError:
    """INVALID_PRODUCER_EPOCH and PRODUCER_FENCED both mean "a newer producer epoch owns this transactional.id"."""
    err = ProducerFencedError(
        "a newer producer with the same transactional.id fenced this one (or the coordinator aborted its "
        "transaction after transaction.timeout.ms); close this producer and create a new one",
        context=context,
    )
    err.__cause__ = cause
    return err
