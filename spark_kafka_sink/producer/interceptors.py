"""Producer interceptors, as the Java client's ``ProducerInterceptor``: see (and may replace) each record before it
is partitioned, and each acknowledgement before the caller's future completes.

An interceptor is any object with some of these methods (missing ones are skipped)::

    on_send(record: ProducerRecord) -> ProducerRecord         # user thread, before partitioning
    on_acknowledgement(metadata: RecordMetadata, error: BaseException | None) -> None   # I/O thread: be quick
    close() -> None

The bulk Arrow path (``send_batch``) does not call the per-record hooks -- that would be a Python call per row.
Interceptors that want to see it may define ``on_send_batch(topic, table) -> table`` and
``on_batch_acknowledgement(metadata: BatchMetadata, error)``.

``InterceptorChain`` runs them in configuration order. As in Java, an exception from an interceptor is logged and
the chain continues: a failing ``on_send`` leaves the record as the previous interceptor returned it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from spark_kafka_sink.producer.record_metadata import (
    NO_OFFSET,
    NO_TIMESTAMP,
    BatchMetadata,
    RecordMetadata,
    TopicPartition,
)
from spark_kafka_sink.protocol.record_batch import Header

__all__ = ["ProducerRecord", "ProducerInterceptor", "InterceptorChain"]

_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ProducerRecord:
    """One record as handed to ``send()``. ``partition`` None: the partitioner decides; ``timestamp_ms`` None: the
    send time."""

    topic: str
    value: bytes | None
    key: bytes | None = None
    headers: Sequence[Header] = ()
    partition: int | None = None
    timestamp_ms: int | None = None


@runtime_checkable
class ProducerInterceptor(Protocol):
    def on_send(self, record: ProducerRecord) -> ProducerRecord: ...

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None: ...

    def close(self) -> None: ...


class InterceptorChain:
    """Runs interceptors in order, logging and skipping their failures. Immutable after construction."""

    def __init__(self, interceptors: Iterable[object] = ()) -> None:
        self.interceptors: tuple[object, ...] = tuple(interceptors)
        for interceptor in self.interceptors:
            if not any(callable(getattr(interceptor, name, None)) for name in _HOOKS):
                raise TypeError(f"{interceptor!r} has none of the interceptor methods {', '.join(_HOOKS)}")
        # Bound methods looked up once: on_send / on_acknowledgement run per record.
        self._by_hook: dict[str, list[tuple[object, Any]]] = {
            name: [(i, getattr(i, name)) for i in self.interceptors if callable(getattr(i, name, None))]
            for name in _HOOKS
        }

    def __bool__(self) -> bool:
        return bool(self.interceptors)

    def _hooks(self, name: str) -> list[tuple[object, Any]]:
        return self._by_hook[name]

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        for interceptor, hook in self._hooks("on_send"):
            try:
                result = hook(record)
            except Exception:
                _log.warning("interceptor %r failed in on_send for topic %s; record passed on unchanged",
                             interceptor, record.topic, exc_info=True)
                continue
            if not isinstance(result, ProducerRecord):
                _log.warning("interceptor %r on_send returned %s, not a ProducerRecord; ignored",
                             interceptor, type(result).__name__)
                continue
            record = result
        return record

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        for interceptor, hook in self._hooks("on_acknowledgement"):
            try:
                hook(metadata, error)
            except Exception:
                _log.warning("interceptor %r failed in on_acknowledgement", interceptor, exc_info=True)

    def on_send_error(self, record: ProducerRecord, tp: TopicPartition | None, error: BaseException) -> None:
        """A record failed before it had a batch (e.g. no metadata, buffer full): acknowledge it with metadata
        that has no offset, and the partition if one was chosen (as Java's onSendError)."""
        partition = tp.partition if tp is not None else (record.partition if record.partition is not None else -1)
        self.on_acknowledgement(RecordMetadata(record.topic, partition, NO_OFFSET, NO_TIMESTAMP), error)

    def on_send_batch(self, topic: str, table: Any) -> Any:
        for interceptor, hook in self._hooks("on_send_batch"):
            try:
                table = hook(topic, table)
            except Exception:
                _log.warning("interceptor %r failed in on_send_batch for topic %s; batch passed on unchanged",
                             interceptor, topic, exc_info=True)
        return table

    def on_batch_acknowledgement(self, metadata: BatchMetadata, error: BaseException | None) -> None:
        for interceptor, hook in self._hooks("on_batch_acknowledgement"):
            try:
                hook(metadata, error)
            except Exception:
                _log.warning("interceptor %r failed in on_batch_acknowledgement", interceptor, exc_info=True)

    def close(self) -> None:
        for interceptor, hook in self._hooks("close"):
            try:
                hook()
            except Exception:
                _log.warning("interceptor %r failed to close", interceptor, exc_info=True)


_HOOKS = ("on_send", "on_acknowledgement", "close", "on_send_batch", "on_batch_acknowledgement")
