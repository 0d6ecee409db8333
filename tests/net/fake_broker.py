"""A scripted Kafka peer for network tests: a listening socket on 127.0.0.1 and a thread running a script.

    def script(peer: Peer) -> None:           # called once per accepted connection, in order
        peer.serve_api_versions()
        header, body = peer.read_request()
        peer.respond(header, {...})

    with FakeBroker(script, connections=1) as broker:   # broker.host, broker.port, broker.address
        ...

Every socket operation has a timeout, so a script waiting for a request that never comes fails instead of
hanging; ``close()`` joins the thread and re-raises the script's exception, if any (unless the client side was
expected to hang up: scripts may end on ``PeerClosed``).
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from spark_kafka_sink.errors import BrokerUnsupportedVersionError
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.framing import FrameDecoder, RequestHeader, decode_request, encode_response
from spark_kafka_sink.protocol.messages import API_SPECS, API_VERSIONS
from spark_kafka_sink.protocol.primitives import write_int16, write_int32

__all__ = ["FakeBroker", "Peer", "PeerClosed", "broker_api_keys", "unused_port"]

IO_TIMEOUT_S = 10.0


class PeerClosed(Exception):
    """The client closed the connection while the script waited for a request."""


def broker_api_keys(overrides: Mapping[int, tuple[int, int]] | None = None) -> list[dict[str, int]]:
    """ApiVersions entries for every API we implement, with our own ranges unless overridden."""
    ranges = {key: (spec.min_version, spec.max_version) for key, spec in API_SPECS.items()}
    ranges.update(overrides or {})
    return [{"api_key": k, "min_version": lo, "max_version": hi} for k, (lo, hi) in sorted(ranges.items())]


def unused_port() -> int:
    """A local port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Peer:
    """The broker side of one accepted connection."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.sock.settimeout(IO_TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # small writes go out as written
        self._decoder = FrameDecoder()
        self._frames: list[bytes] = []
        self.requests: list[RequestHeader] = []

    def read_frame(self) -> bytes:
        while not self._frames:
            try:
                data = self.sock.recv(65536)
            except ConnectionResetError:
                # The client closed while an answer it no longer wanted sat unread in its buffer: the kernel
                # resets instead of a clean close. For the script it is the same thing.
                raise PeerClosed("the client closed the connection (reset)") from None
            if not data:
                raise PeerClosed("the client closed the connection")
            self._frames.extend(self._decoder.feed(data))
        return self._frames.pop(0)

    def read_request(self) -> tuple[RequestHeader, dict[str, Any]]:
        header, body = decode_request(self.read_frame())
        self.requests.append(header)
        return header, body

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response_bytes(self, header: RequestHeader, body: Mapping[str, Any], version: int | None = None,
                       correlation_id: int | None = None) -> bytes:
        api = API_SPECS[header.api_key]
        return encode_response(api, header.api_version if version is None else version,
                               header.correlation_id if correlation_id is None else correlation_id, body)

    def respond(self, header: RequestHeader, body: Mapping[str, Any], version: int | None = None,
                correlation_id: int | None = None) -> None:
        self.send(self.response_bytes(header, body, version, correlation_id))

    def serve_api_versions(self, overrides: Mapping[int, tuple[int, int]] | None = None,
                           finalized: Mapping[str, int] | None = None) -> RequestHeader:
        """Answer the connection's ApiVersions request like a broker would."""
        header, _ = self.read_request()
        if header.api_key != API_VERSIONS.key:
            raise AssertionError(f"expected ApiVersions first, got API key {header.api_key}")
        body: dict[str, Any] = {"error_code": NO_ERROR, "api_keys": broker_api_keys(overrides)}
        if finalized and header.api_version >= 3:
            body["finalized_features_epoch"] = 7
            body["finalized_features"] = [
                {"name": n, "max_version_level": v, "min_version_level": 1} for n, v in finalized.items()]
        self.respond(header, body)
        return header

    def unsupported_api_versions(self, header: RequestHeader, lo: int, hi: int) -> None:
        """Answer an ApiVersions request the way an older broker does: UNSUPPORTED_VERSION in the v0 layout."""
        body = (write_int16(BrokerUnsupportedVersionError.code) + write_int32(1)  # error_code, one api_keys entry:
                + write_int16(API_VERSIONS.key) + write_int16(lo) + write_int16(hi))  # ApiVersions' own range
        payload = write_int32(header.correlation_id) + body
        self.send(write_int32(len(payload)) + payload)

    def wait_closed(self) -> None:
        """Wait for the client to hang up (recv returns b"" or the connection resets)."""
        try:
            while self.sock.recv(65536):
                pass
        except ConnectionResetError:
            pass


class FakeBroker:
    """Accepts up to ``connections`` connections on 127.0.0.1 and runs ``script(peer)`` for each in its own
    thread (a client may hold several connections at once)."""

    def __init__(self, script: Callable[[Peer], None], connections: int = 1) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(IO_TIMEOUT_S)
        self.host = "127.0.0.1"
        self.port: int = self._listener.getsockname()[1]
        self.address = f"{self.host}:{self.port}"
        self._script = script
        self._connections = connections
        self.errors: list[BaseException] = []
        self.peers: list[Peer] = []
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._acceptor = threading.Thread(target=self._accept, name=f"fake-broker-{self.port}", daemon=True)
        self._acceptor.start()

    def _accept(self) -> None:
        self._listener.settimeout(0.05)  # short, to notice close() between connections
        deadline = time.monotonic() + IO_TIMEOUT_S
        while len(self.peers) < self._connections and not self._stop.is_set():
            try:
                sock, _addr = self._listener.accept()
            except TimeoutError:
                if time.monotonic() > deadline:
                    return
                continue
            peer = Peer(sock)
            self.peers.append(peer)
            thread = threading.Thread(target=self._serve, args=(peer,), daemon=True)
            self._threads.append(thread)
            thread.start()

    def _serve(self, peer: Peer) -> None:
        try:
            self._script(peer)
        except PeerClosed:
            pass
        except BaseException as exc:  # reported by close()
            self.errors.append(exc)

    def close(self) -> None:
        """Stop accepting, wait for every script to end, then re-raise the first script error."""
        self._stop.set()
        self._acceptor.join(IO_TIMEOUT_S + 5)
        for thread in self._threads:
            thread.join(IO_TIMEOUT_S + 5)
        stuck = [t for t in self._threads if t.is_alive()]
        for peer in self.peers:
            peer.sock.close()
        self._listener.close()
        if stuck:
            raise AssertionError("a fake broker script did not finish")
        if self.errors:
            raise self.errors[0]

    def __enter__(self) -> FakeBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
