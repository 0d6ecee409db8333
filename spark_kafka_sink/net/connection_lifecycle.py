"""The lifecycle half of :class:`~spark_kafka_sink.net.connection.BrokerConnection`: its states and the moves
between them.

It owns the connection's fields, the state enum and transition table (drawn in ``connection.py``'s docstring),
and the code that changes state: opening the socket (CONNECTING), the security handshakes (HANDSHAKE) and the
ApiVersions negotiation (NEGOTIATING) that lead to READY, plus failing (-> DISCONNECTED) and closing (-> CLOSED).
``BrokerConnection`` subclasses it and adds the traffic: sending requests, reading and writing frames, request
timeouts and ``poll``. Not used on its own.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import selectors
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_kafka_sink.errors import IllegalStateError, KafkaConnectionError, KafkaError
from spark_kafka_sink.net.config import NetConfig, format_address
from spark_kafka_sink.net.handshake import Handshake, HandshakeRunner, HandshakeStatus
from spark_kafka_sink.net.inflight import Completion, InFlightRequest, RequestPurpose, RequestQueue
from spark_kafka_sink.protocol.framing import FrameDecoder
from spark_kafka_sink.protocol.messages import API_VERSIONS, ApiSpec
from spark_kafka_sink.protocol.versions import (
    BrokerVersions, api_versions_request, api_versions_retry_version, parse_api_versions,
)

__all__ = ["ConnectionState", "ConnectionLifecycle", "SETTING_UP"]

# One logger for the whole connection, whichever of its two modules logs: the name users already configure.
log = logging.getLogger("spark_kafka_sink.net.connection")


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    HANDSHAKE = "handshake"
    NEGOTIATING = "negotiating"
    READY = "ready"
    CLOSED = "closed"


_S = ConnectionState
_TRANSITIONS: dict[ConnectionState, frozenset[ConnectionState]] = {
    _S.DISCONNECTED: frozenset({_S.CONNECTING, _S.CLOSED}),
    _S.CONNECTING: frozenset({_S.HANDSHAKE, _S.DISCONNECTED, _S.CLOSED}),
    _S.HANDSHAKE: frozenset({_S.NEGOTIATING, _S.DISCONNECTED, _S.CLOSED}),
    _S.NEGOTIATING: frozenset({_S.READY, _S.DISCONNECTED, _S.CLOSED}),
    _S.READY: frozenset({_S.DISCONNECTED, _S.CLOSED}),
    _S.CLOSED: frozenset(),
}
#: The states of a connection attempt, bounded together by socket.connection.setup.timeout.ms.
SETTING_UP = frozenset({_S.CONNECTING, _S.HANDSHAKE, _S.NEGOTIATING})
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class ConnectionLifecycle:
    """Fields, states and state changes of one connection (see the module docstring)."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        config: NetConfig,
        *,
        selector: selectors.BaseSelector | None = None,
        handshakes: Callable[[], Sequence[Handshake]] | None = None,
    ) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.address = format_address(host, port)
        self.config = config
        self._own_selector = selector is None
        self._selector = selector if selector is not None else selectors.DefaultSelector()
        self._handshake_factory = handshakes
        self.state = ConnectionState.DISCONNECTED
        self.last_error: KafkaError | None = None  # why the last attempt or connection failed
        self.broker_versions: BrokerVersions | None = None  # set on READY, cleared on disconnect
        self._sock: socket.socket | None = None
        self._events = 0  # events currently registered with the selector
        self._decoder = FrameDecoder()
        self._requests = RequestQueue(config.client_id)
        self._completions: list[Completion] = []
        self._setup_deadline_ms = 0
        self._attempts = 0  # rotates through resolved addresses on successive attempts
        self._handshakes = HandshakeRunner((), _Context(self))  # replaced on each attempt
        self._api_versions_retried = False

    # ------------------------------------------------------------------------------------------ state

    def _transition(self, target: ConnectionState) -> None:
        if target not in _TRANSITIONS[self.state]:
            raise IllegalStateError(f"connection to {self.address}", from_state=self.state, to_state=target)
        log.debug("connection to %s (node %s): %s -> %s", self.address, self.node_id, self.state.name, target.name)
        self.state = target

    @property
    def is_ready(self) -> bool:
        return self.state is ConnectionState.READY

    @property
    def in_flight_count(self) -> int:
        """Requests sent (or queued) and not yet completed: awaiting a response, or acks=0 not yet written."""
        return len(self._requests)

    # ------------------------------------------------------------------------------------------ connect

    def connect(self, now_ms: int) -> None:
        """Start connecting (DISCONNECTED -> CONNECTING). Failures show as DISCONNECTED with ``last_error``."""
        self._transition(ConnectionState.CONNECTING)
        self.last_error = None
        self._setup_deadline_ms = now_ms + self.config.socket_connection_setup_timeout_ms
        self._api_versions_retried = False
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except OSError as exc:
            self._fail(KafkaConnectionError(f"cannot resolve {self.address}: {exc}", address=self.address), now_ms)
            return
        family, kind, proto, _, sockaddr = infos[self._attempts % len(infos)]
        self._attempts += 1
        try:
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            self._fail(KafkaConnectionError(f"cannot connect to {self.address}: {exc}", address=self.address), now_ms)
            return
        self._sock = sock
        try:
            sock.setblocking(False)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # requests are whole frames: no Nagle
            if self.config.send_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer_bytes)
            if self.config.receive_buffer_bytes > 0:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self.config.receive_buffer_bytes)
            code = sock.connect_ex(sockaddr)
        except OSError as exc:
            code = exc.errno or errno.ECONNREFUSED
        if code in (0, errno.EISCONN):
            self._on_connected(now_ms)
        elif code in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EALREADY, errno.EINTR):
            self._set_interest(_WRITE)  # writable = connect finished, one way or the other
        else:
            self._fail_connect(code, now_ms)

    def _fail_connect(self, code: int, now_ms: int) -> None:
        reason = os.strerror(code) if code else "unknown error"
        self._fail(KafkaConnectionError(f"cannot connect to {self.address}: {reason}", address=self.address), now_ms)

    def _finish_connect(self, now_ms: int) -> None:
        if self._sock is None:
            return
        code = self._sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if code:
            self._fail_connect(code, now_ms)
        else:
            self._on_connected(now_ms)

    def _on_connected(self, now_ms: int) -> None:
        self._transition(ConnectionState.HANDSHAKE)
        hooks = self._handshake_factory() if self._handshake_factory else ()
        self._handshakes = HandshakeRunner(hooks, _Context(self))
        self._step_handshakes(now_ms)

    def _step_handshakes(self, now_ms: int) -> None:
        try:
            done = self._handshakes.advance(now_ms)
        except KafkaError as exc:
            self._fail(exc, now_ms)
            return
        except OSError as exc:
            name = getattr(self._handshakes.current, "name", "security")
            self._fail(KafkaConnectionError(f"{name} handshake with {self.address} failed: {exc}",
                                            address=self.address), now_ms)
            return
        if not done:
            self._update_interest()
            return
        self._transition(ConnectionState.NEGOTIATING)
        self._send_api_versions(API_VERSIONS.max_version, now_ms)

    def _send_api_versions(self, version: int, now_ms: int) -> None:
        body = api_versions_request(version, self.config.client_software_name, self.config.client_software_version)
        self._enqueue(API_VERSIONS, version, body, now_ms, True, None, RequestPurpose.NEGOTIATION, None)

    def _on_api_versions(self, request: InFlightRequest, body: dict[str, Any], now_ms: int) -> None:
        retry = api_versions_retry_version(body)
        if retry is not None and not self._api_versions_retried and retry != request.version:
            # The broker is older than us: it listed the ApiVersions versions it knows; ask once more.
            self._api_versions_retried = True
            self._send_api_versions(retry, now_ms)
            return
        try:
            self.broker_versions = parse_api_versions(body)
        except KafkaError as exc:
            self._fail(exc, now_ms)
            return
        self._transition(ConnectionState.READY)

    # ------------------------------------------------------------------------------------------ queueing

    def _enqueue(self, api: ApiSpec, version: int, body: Mapping[str, Any], now_ms: int, expect_response: bool,
                 timeout_ms: int | None, purpose: RequestPurpose, tag: Any) -> InFlightRequest:
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        request = self._requests.enqueue(api, version, body, now_ms, timeout, expect_response=expect_response,
                                         purpose=purpose, tag=tag)
        self._update_interest()
        return request

    # ------------------------------------------------------------------------------------------ selector interest

    def _update_interest(self) -> None:
        if self._sock is None:
            return
        if self.state is ConnectionState.CONNECTING:
            events = _WRITE
        elif self.state is ConnectionState.HANDSHAKE:
            want = self._handshakes.want
            want_read = want is HandshakeStatus.WANT_READ or self._requests.awaiting_response
            want_write = want is HandshakeStatus.WANT_WRITE or self._requests.has_unsent
            events = (_READ if want_read else 0) | (_WRITE if want_write else 0) or _READ
        else:
            events = _READ | (_WRITE if self._requests.has_unsent else 0)  # always read: notices the broker closing
        self._set_interest(events)

    def _set_interest(self, events: int) -> None:
        if self._sock is None or events == self._events:
            return
        if self._events:
            self._selector.modify(self._sock, events, self)
        else:
            self._selector.register(self._sock, events, self)
        self._events = events

    # ------------------------------------------------------------------------------------------ failure / close

    def _fail(self, error: KafkaError, now_ms: int, *, culprit: InFlightRequest | None = None,
              culprit_first: bool = False) -> None:
        """Close the socket, fail pending user requests, go DISCONNECTED with ``last_error``."""
        if self.state in (ConnectionState.DISCONNECTED, ConnectionState.CLOSED):
            return
        log.info("connection to %s (node %s) failed: %s", self.address, self.node_id, error)
        if culprit_first:
            culprit = self._requests.oldest_awaiting()  # a bad frame answers the oldest request
        self._fail_pending(error, now_ms, culprit)
        self._close_socket()
        self.last_error = error
        self._transition(ConnectionState.DISCONNECTED)

    def _fail_pending(self, error: KafkaError, now_ms: int, culprit: InFlightRequest | None) -> None:
        # The culprit gets the error itself; every other pending request a retriable connection error -- unless
        # the error is fatal (e.g. a TLS alert refusing this client): then they all get it, retrying cannot help.
        if isinstance(error, KafkaConnectionError) or error.fatal:
            others: KafkaError = error
        else:
            others = KafkaConnectionError(f"connection to {self.address} closed: {error}", address=self.address)
        pending = self._requests.clear()
        if culprit is not None and culprit not in pending:
            pending.insert(0, culprit)  # already matched to its (broken) response, so no longer queued
        for request in pending:
            if request.purpose is RequestPurpose.USER:
                self._completions.append(Completion(request, None, error if request is culprit else others, now_ms))

    def _close_socket(self) -> None:
        if self._sock is not None:
            if self._events:
                self._selector.unregister(self._sock)
            self._sock.close()
        self._sock = None
        self._events = 0
        self._decoder = FrameDecoder()
        self.broker_versions = None
        self._handshakes = HandshakeRunner((), _Context(self))

    def disconnect(self, now_ms: int, reason: str = "disconnected by the client") -> None:
        """Drop the connection (pending requests fail, retriable); it may connect again later."""
        self._fail(KafkaConnectionError(f"connection to {self.address} {reason}", address=self.address), now_ms)

    def close(self, now_ms: int = 0) -> None:
        """Close for good (CLOSED); pending requests fail with a KafkaConnectionError. Idempotent."""
        if self.state is ConnectionState.CLOSED:
            return
        self._fail_pending(KafkaConnectionError(f"connection to {self.address} closed by the client",
                                                address=self.address), now_ms, None)
        self._close_socket()
        self._transition(ConnectionState.CLOSED)
        if self._own_selector:
            self._selector.close()


