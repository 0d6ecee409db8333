"""Drive one of our BrokerConnections to a secured listener, the way the network client does, and produce."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.net.connection import BrokerConnection, ConnectionState, monotonic_ms
from spark_kafka_sink.net.security import handshakes_for
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.messages import METADATA, PRODUCE
from spark_kafka_sink.protocol.record_batch import Record, encode_batch

SETUP_TIMEOUT_MS = 10_000


@dataclass
class Attempt:
    """The outcome of one connection attempt."""

    conn: BrokerConnection
    elapsed_s: float

    @property
    def ready(self) -> bool:
        return self.conn.state is ConnectionState.READY

    @property
    def error(self) -> Any:
        return self.conn.last_error


@contextmanager
def connect(address: str, tls_host: str | None = None, **props: Any) -> Iterator[Attempt]:
    """Connect to ``address`` with our security handshakes until READY or failed; always closes. ``tls_host``:
    the host name TLS checks the certificate against, if not the address's host (no DNS lookup of it)."""
    host, _, port_text = address.rpartition(":")
    port = int(port_text)
    config = ProducerConfig.from_dict({
       "bootstrap.servers": address, "socket.connection.setup.timeout.ms": SETUP_TIMEOUT_MS, **props}).net_config()
    conn = BrokerConnection(-1, host, port, config,
                            handshakes=lambda: handshakes_for(tls_host or host, port, config))
    started = time.monotonic()
    try:
        conn.connect(monotonic_ms())
        # Bounded by the connection's own setup deadline (check_timeouts inside poll fails it at the deadline).
        while conn.state not in (ConnectionState.READY, ConnectionState.DISCONNECTED):
            conn.poll(100, monotonic_ms())
        yield Attempt(conn, time.monotonic() - started)
    finally:
        conn.close(monotonic_ms())


def request(conn: BrokerConnection, api: Any, body: dict[str, Any]) -> dict[str, Any]:
    """Send one request on a READY connection and wait for its answer (bounded by request.timeout.ms)."""
    conn.send(api, conn.choose_version(api), body, monotonic_ms())
    while True:
        for done in conn.poll(100, monotonic_ms()):
            if done.error is not None:
                raise done.error
            assert done.body is not None
            return done.body


def metadata(conn: BrokerConnection, topic: str | None = None) -> dict[str, Any]:
    topics = None if topic is None else [{"name": topic}]
    return request(conn, METADATA, {"topics": topics, "allow_auto_topic_creation": False})


def produce(conn: BrokerConnection, topic: str, values: list[bytes], key: bytes = b"k") -> int:
    """Produce ``values`` to partition 0 of ``topic`` with acks=all; returns the base offset."""
    now = int(time.time() * 1000)
    batch = encode_batch([Record(key, v, now) for v in values])
    body = request(conn, PRODUCE, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10_000,
        "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
    })
    partition = body["responses"][0]["partition_responses"][0]
    assert partition["error_code"] == 0, partition
    return int(partition["base_offset"])
