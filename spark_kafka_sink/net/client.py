"""NetworkClient: connections to every broker a producer talks to, driven by one selector (like Java's).

Non-blocking core, for the producer's sender thread::

    client = NetworkClient(config)                         # bootstrap nodes get ids -1, -2, ... in config order
    if client.ready(node_id, now_ms):                      # connects if needed; True when READY and below
        req = client.send(node_id, PRODUCE, body_for_version, now_ms,    # max.in.flight.requests.per.connection
                          expect_response=acks != 0, context=batches)
    for resp in client.poll(timeout_ms, now_ms):           # ClientResponse: .request .body .error .latency_ms
        ...
    client.wakeup()                                        # any thread: interrupts a blocked poll()

Bodies and versions: ``send`` picks the highest version both sides speak (optionally bounded with
``min_version`` / ``max_version``), then takes the body as either a dict or a callable ``body(version) -> dict``
(recommended when the shape differs by version); ``ClientRequest.version`` says which version was sent. The
request and response types (``Body``, the :class:`ClientRequest` that ``send`` returns, the
:class:`ClientResponse` that ``poll`` delivers) are declared here with the client.

Metadata: ``client.metadata`` (:class:`~spark_kafka_sink.net.metadata.Metadata`) is refreshed from ``poll``
whenever it is due (requested, or older than metadata.max.age.ms), on the least loaded node; those responses are
consumed internally. A failed connection also requests a refresh (the leader may have moved).

Connection timing, as Java's ClusterConnectionStates and Selector:

* reconnect backoff: reconnect.backoff.ms doubling per consecutive failure up to reconnect.backoff.max.ms (+-20%);
* setup timeout: socket.connection.setup.timeout.ms doubling per consecutive attempt that failed before READY (a
  timeout, refused, reset), up to socket.connection.setup.timeout.max.ms (+-20%, never above the max); READY, or a
  failure after READY, starts again from the base (``connection_setup_timeout_ms(node_id)`` says the next one).
  Unlike Java, whose growth covers only the TCP connect, ours covers the whole setup (TCP, TLS, SASL, ApiVersions),
  which is what socket.connection.setup.timeout.ms bounds here;
* idle connections: ``poll`` closes a READY connection with nothing in flight and no traffic for
  connections.max.idle.ms (-1: never), as Java's Selector does. That is a clean close: no backoff, no error, no
  metadata refresh; the next request to the node connects again;
* quotas (KIP-219): an answer with ``throttle_time_ms`` > 0, at a version from which the client throttles itself
  (``ApiSpec.client_throttle_from``: Produce v6+, Metadata v6+ ...), makes ``ready`` False for that node until
  the time has passed and ``connection_delay`` say how long, as Java: the broker mutes the connection meanwhile,
  so a request sent anyway would only wait in its socket while request.timeout.ms runs.

Fatal connection errors: an attempt that fails with an error whose ``fatal`` flag is set (SASL authentication,
untrusted certificate, host name mismatch, security.protocol mismatch) is recorded with
``metadata.set_fatal_error`` -- where the producer's sender and its waiting user threads see it -- and ``poll``
stops refreshing metadata on its own: reconnecting about once a second would only repeat the failure (and, for a
wrong password, fill the broker's log). ``connection_error(node_id)`` still says why each node failed.

Blocking conveniences for control-plane calls and tools (same thread as poll, never concurrently with it):
``request(node_id or None, api, body, timeout_ms)`` returns the response body or raises, and
``fetch_metadata(topics, timeout_ms)``. Responses to other requests that arrive meanwhile are kept and returned
by the next ``poll``.

Threads: everything is owned by the one thread that calls ready/send/poll (the sender), except ``wakeup()``,
which any thread may call (it touches only the wakeup socket and its pending flag, guarded by ``_wakeup_lock``).
A wakeup writes to the socket only when none is pending: the flag is set with the write and cleared by ``poll``
once it read the socket empty, so a burst of wakeups between two polls costs one write. ``now_ms`` arguments
must come from the same clock as the client's ``clock`` (default: :func:`monotonic_ms`).
"""

from __future__ import annotations

