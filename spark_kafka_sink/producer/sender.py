"""``Sender``: moves batches from the accumulator to the brokers, one deterministic round per ``run_once(now_ms)``.

A round (after the Java client's Sender.runOnce):

1. fatal errors first: a connection error reconnecting cannot fix (``client.metadata.fatal_error``: wrong SASL
   password, untrusted certificate, host name mismatch, security.protocol mismatch -- the network client records
   it there) or the transaction manager's fatal state. Either stops the producer: the transaction manager goes to
   FATAL_ERROR with it (a pending ``init_transactions`` / commit fails with it), every incomplete batch fails
   with it, and the round only polls. The producer's user threads see the same error on the metadata and raise it
   from ``send`` / ``flush`` instead of waiting for max.block.ms;
   then the transaction manager: resolve sequences; fetch a producer id (or a new epoch); if a coordinator
   request is due (FindCoordinator, InitProducerId, AddPartitionsToTxn, EndTxn), send it and only poll this
   round -- one such request is in flight at a time;
2. ``accumulator.ready`` -> unknown leaders: add the topic to the metadata and request an update (the network
   client refreshes from ``poll``);
3. ``client.ready`` per ready node (connects if needed; False while max.in.flight requests are out); each answer
   feeds ``node_availability`` (partitioner.availability.timeout.ms, see :mod:`.node_availability`);
4. ``accumulator.drain`` up to max.request.size per node; the ``before_drain`` hook asks the transaction manager
   whether the partition may send now and stamps producer id / epoch / sequence on the batch. A batch whose
   records could not be built (``ProducerBatch.build_error``) is taken off its queue and failed with that error,
   never sent, so its partition's later batches still go (Java's sender would meet the error on every round);
5. expire queued batches past delivery.timeout.ms (DeliveryTimeoutError);
6. one Produce request per node (acks, request.timeout.ms; version <= 12, <= 11 for transactions: the
   transaction-version-1 flow, see :mod:`.transactions`);
7. ``client.poll`` -> coordinator answers go to the transaction manager, Produce answers to the
   :class:`~spark_kafka_sink.producer.produce_responses.ProduceResponseHandler`, which completes, retries or fails
   each batch.

The network client is a seam: anything that satisfies
:class:`~spark_kafka_sink.producer.sender_client.SenderClient` (``NetworkClient`` does) works, so tests drive
``run_once`` against a scripted fake.

Threads: a ``Sender`` and its client are owned by the sender thread (``SenderThread``) -- or by the test stepping
it. Other threads only call ``SenderThread.wakeup`` / ``initiate_close`` / ``force_close``, which set the
``_running`` / ``_forced`` flags (plain bools, written by other threads, read by the loop) and wake the poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from spark_kafka_sink.errors import KafkaError, ProducerClosedError, TransactionAbortedError
from spark_kafka_sink.net.connection import monotonic_ms
from spark_kafka_sink.producer.accumulator import NO_DELAY_LIMIT_MS, RecordAccumulator
from spark_kafka_sink.producer.batch import ProducerBatch
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.node_availability import NodeAvailability
from spark_kafka_sink.producer.produce_responses import ProduceContext, ProduceResponseHandler
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.sender_client import ClientAnswer, SenderClient
from spark_kafka_sink.producer.transactions import (
    TransactionManager,
    TxnRequest,
    TxnState,
)
from spark_kafka_sink.protocol.messages import PRODUCE

__all__ = ["Sender", "SenderThread", "MAX_PRODUCE_VERSION"]

_log = logging.getLogger(__name__)

MAX_PRODUCE_VERSION = 12  # v13 names topics by id
_MAX_POLL_MS = 1_000  # re-check timers at least this often even when nothing is due
_ONGOING = frozenset({TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION, TxnState.ABORTING_TRANSACTION})
_ABORTED_ON_CLOSE = frozenset({TxnState.IN_TRANSACTION, TxnState.ABORTABLE_ERROR})


class Sender:
    """One producer's I/O logic; see the module docstring."""

    def __init__(self, client: SenderClient, accumulator: RecordAccumulator, config: ProducerConfig, *,
                 transaction_manager: TransactionManager | None = None, metrics: ProducerMetrics | None = None
                 ) -> None:
        # Owned by the sender thread (or the test stepping run_once), as every field below.
        self._client = client
        self._acc = accumulator
        self._config = config
        self._tm = transaction_manager
        self._metrics = metrics
        self._produce_responses = ProduceResponseHandler(client, accumulator, config,
                                                         transaction_manager=transaction_manager, metrics=metrics)
        # With max.in.flight = 1 and no idempotence, order is kept by muting a partition while a batch of it is
        # in flight (as Java). With idempotence the sequence rules keep order instead (see transactions/_sequences.py).
        self._guarantee_order = config.max_in_flight_requests_per_connection == 1 and transaction_manager is None
        # partitioner.availability.timeout.ms (ignored without adaptive partitioning, as Java documents): the
        # producer's partitioner reads ``node_availability.unavailable``.
        self.node_availability = NodeAvailability(
            config.partitioner_availability_timeout_ms if config.partitioner_adaptive_partitioning_enable else 0)

    # ------------------------------------------------------------------------------------------ one round

    def run_once(self, now_ms: int) -> None:
        error = self._fatal_error()
        if error is not None:
            # Nothing can be sent any more: fail what is pending with the reason (again each round: a send may
            # have raced with the last abort), keep answering what is in flight.
            if self._acc.has_incomplete():
                self._acc.abort_incomplete_batches(error)
            self._poll(self._config.retry_backoff_ms, now_ms)
            return
        tm = self._tm
        if tm is not None:
            tm.maybe_request_producer_id()
            if self._maybe_send_transactional_request(now_ms):
                return
        timeout = self._send_producer_data(now_ms)
        self._poll(timeout, now_ms)

    def _fatal_error(self) -> KafkaError | None:
        """What stops this producer, if anything: a fatal connection error, or the transaction manager's."""
        connection_error = self._client.metadata.fatal_error
        tm = self._tm
        if tm is None:
            return connection_error
        if connection_error is not None:
            tm.transition_to_fatal_error(connection_error)  # no-op once fatal; fails init/commit/abort calls
        tm.maybe_resolve_sequences()
        if not tm.has_fatal_error:
            return None
        return tm.last_error or KafkaError("the producer is in a fatal state: close it")

    def _leader(self, tp: TopicPartition) -> int | None:
        return self._client.metadata.leader_for(tp.topic, tp.partition)

    def _leader_epoch(self, tp: TopicPartition) -> int:
        return self._client.metadata.leader_epoch_for(tp.topic, tp.partition)

    def _send_producer_data(self, now_ms: int) -> int:
        """Steps 2-6; returns how long the following poll may block."""
        client, metadata = self._client, self._client.metadata
        check = self._acc.ready(self._leader, now_ms, self._leader_epoch)
        if check.unknown_leader_topics:
            for topic in check.unknown_leader_topics:
                metadata.add_topic(topic, now_ms)
            metadata.request_update()
        ready_nodes: list[int] = []
        not_ready_timeout = NO_DELAY_LIMIT_MS
        for node in sorted(check.ready_nodes):
            if client.ready(node, now_ms):
                ready_nodes.append(node)
                self.node_availability.record(node, now_ms, drained=True)
            else:
                self.node_availability.record(node, now_ms, drained=False)  # data waits for this node
                not_ready_timeout = min(not_ready_timeout, client.connection_delay(node, now_ms))
        hook: Callable[[ProducerBatch], bool] | None = self._before_drain if self._tm is not None else None
        drained = self._acc.drain(self._leader, ready_nodes, self._config.max_request_size, now_ms, hook,
                                  self._leader_epoch)
        if self._guarantee_order:
            for batches in drained.values():
                for batch in batches:
                    self._acc.mute(batch.tp)
        unbuilt = self._acc.take_unbuilt()
        for batch in unbuilt:
            error = batch.build_error
            failure = KafkaError(f"the records of a batch for {batch.tp} could not be built "
                                 f"({type(error).__name__}: {error}); they were not sent")
            failure.__cause__ = error
            self._produce_responses.fail_batch(batch, failure, now_ms, maybe_written=False)
        for batch in self._acc.expired_batches(now_ms):
            self._produce_responses.fail_batch(batch, self._acc.expiry_error(batch, now_ms), now_ms,
                                               maybe_written=batch.attempts > 0)
        sent = bool(unbuilt)  # the partition's next batch may be ready behind a failed one
        for node, batches in drained.items():
            if batches:
                self._send_produce(node, batches, now_ms)
                sent = True
        if sent:
            return 0  # more may be sendable right away
        timeout = min(check.next_ready_check_delay_ms, not_ready_timeout,
                      max(0, self._acc.next_batch_expiry_ms - now_ms), _MAX_POLL_MS)
        if check.unknown_leader_topics:
            timeout = min(timeout, self._config.retry_backoff_ms)
        return max(0, timeout)

    def _before_drain(self, batch: ProducerBatch) -> bool:
        # Runs under the partition's lock, inside accumulator.drain.
        assert self._tm is not None
        if self._tm.should_stop_draining(batch):
            return False
        self._tm.stamp(batch)
        return True

    def _send_produce(self, node: int, batches: list[ProducerBatch], now_ms: int) -> None:
        by_topic: dict[str, list[dict[str, Any]]] = {}
        context = ProduceContext(node, {})
        for batch in batches:
            # The records as buffers (header, records view): written to the socket without being copied.
            by_topic.setdefault(batch.tp.topic, []).append({"index": batch.tp.partition,
                                                            "records": batch.payload_parts()})
            context.batches[batch.tp] = batch
        tm = self._tm
        body = {
            "transactional_id": tm.transactional_id if tm is not None else None,
            "acks": self._config.acks,
            "timeout_ms": self._config.request_timeout_ms,
            "topic_data": [{"name": t, "partition_data": parts} for t, parts in by_topic.items()],
        }
        # A transactional batch goes at its transaction's version (v11 for TV1, v12 for TV2).
        max_version = (tm.produce_max_version if tm is not None else None) or MAX_PRODUCE_VERSION
        self._client.send(node, PRODUCE, body, now_ms, expect_response=self._config.acks != 0,
                          max_version=max_version, context=context)
        if self._metrics is not None:
            sizes = [b.size_in_bytes for b in batches]
            self._metrics.record_batches_sent(
                [b.record_count for b in batches], sizes, [b.drained_ms - b.created_ms for b in batches],
                [size / max(1, b.uncompressed_size) for b, size in zip(batches, sizes, strict=True)], now_ms)

    # ------------------------------------------------------------------------------------------ transactions

    def _maybe_send_transactional_request(self, now_ms: int) -> bool:
        """Send the transaction manager's next request if one is due; True if this round is spent on it."""
        tm = self._tm
        assert tm is not None
        backoff = self._config.retry_backoff_ms
        if tm.has_in_flight_request():
            self._poll(backoff, now_ms)
            return True
        if tm.is_transactional and (tm.has_abortable_error or tm.is_aborting) and self._acc.has_undrained():
            # Unsent batches of a doomed transaction are dropped; in-flight ones finish (their fate matters to
            # the sequence numbers).
            error = tm.last_error if tm.has_abortable_error and tm.last_error is not None else \
                TransactionAbortedError("the transaction was aborted before this record was sent")
            self._acc.abort_undrained_batches(error)
        req = tm.next_request(now_ms, self._acc.has_incomplete())
        if req is None:
            return False
        target = self._target_of(req, now_ms)
        if target is None or not self._client.ready(target, now_ms):
            failed = target is None or self._client.connection_error(target) is not None
            tm.requeue(req, now_ms, backoff_ms=backoff if failed else 0, find_coordinator=failed)
            # Connecting: due again at once, but poll waits for the connection's events (as Java's awaitReady).
            self._poll(backoff, now_ms, waiting_for_connection=not failed)
            return True
        self._client.send(target, req.api, req.build, now_ms, max_version=req.max_version, context=req)
        tm.request_sent(req)
        self._poll(backoff, now_ms)
        return True

    def _target_of(self, req: TxnRequest, now_ms: int) -> int | None:
        assert self._tm is not None
        if not req.to_coordinator:
            return self._client.least_loaded_node(now_ms)
        coordinator = self._tm.coordinator_of(req)
        if coordinator is None:
            return None
        if self._client.metadata.broker(coordinator.node_id) is None:
            self._client.metadata.request_update()  # a broker we have not seen yet: learn its address
        return coordinator.node_id

    # ------------------------------------------------------------------------------------------ polling

    def _poll(self, timeout_ms: int, now_ms: int, waiting_for_connection: bool = False) -> None:
        # A transactional request due now shortens the wait, unless it waits for a connection being set up: that
        # would spin (a poll of 0 ms per loop) for as long as the setup takes, e.g. a SASL login waiting for a KDC.
        if self._tm is not None and not waiting_for_connection:
            delay = self._tm.next_request_delay_ms(now_ms)
            if delay is not None:
                timeout_ms = min(timeout_ms, delay)
        for response in self._client.poll(max(0, timeout_ms), now_ms):
            self._handle(response)

    def _handle(self, response: ClientAnswer) -> None:
        context = response.request.context
        if isinstance(context, TxnRequest):
            assert self._tm is not None
            if response.error is not None:
                self._tm.handle_request_failure(context, response.error, response.received_ms)
            else:
                # The answering broker's finalized features decide the next transaction's protocol (TV1 / TV2).
                self._tm.observe_features(self._client.finalized_features(response.request.node_id))
                self._tm.handle_response(context, response.request.version, response.body or {},
                                         response.received_ms)
        elif isinstance(context, ProduceContext):
            self._produce_responses.handle(context, response)

    @property
    def retry_backoff_ms(self) -> int:
        return self._config.retry_backoff_ms

    def has_pending_work(self) -> bool:
        """Anything left to send or answer (for a graceful close)."""
        tm = self._tm
        # Coordinator requests count only inside a transaction (e.g. AddPartitionsToTxn for records still queued):
        # a producer id that was never obtained must not keep a closing producer alive (as Java).
        ongoing = tm is not None and tm.is_transactional and tm.state in _ONGOING
        return (self._acc.has_incomplete() or self._client.in_flight_count() > 0
                or (ongoing and tm is not None and tm.has_pending_requests()))

    def abort_open_transaction(self) -> None:
        """For a graceful close, once everything queued was answered: a transaction still open (begun, or failed
        with an abortable error) is aborted, as Java's sender does; a commit or abort under way finishes as it
        is. The caller then steps until ``has_pending_work`` is False (the EndTxn answered)."""
        tm = self._tm
        if tm is None or not tm.is_transactional or tm.state not in _ABORTED_ON_CLOSE:
            return
        _log.info("aborting the open transaction of transactional.id %s: the producer is closing",
                  tm.transactional_id)
        try:
            tm.begin_abort()
        except KafkaError as exc:  # e.g. fenced meanwhile: nothing this producer can end
            _log.warning("could not abort the open transaction on close: %s", exc)

    def abort_all(self, error: KafkaError) -> None:
        """Fail every incomplete batch, queued or in flight (a forced close)."""
        self._acc.abort_incomplete_batches(error)

    def wakeup(self) -> None:
        self._client.wakeup()

    def close_client(self) -> None:
        self._client.close()


