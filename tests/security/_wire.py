"""A TCP relay in front of a broker listener that keeps the bytes its clients send, so a test can read the SASL
client message as it went over the wire (split by hand, not by the package's own codec)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ClientBytes", "relay"]


class ClientBytes:
    """What the relay's clients sent, all connections together (guarded by ``_lock``)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sent = bytearray()
        self.address = ""  # host:port of the relay, set once it listens

    def add(self, chunk: bytes) -> None:
        with self._lock:
            self._sent += chunk

    def oauthbearer_messages(self) -> list[tuple[str, dict[str, str]]]:
        """Each OAUTHBEARER client message sent (RFC 7628: gs2 header, then key=value pairs ended by 0x01):
        its gs2 header and its pairs."""
        with self._lock:
            sent = bytes(self._sent)
        found = []
        start = sent.find(b"\x01auth=Bearer ")
        while start >= 0:
            header_at = sent.rfind(b"n,", 0, start)
            end = sent.find(b"\x01\x01", start)
            pairs = sent[start + 1:end].decode().split("\x01")
            found.append((sent[header_at:start].decode(), dict(p.split("=", 1) for p in pairs)))
            start = sent.find(b"\x01auth=Bearer ", end)
        return found


def _pump(source: socket.socket, target: socket.socket, seen: ClientBytes | None) -> None:
    try:
        while chunk := source.recv(65536):
            if seen is not None:
                seen.add(chunk)
            target.sendall(chunk)
    except OSError:
        pass  # either side closed: the relay of this connection ends
    finally:
        for sock in (source, target):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@contextmanager
def relay(host: str, port: int) -> Iterator[ClientBytes]:
    """A relay to ``host:port`` on a free local port for the duration of the block."""
    seen = ClientBytes()
    server = socket.create_server(("127.0.0.1", 0))
    seen.address = f"127.0.0.1:{server.getsockname()[1]}"
    stopping = threading.Event()
    open_sockets: list[socket.socket] = []

    def accept() -> None:
        while not stopping.is_set():
            try:
                client, _ = server.accept()
            except OSError:
                return  # the server socket was closed
            upstream = socket.create_connection((host, port), timeout=10)
            upstream.settimeout(None)
            open_sockets.extend((client, upstream))
            threading.Thread(target=_pump, args=(client, upstream, seen), daemon=True).start()
            threading.Thread(target=_pump, args=(upstream, client, None), daemon=True).start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield seen
    finally:
        stopping.set()
        server.close()
        for sock in open_sockets:
            sock.close()
        acceptor.join(timeout=5)