import logging
import math
import random
import selectors
import socket
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from spark_kafka_sink.errors import IllegalStateError, KafkaConnectionError, KafkaError, raise_for_code
from spark_kafka_sink.net.config import NetConfig, format_address
from spark_kafka_sink.net.connection import SETTING_UP, BrokerConnection, ConnectionState, monotonic_ms
from spark_kafka_sink.net.handshake import HandshakeFactory
from spark_kafka_sink.net.host_names import canonical_bootstrap_servers
from spark_kafka_sink.net.inflight import Completion
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import METADATA, ApiSpec
from spark_kafka_sink.protocol.versions import BrokerVersions

__all__ = ["NetworkClient", "ClientRequest", "ClientResponse", "Body", "NO_CONNECTION_DELAY_LIMIT_MS"]

log = logging.getLogger(__name__)

NO_CONNECTION_DELAY_LIMIT_MS = 1 << 31  # connection_delay of a connecting or connected node: wait for events
_WAKEUP = object()  # selector key data of the wakeup socket
_METADATA_REFRESH = object()  # context of the client's own metadata requests
_PARALLEL_ATTEMPTS = 3  # blocking calls: addresses set up at once, so one that never answers costs no time


#: A request body, or a function of the chosen version returning it.
Body = Mapping[str, Any] | Callable[[int], Mapping[str, Any]]


@dataclass(eq=False)
class ClientRequest:
    """A request handed to :meth:`NetworkClient.send`; ``context`` is the caller's (e.g. the batches it carries)."""

    node_id: int
    api: ApiSpec
    version: int
    body: Mapping[str, Any]
    expect_response: bool
    created_ms: int
    context: Any = None
    correlation_id: int = -1


@dataclass(frozen=True)
class ClientResponse:
    """The outcome of a request: ``body`` (None for expect_response=False) or ``error``.

    ``error`` is a retriable ``KafkaConnectionError`` (disconnected) or ``KafkaTimeoutError`` (request.timeout.ms
    passed), or a ``ProtocolError`` (the broker's bytes made no sense; the connection was closed). Broker error
    codes inside ``body`` are the caller's to interpret.
    """

    request: ClientRequest
    node_id: int
    body: dict[str, Any] | None
    error: KafkaError | None
    latency_ms: int
    received_ms: int

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class _Node:
    """Per-node connection bookkeeping (owned by the network thread)."""

    conn: BrokerConnection
    failures: int = 0  # consecutive failed attempts; drives the reconnect backoff
    setup_failures: int = 0  # consecutive attempts that failed before READY; drives the setup timeout
    setup_timeout_ms: int = 0  # the next attempt's setup timeout (0: not drawn yet)
    next_attempt_ms: int = 0  # no new attempt before this
    active: bool = False  # an attempt or connection is live (to notice when it ends)
    last_error: KafkaError | None = field(default=None)
    throttled_until_ms: int = 0  # KIP-219: nothing is sent to the node before this (module docstring)


