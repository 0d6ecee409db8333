"""The sender's seam to the network layer: what :class:`~spark_kafka_sink.producer.sender.Sender` needs of a network
client, declared as protocols.

    SenderClient     ready / connection_delay / connection_error / least_loaded_node / in_flight_count / address,
                     send, poll, wakeup, close, and the ``metadata`` it keeps
    SenderMetadata   fatal_error, leader_for, leader_epoch_for, update_partition_leadership, broker, add_topic,
                     request_update
    ClientAnswer     one result of ``poll``: the request it answers (``SentRequest``: context, version), the body
                     or the error, latency and arrival time

:class:`~spark_kafka_sink.net.client.NetworkClient` satisfies them (the producer hands one to the sender), and so
does the scripted fake the sender's tests step ``run_once`` against; mypy checks both. Beyond these the sender
takes only the network client's clock (``net.client.monotonic_ms``) from ``net/``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.protocol.messages import ApiSpec

__all__ = ["SenderClient", "SenderMetadata", "ClientAnswer", "SentRequest", "RequestBody"]

#: A request body, or a function of the version the client negotiated that builds it.
RequestBody = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]


class SenderMetadata(Protocol):
    """The cluster metadata cache, as far as the sender reads and steers it."""

    @property
    def fatal_error(self) -> KafkaError | None:
        """A connection error reconnecting cannot fix (SASL, TLS trust ...): it stops the producer."""

    def leader_for(self, topic: str, partition: int) -> int | None:
        """The partition's leader node id; None while unknown."""

    def leader_epoch_for(self, topic: str, partition: int) -> int:
        """The partition's leader epoch; -1 while unknown."""

    def update_partition_leadership(self, leaders: Mapping[tuple[str, int], tuple[int, int]],
                                    node_endpoints: Sequence[Mapping[str, Any]] = ()) -> set[tuple[str, int]]:
        """Take the new leaders (id, epoch) a Produce answer named, with its node_endpoints (KIP-951)."""

    def broker(self, node_id: int) -> object | None:
        """The broker's address entry; None for a node the cache has not seen."""

    def add_topic(self, topic: str, now_ms: int) -> object:
        """Keep ``topic`` in the metadata refreshed from now on (it was used at ``now_ms``)."""

    def request_update(self) -> object:
        """Ask for a refresh at the next ``poll``."""


class SentRequest(Protocol):
    """The request a ``ClientAnswer`` answers."""

    @property
    def context(self) -> object:
        """What the sender passed to ``send(..., context=...)``."""

    @property
    def version(self) -> int:
        """The API version the client negotiated and sent."""

    @property
    def node_id(self) -> int:
        """The node it was sent to."""


class ClientAnswer(Protocol):
    """One completed request, as ``poll`` returns it: ``body`` (None for acks=0) or ``error``."""

    @property
    def request(self) -> SentRequest: ...

    @property
    def body(self) -> dict[str, Any] | None:
        """The decoded response; broker error codes inside it are the sender's to interpret."""

    @property
    def error(self) -> KafkaError | None:
        """Why the request failed as a whole: disconnected, request.timeout.ms passed, unreadable answer; a
        ``fatal`` one (a TLS alert refusing this client) must not be retried."""

    @property
    def latency_ms(self) -> int: ...

    @property
    def received_ms(self) -> int:
        """When the answer arrived, on the clock of the ``now_ms`` arguments."""


class SenderClient(Protocol):
    """A non-blocking network client owned by the sender thread (only ``wakeup`` is called from other threads)."""

    @property
    def metadata(self) -> SenderMetadata: ...

    def ready(self, node_id: int, now_ms: int) -> bool:
        """True if a request can be sent to ``node_id`` now; otherwise starts connecting when allowed."""

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """How long a caller waiting for ``node_id`` to become ready may block in ``poll``."""

    def connection_error(self, node_id: int) -> KafkaError | None:
        """Why the last attempt to reach ``node_id`` failed, else None."""

    def least_loaded_node(self, now_ms: int) -> int | None:
        """A node for a cluster-wide request; None if every node is backing off."""

    def in_flight_count(self) -> int:
        """Requests awaiting an answer, on every node."""

    def address(self, node_id: int) -> str:
        """``host:port`` of a node (for messages)."""

    def finalized_features(self, node_id: int) -> dict[str, int]:
        """The cluster's finalized feature levels as ``node_id`` reported them (e.g. ``transaction.version``)."""

    def send(self, node_id: int, api: ApiSpec, body: RequestBody, now_ms: int, *, expect_response: bool = True,
             max_version: int | None = None, context: object = None) -> object:
        """Queue a request to a ready node; ``poll`` returns its ``ClientAnswer`` later (at once for
        ``expect_response=False``)."""

    def poll(self, timeout_ms: int, now_ms: int) -> Sequence[ClientAnswer]:
        """Do network I/O for up to ``timeout_ms``; return the requests that completed."""

    def wakeup(self) -> None:
        """Interrupt a ``poll`` blocked in another thread (thread-safe)."""

    def close(self) -> None: ...
