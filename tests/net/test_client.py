"""NetworkClient against scripted peers: readiness, versions, polling, wakeup, metadata, blocking helpers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    ConcurrentTransactionsError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaTimeoutError,
    SaslAuthenticationFailedError,
    UnknownTopicOrPartitionError,
)
from spark_kafka_sink.net.client import NO_CONNECTION_DELAY_LIMIT_MS, ClientResponse, NetworkClient
from spark_kafka_sink.net.config import NetConfig
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.net.handshake import Handshake, HandshakeContext, HandshakeStatus
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.framing import RequestHeader
from spark_kafka_sink.protocol.messages import INIT_PRODUCER_ID, METADATA, PRODUCE
from tests.net.fake_broker import FakeBroker, Peer, unused_port
from tests.net_settings import net_config

Handler = Callable[[RequestHeader, dict[str, Any]], Mapping[str, Any] | None]
PRODUCE_ANSWER: dict[str, Any] = {"responses": [], "throttle_time_ms": 0}


def serve(handlers: dict[int, Handler], overrides: Mapping[int, tuple[int, int]] | None = None,
          finalized: Mapping[str, int] | None = None) -> Callable[[Peer], None]:
    """A script answering ApiVersions, then every request with its API's handler (None: no answer)."""

    def script(peer: Peer) -> None:
        peer.serve_api_versions(overrides, finalized)
        while True:
            header, body = peer.read_request()
            answer = handlers[header.api_key](header, body)
            if answer is not None:
                peer.respond(header, answer)

    return script