class _Context:
    """What a handshake sees of its connection (implements handshake.HandshakeContext)."""

    def __init__(self, conn: ConnectionLifecycle) -> None:
        self._conn = conn

    host = property(lambda self: self._conn.host)
    port = property(lambda self: self._conn.port)
    address = property(lambda self: self._conn.address)
    node_id = property(lambda self: self._conn.node_id)
    config = property(lambda self: self._conn.config)

    @property
    def sock(self) -> socket.socket:
        if self._conn._sock is None:
            raise IllegalStateError(f"connection to {self._conn.address} has no socket")
        return self._conn._sock

    def wrap_socket(self, wrap: Callable[[socket.socket], socket.socket]) -> None:
        conn = self._conn
        old = self.sock
        # Unregister before wrapping: ssl.wrap_socket detaches the old object (its fileno becomes -1).
        if conn._events:
            conn._selector.unregister(old)
            conn._events = 0
        try:
            conn._sock = wrap(old)
        except BaseException:
            conn._sock = old  # still ours to close when the connection fails
            raise
        conn._update_interest()

    def send_request(self, api: ApiSpec, version: int, body: Mapping[str, Any]) -> int:
        conn = self._conn
        request = conn._enqueue(api, version, body, 0, True, None, RequestPurpose.HANDSHAKE, None)
        request.deadline_ms = conn._setup_deadline_ms  # bounded by the setup timeout, not request.timeout.ms
        return request.correlation_id

    def take_response(self) -> dict[str, Any] | None:
        responses = self._conn._handshakes.responses
        return responses.popleft() if responses else None
