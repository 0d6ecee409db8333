"""send.buffer.bytes / receive.buffer.bytes reach the socket (SO_SNDBUF / SO_RCVBUF); -1 keeps the OS default."""

from __future__ import annotations

import socket
import time

from spark_kafka_sink.net.connection import BrokerConnection, ConnectionState, monotonic_ms
from tests.net.fake_broker import FakeBroker, Peer
from tests.net_settings import net_config


def kernel_value(option: int, requested: int | None) -> int:
    """What the kernel reports for a socket given ``requested`` (Linux doubles it); None: the default."""
    with socket.socket() as sock:
        if requested is not None:
            sock.setsockopt(socket.SOL_SOCKET, option, requested)
        value: int = sock.getsockopt(socket.SOL_SOCKET, option)
        return value


def connected_buffers(send: int, receive: int) -> tuple[int, int]:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.wait_closed()

    with FakeBroker(script) as broker:
        config = net_config((broker.host, broker.port), send_buffer_bytes=send,
                            receive_buffer_bytes=receive)
        conn = BrokerConnection(1, broker.host, broker.port, config)
        try:
            conn.connect(monotonic_ms())
            deadline = time.monotonic() + 10
            while conn.state is not ConnectionState.READY:
                assert time.monotonic() < deadline and conn.last_error is None, conn.last_error
                conn.poll(20, monotonic_ms())
            sock = conn._sock  # the connection's own socket: what the options were applied to
            assert sock is not None
            return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF), \
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
        finally:
            conn.close()


def test_buffer_sizes_are_applied_to_the_socket() -> None:
    sent, received = connected_buffers(40_000, 50_000)
    print(f"SO_SNDBUF {sent}, SO_RCVBUF {received} for send.buffer.bytes=40000, receive.buffer.bytes=50000")
    assert sent == kernel_value(socket.SO_SNDBUF, 40_000)
    assert received == kernel_value(socket.SO_RCVBUF, 50_000)


def test_minus_one_keeps_the_os_default() -> None:
    sent, received = connected_buffers(-1, -1)
    assert sent != kernel_value(socket.SO_SNDBUF, 40_000) and received != kernel_value(socket.SO_RCVBUF, 50_000)