def metadata_answer(port: int, topics: Sequence[str] = ()) -> Handler:
    def handler(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        wanted = [t["name"] for t in body["topics"] or []]
        partitions = [{"error_code": NO_ERROR, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                       "replica_nodes": [1], "isr_nodes": [1]}]
        return {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
            "cluster_id": "fake", "controller_id": 1,
            "topics": [{"error_code": NO_ERROR, "name": name, "partitions": partitions} if name in topics
                       else {"error_code": UnknownTopicOrPartitionError.code, "name": name, "partitions": []}
                       for name in wanted],
        }

    return handler


def make_client(*addresses: tuple[str, int], **overrides: Any) -> NetworkClient:
    return NetworkClient(net_config(*addresses, **overrides))


@pytest.fixture
def clients() -> Iterator[list[NetworkClient]]:
    made: list[NetworkClient] = []
    yield made
    for client in made:
        client.close()


def poll_until(client: NetworkClient, until: Callable[[list[ClientResponse]], bool], timeout_s: float = 5.0
               ) -> list[ClientResponse]:
    got: list[ClientResponse] = []
    deadline = time.monotonic() + timeout_s
    while not until(got):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s")
        got += client.poll(20, monotonic_ms())
    return got


def await_ready(client: NetworkClient, node_id: int) -> None:
    deadline = time.monotonic() + 5
    while not client.ready(node_id, monotonic_ms()):
        if time.monotonic() > deadline:
            raise AssertionError(f"node {node_id} not ready: {client.connection_error(node_id)}")
        client.poll(20, monotonic_ms())


def fresh_metadata(client: NetworkClient) -> None:
    """Pretend metadata was just fetched, so poll() does not refresh it on its own."""
    client.metadata.update({"brokers": [], "topics": []}, monotonic_ms())


def test_send_uses_highest_common_version_and_a_body_function(clients: list[NetworkClient]) -> None:
    seen: list[int] = []

    def produce(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        seen.append(header.api_version)
        return PRODUCE_ANSWER

    with FakeBroker(serve({PRODUCE.key: produce}, overrides={PRODUCE.key: (3, 9)},
                          finalized={"transaction.version": 2})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        assert client.api_version(-1, PRODUCE) == 9
        assert client.finalized_features(-1) == {"transaction.version": 2}
        asked: list[int] = []

        def body(version: int) -> dict[str, Any]:
            asked.append(version)
            return {"acks": -1, "timeout_ms": 1000, "topic_data": []}

        first = client.send(-1, PRODUCE, body, monotonic_ms(), context="mine")
        second = client.send(-1, PRODUCE, body, monotonic_ms(), max_version=7)
        assert client.in_flight_count(-1) == 2 and client.in_flight_count() == 2
        got = poll_until(client, lambda r: len(r) == 2)
        client.close()
    assert (first.version, second.version) == (9, 7) and asked == [9, 7] and seen == [9, 7]
    assert [r.request for r in got] == [first, second]
    assert got[0].ok and got[0].body is not None and got[0].body["responses"] == []
    assert got[0].request.context == "mine"
    assert got[0].node_id == -1 and got[0].latency_ms >= 0


def test_ready_counts_in_flight_requests(clients: list[NetworkClient]) -> None:
    release = threading.Event()
    answered: list[RequestHeader] = []

    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        pending = [peer.read_request()[0], peer.read_request()[0]]
        release.wait(10)
        for header in pending:
            peer.respond(header, PRODUCE_ANSWER)
            answered.append(header)
        peer.wait_closed()

    with FakeBroker(script) as broker:
        client = make_client((broker.host, broker.port), max_in_flight_requests_per_connection=2)
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        body = {"acks": -1, "timeout_ms": 1000, "topic_data": []}
        client.send(-1, PRODUCE, body, monotonic_ms())
        assert client.ready(-1, monotonic_ms())
        client.send(-1, PRODUCE, body, monotonic_ms())
        assert not client.ready(-1, monotonic_ms())
        # Not ready only until a response frees a slot: a caller may block in poll (which returns on it).
        assert client.connection_delay(-1, monotonic_ms()) == NO_CONNECTION_DELAY_LIMIT_MS
        release.set()
        poll_until(client, lambda r: len(r) == 2)
        assert client.ready(-1, monotonic_ms())
        client.close()


@pytest.mark.parametrize(("version", "throttled"), [(9, True), (5, False)], ids=["v9", "v5-before-KIP-219"])
def test_a_throttled_answer_mutes_the_node_for_the_throttle_time(clients: list[NetworkClient], version: int,
                                                                 throttled: bool) -> None:
    def produce(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {**PRODUCE_ANSWER, "throttle_time_ms": 400}  # a quota: the broker answers at once, muted 400 ms

    with FakeBroker(serve({PRODUCE.key: produce})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        client.send(-1, PRODUCE, {"acks": -1, "timeout_ms": 1000, "topic_data": []}, monotonic_ms(),
                    max_version=version)
        (answer,) = poll_until(client, lambda r: len(r) == 1)
        received = answer.received_ms
        # Produce v6+ asks the client to wait out the throttle itself (Java: shouldClientThrottle); older versions
        # are throttled by the broker delaying its answer, so nothing is owed after it.
        assert client.ready(-1, received) is not throttled
        assert client.ready(-1, received + 399) is not throttled
        assert client.ready(-1, received + 400)
        delay = client.connection_delay(-1, received + 100)
        assert delay == (300 if throttled else NO_CONNECTION_DELAY_LIMIT_MS)
        client.close()


def test_send_to_a_node_that_is_not_ready(clients: list[NetworkClient]) -> None:
    client = make_client(("127.0.0.1", unused_port()))
    clients.append(client)
    with pytest.raises(IllegalStateError, match="not ready"):
        client.send(-1, METADATA, {"topics": []}, monotonic_ms())


def test_wakeup_interrupts_a_blocked_poll(clients: list[NetworkClient]) -> None:
    client = make_client(("127.0.0.1", unused_port()))
    clients.append(client)
    fresh_metadata(client)
    assert client.poll(0, monotonic_ms()) == []
    waker = threading.Timer(0.1, client.wakeup)
    start = time.monotonic()
    waker.start()
    client.poll(30_000, monotonic_ms())
    waker.join()
    assert time.monotonic() - start < 10  # far below the 30 s poll timeout
    start = time.monotonic()
    client.poll(100, monotonic_ms())  # the wakeup was consumed: this one waits its timeout
    assert time.monotonic() - start >= 0.09
    client.close()
    client.wakeup()  # harmless after close


def test_wakeups_between_two_polls_write_the_socket_once(clients: list[NetworkClient]) -> None:
    """A send loop wakes the sender per new or full batch: while one wakeup is pending (written, not yet read by
    poll) further ones write nothing; the poll that reads it re-arms the next one, which writes and wakes again."""
    client = make_client(("127.0.0.1", unused_port()))
    clients.append(client)
    fresh_metadata(client)
    client.poll(0, monotonic_ms())
    before = client.wakeup_writes
    for _ in range(1000):
        client.wakeup()
    assert client.wakeup_writes == before + 1
    start = time.monotonic()
    client.poll(30_000, monotonic_ms())  # the pending wakeup makes it return at once
    assert time.monotonic() - start < 10
    def wake_100_times() -> None:
        for _ in range(100):
            client.wakeup()

    waker = threading.Timer(0.1, wake_100_times)
    start = time.monotonic()
    waker.start()
    client.poll(30_000, monotonic_ms())  # re-armed by the read: the first of these wakeups writes and wakes it
    waker.join()
    assert time.monotonic() - start < 10
    assert client.wakeup_writes == before + 2
    client.close()


def test_poll_keeps_waiting_while_a_large_request_is_only_being_written(clients: list[NetworkClient]) -> None:
    """A 4 MB request through an 8 KiB send buffer leaves in hundreds of writes, each on a "writable" event; poll
    handles them without returning (nothing the caller acts on happened) and returns with the answer."""
    release = threading.Event()

    def produce(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        release.wait(10)
        return PRODUCE_ANSWER

    with FakeBroker(serve({PRODUCE.key: produce})) as broker:
        client = make_client((broker.host, broker.port), send_buffer_bytes=8192)
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        records = bytes(4 << 20)
        client.send(-1, PRODUCE, {"acks": -1, "timeout_ms": 10_000, "transactional_id": None,
                                  "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]},
                    monotonic_ms())
        polls = 0
        got: list[ClientResponse] = []
        threading.Timer(0.5, release.set).start()  # the answer comes only once the whole request was read
        while not got:
            got = client.poll(10_000, monotonic_ms())
            polls += 1
        client.close()
    assert release.is_set() and got[0].ok
    assert polls <= 2, polls  # one, unless the answer arrived in two reads (67 when every write returned)


def test_an_acks_0_request_completes_at_the_next_poll_without_waiting(clients: list[NetworkClient]) -> None:
    # Written as it is sent (the socket takes it at once), it is complete before the poll: the poll must not
    # block for its timeout first.
    with FakeBroker(serve({PRODUCE.key: lambda header, body: None})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        request = client.send(-1, PRODUCE, {"acks": 0, "timeout_ms": 1000, "transactional_id": None,
                                            "topic_data": []}, monotonic_ms(), expect_response=False)
        start = time.monotonic()
        got = client.poll(30_000, monotonic_ms())
        waited = time.monotonic() - start
        client.close()
    assert [r.request for r in got] == [request] and waited < 5  # far below the 30 s poll timeout


def test_connection_failure_backs_off_and_is_reported(clients: list[NetworkClient]) -> None:
    port = unused_port()
    client = make_client(("127.0.0.1", port), reconnect_backoff_ms=5_000, reconnect_backoff_max_ms=5_000)
    clients.append(client)
    fresh_metadata(client)
    assert not client.ready(-1, monotonic_ms())
    deadline = time.monotonic() + 5
    while client.connection_error(-1) is None and time.monotonic() < deadline:
        client.poll(20, monotonic_ms())
    error = client.connection_error(-1)
    assert isinstance(error, KafkaConnectionError) and f"127.0.0.1:{port}" in str(error)
    assert client.connection_delay(-1, monotonic_ms()) > 3_000  # 5 s +-20% jitter
    assert client.metadata.needs_update(monotonic_ms() + 1_000)  # a failed node asks for fresh metadata
    assert not client.ready(-1, monotonic_ms())  # still backing off: no new attempt
    assert client.least_loaded_node(monotonic_ms()) is None


def test_unreachable_bootstrap_fails_within_the_timeout_naming_every_address(
        clients: list[NetworkClient]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts in the kernel, never answers
        silent_port = silent.getsockname()[1]
        refused = unused_port()  # drawn while the silent port is taken, so the two cannot be the same port
        # A constant setup timeout (max = base): growing it would leave the last attempt still running at the end.
        client = make_client(("127.0.0.1", refused), ("127.0.0.1", silent_port),
                             socket_connection_setup_timeout_ms=400, socket_connection_setup_timeout_max_ms=400)
        clients.append(client)
        start = time.monotonic()
        with pytest.raises(KafkaConnectionError) as info:
            client.fetch_metadata([], timeout_ms=1_500)
        elapsed = time.monotonic() - start
    message = str(info.value)
    assert f"127.0.0.1:{refused}" in message and f"127.0.0.1:{silent_port}" in message
    assert "refused" in message.lower() and "socket.connection.setup.timeout.ms" in message
    # 1.49: the client clock counts whole milliseconds. The upper bound leaves room for a loaded 2-core CI machine
    # descheduling the test; what it rules out is waiting for a default timeout (60 s) or hanging.
    assert 1.49 <= elapsed < 4.5, elapsed


def test_blocking_request_keeps_other_responses_for_poll(clients: list[NetworkClient]) -> None:
    def init_pid(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": NO_ERROR, "producer_id": 42, "producer_epoch": 1}

    with FakeBroker(serve({PRODUCE.key: lambda h, b: PRODUCE_ANSWER, INIT_PRODUCER_ID.key: init_pid})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        await_ready(client, -1)
        pending = client.send(-1, PRODUCE, {"acks": -1, "timeout_ms": 1000, "topic_data": []}, monotonic_ms())
        answer = client.request(-1, INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 60000},
                                5_000)
        assert answer["producer_id"] == 42
        later = client.poll(0, monotonic_ms())
        client.close()
    assert [r.request for r in later] == [pending]


def test_blocking_request_raises_the_top_level_error(clients: list[NetworkClient]) -> None:
    def busy(header: RequestHeader, body: dict[str, Any]) -> dict[str, Any]:
        return {"error_code": ConcurrentTransactionsError.code}

    with FakeBroker(serve({INIT_PRODUCER_ID.key: busy})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        body = {"transactional_id": "tx", "transaction_timeout_ms": 60000}
        with pytest.raises(ConcurrentTransactionsError, match="InitProducerId"):
            client.request(None, INIT_PRODUCER_ID, body, 5_000)
        answer = client.request(None, INIT_PRODUCER_ID, body, 5_000, raise_on_error=False)
        assert answer["error_code"] == ConcurrentTransactionsError.code
        client.close()


def test_blocking_request_times_out_when_unanswered(clients: list[NetworkClient]) -> None:
    with FakeBroker(serve({INIT_PRODUCER_ID.key: lambda h, b: None})) as broker:
        client = make_client((broker.host, broker.port))
        clients.append(client)
        fresh_metadata(client)
        start = time.monotonic()
        with pytest.raises(KafkaTimeoutError, match="InitProducerId"):
            client.request(None, INIT_PRODUCER_ID, {"transactional_id": None, "transaction_timeout_ms": 1}, 500)
        assert time.monotonic() - start < 3
        client.close()


def test_poll_refreshes_metadata_and_least_loaded_moves_to_brokers(clients: list[NetworkClient]) -> None:
    def script_for(port_box: list[int]) -> Callable[[Peer], None]:
        def script(peer: Peer) -> None:
            serve({METADATA.key: metadata_answer(port_box[0], ["t"])})(peer)
        return script

    port_box: list[int] = []
    with FakeBroker(script_for(port_box), connections=2) as broker:
        port_box.append(broker.port)
        client = make_client((broker.host, broker.port))
        clients.append(client)
        assert client.least_loaded_node(monotonic_ms()) == -1  # only bootstrap addresses known
        client.metadata.add_topic("t", monotonic_ms())
        deadline = time.monotonic() + 5
        while client.metadata.leader_for("t", 0) is None:
            assert time.monotonic() < deadline, "metadata never refreshed"
            assert client.poll(20, monotonic_ms()) == []  # metadata answers are consumed internally
        assert client.metadata.cluster_id == "fake"
        assert client.least_loaded_node(monotonic_ms()) == 1
        await_ready(client, 1)  # the second connection: to the broker's advertised address
        md = client.fetch_metadata(["t", "missing"], 5_000)
        assert md.topic_error("missing") is not None and md.partitions_for("t") == [0]
        client.close()


class RejectingAuth:
    """A handshake that fails as a wrong SASL password does."""

    name = "REJECTING"

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        raise SaslAuthenticationFailedError("bad password", context=f"SASL with {ctx.address}")

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        raise AssertionError("not reached")


def rejecting(attempts: list[str]) -> Callable[[str, int, NetConfig], list[Handshake]]:
    def factory(host: str, port: int, config: NetConfig) -> list[Handshake]:
        attempts.append(f"{host}:{port}")
        return [RejectingAuth()]

    return factory


def test_blocking_request_gives_up_at_once_on_a_non_retriable_setup_error(clients: list[NetworkClient]) -> None:
    attempts: list[str] = []
    factory = rejecting(attempts)
    with FakeBroker(lambda peer: peer.wait_closed()) as broker:
        client = NetworkClient(net_config((broker.host, broker.port)), handshakes=factory)
        clients.append(client)
        start = time.monotonic()
        with pytest.raises(SaslAuthenticationFailedError):
            client.fetch_metadata([], timeout_ms=20_000)
        assert time.monotonic() - start < 5
        error = client.connection_error(-1)
        assert error is not None and error.fatal
        client.close()
    assert attempts == [broker.address]


def test_a_fatal_setup_error_is_reported_on_the_metadata_and_ends_the_reconnecting(
        clients: list[NetworkClient]) -> None:
    # The sender's way of driving the client: poll only; the client connects for its own metadata refresh.
    attempts: list[str] = []
    with FakeBroker(lambda peer: peer.wait_closed()) as broker:
        client = NetworkClient(net_config((broker.host, broker.port), reconnect_backoff_ms=1,
                                          reconnect_backoff_max_ms=1), handshakes=rejecting(attempts))
        clients.append(client)
        metadata = client.metadata
        metadata.add_topic("t", monotonic_ms())
        woken: list[bool] = []
        waiter = threading.Thread(target=lambda: woken.append(metadata.wait_for_update(metadata.version, 60_000)))
        waiter.start()  # a producer thread waiting for the topic's metadata
        deadline = time.monotonic() + 10
        while metadata.fatal_error is None:
            assert time.monotonic() < deadline, "no fatal error recorded"
            client.poll(100, monotonic_ms())
        assert isinstance(metadata.fatal_error, SaslAuthenticationFailedError)
        assert metadata.fatal_error is client.connection_error(-1)
        waiter.join(10)
        assert woken == [False]  # woken by the error, not by a new version or the timeout
        for later in range(1, 6):  # far past every backoff and metadata.max.age.ms: still no new attempt
            client.poll(0, monotonic_ms() + later * 600_000)
        assert attempts == [broker.address]
        client.close()


def test_a_silent_bootstrap_address_does_not_hide_a_good_one(clients: list[NetworkClient]) -> None:
    with socket.create_server(("127.0.0.1", 0)) as silent, \
            FakeBroker(serve({METADATA.key: metadata_answer(0)}), connections=2) as good:
        silent_port = silent.getsockname()[1]
        for order in ([silent_port, good.port], [good.port, silent_port]):
            client = make_client(*[("127.0.0.1", p) for p in order], socket_connection_setup_timeout_ms=60_000)
            clients.append(client)
            start = time.monotonic()
            client.fetch_metadata([], timeout_ms=20_000)
            assert time.monotonic() - start < 5
            assert client.metadata.cluster_id == "fake"
            client.close()


@pytest.mark.parametrize(("trigger_ms", "rebootstraps"), [(300, True), (300_000, False)])
def test_metadata_unanswered_for_the_trigger_rebootstraps(clients: list[NetworkClient], trigger_ms: int,
                                                          rebootstraps: bool) -> None:
    """metadata.recovery.rebootstrap.trigger.ms (KIP-1102): the broker of the last metadata takes connections but
    never answers Metadata. Past the trigger the client asks bootstrap.servers again; with the default trigger it
    keeps asking that broker (reconnect.backoff.ms=0 keeps it connectable, so the every-broker-backing-off rule
    of KIP-899 does not apply)."""
    asked_bootstrap: list[float] = []
    silent_port: list[int] = []

    def idle_ends(script: Callable[[Peer], None]) -> Callable[[Peer], None]:
        def run(peer: Peer) -> None:
            try:
                script(peer)
            except TimeoutError:  # a connection the client keeps open but no longer uses
                pass
        return run

    def answer(header: RequestHeader, body: dict[str, Any]) -> Mapping[str, Any] | None:
        asked_bootstrap.append(time.monotonic())
        return metadata_answer(silent_port[0])(header, body)

    with FakeBroker(idle_ends(serve({METADATA.key: lambda _h, _b: None})), connections=8) as silent, \
            FakeBroker(idle_ends(serve({METADATA.key: answer})), connections=2) as boot:
        silent_port.append(silent.port)
        client = make_client((boot.host, boot.port), request_timeout_ms=1_000, reconnect_backoff_ms=0,
                             metadata_recovery_rebootstrap_trigger_ms=trigger_ms)
        clients.append(client)
        client.metadata.add_topic("t", monotonic_ms())
        deadline = time.monotonic() + 5
        while not asked_bootstrap:
            assert time.monotonic() < deadline, "the bootstrap server was never asked"
            client.poll(20, monotonic_ms())
        client.metadata.request_update()  # now known: broker 1, the silent one
        window = time.monotonic() + 4  # the trigger case rebootstraps after the first request timeout (~1 s)
        while len(asked_bootstrap) < 2 and time.monotonic() < window:
            client.poll(20, monotonic_ms())
        assert (len(asked_bootstrap) >= 2) is rebootstraps
        client.close()  # the fakes' scripts end with the connections
