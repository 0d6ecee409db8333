"""BrokerConnection: one non-blocking TCP connection to one broker, driven by a ``selectors`` selector.

States (an enum plus a transition table; any other move raises ``IllegalStateError`` naming both states)::

    DISCONNECTED -> CONNECTING -> HANDSHAKE -> NEGOTIATING -> READY
         ^              |             |             |           |
         +--------------+-------------+-------------+-----------+   on any failure (may connect again)
    every state -> CLOSED by close(); CLOSED is final

* CONNECTING: non-blocking ``connect``; DNS is resolved synchronously (as the Java client does).
* HANDSHAKE: the security seam, :mod:`spark_kafka_sink.net.handshake` (TLS, SASL); plaintext has no handshakes.
* NEGOTIATING: ApiVersions at the highest version we implement; if the broker answers UNSUPPORTED_VERSION with
  its own range, once more at the highest common version. Keeps the broker's per-API ranges and finalized
  features (``broker_versions``). Connect, handshakes and negotiation together must finish within the setup
  timeout ``connect`` is given (socket.connection.setup.timeout.ms, grown per failed attempt by the network
  client), else the attempt fails with a ``KafkaConnectionError`` naming host:port.
* Idle time: ``last_activity_ms`` is when the connection last connected, queued, wrote or read something; the
  network client closes connections idle for connections.max.idle.ms.
* READY: :meth:`send` frames requests with increasing correlation ids and writes a request at once when none
  waits before it (what the socket does not take is written on "writable" events; a write error then is met
  again, and fails the connection, in the next poll). Responses must come back in request order:
  any other correlation id is a ``ProtocolError`` and closes the connection. A request unanswered after its
  timeout (request.timeout.ms) fails with a retriable ``KafkaTimeoutError`` and, as in the Java client, the
  connection closes: every other pending request fails with a retriable ``KafkaConnectionError``. A request
  sent with ``expect_response=False`` (Produce with acks=0) completes, with body ``None``, once it is written.

Driving it: the connection registers its socket with the selector it is given (``key.data`` is the connection);
whoever selects calls :meth:`handle_events` for its keys and :meth:`check_timeouts`, then collects finished
requests with :meth:`drain_completions`. :meth:`poll` does all three for standalone use. Time is passed in as
``now_ms``. Not thread-safe: one thread (the network client's owner) drives each connection.

This module owns the connection whole: its states and transition table, the socket from connect to close, the
view of it a handshake gets (a :class:`~spark_kafka_sink.net.handshake.HandshakeContext`), the ApiVersions
negotiation and the traffic once READY. The queue of one connection's requests, and the order their answers
must come back in, belong to :class:`~spark_kafka_sink.net.inflight.RequestQueue`.
"""

from __future__ import annotations

import enum
import errno
import logging
import os
import selectors
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_kafka_sink.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    UnsupportedVersionError,
)
from spark_kafka_sink.net.config import NetConfig, format_address
from spark_kafka_sink.net.handshake import Handshake, HandshakeRunner, HandshakeStatus
from spark_kafka_sink.net.inflight import WOULD_BLOCK, Completion, InFlightRequest, RequestPurpose, RequestQueue
from spark_kafka_sink.net.security_errors import plaintext_reply_error, tls_io_error
from spark_kafka_sink.protocol.framing import FrameDecoder, decode_response, peek_correlation_id
from spark_kafka_sink.protocol.messages import API_VERSIONS, ApiSpec
from spark_kafka_sink.protocol.versions import (
    BrokerVersions,
    api_versions_request,
    api_versions_retry_version,
    parse_api_versions,
    select_version,
)

__all__ = ["ConnectionState", "BrokerConnection", "SETTING_UP", "monotonic_ms"]

log = logging.getLogger(__name__)