class NetworkClient:
    """See the module docstring."""

    def __init__(self, config: NetConfig, *, metadata: Metadata | None = None,
                 handshakes: HandshakeFactory | None = None, clock: Callable[[], int] = monotonic_ms) -> None:
        self.config = config
        self.metadata = metadata if metadata is not None else Metadata(config)
        # The bootstrap servers as given, or by their addresses' canonical names (client.dns.lookup), once.
        self._bootstrap = (canonical_bootstrap_servers(config.bootstrap_servers)
                           if config.client_dns_lookup == "resolve_canonical_bootstrap_servers_only"
                           else config.bootstrap_servers)
        self._handshakes = handshakes
        self._clock = clock
        # Owned by the network thread:
        self._selector = selectors.DefaultSelector()
        self._nodes: dict[int, _Node] = {}
        self._stash: list[ClientResponse] = []  # responses a blocking call read for others, returned by poll()
        self._metadata_in_flight = False
        # Rebootstrap (metadata.recovery.strategy): since when a metadata refresh has been due without an answer,
        # and whether bootstrap.servers stand in for the brokers last known until one answers.
        self._metadata_wanted_since: int | None = None
        self._rebootstrapped = False
        self._closed = False
        self._random = random.Random()
        # Shared with other threads: the wakeup pair and the closed flag below, guarded by _wakeup_lock.
        self._wakeup_lock = threading.Lock()
        self._wakeup_r, self._wakeup_w = socket.socketpair()
        self._wakeup_closed = False
        # True from a write to the wakeup socket until poll read it and cleared this (both under _wakeup_lock);
        # wakeup() reads it without the lock first. A wakeup that finds it True writes nothing: the poll that
        # clears it returns afterwards, and its caller then sees what that wakeup's caller changed before.
        self._wakeup_pending = False
        self.wakeup_writes = 0  # writes to the wakeup socket so far (under _wakeup_lock): for tests and tuning
        self._wakeup_r.setblocking(False)
        self._wakeup_w.setblocking(False)
        self._selector.register(self._wakeup_r, selectors.EVENT_READ, _WAKEUP)

    # ------------------------------------------------------------------------------------------ nodes

    @property
    def bootstrap_node_ids(self) -> list[int]:
        return [-(i + 1) for i in range(len(self._bootstrap))]

    def _address_of(self, node_id: int) -> tuple[str, int] | None:
        if node_id < 0:
            index = -node_id - 1
            return self._bootstrap[index] if index < len(self._bootstrap) else None
        broker = self.metadata.broker(node_id)
        return None if broker is None else (broker.host, broker.port)

    def address(self, node_id: int) -> str:
        """``host:port`` of a node, or ``node <id>`` if unknown (for messages)."""
        where = self._address_of(node_id)
        return format_address(*where) if where else f"node {node_id}"

    def _node(self, node_id: int) -> _Node | None:
        if self._closed:
            raise IllegalStateError("the network client is closed")
        node = self._nodes.get(node_id)
        where = self._address_of(node_id)
        if node is not None and where is not None and (node.conn.host, node.conn.port) != where \
                and node.conn.state is ConnectionState.DISCONNECTED:
            node.conn.close()  # the broker moved: connect to its new address
            node = None
        if node is None:
            if where is None:
                return None
            factory = self._handshakes
            host, port = where
            hooks = (lambda: factory(host, port, self.config)) if factory is not None else None
            node = _Node(BrokerConnection(node_id, host, port, self.config, selector=self._selector,
                                          handshakes=hooks, clock=self._clock))
            self._nodes[node_id] = node
        return node

    def ready(self, node_id: int, now_ms: int) -> bool:
        """True if a request can be sent to ``node_id`` now; otherwise starts connecting when allowed."""
        node = self._node(node_id)
        if node is None:
            return False
        conn = node.conn
        if conn.state is ConnectionState.READY:
            return (conn.in_flight_count < self.config.max_in_flight_requests_per_connection
                    and now_ms >= node.throttled_until_ms)
        if conn.state is ConnectionState.DISCONNECTED and now_ms >= node.next_attempt_ms:
            node.active = True
            conn.connect(now_ms, self.connection_setup_timeout_ms(node_id))
            self._track(node, now_ms)
        return False

    def connection_setup_timeout_ms(self, node_id: int) -> int:
        """The setup timeout of the next (or current) attempt to ``node_id``, as Java's connectionSetupTimeoutMs:
        socket.connection.setup.timeout.ms * 2^(attempts that failed before READY), +-20%, capped at
        socket.connection.setup.timeout.max.ms."""
        node = self._node(node_id)
        if node is None:
            return self._draw_setup_timeout(0)  # an unknown node: nothing to connect to yet
        if not node.setup_timeout_ms:
            node.setup_timeout_ms = self._draw_setup_timeout(node.setup_failures)
        return node.setup_timeout_ms

    def _draw_setup_timeout(self, failures: int) -> int:
        cap = self.config.socket_connection_setup_timeout_max_ms
        base = min(self.config.socket_connection_setup_timeout_ms, cap)
        if cap <= base:
            return base  # as Java's ExponentialBackoff: a max at or below the base is a constant timeout
        exponent = min(failures, math.log2(cap / max(base, 1)))
        return max(1, min(cap, int(base * 2 ** exponent * self._random.uniform(0.8, 1.2))))

    def is_ready(self, node_id: int) -> bool:
        """Connected and negotiated (regardless of in-flight requests); never starts a connection."""
        node = self._nodes.get(node_id)
        return node is not None and node.conn.state is ConnectionState.READY

    def connection_error(self, node_id: int) -> KafkaError | None:
        """Why the last attempt to reach ``node_id`` failed, else None. A ``fatal`` error (SASL authentication,
        untrusted certificate) will not heal by reconnecting: the caller should stop and report it."""
        node = self._nodes.get(node_id)
        return None if node is None else node.last_error

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        """How long a caller waiting for ``node_id`` to become ready may block in poll(), as Java's
        connectionDelay: a disconnected node's remaining reconnect backoff (0 for an unknown node: ready() may
        connect now); for a connecting or connected node, no limit: only network events (connected, a response
        freeing an in-flight slot) or wakeup() can change its readiness, and poll() returns on those. (Returning
        0 there made the sender spin while max.in.flight requests were out.)"""
        node = self._nodes.get(node_id)
        if node is None:
            return 0
        if node.conn.state is ConnectionState.READY and now_ms < node.throttled_until_ms:
            return node.throttled_until_ms - now_ms  # the broker's throttle ends then (as Java's pollDelayMs)
        if node.conn.state is not ConnectionState.DISCONNECTED:
            return NO_CONNECTION_DELAY_LIMIT_MS
        return max(0, node.next_attempt_ms - now_ms)

    def in_flight_count(self, node_id: int | None = None) -> int:
        """Requests awaiting completion on ``node_id`` (all nodes when None)."""
        nodes = self._nodes.values() if node_id is None else [n for i, n in self._nodes.items() if i == node_id]
        return sum(n.conn.in_flight_count for n in nodes)

    def broker_versions(self, node_id: int) -> BrokerVersions | None:
        """What ``node_id`` negotiated (API ranges, features); None unless it is READY."""
        node = self._nodes.get(node_id)
        return None if node is None else node.conn.broker_versions

    def api_version(self, node_id: int, api: ApiSpec, max_version: int | None = None) -> int | None:
        """The version send() would use for ``api`` on ``node_id``; None until the node is READY.

        Raises UnsupportedVersionError if the node is READY but shares no version of ``api`` with us.
        """
        node = self._nodes.get(node_id)
        if node is None or node.conn.broker_versions is None:
            return None
        return node.conn.choose_version(api, max_version=max_version)

    def finalized_features(self, node_id: int) -> dict[str, int]:
        """Finalized feature levels (e.g. ``{"transaction.version": 2}``) from ``node_id``; {} until READY."""
        versions = self.broker_versions(node_id)
        if versions is None or versions.finalized_features_epoch < 0:
            return {}
        return {name: levels[1] for name, levels in versions.finalized_features.items()}

    def _candidates(self) -> list[int]:
        """The nodes a cluster-wide request may go to: the brokers of the last metadata, else (none yet, or
        rebootstrapping) the bootstrap servers."""
        known = [] if self._rebootstrapped else list(self.metadata.brokers())
        return known or self.bootstrap_node_ids

    def _should_rebootstrap(self, node_id: int | None, now_ms: int) -> bool:
        """metadata.recovery.strategy=rebootstrap: no known broker may be tried now (KIP-899), or none answered a
        metadata request for metadata.recovery.rebootstrap.trigger.ms (KIP-1102)."""
        if self.config.metadata_recovery_strategy != "rebootstrap" or self._rebootstrapped:
            return False
        if not list(self.metadata.brokers()):
            return False  # still on the bootstrap servers
        since = self._metadata_wanted_since
        waited = since is not None and now_ms - since >= self.config.metadata_recovery_rebootstrap_trigger_ms
        return node_id is None or waited

    def _rebootstrap(self, now_ms: int) -> None:
        log.info("rebootstrap: no broker of the last metadata answered (%s); connecting to bootstrap.servers "
                 "again", ", ".join(self.address(n) for n in self.metadata.brokers()))
        self._rebootstrapped = True
        self._metadata_wanted_since = now_ms
        for node_id in self.bootstrap_node_ids:  # connect anew (the names are resolved again)
            node = self._nodes.get(node_id)
            if node is not None and node.conn.state is ConnectionState.DISCONNECTED:
                node.next_attempt_ms = now_ms

    def least_loaded_node(self, now_ms: int) -> int | None:
        """A node to send a cluster-wide request to: a READY one with the fewest in-flight requests, else one
        that is connecting, else one we may connect to now; None if every node is backing off."""
        candidates = self._candidates()
        start = self._random.randrange(len(candidates))
        best: int | None = None
        best_load = -1
        connecting: int | None = None
        connectable: int | None = None
        for node_id in candidates[start:] + candidates[:start]:  # random start spreads the load
            node = self._nodes.get(node_id)
            state = node.conn.state if node else ConnectionState.DISCONNECTED
            if node is not None and state is ConnectionState.READY:
                load = node.conn.in_flight_count
                if load == 0:
                    return node_id
                if best is None or load < best_load:
                    best, best_load = node_id, load
            elif state in SETTING_UP:
                connecting = node_id if connecting is None else connecting
            elif connectable is None and (node is None or now_ms >= node.next_attempt_ms):
                connectable = node_id
        if best is not None and best_load < self.config.max_in_flight_requests_per_connection:
            return best
        return connecting if connecting is not None else connectable if connectable is not None else best

    def disconnect(self, node_id: int) -> None:
        """Drop the connection to ``node_id``; its requests fail (retriable) at the next poll."""
        node = self._nodes.get(node_id)
        if node is not None:
            node.conn.disconnect(self._clock())

    # ------------------------------------------------------------------------------------------ sending

    def send(self, node_id: int, api: ApiSpec, body: Body, now_ms: int, *, expect_response: bool = True,
             min_version: int | None = None, max_version: int | None = None, timeout_ms: int | None = None,
             context: Any = None) -> ClientRequest:
        """Queue a request to a READY node (check ``ready`` first, else IllegalStateError).

        The version is the highest both sides speak within ``[min_version, max_version]``; ``body`` is a dict or
        ``body(version) -> dict``. ``timeout_ms`` overrides request.timeout.ms for this request.
        """
        node = self._nodes.get(node_id)
        if node is None or node.conn.state is not ConnectionState.READY:
            raise IllegalStateError(f"cannot send {api.name} to {self.address(node_id)}: node {node_id} is not "
                                    "ready (call ready() until it returns True)")
        version = node.conn.choose_version(api, min_version, max_version)
        payload = body(version) if callable(body) else body
        request = ClientRequest(node_id, api, version, payload, expect_response, now_ms, context)
        sent = node.conn.send(api, version, payload, now_ms, expect_response=expect_response,
                              timeout_ms=timeout_ms, tag=request)
        request.correlation_id = sent.correlation_id
        return request

    # ------------------------------------------------------------------------------------------ polling

    def poll(self, timeout_ms: int, now_ms: int) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms`` (less when a deadline or wakeup comes first); return the
        responses (and failures) of requests that completed."""
        if self._closed:
            raise IllegalStateError("the network client is closed")
        responses, self._stash = self._stash, []
        waiting = bool(responses)  # answers to return already (a stash, or an acks=0 request written when sent)
        timeout_ms = min(timeout_ms, self._maybe_refresh_metadata(now_ms))
        for node in self._nodes.values():
            deadline = node.conn.next_deadline_ms()
            if deadline is not None:
                timeout_ms = min(timeout_ms, deadline - now_ms)
            waiting = waiting or node.conn.has_completions
        if waiting:
            timeout_ms = 0  # someone is waiting for these already
        until_ms = now_ms + max(0, timeout_ms)
        while True:
            ready = self._selector.select(max(0, timeout_ms) / 1000)
            now_ms = self._clock()
            # A large request leaves in several writes, one per "writable" event (a 1 MB Produce through the
            # default 128 KiB send buffer: about four). Such an event changes nothing the caller acts on, so poll
            # keeps waiting, up to the same deadline, instead of returning to a caller that would go round its
            # whole loop (the sender: ready, drain, expiry) for nothing. Anything else returns: a wakeup, a read,
            # a completion (acks=0 requests complete once written), a connection leaving READY, the timeout.
            writes_only = bool(ready)
            for key, mask in ready:
                if key.data is _WAKEUP:
                    self._drain_wakeup()
                    writes_only = False
                else:
                    conn = key.data
                    conn.handle_events(mask, now_ms)
                    if mask != selectors.EVENT_WRITE or conn.state is not ConnectionState.READY \
                            or conn.has_completions:
                        writes_only = False
            timeout_ms = until_ms - now_ms
            if not writes_only or timeout_ms <= 0:
                break
        for node in list(self._nodes.values()):
            node.conn.check_timeouts(now_ms)
            self._close_if_idle(node, now_ms)
            self._track(node, now_ms)
            for completion in node.conn.drain_completions():
                self._throttle(node, completion)
                response = self._to_response(node.conn.node_id, completion)
                if response is not None:
                    responses.append(response)
        return responses

    def _track(self, node: _Node, now_ms: int) -> None:
        """Notice a connection becoming READY or failing: reset / grow the backoff, refresh metadata."""
        conn = node.conn
        if conn.state is ConnectionState.READY and (node.failures or node.setup_failures):
            node.failures = 0
            node.setup_failures = 0
            node.setup_timeout_ms = 0
            node.last_error = None  # the metadata's connection_error stays until a Metadata answer arrives
        elif conn.state is ConnectionState.DISCONNECTED and node.active:
            node.active = False
            node.setup_failures = node.setup_failures + 1 if conn.failed_during_setup else 0
            node.setup_timeout_ms = 0  # drawn again for the next attempt
            node.last_error = conn.last_error
            if node.last_error is not None:
                self.metadata.set_connection_error(node.last_error)
            if node.last_error is not None and node.last_error.fatal:
                log.error("connection to %s failed and reconnecting cannot fix it: %s", conn.address,
                          node.last_error)
                self.metadata.set_fatal_error(node.last_error)
            node.failures += 1
            backoff = min(self.config.reconnect_backoff_ms * 2 ** (node.failures - 1),
                          self.config.reconnect_backoff_max_ms)
            node.next_attempt_ms = now_ms + int(backoff * self._random.uniform(0.8, 1.2))  # jitter: no herds
            self.metadata.request_update()

    def _close_if_idle(self, node: _Node, now_ms: int) -> None:
        """connections.max.idle.ms: a clean close of a READY connection without traffic (module docstring)."""
        idle_ms = self.config.connections_max_idle_ms
        conn = node.conn
        if idle_ms < 0 or conn.state is not ConnectionState.READY or conn.in_flight_count:
            return
        # Idle for MORE than the limit, as Java's Selector: with 0, a connection that became ready (or answered) in
        # this poll stays for the caller's next request, instead of closing before anything could be sent on it.
        if now_ms - conn.last_activity_ms > idle_ms:
            log.debug("closing the connection to %s (node %s): idle for %d ms (connections.max.idle.ms)",
                      conn.address, conn.node_id, now_ms - conn.last_activity_ms)
            conn.disconnect(now_ms, f"was idle for {now_ms - conn.last_activity_ms} ms (connections.max.idle.ms)")
            node.active = False  # not a failure: no backoff, no refresh
            node.last_error = None

    @staticmethod
    def _throttle(node: _Node, completion: Completion) -> None:
        """KIP-219: an answer carrying throttle_time_ms at a version from which the client throttles itself mutes
        the node until that time has passed (the broker mutes the connection meanwhile, so anything sent would
        only wait in its socket while request.timeout.ms runs)."""
        body = completion.body
        request: ClientRequest = completion.request.tag
        since = request.api.client_throttle_from
        if body is None or since is None or request.version < since:
            return
        throttle_ms = int(body.get("throttle_time_ms", 0) or 0)
        if throttle_ms > 0:
            node.throttled_until_ms = max(node.throttled_until_ms, completion.completed_ms + throttle_ms)
            log.debug("node %s throttled the client for %d ms (a quota): nothing is sent to it before then",
                      request.node_id, throttle_ms)

    def _to_response(self, node_id: int, completion: Completion) -> ClientResponse | None:
        request: ClientRequest = completion.request.tag
        now_ms = completion.completed_ms
        if request.context is _METADATA_REFRESH:
            self._metadata_in_flight = False
            body = completion.body
            if completion.error is None and body is not None and body.get("error_code", NO_ERROR) == NO_ERROR:
                self.metadata.update(body, now_ms)
                self._metadata_wanted_since, self._rebootstrapped = None, False
            else:
                self.metadata.failed_update(now_ms)
            return None
        return ClientResponse(request, node_id, completion.body, completion.error,
                              max(0, now_ms - request.created_ms), now_ms)

    def _maybe_refresh_metadata(self, now_ms: int) -> int:
        """Send a metadata refresh if due; returns how long poll may wait as far as metadata is concerned."""
        if self._metadata_in_flight:
            return self.config.request_timeout_ms
        if self.metadata.fatal_error is not None:
            return self.config.request_timeout_ms  # no refresh: "Fatal connection errors" in the module docstring
        wait = self.metadata.time_to_next_update(now_ms)
        if wait > 0:
            return wait
        if self._metadata_wanted_since is None:
            self._metadata_wanted_since = now_ms
        node_id = self.least_loaded_node(now_ms)
        if self._should_rebootstrap(node_id, now_ms):
            self._rebootstrap(now_ms)
            node_id = self.least_loaded_node(now_ms)
        if node_id is None:
            return self.config.reconnect_backoff_ms
        if not self.ready(node_id, now_ms):
            return self.config.reconnect_backoff_ms  # connecting: its socket events wake us sooner
        self.send(node_id, METADATA, lambda _v: self.metadata.request_body(), now_ms, context=_METADATA_REFRESH)
        self._metadata_in_flight = True
        return self.config.request_timeout_ms

    def wakeup(self) -> None:
        """Interrupt a poll() blocked in another thread (or make the next one return at once). Thread-safe;
        harmless after close(). Writes the wakeup socket only if no wakeup is pending (module docstring)."""
        if self._wakeup_pending:
            return
        with self._wakeup_lock:
            if self._wakeup_closed or self._wakeup_pending:
                return
            self._wakeup_pending = True
            self.wakeup_writes += 1
            try:
                self._wakeup_w.send(b"\x00")
            except (BlockingIOError, InterruptedError):
                pass  # the pipe is full: a wakeup is pending anyway

    def _drain_wakeup(self) -> None:
        # Read and cleared under the lock: cleared before the read, a write in between would be read and its
        # flag left set with the socket empty, and every later wakeup skipped.
        with self._wakeup_lock:
            try:
                while self._wakeup_r.recv(4096):
                    pass
            except (BlockingIOError, InterruptedError):
                pass
            self._wakeup_pending = False

    # ------------------------------------------------------------------------------------------ blocking helpers

    def request(self, node_id: int | None, api: ApiSpec, body: Body, timeout_ms: int, *,
                min_version: int | None = None, max_version: int | None = None,
                raise_on_error: bool = True) -> dict[str, Any]:
        """Send one request and wait for its answer (``node_id`` None: the least loaded node, bootstrap at
        first). Raises KafkaConnectionError when no node could be reached within ``timeout_ms`` (naming every
        address tried), KafkaTimeoutError when the answer does not come in time, and -- with ``raise_on_error``
        -- the BrokerError of a non-zero top-level ``error_code`` in the body."""
        deadline = self._clock() + timeout_ms
        target = self._wait_ready(node_id, deadline, f"{api.name} within {timeout_ms} ms")
        now = self._clock()
        request = self.send(target, api, body, now, min_version=min_version, max_version=max_version,
                            timeout_ms=max(1, deadline - now))
        while True:
            for response in self.poll(max(0, deadline - self._clock()), self._clock()):
                if response.request is not request:
                    self._stash.append(response)
                    continue
                if response.error is not None:
                    raise response.error
                result = response.body if response.body is not None else {}
                if raise_on_error and result.get("error_code", NO_ERROR) != NO_ERROR:
                    raise_for_code(result["error_code"], result.get("error_message"),
                                   f"{api.name} to {self.address(target)}")
                return result

    def _wait_ready(self, node_id: int | None, deadline: int, what: str) -> int:
        """A READY node (``node_id``, or any); raises at the deadline naming every address tried and why it
        failed, or at once when an attempt fails with a non-retriable error (e.g. SASL authentication)."""
        tried: dict[str, str] = {}
        before = {nid: node.last_error for nid, node in self._nodes.items()}  # only this call's failures count
        while True:
            now = self._clock()
            candidate = node_id if node_id is not None else self.least_loaded_node(now)
            if candidate is not None:
                if self.ready(candidate, now) or self.is_ready(candidate):
                    return candidate
                tried.setdefault(self.address(candidate), "no answer yet")
            if node_id is None:
                for extra in self._spare_attempts(now):  # a silent address must not hide a good one
                    self.ready(extra, now)
                    tried.setdefault(self.address(extra), "no answer yet")
            for nid, node in self._nodes.items():
                error = node.last_error
                if error is not None and error is not before.get(nid):
                    if not error.retriable:
                        raise error  # reconnecting cannot fix it: fix the configuration instead
                    tried[self.address(nid)] = str(error)
            if now >= deadline:
                for nid, node in self._nodes.items():
                    address = self.address(nid)
                    if node.conn.state in SETTING_UP and address in tried:
                        earlier = tried[address]  # an earlier attempt's failure stays in the message
                        tried[address] = f"no answer yet, still {node.conn.state.name}" \
                            if earlier == "no answer yet" else f"{earlier}; then still {node.conn.state.name}"
                listed = "; ".join(f"{addr} ({why})" for addr, why in tried.items()) or "none"
                raise KafkaConnectionError(
                    f"could not reach any broker for {what}; tried: {listed}. "
                    "Check bootstrap.servers, that the brokers run and that this host can reach them.")
            wait = deadline - now
            if candidate is not None:
                wait = min(wait, max(1, self.connection_delay(candidate, now)))
            self._stash.extend(self.poll(wait, now))

    def _spare_attempts(self, now_ms: int) -> list[int]:
        """Nodes to try in parallel while none is READY: up to _PARALLEL_ATTEMPTS set up at a time."""
        candidates = self._candidates()
        busy = sum(1 for n in candidates if n in self._nodes and self._nodes[n].conn.state in SETTING_UP)
        free = [n for n in candidates if n not in self._nodes or (
            self._nodes[n].conn.state is ConnectionState.DISCONNECTED and now_ms >= self._nodes[n].next_attempt_ms)]
        return free[:max(0, _PARALLEL_ATTEMPTS - busy)]

    def fetch_metadata(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None, *,
                       allow_auto_topic_creation: bool | None = None,
                       include_topic_authorized_operations: bool = False) -> Metadata:
        """Blocking refresh: Metadata for ``topics`` (None = every topic, [] = brokers only) into ``metadata``;
        ``allow_auto_topic_creation`` None: as allow.auto.create.topics says. ``include_topic_authorized_operations``
        fills each TopicInfo's ``authorized_operations`` (Metadata v8+)."""
        names = None if topics is None else [{"name": t} for t in topics]
        if allow_auto_topic_creation is None:
            allow_auto_topic_creation = self.metadata.allow_auto_create_topics
        auto_create = allow_auto_topic_creation
        body = self.request(None, METADATA, lambda _v: {
            "topics": names, "allow_auto_topic_creation": auto_create,
            "include_topic_authorized_operations": include_topic_authorized_operations},
            self.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        self.metadata.update(body, self._clock())
        self._metadata_wanted_since, self._rebootstrapped = None, False
        return self.metadata

    # ------------------------------------------------------------------------------------------ closing

    def close(self) -> None:
        """Close every connection (pending requests are dropped), the selector and the wakeup pair."""
        if self._closed:
            return
        self._closed = True
        now = self._clock()
        for node in self._nodes.values():
            node.conn.close(now)
        self._nodes.clear()
        with self._wakeup_lock:
            self._wakeup_closed = True
            self._selector.unregister(self._wakeup_r)
            self._wakeup_r.close()
            self._wakeup_w.close()
        self._selector.close()
        self.metadata.close()

    # ------------------------------------------------------------------------------------------ context manager

    def __enter__(self) -> NetworkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
