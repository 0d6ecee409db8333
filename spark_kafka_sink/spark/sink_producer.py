"""The Spark adapter's seam to the producer: what a task and the worker's producer cache call on a producer.

``KafkaProducer`` satisfies both protocols; the tests' fakes are checked against them by mypy (tests/test_typing.py),
so a fake cannot drift from what the adapter really calls. ``SinkProducer`` is generic in what ``prepare_batch``
returns (a ``PreparedBatch`` for the real producer): the adapter only hands it back to ``send_prepared``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol, TypeVar

import pyarrow as pa

from spark_kafka_sink.producer.arrow_send import BatchSendResult
from spark_kafka_sink.producer.transactions import TransactionIdentity

__all__ = ["CachedProducer", "SinkProducer", "PreparedT"]

PreparedT = TypeVar("PreparedT")


class CachedProducer(Protocol):
    """What the producer cache (``producer_cache``) calls: is it still usable, switch its transactional.id, close."""

    @property
    def usable(self) -> bool: ...

    def switch_transactional_id(self, transactional_id: str) -> None: ...

    def close(self, timeout_s: float | None = None, *, abort_open_transaction: bool = True) -> None: ...


class SinkProducer(CachedProducer, Protocol[PreparedT]):
    """What a task (``writer``) calls: send whole batches, flush, and the transaction calls of exactly_once."""

    def partitions_for(self, topic: str, needed: int = 0) -> list[int]: ...

    def send_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> Future[BatchSendResult]: ...

    def prepare_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> PreparedT: ...

    def send_prepared(self, prepared: PreparedT) -> Future[BatchSendResult]: ...

    def flush(self, timeout_s: float | None = None) -> None: ...

    def start_init_transactions(self) -> None: ...

    def init_transactions(self, timeout_s: float | None = None) -> None: ...

    def begin_transaction(self) -> None: ...

    def abort_transaction(self, timeout_s: float | None = None) -> None: ...

    def transaction_identity(self) -> TransactionIdentity: ...
