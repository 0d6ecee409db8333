"""What a Produce answer does to each batch it carries: ``ProduceResponseHandler`` completes, retries or fails it.

Per partition of a Produce answer (as the Java client's Sender.completeBatch):

=================================  ============================================================================
NONE                               complete the batch: RecordMetadata per record (base offset + index; the
                                   broker's log-append time for LogAppendTime topics)
DUPLICATE_SEQUENCE_NUMBER          success: the broker already has this batch (an earlier attempt got through)
retriable (NOT_LEADER_OR_FOLLOWER, re-enqueue at the front of the partition's queue with exponential backoff
UNKNOWN_TOPIC_OR_PARTITION, ...)   (retry.backoff.ms doubling up to retry.backoff.max.ms, jittered), while
                                   attempts < retries and delivery.timeout.ms has not passed; invalid-metadata
                                   errors also request a metadata refresh, so the retry goes to the new leader.
                                   NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH answers (v10+) name the new
                                   leader: the metadata takes it at once (KIP-951), and the retry, now bound for
                                   a newer leader, skips its backoff (accumulator)
OUT_OF_ORDER_SEQUENCE_NUMBER,      the transaction manager decides (retry behind an earlier failure, or a new
UNKNOWN_PRODUCER_ID                epoch with renumbered sequences; abortable inside a transaction)
INVALID_PRODUCER_EPOCH,            fail with ProducerFencedError: a newer producer owns this id
PRODUCER_FENCED
MESSAGE_TOO_LARGE with more than     split into batches of half its (uncompressed) size and queue them first, as
one record                         Java's splitAndReenqueue (with idempotence they take over its sequences); a
                                   part refused again is split again, so batch.size may exceed the topic's
                                   max.message.bytes (Java splits at batch.size only: KAFKA-8350)
MESSAGE_TOO_LARGE (one record),    fail with a message naming the record's size and the settings to change
RECORD_LIST_TOO_LARGE
anything else                      fail the batch with the named broker error
=================================  ============================================================================

A request that failed as a whole (disconnected, request.timeout.ms passed, unreadable answer) counts as
NETWORK_EXCEPTION for each of its batches: retriable, refreshes metadata, and the batch "may have been written".
One that failed with a ``fatal`` error (a TLS alert refusing this client) fails its batches with that error.

A batch's final failure (here, or its expiry in the sender's round) goes through :meth:`fail_batch`: the
transaction manager hears of it before the batch's futures do.

Threads: runs on the sender thread only (inside ``Sender.run_once``); it keeps no state of its own between answers.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from spark_kafka_sink.errors import (
    FENCED_CODES,
    TOO_LARGE_CODES,
    BrokerError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    KafkaError,
    MessageTooLargeError,
    NetworkExceptionError,
    NotEnoughReplicasAfterAppendError,
    NotLeaderOrFollowerError,
    RequestTimedOutError,
    error_for_code,
)
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.batch import ProducerBatch
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.record_metadata import NO_OFFSET, NO_TIMESTAMP
from spark_kafka_sink.producer.sender_client import ClientAnswer, SenderClient
from spark_kafka_sink.producer.transactions import TransactionManager, broker_error, fenced_error
from spark_kafka_sink.protocol.error_codes import NO_ERROR

__all__ = ["ProduceContext", "ProduceResponseHandler"]

_log = logging.getLogger(__name__)

# Answers after which the batch may be in the log although the request failed.
_MAYBE_WRITTEN = frozenset({NetworkExceptionError.code, RequestTimedOutError.code,
                            NotEnoughReplicasAfterAppendError.code})
# Answers that may name the partition's new leader (current_leader, Produce v10+: KIP-951).
_LEADER_MOVED = frozenset({NotLeaderOrFollowerError.code, FencedLeaderEpochError.code})


@dataclass
class ProduceContext:
    """The ``context`` of a Produce request: where it went and the batch of each partition it carries."""

    node_id: int
    batches: dict[tuple[str, int], ProducerBatch]  # keyed by each batch's TopicPartition (a plain tuple finds it)


class ProduceResponseHandler:
    """Settles the batches of Produce requests once answered or failed (see the module docstring)."""

    def __init__(self, client: SenderClient, accumulator: RecordAccumulator, config: ProducerConfig, *,
                 transaction_manager: TransactionManager | None = None, metrics: ProducerMetrics | None = None
                 ) -> None:
        self._client = client  # for metadata refreshes and broker addresses in messages
        self._acc = accumulator
        self._config = config
        self._tm = transaction_manager
        self._metrics = metrics

    def handle(self, context: ProduceContext, response: ClientAnswer) -> None:
        """The answer (or failure) of the Produce request sent with ``context``."""
        now_ms = response.received_ms
        if self._metrics is not None:
            records = sum(b.record_count for b in context.batches.values())
            self._metrics.record_request(records, response.latency_ms, now_ms)
            if response.body:
                self._metrics.record_throttle(response.body.get("throttle_time_ms", 0), now_ms)
        body, error = response.body, response.error
        if error is not None and error.fatal:
            # E.g. the broker refused our TLS client certificate after the handshake (TLS 1.3): a retry would meet
            # the same refusal. The network client also records it, so the next round stops the producer.
            for batch in context.batches.values():
                self.fail_batch(batch, error, now_ms, maybe_written=True)
            return
        if error is not None:
            _log.info("Produce to node %s failed (%s); %d batch(es) will be retried if allowed", context.node_id,
                      error, len(context.batches))
            for batch in context.batches.values():
                self._complete(batch, NetworkExceptionError.code, NO_OFFSET, NO_TIMESTAMP, -1, str(error), [],
                               context, now_ms)
            return
        if body is None:  # acks=0: written to the socket is all we will ever know
            for batch in context.batches.values():
                self._complete(batch, NO_ERROR, NO_OFFSET, NO_TIMESTAMP, -1, None, [], context, now_ms)
            return
        answered: set[tuple[str, int]] = set()
        new_leaders: dict[tuple[str, int], tuple[int, int]] = {}
        batches = context.batches
        for topic in body["responses"]:
            name = topic["name"]
            for p in topic["partition_responses"]:
                mine = batches.get((name, p["index"]))  # cheaper to build than a TopicPartition, and equal
                if mine is None:
                    continue  # not ours: a confused broker; the missing ones are handled below
                answered.add(mine.tp)
                code = p["error_code"]
                self._complete(mine, code, p["base_offset"], p.get("log_append_time_ms", -1),
                               p.get("log_start_offset", -1), p.get("error_message"), p.get("record_errors") or [],
                               context, now_ms)
                if code in _LEADER_MOVED and (leader := p.get("current_leader")):
                    new_leaders[mine.tp] = (leader["leader_id"], leader["leader_epoch"])  # metadata vets them
        if new_leaders:
            self._follow_new_leaders(new_leaders, body.get("node_endpoints") or [])
        if len(answered) == len(batches):
            return
        for tp, batch in batches.items():
            if tp not in answered:
                self._complete(batch, NetworkExceptionError.code, NO_OFFSET, NO_TIMESTAMP, -1,
                               "the Produce response did not mention this partition", [], context, now_ms)

    def _follow_new_leaders(self, leaders: dict[tuple[str, int], tuple[int, int]],
                            endpoints: list[dict[str, Any]]) -> None:
        updated = self._client.metadata.update_partition_leadership(leaders, endpoints)
        for topic, partition in sorted(updated):
            _log.info("%s-%d: the Produce answer named node %d (leader epoch %d) as the new leader; retrying there",
                      topic, partition, *leaders[(topic, partition)])

    def _complete(self, batch: ProducerBatch, code: int, base_offset: int, log_append_time_ms: int,
                  log_start_offset: int, message: str | None, record_errors: list[dict[str, Any]],
                  context: ProduceContext, now_ms: int) -> None:
        tp = batch.tp
        if code == NO_ERROR or code == DuplicateSequenceNumberError.code:
            offset = base_offset if code == NO_ERROR else NO_OFFSET  # a duplicate's offset is not in the answer
            if self._tm is not None:
                self._tm.batch_succeeded(batch, offset)
            batch.done(offset, log_append_time_ms, None)
            self._acc.unmute(tp)
            return
        if code == MessageTooLargeError.code and batch.record_count > 1 and not batch.is_done:
            self._split(batch, message, now_ms)
            return
        error = self._error_for(batch, code, message, record_errors, context)
        if error.invalid_metadata:
            self._client.metadata.request_update()  # the retry then goes to the partition's new leader
        if self._can_retry(batch, code, log_start_offset, now_ms):
            _log.warning("retrying %s after %s (attempt %d)", batch, error.error_name, batch.attempts + 1)
            batch.last_error = error
            self._acc.reenqueue(batch, now_ms)
            self._acc.unmute(tp)
            if self._metrics is not None:
                self._metrics.record_retry(batch.record_count, now_ms)
            return
        final: KafkaError = error
        if error.retriable and batch.has_reached_delivery_timeout(now_ms, self._config.delivery_timeout_ms):
            final = self._acc.expiry_error(batch, now_ms)
            final.__cause__ = error
        self.fail_batch(batch, final, now_ms, maybe_written=code in _MAYBE_WRITTEN)

    def _split(self, batch: ProducerBatch, message: str | None, now_ms: int) -> None:
        max_bytes = max(1, batch.uncompressed_size // 2)
        parts = batch.split(max_bytes, self._config.compression_type, self._config.effective_compression_level)
        _log.warning("%s was too large for the broker (%s); splitting it into %d batches of at most %d bytes and "
                     "sending them again", batch, message or "MESSAGE_TOO_LARGE", len(parts), max_bytes)
        if self._tm is not None:
            self._tm.split_batch(batch, parts)
        self._acc.split_and_reenqueue(batch, parts)
        self._acc.unmute(batch.tp)
        if self._metrics is not None:
            self._metrics.record_retry(batch.record_count, now_ms)

    def _can_retry(self, batch: ProducerBatch, code: int, log_start_offset: int, now_ms: int) -> bool:
        if batch.is_done or batch.has_reached_delivery_timeout(now_ms, self._config.delivery_timeout_ms):
            return False
        if batch.attempts >= self._config.retries:
            return False
        if self._tm is not None:
            return self._tm.can_retry(batch, code, log_start_offset)
        return error_for_code(code).retriable

    def _error_for(self, batch: ProducerBatch, code: int, message: str | None,
                   record_errors: list[dict[str, Any]], context: ProduceContext) -> BrokerError:
        where = f"Produce {batch.tp} to {self._client.address(context.node_id)}"
        if code in FENCED_CODES:  # one named error for "a newer producer owns this id", wherever it shows up
            return fenced_error(broker_error(code, where, message), where)
        if code in TOO_LARGE_CODES and batch.record_count == 1:
            message = (f"the broker rejected a record of {batch.size_in_bytes} bytes (in a batch of its own): the "
                       f"topic's limit for one record batch, max.message.bytes (broker default: message.max.bytes), "
                       f"is below {batch.size_in_bytes} bytes. Send smaller records, or raise the topic's "
                       "max.message.bytes"
                       + (f"; broker says: {message}" if message else ""))
        elif code in TOO_LARGE_CODES:
            message = (f"the broker rejected a {batch.size_in_bytes}-byte batch of {batch.record_count} record(s): "
                       "larger than the topic's max.message.bytes (broker: message.max.bytes). Lower batch.size and "
                       "max.request.size below that limit, or raise the topic's max.message.bytes"
                       + (f"; broker says: {message}" if message else ""))
        elif record_errors:
            details = "; ".join(f"record {e['batch_index']}: {e.get('batch_index_error_message')}"
                                for e in record_errors[:5])
            message = f"{message or ''} [{details}]".strip()
        return broker_error(code, where, message)

    def fail_batch(self, batch: ProducerBatch, error: KafkaError, now_ms: int, *, maybe_written: bool) -> None:
        """Final failure: tell the transaction manager (sequences, transaction state), then the futures."""
        if self._tm is not None:
            self._tm.batch_failed(batch, error, maybe_written=maybe_written)
        if batch.done(NO_OFFSET, NO_TIMESTAMP, error) and self._metrics is not None:
            self._metrics.record_error(batch.record_count, now_ms)
        self._acc.unmute(batch.tp)
        if isinstance(error, DeliveryTimeoutError):
            _log.warning("%s", error)
