"""BrokerConnection against scripted peers: state machine, negotiation, framing, failures. No real broker."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProtocolError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
    UnsupportedVersionError,
)
from spark_kafka_sink.net.connection import BrokerConnection, ConnectionState, monotonic_ms
from spark_kafka_sink.net.handshake import HandshakeContext, HandshakeStatus
from spark_kafka_sink.net.inflight import Completion
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import API_VERSIONS, METADATA, PRODUCE, SASL_HANDSHAKE
from tests.net.fake_broker import FakeBroker, Peer, unused_port
from tests.net_settings import net_config

S = ConnectionState
METADATA_ANSWER: dict[str, Any] = {"brokers": [], "topics": [], "cluster_id": "c", "controller_id": 1}


def make_conn(port: int, host: str = "127.0.0.1", **overrides: Any) -> BrokerConnection:
    config = net_config((host, port), **overrides)
    return BrokerConnection(1, host, port, config)


@pytest.fixture
def conns() -> Iterator[list[BrokerConnection]]:
    made: list[BrokerConnection] = []
    yield made
    for conn in made:
        conn.close()


def drive(conn: BrokerConnection, until: Callable[[list[Completion]], bool], timeout_s: float = 5.0
          ) -> list[Completion]:
    """Poll until ``until(completions so far)`` holds; fail (never hang) after ``timeout_s``."""
    done: list[Completion] = []
    deadline = time.monotonic() + timeout_s
    while not until(done):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s; state {conn.state.name}, "
                                 f"last error {conn.last_error}")
        done += conn.poll(20, monotonic_ms())
    return done


def connect_ready(conn: BrokerConnection) -> None:
    conn.connect(monotonic_ms())
    drive(conn, lambda _: conn.state in (S.READY, S.DISCONNECTED))
    assert conn.state is S.READY, conn.last_error


def ready_on(broker: FakeBroker, conns: list[BrokerConnection]) -> BrokerConnection:
    """A connection to ``broker``, READY (closed at the test's end)."""
    conn = make_conn(broker.port)
    conns.append(conn)
    connect_ready(conn)
    return conn


def reads_one_request(then: Callable[[], object] = lambda: None) -> Callable[[Peer], None]:
    """A broker script: ApiVersions, then read one request without answering it, call ``then``, wait for the
    close."""
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.read_request()
        then()
        peer.wait_closed()

    return script


def metadata_request(conn: BrokerConnection, **kwargs: Any) -> Any:
    return conn.send(METADATA, 12, {"topics": [], "allow_auto_topic_creation": False}, monotonic_ms(), **kwargs)


# ---------------------------------------------------------------------------------------- state machine


def test_illegal_transition_names_both_states(conns: list[BrokerConnection]) -> None:
    conn = make_conn(unused_port())
    conns.append(conn)
    conn.close()
    with pytest.raises(IllegalStateError, match="from CLOSED to CONNECTING"):
        conn.connect(0)


def test_send_before_ready_is_refused(conns: list[BrokerConnection]) -> None:
    conn = make_conn(unused_port())
    conns.append(conn)
    with pytest.raises(IllegalStateError, match="DISCONNECTED, not READY"):
        metadata_request(conn)


def test_negotiates_and_keeps_ranges_and_features(conns: list[BrokerConnection]) -> None:
    seen: list[int] = []

    def script(peer: Peer) -> None:
        seen.append(peer.serve_api_versions({0: (3, 9)}, finalized={"transaction.version": 2}).api_version)

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        states = [conn.state]
        conn.connect(monotonic_ms())
        states.append(conn.state)
        drive(conn, lambda _: conn.state is S.READY)
    assert seen == [API_VERSIONS.max_version]
    assert states[0] is S.DISCONNECTED
    assert states[1] in (S.CONNECTING, S.NEGOTIATING)  # plaintext: HANDSHAKE passes at once
    assert conn.broker_versions is not None
    assert conn.broker_versions.api_versions[0] == (3, 9)
    assert conn.broker_versions.finalized_features["transaction.version"] == (1, 2)
    assert conn.choose_version(PRODUCE) == 9
    assert conn.choose_version(PRODUCE, max_version=7) == 7
    with pytest.raises(UnsupportedVersionError, match="Produce"):
        conn.choose_version(PRODUCE, min_version=10)


def test_api_versions_falls_back_to_the_brokers_range(conns: list[BrokerConnection]) -> None:
    versions: list[int] = []

    def script(peer: Peer) -> None:
        header, _ = peer.read_request()
        versions.append(header.api_version)
        peer.unsupported_api_versions(header, 0, 2)
        versions.append(peer.serve_api_versions().api_version)

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
    assert versions == [4, 2]


def test_api_versions_fallback_happens_once(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        for _ in range(2):
            header, _ = peer.read_request()
            peer.unsupported_api_versions(header, 0, 2)
        peer.wait_closed()

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state is S.DISCONNECTED)
    assert isinstance(conn.last_error, UnsupportedVersionError)


# ---------------------------------------------------------------------------------------- framing


class OneByteSocket(socket.socket):
    """A socket whose every recv returns at most one byte: frames arrive in the worst-case splits."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        return super().recv(1, flags)


class OneByteReads:
    """A handshake that swaps the socket (through the seam, as TLS does) for a :class:`OneByteSocket`."""

    name = "ONE-BYTE-READS"

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        def wrap(sock: socket.socket) -> socket.socket:
            new = OneByteSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
            new.setblocking(False)
            return new

        ctx.wrap_socket(wrap)
        return HandshakeStatus.DONE

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        return HandshakeStatus.DONE


def test_response_split_into_single_bytes_and_coalesced(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        h1, _ = peer.read_request()
        h2, _ = peer.read_request()
        h3, _ = peer.read_request()
        for byte in peer.response_bytes(h1, METADATA_ANSWER):
            peer.send(bytes([byte]))  # worst case: one byte per segment
        peer.send(peer.response_bytes(h2, METADATA_ANSWER) + peer.response_bytes(h3, METADATA_ANSWER))
        peer.wait_closed()

    with FakeBroker(script) as broker:
        config = net_config(("127.0.0.1", broker.port))
        conn = BrokerConnection(1, "127.0.0.1", broker.port, config, handshakes=lambda: [OneByteReads()])
        conns.append(conn)
        connect_ready(conn)
        sent = [metadata_request(conn) for _ in range(3)]
        assert conn.in_flight_count == 3
        done = drive(conn, lambda d: len(d) == 3)
        conn.close()
    assert [c.request for c in done] == sent
    assert all(c.error is None and c.body is not None and c.body["cluster_id"] == "c" for c in done)
    assert conn.in_flight_count == 0


def test_unexpected_correlation_id_is_a_protocol_error_and_closes(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        h1, _ = peer.read_request()
        peer.read_request()
        peer.respond(h1, METADATA_ANSWER, correlation_id=h1.correlation_id + 1)  # the second's id first
        peer.wait_closed()

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
        first, second = metadata_request(conn), metadata_request(conn)
        done = drive(conn, lambda d: len(d) == 2)
    errors = {c.request.correlation_id: c.error for c in done}
    assert isinstance(errors[first.correlation_id], ProtocolError)
    assert "correlation id" in str(errors[first.correlation_id])
    assert isinstance(errors[second.correlation_id], KafkaConnectionError)
    assert conn.state is S.DISCONNECTED


@pytest.mark.parametrize("garbage", [
    pytest.param(lambda cid: b"\x00\x00\x00\x06" + cid.to_bytes(4, "big") + b"\x00\x01", id="truncated-body"),
    pytest.param(lambda cid: b"HTTP/1.1 400 Bad Request\r\n\r\n", id="http"),
    pytest.param(lambda cid: b"\x00\x00\x00\x02\x00\x00", id="frame-shorter-than-header"),
])
def test_malformed_bytes_are_a_protocol_error(conns: list[BrokerConnection],
                                              garbage: Callable[[int], bytes]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        header, _ = peer.read_request()
        peer.send(garbage(header.correlation_id))
        peer.wait_closed()

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
        metadata_request(conn)
        done = drive(conn, lambda d: len(d) == 1)
    assert isinstance(done[0].error, ProtocolError), done[0].error
    assert broker.address in str(done[0].error)
    assert conn.state is S.DISCONNECTED


def test_response_without_request_in_flight(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        header = peer.serve_api_versions()
        peer.respond(header, {"error_code": NO_ERROR, "api_keys": []})  # a second, unasked-for answer
        peer.wait_closed()

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state is S.DISCONNECTED)
    assert isinstance(conn.last_error, ProtocolError)
    assert "no request is in flight" in str(conn.last_error)


def test_fire_and_forget_completes_when_written(conns: list[BrokerConnection]) -> None:
    received: list[int] = []

    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        received.append(peer.read_request()[0].api_key)
        peer.wait_closed()

    body = {"acks": 0, "timeout_ms": 1000, "topic_data": []}
    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
        request = conn.send(PRODUCE, 9, body, monotonic_ms(), expect_response=False)
        done = drive(conn, lambda d: len(d) == 1)
        conn.close()
    assert done[0].request is request and done[0].body is None and done[0].error is None
    assert received == [PRODUCE.key]


def test_a_request_is_written_when_it_is_sent_without_waiting_for_a_poll(conns: list[BrokerConnection]) -> None:
    # The socket almost always takes a request at once: writing it then saves a selector round per request.
    arrived = threading.Event()
    with FakeBroker(reads_one_request(then=arrived.set)) as broker:
        conn = ready_on(broker, conns)
        metadata_request(conn)
        assert arrived.wait(5), "the request stayed unsent until the connection was polled"
        conn.close()


def test_an_acks_0_request_written_when_sent_completes_at_the_next_poll_without_waiting(
        conns: list[BrokerConnection]) -> None:
    with FakeBroker(reads_one_request()) as broker:
        conn = ready_on(broker, conns)
        request = conn.send(PRODUCE, 9, {"acks": 0, "timeout_ms": 1000, "topic_data": []}, monotonic_ms(),
                            expect_response=False)
        start = time.monotonic()
        done = conn.poll(30_000, monotonic_ms())  # nothing else will happen: a blocking poll would wait 30 s
        waited = time.monotonic() - start
        conn.close()
    assert [c.request for c in done] == [request] and waited < 5


def test_a_write_error_when_a_request_is_sent_fails_the_connection_at_the_next_poll(
        conns: list[BrokerConnection], monkeypatch: pytest.MonkeyPatch) -> None:
    with FakeBroker(reads_one_request()) as broker:
        conn = ready_on(broker, conns)

        def broken(sock: socket.socket) -> list[Any]:
            raise ConnectionResetError(104, "Connection reset by peer")

        monkeypatch.setattr(conn._requests, "write_to", broken)
        request = metadata_request(conn)  # the send itself does not fail the connection ...
        assert conn.state.name == "READY"
        done = drive(conn, lambda d: len(d) == 1)  # ... the poll that meets the error again does
    assert done[0].request is request and isinstance(done[0].error, KafkaConnectionError)
    assert broker.address in str(done[0].error) and conn.state is S.DISCONNECTED


class _CountingSocket:
    """A connected socket that counts its reads, and those that found nothing to read."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self.reads = self.empty_reads = 0

    def recv(self, size: int) -> bytes:
        self.reads += 1
        try:
            return self._sock.recv(size)
        except BlockingIOError:
            self.empty_reads += 1
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)