def monotonic_ms() -> int:
    """The default clock: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


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
_RECV_SIZE = 256 * 1024
_HANDSHAKE_POLL_MS = 5  # how often a handshake that returned WAIT is stepped again
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class BrokerConnection:
    """One connection to ``host:port`` (``node_id`` < 0 for bootstrap addresses). See the module docstring."""

    def __init__(
        self,
        node_id: int,
        host: str,
        port: int,
        config: NetConfig,
        *,
        selector: selectors.BaseSelector | None = None,
        handshakes: Callable[[], Sequence[Handshake]] | None = None,
        clock: Callable[[], int] = monotonic_ms,
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
        self._handshake_poll_ms: int | None = None  # a handshake returned WAIT: step it again then
        self._setup_timeout_ms = config.socket_connection_setup_timeout_ms  # of the current attempt
        self.last_activity_ms = 0  # see "Idle time" in the module docstring
        self.failed_during_setup = False  # the last failure came before READY (drives the setup timeout)
        self._attempts = 0  # rotates through resolved addresses on successive attempts
        self._handshakes = HandshakeRunner((), _Context(self))  # replaced on each attempt
        self._api_versions_retried = False
        self._clock = clock  # only poll() reads it: the time after waiting in select

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

    # ------------------------------------------------------------------------------------------ setup

    def connect(self, now_ms: int, setup_timeout_ms: int | None = None) -> None:
        """Start connecting (DISCONNECTED -> CONNECTING); the whole setup must finish within ``setup_timeout_ms``
        (default socket.connection.setup.timeout.ms). Failures show as DISCONNECTED with ``last_error``."""
        self._transition(ConnectionState.CONNECTING)
        self.last_error = None
        self.last_activity_ms = now_ms
        self._setup_timeout_ms = self.config.socket_connection_setup_timeout_ms if setup_timeout_ms is None \
            else setup_timeout_ms
        self._setup_deadline_ms = now_ms + self._setup_timeout_ms
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
        waiting = not done and self._handshakes.want is HandshakeStatus.WAIT
        self._handshake_poll_ms = now_ms + _HANDSHAKE_POLL_MS if waiting else None
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

    # ------------------------------------------------------------------------------------------ handshake context

    def _handshake_socket(self) -> socket.socket:
        if self._sock is None:
            raise IllegalStateError(f"connection to {self.address} has no socket")
        return self._sock

    def _wrap_socket(self, wrap: Callable[[socket.socket], socket.socket]) -> None:
        old = self._handshake_socket()
        # Unregister before wrapping: ssl.wrap_socket detaches the old object (its fileno becomes -1).
        if self._events:
            self._selector.unregister(old)
            self._events = 0
        try:
            self._sock = wrap(old)
        except BaseException:
            self._sock = old  # still ours to close when the connection fails
            raise
        self._update_interest()

    def _send_handshake_request(self, api: ApiSpec, version: int, body: Mapping[str, Any]) -> int:
        request = self._enqueue(api, version, body, 0, True, None, RequestPurpose.HANDSHAKE, None)
        request.deadline_ms = self._setup_deadline_ms  # bounded by the setup timeout, not request.timeout.ms
        return request.correlation_id

    def _take_handshake_response(self) -> dict[str, Any] | None:
        responses = self._handshakes.responses
        return responses.popleft() if responses else None

    # ------------------------------------------------------------------------------------------ sending

    def choose_version(self, api: ApiSpec, min_version: int | None = None, max_version: int | None = None) -> int:
        """The highest version of ``api`` both sides speak, within the caller's optional bounds."""
        if self.broker_versions is None:
            raise IllegalStateError(f"no API versions for {self.address}: connection is {self.state.name}")
        best = select_version(api, self.broker_versions.api_versions)
        if max_version is not None:
            best = min(best, max_version)
        floor = max(self.broker_versions.api_versions[api.key][0], api.min_version, min_version or 0)
        if best < floor:
            lo, hi = self.broker_versions.api_versions[api.key]
            raise UnsupportedVersionError(
                f"no {api.name} version within the requested v{min_version or api.min_version}-"
                f"{api.max_version if max_version is None else max_version} that {self.address} serves "
                f"(broker: v{lo}-{hi}, this client: v{api.min_version}-{api.max_version})")
        return best

    def send(self, api: ApiSpec, version: int, body: Mapping[str, Any], now_ms: int, *,
             expect_response: bool = True, timeout_ms: int | None = None, tag: Any = None) -> InFlightRequest:
        """Queue one request (READY only) and write what the socket takes now if no request waits before it; the
        rest is written by later I/O. Encoding errors raise here; a write error is left to the next poll."""
        if self.state is not ConnectionState.READY:
            raise IllegalStateError(f"cannot send {api.name} to {self.address}: the connection is "
                                    f"{self.state.name}, not READY")
        return self._enqueue(api, version, body, now_ms, expect_response, timeout_ms, RequestPurpose.USER, tag)

    # ------------------------------------------------------------------------------------------ queueing

    def _enqueue(self, api: ApiSpec, version: int, body: Mapping[str, Any], now_ms: int, expect_response: bool,
                 timeout_ms: int | None, purpose: RequestPurpose, tag: Any) -> InFlightRequest:
        timeout = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        idle = not self._requests.has_unsent
        request = self._requests.enqueue(api, version, body, now_ms, timeout, expect_response=expect_response,
                                         purpose=purpose, tag=tag)
        self.last_activity_ms = max(self.last_activity_ms, now_ms)
        if idle and self.state is ConnectionState.READY:
            # Written at once when nothing waits before it: the socket almost always takes it, which saves a
            # selector round per request (write interest set, a "writable" wakeup, write interest cleared: three
            # system calls, each handing the GIL to the caller's thread). What the socket does not take waits
            # for "writable" as before; a write error is left to that poll, which meets it again and fails the
            # connection there (a send never fails its connection).
            self._flush(now_ms, defer_errors=True)
        self._update_interest()
        return request

    # ------------------------------------------------------------------------------------------ I/O

    def handle_events(self, mask: int, now_ms: int) -> None:
        """React to selector events for this connection's socket."""
        self.last_activity_ms = max(self.last_activity_ms, now_ms)
        if self.state is ConnectionState.CONNECTING:
            self._finish_connect(now_ms)
            return
        if mask & _WRITE and self._requests.has_unsent and self.state in (_S.HANDSHAKE, _S.NEGOTIATING, _S.READY):
            self._flush(now_ms)
        if mask & _READ and self._reads_frames():
            self._read(now_ms)
        if self.state is ConnectionState.HANDSHAKE:
            self._step_handshakes(now_ms)
        self._update_interest()

    def _reads_frames(self) -> bool:
        # During a handshake the socket belongs to the handshake (e.g. TLS) unless it sent Kafka requests.
        if self.state is ConnectionState.HANDSHAKE:
            return self._requests.awaiting_response
        return self.state in (_S.NEGOTIATING, _S.READY)

    def _flush(self, now_ms: int, *, defer_errors: bool = False) -> None:
        if self._sock is None:
            return
        try:
            written_only = self._requests.write_to(self._sock)
        except OSError as exc:
            if defer_errors:
                return
            # A TLS alert (e.g. the broker refused our client certificate) is fatal, not a network blip.
            self._fail(tls_io_error(exc, self.address) or KafkaConnectionError(
                f"writing to {self.address} failed: {exc}", address=self.address), now_ms)
            return
        for request in written_only:  # expect_response=False (acks=0): done once written
            if request.purpose is RequestPurpose.USER:
                self._completions.append(Completion(request, None, None, now_ms))

    def _read(self, now_ms: int) -> None:
        while self._sock is not None:
            try:
                data = self._sock.recv(_RECV_SIZE)
            except WOULD_BLOCK:
                return
            except OSError as exc:
                # A TLS alert (e.g. the broker refused our client certificate) is fatal, not a network blip.
                self._fail(tls_io_error(exc, self.address) or KafkaConnectionError(
                    f"reading from {self.address} failed: {exc}", address=self.address), now_ms)
                return
            if not data:
                if self.state is ConnectionState.HANDSHAKE and self._handshakes.responses:
                    # A broker answers a failed authentication, then closes: let the handshake report that
                    # answer (e.g. SASL_AUTHENTICATION_FAILED) instead of the bare close.
                    self._step_handshakes(now_ms)
                    if self._sock is None:
                        return
                self._fail(KafkaConnectionError(f"{self.address} closed the connection", address=self.address),
                           now_ms)
                return
            try:
                for payload in self._decoder.feed(data):
                    self._on_frame(payload, now_ms)
                    if self._sock is None:
                        return  # a frame failed the connection; ignore the rest
            except ProtocolError as exc:
                # A plaintext client on a TLS listener reads the broker's TLS alert as an absurd frame size.
                mismatch = None if isinstance(self._sock, ssl.SSLSocket) else plaintext_reply_error(data, self.address)
                self._fail(mismatch or ProtocolError(f"from {self.address}: {exc}"), now_ms, culprit_first=True)
                return
            if len(data) < _RECV_SIZE and not isinstance(self._sock, ssl.SSLSocket):
                # The kernel gave all it had: another recv would only say so (a system call, and the GIL handed
                # to the caller's thread, per answer). More arriving wakes the poll again. A TLS socket keeps
                # reading: bytes it decrypted ahead wake no poll.
                return

    def _on_frame(self, payload: bytes, now_ms: int) -> None:
        request = self._requests.match_response(peek_correlation_id(payload))
        try:
            _, body = decode_response(request.api, request.version, payload, request.correlation_id)
        except ProtocolError as exc:
            self._fail(ProtocolError(f"from {self.address}: {exc}"), now_ms, culprit=request)
            return
        if request.purpose is RequestPurpose.USER:
            self._completions.append(Completion(request, body, None, now_ms))
        elif request.purpose is RequestPurpose.HANDSHAKE:
            self._handshakes.responses.append(body)
        else:
            self._on_api_versions(request, body, now_ms)

    # ------------------------------------------------------------------------------------------ timeouts

    def check_timeouts(self, now_ms: int) -> None:
        """Fail the setup or a request whose deadline passed (which closes the connection)."""
        if self.state in SETTING_UP and now_ms >= self._setup_deadline_ms:
            current = self._handshakes.current if self.state is ConnectionState.HANDSHAKE else None
            waiting_for = getattr(current, "waiting_for", None)
            stuck = (f"stuck in {getattr(current, 'name', 'a handshake')}, waiting for {waiting_for})"
                     if waiting_for else f"stuck {self.state.name}): is the address a reachable Kafka listener?")
            self._fail(KafkaConnectionError(
                f"could not set up a connection to {self.address} within {self._setup_timeout_ms} ms "
                f"(socket.connection.setup.timeout.ms, doubled per failed attempt up to "
                f"socket.connection.setup.timeout.max.ms; {stuck}", address=self.address), now_ms)
            return
        if self.state is ConnectionState.HANDSHAKE and self._handshake_poll_ms is not None \
                and now_ms >= self._handshake_poll_ms:
            self._step_handshakes(now_ms)  # a handshake waiting for work off the network thread (WAIT)
            return
        if self.state is not ConnectionState.READY:
            return
        request = self._requests.expired(now_ms)
        if request is not None:
            error = KafkaTimeoutError(
                f"{request.api.name} request (correlation id {request.correlation_id}) to {self.address} got no "
                f"response within {now_ms - request.enqueued_ms} ms (request.timeout.ms); the connection is closed")
            self._fail(error, now_ms, culprit=request)

    def next_deadline_ms(self) -> int | None:
        """The earliest time check_timeouts may have work to do (None: no deadline pending)."""
        if self.state in SETTING_UP:
            poll = self._handshake_poll_ms if self.state is ConnectionState.HANDSHAKE else None
            return self._setup_deadline_ms if poll is None else min(poll, self._setup_deadline_ms)
        return self._requests.next_deadline_ms()

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
            events = (_READ if want_read else 0) | (_WRITE if want_write else 0)
            if not events and want is not HandshakeStatus.WAIT:
                events = _READ
            # WAIT: no interest at all. Nothing is read then (TLS 1.3 session tickets may arrive, which only the
            # next read of the TLS socket consumes), so a readable socket would wake the selector again and again;
            # a broker closing meanwhile is noticed once the handshake sends its next request.
        else:
            events = _READ | (_WRITE if self._requests.has_unsent else 0)  # always read: notices the broker closing
        self._set_interest(events)

    def _set_interest(self, events: int) -> None:
        if self._sock is None or events == self._events:
            return
        if not events:
            self._selector.unregister(self._sock)
        elif self._events:
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
        self.failed_during_setup = self.state in SETTING_UP
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


    # ------------------------------------------------------------------------------------------ driving

    @property
    def has_completions(self) -> bool:
        """Requests completed since the last ``drain_completions``."""
        return bool(self._completions)

    def drain_completions(self) -> list[Completion]:
        """Requests finished since the last call, in completion order."""
        done, self._completions = self._completions, []
        return done

    def poll(self, timeout_ms: int, now_ms: int) -> list[Completion]:
        """Standalone driving: wait up to ``timeout_ms`` for I/O, handle it and timeouts, return completions.

        Events for other connections registered on a shared selector are dispatched to them too.
        """
        deadline = self.next_deadline_ms()
        if deadline is not None:
            timeout_ms = max(0, min(timeout_ms, deadline - now_ms))
        if self._completions:
            timeout_ms = 0  # e.g. an acks=0 request written when it was sent
        ready = self._selector.select(timeout_ms / 1000)
        now_ms = self._clock()  # time passed while waiting
        for key, mask in ready:
            if isinstance(key.data, BrokerConnection):
                key.data.handle_events(mask, now_ms)
        self.check_timeouts(now_ms)
        return self.drain_completions()


class _Context:
    """What a handshake sees of its connection (implements handshake.HandshakeContext); every change it makes
    goes through the connection's own methods."""

    def __init__(self, conn: BrokerConnection) -> None:
        self._conn = conn

    host = property(lambda self: self._conn.host)
    port = property(lambda self: self._conn.port)
    address = property(lambda self: self._conn.address)
    node_id = property(lambda self: self._conn.node_id)
    config = property(lambda self: self._conn.config)

    @property
    def sock(self) -> socket.socket:
        return self._conn._handshake_socket()

    def wrap_socket(self, wrap: Callable[[socket.socket], socket.socket]) -> None:
        self._conn._wrap_socket(wrap)

    def send_request(self, api: ApiSpec, version: int, body: Mapping[str, Any]) -> int:
        return self._conn._send_handshake_request(api, version, body)

    def take_response(self) -> dict[str, Any] | None:
        return self._conn._take_handshake_response()
