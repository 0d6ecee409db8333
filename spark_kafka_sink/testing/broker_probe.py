"""The broker launcher's readiness probe: one Metadata request over a plain socket, listing the live broker ids."""

from __future__ import annotations

import socket
import struct

__all__ = ["metadata_broker_ids"]


def metadata_broker_ids(host: str, port: int, timeout: float = 2.0) -> list[int]:
    """Send Metadata v1 (no topics) and return the broker ids it lists.

    Deliberately independent of the package's protocol layer: the launcher must work before, and regardless of, the
    code under test. Layout: request header v1 = api_key int16, api_version int16, correlation_id int32,
    client_id string; body v1 = topics array (int32 count; 0 = none). Response: correlation_id int32, then
    brokers array of (node_id int32, host string, port int32, rack nullable string), ...
    """
    client_id = b"sks-launcher"
    body = struct.pack(">hhih", 3, 1, 1, len(client_id)) + client_id + struct.pack(">i", 0)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exact(sock, 4))[0]
        payload = _recv_exact(sock, size)
    pos = 4
    (count,) = struct.unpack_from(">i", payload, pos)
    pos += 4
    ids = []
    for _ in range(count):
        node_id, host_len = struct.unpack_from(">ih", payload, pos)
        pos += 6 + host_len + 4
        (rack_len,) = struct.unpack_from(">h", payload, pos)
        pos += 2 + max(rack_len, 0)
        ids.append(node_id)
    return ids


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)