def test_an_answer_is_read_without_a_read_that_finds_nothing(conns: list[BrokerConnection]) -> None:
    # A short read means the kernel gave all it had: reading again would only fail with EAGAIN (a system call,
    # and a GIL hand-over to the caller's thread, per answer).
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        for _ in range(3):
            header, _ = peer.read_request()
            peer.respond(header, METADATA_ANSWER)
        peer.wait_closed()

    with FakeBroker(script) as broker:
        conn = ready_on(broker, conns)
        counting = _CountingSocket(conn._sock)  # type: ignore[arg-type]
        conn._sock = counting  # type: ignore[assignment]
        for _ in range(3):
            metadata_request(conn)
            drive(conn, lambda d: len(d) == 1)
        conn.close()
    assert counting.reads >= 3 and counting.empty_reads == 0


# ---------------------------------------------------------------------------------------- failures


def test_request_timeout_fails_retriable_and_closes(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.wait_closed()  # reads the requests, never answers

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port, request_timeout_ms=300)
        conns.append(conn)
        connect_ready(conn)
        start = monotonic_ms()
        first = metadata_request(conn)
        second = metadata_request(conn, timeout_ms=60_000)
        done = drive(conn, lambda d: len(d) == 2)
        elapsed = monotonic_ms() - start
    by_request = {id(c.request): c.error for c in done}
    timeout_error = by_request[id(first)]
    assert isinstance(timeout_error, KafkaTimeoutError) and timeout_error.retriable
    assert "Metadata" in str(timeout_error) and broker.address in str(timeout_error)
    other = by_request[id(second)]
    assert isinstance(other, KafkaConnectionError) and other.retriable
    assert conn.state is S.DISCONNECTED
    assert 300 <= elapsed < 3000


