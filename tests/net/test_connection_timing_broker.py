"""Connection timing options of the network client, against real sockets: socket.connection.setup.timeout.max.ms
(the setup timeout grows per failed setup, as Java's ClusterConnectionStates) against a scripted peer, and
connections.max.idle.ms (idle connections closed, as Java's Selector) against the session's real broker.

The setup test moves the client's clock forward past each deadline (an offset on the real clock) instead of
waiting out the timeouts; socket events still happen for real."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from spark_kafka_sink.errors import KafkaConnectionError
from spark_kafka_sink.net.client import NO_CONNECTION_DELAY_LIMIT_MS, NetworkClient
from spark_kafka_sink.net.connection import monotonic_ms
from tests.net.fake_broker import FakeBroker, Peer
from tests.net_settings import net_config


@pytest.fixture
def clients() -> Iterator[list[NetworkClient]]:
    made: list[NetworkClient] = []
    yield made
    for client in made:
        client.close()


def test_setup_timeout_doubles_per_failed_setup_up_to_the_max_and_resets_when_ready(
        clients: list[NetworkClient]) -> None:
    silent = 4
    accepted: list[int] = []
    lock = threading.Lock()

    def script(peer: Peer) -> None:
        with lock:
            accepted.append(len(accepted))
            mine = accepted[-1]
        if mine >= silent:
            peer.serve_api_versions()  # the fifth connection is set up
        peer.wait_closed()  # the first four never answer ApiVersions: their setup times out

    offset = [0]

    def clock() -> int:
        return monotonic_ms() + offset[0]

    with FakeBroker(script, connections=silent + 1) as broker:
        client = NetworkClient(net_config((broker.host, broker.port),
                                          socket_connection_setup_timeout_ms=1_000,
                                          socket_connection_setup_timeout_max_ms=5_000,
                                          reconnect_backoff_ms=1, reconnect_backoff_max_ms=1), clock=clock)
        clients.append(client)
        timeouts: list[int] = []
        started = time.monotonic()
        for _ in range(silent):
            timeout = client.connection_setup_timeout_ms(-1)
            timeouts.append(timeout)
            assert not client.ready(-1, clock())  # starts the attempt with that timeout
            assert client.connection_setup_timeout_ms(-1) == timeout  # drawn once per attempt
            offset[0] += timeout  # the deadline has come
            deadline = time.monotonic() + 10
            while client.connection_delay(-1, clock()) == NO_CONNECTION_DELAY_LIMIT_MS:  # still setting up
                assert time.monotonic() < deadline, "the setup timeout never fired"
                client.poll(10, clock())
            error = client.connection_error(-1)
            assert isinstance(error, KafkaConnectionError) and f"within {timeout} ms" in str(error)
            offset[0] += 5  # past the reconnect backoff
        print(f"setup timeouts of 4 failed attempts: {timeouts} ms")
        assert 800 <= timeouts[0] <= 1_200  # socket.connection.setup.timeout.ms +-20%
        assert 1_600 <= timeouts[1] <= 2_400
        assert 3_200 <= timeouts[2] <= 4_800
        # As Java's ExponentialBackoff: the exponent stops where the base reaches the max, and the jittered value
        # (max +-20%) is capped at the max.
        assert 4_000 <= timeouts[3] <= 5_000
        assert 4_000 <= client.connection_setup_timeout_ms(-1) <= 5_000
        deadline = time.monotonic() + 10
        while not client.is_ready(-1):
            assert time.monotonic() < deadline, "the fifth connection never became ready"
            client.ready(-1, clock())
            client.poll(10, clock())
        print(f"ready after {time.monotonic() - started:.2f} s of real time; next setup timeout "
              f"{client.connection_setup_timeout_ms(-1)} ms")
        assert 800 <= client.connection_setup_timeout_ms(-1) <= 1_200  # READY starts again from the base
        client.close()  # before the fake broker waits for its peers to hang up


def test_a_max_below_the_base_is_a_constant_timeout() -> None:
    client = NetworkClient(net_config(("127.0.0.1", 9), socket_connection_setup_timeout_ms=3_000,
                                      socket_connection_setup_timeout_max_ms=1_000))
    try:
        assert client.connection_setup_timeout_ms(-1) == 1_000  # as Java's ExponentialBackoff: no jitter either
    finally:
        client.close()


def test_idle_connection_is_closed_after_connections_max_idle_ms(bootstrap: str, clients: list[NetworkClient]
                                                                 ) -> None:
    client = NetworkClient(net_config(bootstrap,
                                      connections_max_idle_ms=300, metadata_max_age_ms=600_000))
    clients.append(client)
    client.fetch_metadata([], timeout_ms=30_000)
    node = -1  # the bootstrap connection that answered
    assert client.is_ready(node)
    idle_since = time.monotonic()
    deadline = idle_since + 20
    while client.is_ready(node):
        assert time.monotonic() < deadline, "the idle connection was never closed"
        assert client.poll(50, monotonic_ms()) == []
    closed_after = time.monotonic() - idle_since
    print(f"idle connection closed after {closed_after * 1000:.0f} ms (connections.max.idle.ms=300)")
    assert closed_after >= 0.29
    assert client.connection_error(node) is None  # a clean close, not a failure
    assert client.connection_delay(node, monotonic_ms()) == 0  # no reconnect backoff: the next request connects
    client.fetch_metadata([], timeout_ms=30_000)  # and it does
    assert any(client.is_ready(n) for n in [node, *client.metadata.brokers()])


def test_idle_close_is_off_with_minus_one(bootstrap: str, clients: list[NetworkClient]) -> None:
    offset = [0]
    client = NetworkClient(net_config(bootstrap, connections_max_idle_ms=-1,
                                      metadata_max_age_ms=600_000), clock=lambda: monotonic_ms() + offset[0])
    clients.append(client)
    client.fetch_metadata([], timeout_ms=30_000)
    deadline = time.monotonic() + 30
    while client.in_flight_count():  # the client's own first refresh: a day without its answer would time it out
        assert time.monotonic() < deadline, "the metadata refresh was never answered"
        client.poll(20, monotonic_ms())
    assert client.is_ready(-1)
    offset[0] += 86_400_000  # a day later
    client.poll(0, monotonic_ms() + offset[0])
    assert client.is_ready(-1)
