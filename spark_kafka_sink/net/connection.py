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
  features (``broker_versions``). Connect, handshakes and negotiation together must finish within
  socket.connection.setup.timeout.ms, else the attempt fails with a ``KafkaConnectionError`` naming host:port.
* READY: :meth:`send` frames requests with increasing correlation ids. Responses must come back in request order:
  any other correlation id is a ``ProtocolError`` and closes the connection. A request unanswered after its
  timeout (request.timeout.ms) fails with a retriable ``KafkaTimeoutError`` and, as in the Java client, the
  connection closes: every other pending request fails with a retriable ``KafkaConnectionError``. A request
  sent with ``expect_response=False`` (Produce with acks=0) completes, with body ``None``, once it is written.

Driving it: the connection registers its socket with the selector it is given (``key.data`` is the connection);
whoever selects calls :meth:`handle_events` for its keys and :meth:`check_timeouts`, then collects finished
requests with :meth:`drain_completions`. :meth:`poll` does all three for standalone use. Time is passed in as
``now_ms``. Not thread-safe: one thread (the network client's owner) drives each connection.

The class has two halves: :mod:`~spark_kafka_sink.net.connection_lifecycle` holds the states and the code that
changes them (connecting, handshakes, ApiVersions, failing, closing); this module adds the traffic once set up
(sending, reading and writing frames, request timeouts, ``poll``).
"""

from __future__ import annotations

import selectors
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from spark_kafka_sink.errors import (
    IllegalStateError, KafkaConnectionError, KafkaTimeoutError, ProtocolError, UnsupportedVersionError,
)
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.connection_lifecycle import SETTING_UP, ConnectionLifecycle, ConnectionState
from spark_kafka_sink.net.handshake import Handshake
from spark_kafka_sink.net.inflight import WOULD_BLOCK, Completion, InFlightRequest, RequestPurpose
from spark_kafka_sink.net.security_errors import plaintext_reply_error, tls_io_error
from spark_kafka_sink.protocol.framing import decode_response, peek_correlation_id
from spark_kafka_sink.protocol.messages import ApiSpec
from spark_kafka_sink.protocol.versions import select_version

__all__ = ["ConnectionState", "BrokerConnection", "InFlightRequest", "Completion", "monotonic_ms"]


def monotonic_ms() -> int:
    """The default clock: monotonic milliseconds."""
    return time.monotonic_ns() // 1_000_000


_S = ConnectionState
_RECV_SIZE = 256 * 1024
_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class BrokerConnection(ConnectionLifecycle):
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
        super().__init__(node_id, host, port, config, selector=selector, handshakes=handshakes)
        self._clock = clock  # only poll() reads it: the time after waiting in select

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
        """Queue one request (READY only); it is written by later I/O. Encoding errors raise here."""
        if self.state is not ConnectionState.READY:
            raise IllegalStateError(f"cannot send {api.name} to {self.address}: the connection is "
                                    f"{self.state.name}, not READY")
        return self._enqueue(api, version, body, now_ms, expect_response, timeout_ms, RequestPurpose.USER, tag)

    # ------------------------------------------------------------------------------------------ I/O

    def handle_events(self, mask: int, now_ms: int) -> None:
        """React to selector events for this connection's socket."""
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

    def _flush(self, now_ms: int) -> None:
        if self._sock is None:
            return
        try:
            written_only = self._requests.write_to(self._sock)
        except OSError as exc:
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
            self._fail(KafkaConnectionError(
                f"could not set up a connection to {self.address} within "
                f"{self.config.socket_connection_setup_timeout_ms} ms (socket.connection.setup.timeout.ms; "
                f"stuck {self.state.name}): is the address a reachable Kafka listener?",
                address=self.address), now_ms)
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
            return self._setup_deadline_ms
        return self._requests.next_deadline_ms()

    # ------------------------------------------------------------------------------------------ driving

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
        ready = self._selector.select(timeout_ms / 1000)
        now_ms = self._clock()  # time passed while waiting
        for key, mask in ready:
            if isinstance(key.data, BrokerConnection):
                key.data.handle_events(mask, now_ms)
        self.check_timeouts(now_ms)
        return self.drain_completions()