def test_broker_closing_fails_in_flight_requests(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.read_request()
        peer.sock.close()

    with FakeBroker(script) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
        metadata_request(conn)
        done = drive(conn, lambda d: len(d) == 1)
    assert isinstance(done[0].error, KafkaConnectionError)
    assert broker.address in str(done[0].error)


def test_connection_refused_names_the_address(conns: list[BrokerConnection]) -> None:
    port = unused_port()
    conn = make_conn(port)
    conns.append(conn)
    conn.connect(monotonic_ms())
    drive(conn, lambda _: conn.state is S.DISCONNECTED)
    assert isinstance(conn.last_error, KafkaConnectionError)
    assert f"127.0.0.1:{port}" in str(conn.last_error)
    assert "refused" in str(conn.last_error).lower()


def test_unknown_host_names_the_address(conns: list[BrokerConnection]) -> None:
    conn = make_conn(9092, host="no-such-host.invalid")
    conns.append(conn)
    conn.connect(monotonic_ms())
    assert conn.state is S.DISCONNECTED
    assert "no-such-host.invalid:9092" in str(conn.last_error)


def test_silent_listener_hits_the_setup_timeout(conns: list[BrokerConnection]) -> None:
    # The kernel completes the TCP handshake from the backlog; nobody ever accepts or answers ApiVersions.
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        conn = make_conn(port, socket_connection_setup_timeout_ms=300)
        conns.append(conn)
        start = monotonic_ms()
        conn.connect(start)
        drive(conn, lambda _: conn.state is S.DISCONNECTED)
        elapsed = monotonic_ms() - start
    assert isinstance(conn.last_error, KafkaConnectionError)
    assert f"127.0.0.1:{port}" in str(conn.last_error)
    assert "socket.connection.setup.timeout.ms" in str(conn.last_error)
    assert 300 <= elapsed < 3000


def test_reconnects_after_a_failure(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.wait_closed()

    with FakeBroker(script, connections=2) as broker:
        conn = make_conn(broker.port)
        conns.append(conn)
        connect_ready(conn)
        conn.disconnect(monotonic_ms())
        states = [conn.state]
        connect_ready(conn)
        conn.close()
        states.append(conn.state)
    assert states == [S.DISCONNECTED, S.CLOSED]


# ---------------------------------------------------------------------------------------- handshake seam


class FakeSasl:
    """A handshake that exchanges one SaslHandshake request through the context."""

    name = "FAKE-SASL"

    def __init__(self) -> None:
        self.answer: dict[str, Any] | None = None

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        ctx.send_request(SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        return HandshakeStatus.WANT_READ

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        self.answer = ctx.take_response()
        if self.answer is None:
            return HandshakeStatus.WANT_READ
        if self.answer["error_code"] != NO_ERROR:
            raise SaslAuthenticationFailedError("wrong mechanism", context=f"SASL with {ctx.address}")
        return HandshakeStatus.DONE


class WrapIdentity:
    """A handshake that swaps the socket (as TLS does) for a duplicate of itself, then finishes."""

    name = "WRAP"

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        def wrap(sock: socket.socket) -> socket.socket:
            new = sock.dup()
            sock.close()
            return new

        ctx.wrap_socket(wrap)
        return HandshakeStatus.WANT_WRITE  # ask for a writable event: step() must be called again

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        return HandshakeStatus.DONE


@pytest.mark.parametrize("error_code", [NO_ERROR, UnsupportedSaslMechanismError.code])
def test_handshake_requests_run_before_api_versions(conns: list[BrokerConnection], error_code: int) -> None:
    order: list[int] = []

    def script(peer: Peer) -> None:
        header, _ = peer.read_request()
        order.append(header.api_key)
        peer.respond(header, {"error_code": error_code, "mechanisms": ["PLAIN"]})
        if error_code != NO_ERROR:
            peer.wait_closed()
            return
        order.append(peer.serve_api_versions().api_key)

    sasl = FakeSasl()
    with FakeBroker(script) as broker:
        config = net_config(("127.0.0.1", broker.port))
        conn = BrokerConnection(1, "127.0.0.1", broker.port, config, handshakes=lambda: [WrapIdentity(), sasl])
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state in (S.READY, S.DISCONNECTED))
    assert sasl.answer is not None and sasl.answer["mechanisms"] == ["PLAIN"]
    if error_code != NO_ERROR:
        assert conn.state is S.DISCONNECTED and isinstance(conn.last_error, SaslAuthenticationFailedError)
        assert order == [SASL_HANDSHAKE.key]
    else:
        assert conn.state is S.READY
        assert order == [SASL_HANDSHAKE.key, API_VERSIONS.key]


def test_handshake_oserror_becomes_connection_error(conns: list[BrokerConnection]) -> None:
    class Broken:
        name = "BROKEN"

        def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
            raise OSError("certificate verify failed")

        def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
            raise AssertionError("not reached")

    def script(peer: Peer) -> None:
        peer.wait_closed()

    with FakeBroker(script) as broker:
        config = net_config(("127.0.0.1", broker.port))
        conn = BrokerConnection(1, "127.0.0.1", broker.port, config, handshakes=lambda: [Broken()])
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state is S.DISCONNECTED)
    error: KafkaError | None = conn.last_error
    assert isinstance(error, KafkaConnectionError)
    assert "BROKEN handshake" in str(error) and broker.address in str(error)


class WaitsOffThread:
    """A handshake whose work runs elsewhere: WAIT until ``ready`` is set (by a timer thread), as SASL does while
    a KDC or token endpoint answers."""

    name = "WAITING"
    waiting_for = "the test's timer"

    def __init__(self, ready: threading.Event) -> None:
        self.ready = ready
        self.steps = 0

    def start(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        return self.step(ctx, now_ms)

    def step(self, ctx: HandshakeContext, now_ms: int) -> HandshakeStatus:
        self.steps += 1
        return HandshakeStatus.DONE if self.ready.is_set() else HandshakeStatus.WAIT


def test_a_waiting_handshake_is_stepped_again_without_socket_events(conns: list[BrokerConnection]) -> None:
    """WAIT: no socket interest (nothing to read or write), the connection's next deadline a few ms ahead, and the
    handshake stepped again at it until its work is done; then ApiVersions as usual."""
    ready = threading.Event()
    handshake = WaitsOffThread(ready)

    def script(peer: Peer) -> None:
        peer.serve_api_versions()
        peer.wait_closed()

    with FakeBroker(script) as broker:
        config = net_config(("127.0.0.1", broker.port))
        conn = BrokerConnection(1, "127.0.0.1", broker.port, config, handshakes=lambda: [handshake])
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state is S.HANDSHAKE and handshake.steps >= 3)
        now = monotonic_ms()
        deadline = conn.next_deadline_ms()
        assert deadline is not None and deadline - now <= 10, deadline  # stepped again soon, not at setup end
        assert conn._events == 0  # no socket interest: a readable socket cannot spin the selector
        threading.Timer(0.05, ready.set).start()
        drive(conn, lambda _: conn.state in (S.READY, S.DISCONNECTED))
        assert conn.state is S.READY, conn.last_error
        conn.close()  # the broker's script waits for it


def test_the_setup_timeout_names_what_a_waiting_handshake_waits_for(conns: list[BrokerConnection]) -> None:
    def script(peer: Peer) -> None:
        peer.wait_closed()

    with FakeBroker(script) as broker:
        config = net_config(("127.0.0.1", broker.port), socket_connection_setup_timeout_ms=200,
                            socket_connection_setup_timeout_max_ms=200)
        conn = BrokerConnection(1, "127.0.0.1", broker.port, config,
                                handshakes=lambda: [WaitsOffThread(threading.Event())])
        conns.append(conn)
        conn.connect(monotonic_ms())
        drive(conn, lambda _: conn.state is S.DISCONNECTED)
    assert isinstance(conn.last_error, KafkaConnectionError) and conn.last_error.retriable
    assert "stuck in WAITING, waiting for the test's timer)" in str(conn.last_error), str(conn.last_error)
