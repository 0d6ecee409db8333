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
(recommended when the shape differs by version); ``ClientRequest.version`` says which version was sent.

Metadata: ``client.metadata`` (:class:`~spark_kafka_sink.net.metadata.Metadata`) is refreshed from ``poll``
whenever it is due (requested, or older than metadata.max.age.ms), on the least loaded node; those responses are
consumed internally. A failed connection also requests a refresh (the leader may have moved).

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
which any thread may call (it touches only the wakeup socket, guarded by ``_wakeup_lock``). ``now_ms`` arguments
must come from the same clock as the client's ``clock`` (default: :func:`monotonic_ms`).

Layout: the non-blocking core is :class:`~spark_kafka_sink.net.nonblocking_client.NonBlockingClient`, which this
class extends with the blocking conveniences; ``ClientRequest``, ``ClientResponse`` and ``Body`` are declared in
``net/client_requests.py``. Import all of them from here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from spark_kafka_sink.errors import KafkaConnectionError, raise_for_code
from spark_kafka_sink.net.client_requests import Body, ClientRequest, ClientResponse
from spark_kafka_sink.net.connection import SETTING_UP, ConnectionState, monotonic_ms
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.net.nonblocking_client import NonBlockingClient
from spark_kafka_sink.protocol.messages import METADATA, ApiSpec

__all__ = ["NetworkClient", "ClientRequest", "ClientResponse", "Body", "monotonic_ms"]

_PARALLEL_ATTEMPTS = 3  # blocking calls: addresses set up at once, so one that never answers costs no time


class NetworkClient(NonBlockingClient):
    """See the module docstring."""

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
                if raise_on_error and result.get("error_code"):
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
                    if node.conn.state in SETTING_UP and self.address(nid) in tried:
                        tried[self.address(nid)] = f"no answer yet, still {node.conn.state.name}"
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
        candidates = list(self.metadata.brokers()) or self.bootstrap_node_ids
        busy = sum(1 for n in candidates if n in self._nodes and self._nodes[n].conn.state in SETTING_UP)
        free = [n for n in candidates if n not in self._nodes or (
            self._nodes[n].conn.state is ConnectionState.DISCONNECTED and now_ms >= self._nodes[n].next_attempt_ms)]
        return free[:max(0, _PARALLEL_ATTEMPTS - busy)]

    def fetch_metadata(self, topics: Iterable[str] | None = None, timeout_ms: int | None = None, *,
                       allow_auto_topic_creation: bool = True) -> Metadata:
        """Blocking refresh: Metadata for ``topics`` (None = every topic, [] = brokers only) into ``metadata``."""
        names = None if topics is None else [{"name": t} for t in topics]
        body = self.request(None, METADATA, lambda _v: {"topics": names,
                                                       "allow_auto_topic_creation": allow_auto_topic_creation},
                            self.config.request_timeout_ms if timeout_ms is None else timeout_ms)
        self.metadata.update(body, self._clock())
        return self.metadata

    # ------------------------------------------------------------------------------------------ context manager

    def __enter__(self) -> NetworkClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
