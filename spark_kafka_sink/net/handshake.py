"""The security seam: handshakes that run between TCP connect and ApiVersions (TLS, SASL).

A :class:`~spark_kafka_sink.net.connection.BrokerConnection` takes a sequence of :class:`Handshake` objects and,
once the TCP connection is up, runs them in order in state ``HANDSHAKE``; when the last one says ``DONE`` it moves
on to ``NEGOTIATING`` (ApiVersions). A plaintext connection has none. ``net/security.py`` only has to provide
handshake classes and a factory ``(host, port, config) -> list[Handshake]`` that the network client is given::

    NetworkClient(config, handshakes=security.handshakes_for)     # factory called once per connection attempt

Contract of a handshake (all non-blocking; the connection owns the selector and the clock):

* ``start(ctx, now_ms)`` is called once; ``step(ctx, now_ms)`` after every I/O event on the socket while this
  handshake is current. Both return a :class:`HandshakeStatus`: ``WANT_READ`` / ``WANT_WRITE`` (wait for the
  socket to be readable / writable, then ``step`` again) or ``DONE``. ``step`` may be called when nothing
  changed for it: it must then just report what it still waits for.
* TLS: ``ctx.wrap_socket(lambda s: ssl_context.wrap_socket(s, server_hostname=ctx.host,
  do_handshake_on_connect=False))`` swaps the socket in place (the connection re-registers it), then each
  ``step`` calls ``ctx.sock.do_handshake()`` and maps ``ssl.SSLWantReadError`` / ``SSLWantWriteError`` to
  ``WANT_READ`` / ``WANT_WRITE``. Every later byte, SASL's and the Kafka requests', goes through the TLS socket.
* SASL: ``ctx.send_request(SASL_HANDSHAKE, 1, {"mechanism": "SCRAM-SHA-256"})`` frames a Kafka request (the
  connection assigns the correlation id, writes it, reads and decodes the response) and returns its correlation
  id; ``ctx.take_response()`` returns the decoded body of the oldest answered handshake request, or ``None``
  while it is still on its way (return ``WANT_READ``). Before authentication a broker accepts only ApiVersions,
  SaslHandshake and SaslAuthenticate; Kafka 4.x serves SaslHandshake v0-1 and SaslAuthenticate v0-2, so fixed
  versions (1 and 2) are fine, or send an ApiVersions request first as the Java client does.
* Work that would block (a Kerberos KDC round trip) runs in another thread while ``step`` returns ``WAIT``: the
  connection then steps it again every few milliseconds (no socket event will come), still within the setup
  timeout, and the network thread goes on serving the other connections. A handshake that waits says for what in
  its ``waiting_for`` attribute (e.g. ``"the KDC"``), which the setup timeout's error names.
* Failure: raise a :class:`~spark_kafka_sink.errors.KafkaError` (e.g. ``SaslAuthenticationFailedError`` via
  ``raise_for_code``; a TLS failure as ``KafkaConnectionError``). The connection closes and reports that error
  (``BrokerConnection.last_error`` / ``NetworkClient.connection_error(node_id)``); an ``OSError`` is wrapped in
  a ``KafkaConnectionError`` naming the address. The whole setup, handshakes included, must finish within
  ``socket.connection.setup.timeout.ms``.
"""

from __future__ import annotations

import enum
import socket
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.protocol.messages import ApiSpec

__all__ = ["HandshakeStatus", "Handshake", "HandshakeContext", "HandshakeFactory", "HandshakeRunner", "OffThread"]


class HandshakeStatus(enum.Enum):
    """What a handshake waits for next."""

    WANT_READ = "want_read"
    WANT_WRITE = "want_write"
    # Work runs off the network thread (e.g. asking a Kerberos KDC for a ticket): nothing to wait for on the
    # socket; the connection steps the handshake again every few milliseconds, within the setup timeout.
    WAIT = "wait"
    DONE = "done"


class HandshakeContext(Protocol):
    """What a handshake may use of the connection it runs on."""

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...

    @property
    def address(self) -> str:
        """``host:port``, for error messages."""
        ...

    @property
    def node_id(self) -> int: ...

    @property
    def config(self) -> NetConfig: ...

    @property
    def sock(self) -> socket.socket:
        """The current socket (a TLS socket once wrapped)."""
        ...

    def wrap_socket(self, wrap: Callable[[socket.socket], socket.socket]) -> None:
        """Replace the socket by ``wrap(sock)`` (e.g. an ``ssl.SSLSocket``); the connection re-registers it."""
        ...

    def send_request(self, api: ApiSpec, version: int, body: Mapping[str, Any]) -> int:
        """Queue a framed Kafka request; returns its correlation id. The answer comes from take_response()."""
        ...

    def take_response(self) -> dict[str, Any] | None:
        """The decoded body of the oldest answered handshake request, or None if none has arrived yet."""
        ...


class Handshake(Protocol):
    """One setup step of a connection (see the module docstring for the contract)."""

    @property
    def name(self) -> str:
        """Short name for logs and errors, e.g. ``"TLS"`` or ``"SASL/SCRAM-SHA-256"``."""
        ...

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus: ...

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus: ...


#: Builds the handshakes of one connection attempt: ``(host, port, config) -> [Handshake, ...]``.
HandshakeFactory = Callable[[str, int, NetConfig], Sequence[Handshake]]


class HandshakeRunner:
    """Runs the handshakes of one connection attempt in order (the connection's side of the seam).

    ``responses`` holds the decoded answers to handshake requests, oldest first: the connection appends,
    ``HandshakeContext.take_response`` pops. Exceptions from a handshake propagate to the connection.
    """

    def __init__(self, hooks: Sequence[Handshake], ctx: HandshakeContext) -> None:
        self._hooks = list(hooks)
        self._ctx = ctx
        self._index = 0
        self._started = False
        self.want = HandshakeStatus.WANT_READ  # what the current handshake waits for
        self.responses: deque[dict[str, Any]] = deque()

    @property
    def current(self) -> Handshake | None:
        return self._hooks[self._index] if self._index < len(self._hooks) else None

    def advance(self, now_ms: int) -> bool:
        """Start or step the current handshake, moving on while they finish; True once all are DONE."""
        while (hook := self.current) is not None:
            if self._started:
                status = hook.step(self._ctx, now_ms)
            else:
                self._started = True
                status = hook.start(self._ctx, now_ms)
            if status is not HandshakeStatus.DONE:
                self.want = status
                return False
            self._index += 1
            self._started = False
        return True


_T = TypeVar("_T")


class OffThread(Generic[_T]):
    """``work()`` run in a daemon thread of its own, for a handshake that returns ``WAIT`` meanwhile: ``done()``
    says when, ``result()`` gives its value or raises its exception. A connection that gives up (setup timeout)
    leaves the thread to finish on its own; nothing waits for it."""

    def __init__(self, work: Callable[[], _T], name: str) -> None:
        self._done = threading.Event()
        self._value: _T | None = None
        self._error: BaseException | None = None
        threading.Thread(target=self._run, args=(work,), name=name, daemon=True).start()

    def _run(self, work: Callable[[], _T]) -> None:
        try:
            self._value = work()
        except BaseException as exc:  # handed to the network thread, which raises it in the handshake
            self._error = exc
        finally:
            self._done.set()

    def done(self) -> bool:
        return self._done.is_set()

    def result(self) -> _T:
        if not self._done.is_set():
            raise RuntimeError("OffThread.result() before done()")
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]  # set when no error was
