"""What goes into :class:`~spark_kafka_sink.net.client.NetworkClient` and what comes back: a request body (or a
function of the version that builds it), the :class:`ClientRequest` that ``send`` returns and the
:class:`ClientResponse` that ``poll`` delivers. Import them from ``net.client``, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.protocol.messages import ApiSpec

__all__ = ["Body", "ClientRequest", "ClientResponse"]

#: A request body, or a function of the chosen version returning it.
Body = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]


@dataclass(eq=False)
class ClientRequest:
    """A request handed to :meth:`NetworkClient.send`; ``context`` is the caller's (e.g. the batches it carries)."""

    node_id: int
    api: ApiSpec
    version: int
    body: Mapping[str, Any]
    expect_response: bool
    created_ms: int
    context: Any = None
    correlation_id: int = -1


@dataclass(frozen=True)
class ClientResponse:
    """The outcome of a request: ``body`` (None for expect_response=False) or ``error``.

    ``error`` is a retriable ``KafkaConnectionError`` (disconnected) or ``KafkaTimeoutError`` (request.timeout.ms
    passed), or a ``ProtocolError`` (the broker's bytes made no sense; the connection was closed). Broker error
    codes inside ``body`` are the caller's to interpret.
    """

    request: ClientRequest
    node_id: int
    body: dict[str, Any] | None
    error: KafkaError | None
    latency_ms: int
    received_ms: int

    @property
    def ok(self) -> bool:
        return self.error is None
