"""The request queue of one connection: frames waiting to be written, and the order answers must come back in.

Kafka answers the requests of a connection in the order they were sent, so one deque is the whole matching
logic: the next response must carry the correlation id of the oldest request that expects one. Anything else
means the stream is out of step (a ``ProtocolError``; the connection must close).

A frame waits as a list of buffers (``encode_request_parts``): a Produce request's record batches are the
producer's own bytes, written with one gathering ``sendmsg`` per writable socket, never joined into a copy (two
copies of every record on the sender thread before: the stamp and the join, each a pass over ~2.7 MB a request
at 256 KiB batches, with the GIL held). A TLS socket has no ``sendmsg``: there the frame is joined once, as before.
"""

from __future__ import annotations

import enum
import socket
import ssl
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import KafkaError, ProtocolError
from spark_kafka_sink.protocol.framing import encode_request_parts
from spark_kafka_sink.protocol.messages import ApiSpec

__all__ = ["RequestPurpose", "InFlightRequest", "Completion", "RequestQueue", "WOULD_BLOCK"]

#: Exceptions a non-blocking (plain or TLS) socket raises when it cannot make progress right now.
WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)
_MAX_BUFFERS = 1024  # buffers per sendmsg: Linux's IOV_MAX (a request of many partitions takes several calls)


class RequestPurpose(enum.Enum):
    USER = "user"  # sent with BrokerConnection.send(): completes through drain_completions()
    HANDSHAKE = "handshake"  # sent by a handshake through its context: answered via take_response()
    NEGOTIATION = "negotiation"  # the connection's own ApiVersions


@dataclass(eq=False)
class InFlightRequest:
    """A request queued or sent on a connection. ``tag`` is whatever the caller attached."""

    correlation_id: int
    api: ApiSpec
    version: int
    expect_response: bool
    enqueued_ms: int
    deadline_ms: int
    purpose: RequestPurpose
    tag: Any = None


@dataclass(frozen=True)
class Completion:
    """A finished request: ``body`` (None for expect_response=False) or ``error`` (retriable on disconnect)."""

    request: InFlightRequest
    body: dict[str, Any] | None
    error: KafkaError | None
    completed_ms: int


class RequestQueue:
    """Unsent frames plus the requests awaiting an answer, for one connection (owned by its thread)."""

    def __init__(self, client_id: str | None) -> None:
        self._client_id = client_id
        self._next_correlation_id = 0
        # Frames not completely written, as the buffers still to write (the first one cut where a write stopped).
        self._unsent: deque[tuple[list[memoryview], InFlightRequest]] = deque()
        self._awaiting: deque[InFlightRequest] = deque()  # response expected, in send order

    def enqueue(self, api: ApiSpec, version: int, body: Mapping[str, Any], now_ms: int, timeout_ms: int, *,
                expect_response: bool, purpose: RequestPurpose, tag: Any = None) -> InFlightRequest:
        """Frame a request (encoding errors raise here, queueing nothing) and queue it for writing."""
        correlation_id = self._next_correlation_id
        frame = [memoryview(part) for part in encode_request_parts(api, version, correlation_id, self._client_id,
                                                                    body) if len(part)]
        self._next_correlation_id = (correlation_id + 1) & 0x7FFFFFFF  # int32 on the wire, kept non-negative
        request = InFlightRequest(correlation_id, api, version, expect_response, now_ms, now_ms + timeout_ms,
                                  purpose, tag)
        self._unsent.append((frame, request))
        if expect_response:
            self._awaiting.append(request)
        return request

    @property
    def has_unsent(self) -> bool:
        return bool(self._unsent)

    @property
    def awaiting_response(self) -> bool:
        return bool(self._awaiting)

    def oldest_awaiting(self) -> InFlightRequest | None:
        return self._awaiting[0] if self._awaiting else None

    def write_to(self, sock: socket.socket) -> list[InFlightRequest]:
        """Write as much as the socket takes; returns the fully written requests that expect no response.

        Raises OSError (other than would-block) for the connection to fail.
        """
        written_only: list[InFlightRequest] = []
        gather = not isinstance(sock, ssl.SSLSocket)
        while self._unsent:
            views, request = self._unsent[0]
            if len(views) > 1 and not gather:
                views[:] = [memoryview(b"".join(views))]
            try:
                sent = sock.sendmsg(views[:_MAX_BUFFERS]) if len(views) > 1 else sock.send(views[0])
            except WOULD_BLOCK:
                break
            done = 0
            while done < len(views) and sent >= len(views[done]):
                sent -= len(views[done])
                done += 1
            del views[:done]
            if views:
                views[0] = views[0][sent:]
                if done < _MAX_BUFFERS:
                    break  # the socket buffer is full: wait for writable
                continue
            self._unsent.popleft()
            if not request.expect_response:
                written_only.append(request)
        return written_only

    def match_response(self, correlation_id: int) -> InFlightRequest:
        """The request a response with ``correlation_id`` answers (removed from the queue), or ProtocolError."""
        if not self._awaiting:
            raise ProtocolError(f"response with correlation id {correlation_id} while no request is in flight")
        request = self._awaiting[0]
        if correlation_id != request.correlation_id:
            raise ProtocolError(f"response with correlation id {correlation_id}, expected "
                                f"{request.correlation_id} ({request.api.name}): responses out of order")
        return self._awaiting.popleft()

    def pending(self) -> list[InFlightRequest]:
        """Requests not finished: awaiting a response, or (expecting none) not yet fully written."""
        return list(self._awaiting) + [r for _, r in self._unsent if not r.expect_response]

    def __len__(self) -> int:
        return len(self._awaiting) + sum(1 for _, r in self._unsent if not r.expect_response)

    def next_deadline_ms(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.pending()]
        return min(deadlines) if deadlines else None

    def expired(self, now_ms: int) -> InFlightRequest | None:
        """The first pending request whose deadline has passed, if any."""
        return next((r for r in self.pending() if now_ms >= r.deadline_ms), None)

    def clear(self) -> list[InFlightRequest]:
        """Drop everything; returns what was pending (for failing it)."""
        pending = self.pending()
        self._awaiting.clear()
        self._unsent.clear()
        return pending
