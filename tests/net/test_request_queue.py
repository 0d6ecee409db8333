"""RequestQueue writes each frame's buffers with gathering writes, through any split the socket imposes."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from typing import Any

import pytest

from spark_kafka_sink.net.inflight import RequestPurpose, RequestQueue
from spark_kafka_sink.protocol.framing import encode_request
from spark_kafka_sink.protocol.messages import PRODUCE


class CountingSocket(socket.socket):
    """A plain socket that counts its writes and the buffers handed to them."""

    sendmsg_calls = 0
    buffers = 0

    def sendmsg(self, buffers: Any, *args: Any) -> int:
        self.sendmsg_calls += 1
        self.buffers += len(buffers)
        return super().sendmsg(buffers, *args)


@pytest.fixture
def pair() -> Iterator[tuple[CountingSocket, socket.socket]]:
    a, b = socket.socketpair()
    writer = CountingSocket(a.family, a.type, a.proto, fileno=a.detach())
    writer.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)  # many partial writes
    writer.setblocking(False)
    b.setblocking(False)
    yield writer, b
    writer.close()
    b.close()


def _produce(partitions: int, size: int) -> dict[str, Any]:
    """A Produce body whose records come in pieces, as the sender builds it (stamped header, records view)."""
    data = bytes(range(256)) * (size // 256 + 1)
    return {"transactional_id": None, "acks": -1, "timeout_ms": 1000, "topic_data": [{"name": "t", "partition_data": [
        {"index": i, "records": (data[:61], memoryview(data)[61:size])} for i in range(partitions)]}]}


def _drain(queue: RequestQueue, writer: socket.socket, reader: socket.socket) -> bytes:
    received = bytearray()
    for _ in range(100_000):
        queue.write_to(writer)
        try:
            while chunk := reader.recv(1 << 16):
                received += chunk
        except BlockingIOError:
            pass
        if not queue.has_unsent:
            break
    else:
        raise AssertionError("the queue did not finish writing")
    try:
        while chunk := reader.recv(1 << 16):
            received += chunk
    except BlockingIOError:
        pass
    return bytes(received)


@pytest.mark.parametrize(("partitions", "size"), [(3, 50_000), (700, 200)], ids=["large-records", "over-iov-max"])
def test_frames_in_pieces_arrive_whole_and_in_order(pair: tuple[CountingSocket, socket.socket], partitions: int,
                                                    size: int) -> None:
    writer, reader = pair
    queue = RequestQueue("client")
    bodies = [_produce(partitions, size), _produce(1, 100)]
    for body in bodies:
        queue.enqueue(PRODUCE, 12, body, 0, 1000, expect_response=True, purpose=RequestPurpose.USER)
    received = _drain(queue, writer, reader)
    assert received == b"".join(encode_request(PRODUCE, 12, cid, "client", b) for cid, b in enumerate(bodies))
    # The records went out by gathering writes from the caller's buffers (3 per partition), never joined first:
    # 700 partitions are more buffers than one sendmsg takes (IOV_MAX), so that frame needed several calls.
    assert writer.sendmsg_calls >= (2 if partitions < 400 else 3) and writer.buffers >= 3 * partitions