class SenderThread(threading.Thread):
    """The daemon thread that loops ``sender.run_once`` until closed (see the module docstring)."""

    def __init__(self, sender: Sender, *, name: str = "kafka-producer-network-thread",
                 clock: Callable[[], int] = monotonic_ms) -> None:
        super().__init__(name=name, daemon=True)
        self.sender = sender
        self._clock = clock
        self._running = True  # False: finish pending work, then stop (written by closing threads)
        self._forced = False  # True: stop now, failing what is pending (written by closing threads)
        self._abort_transaction = True  # a graceful close aborts an open transaction (written by closing threads)

    def run(self) -> None:
        sender = self.sender
        try:
            while self._running:
                self._step()
            # Graceful close: the accumulator is closed; send what is queued and wait for the answers.
            while not self._forced and sender.has_pending_work():
                self._step()
            if not self._forced and self._abort_transaction:
                sender.abort_open_transaction()
                while not self._forced and sender.has_pending_work():
                    self._step()
            if self._forced:
                sender.abort_all(ProducerClosedError(
                    "the producer was closed (close(timeout) ran out or close(0)) before this record was "
                    "acknowledged; it may or may not have been written"))
        finally:
            sender.close_client()

    def _step(self) -> None:
        try:
            self.sender.run_once(self._clock())
        except Exception:  # one bad round must not kill the producer; the error is logged with its traceback
            _log.exception("unexpected error in the producer's sender thread")
            time.sleep(self.sender.retry_backoff_ms / 1000)  # a back-off, so a persistent bug cannot spin

    def wakeup(self) -> None:
        self.sender.wakeup()

    def initiate_close(self, *, abort_transaction: bool = True) -> None:
        self._abort_transaction = abort_transaction
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        self._forced = True
        self._running = False
        self.wakeup()
