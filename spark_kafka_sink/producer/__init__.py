"""The producer engine, shaped like the Java KafkaProducer.

Public API: :class:`KafkaProducer` (``send`` / ``send_batch`` / ``flush`` / ``close`` / transactions),
:class:`AsyncKafkaProducer` (the same, awaitable, for asyncio) and the :class:`DeliveryFuture` its sends return,
:class:`RecordMetadata`, :class:`BatchSendResult` / :class:`PartitionWrite` (what ``send_batch`` wrote),
:class:`PreparedBatch` (``prepare_batch`` / ``send_prepared``), :class:`ConsumerGroupMetadata` /
:class:`OffsetAndMetadata` / :class:`TopicPartition` (``send_offsets_to_transaction``), and
for ending transactions from another process (the Spark driver): :class:`TransactionIdentity`,
:func:`end_transaction`, :func:`fence_transactional_id`, and :class:`CoordinatorSession` for many of them.
"""

from spark_kafka_sink.producer.arrow_send import BatchSendResult, PartitionWrite, PreparedBatch
from spark_kafka_sink.producer.async_delivery import DeliveryFuture
from spark_kafka_sink.producer.async_producer import AsyncKafkaProducer
from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.producer.record_metadata import RecordMetadata, TopicPartition
from spark_kafka_sink.producer.transactions import (
    ConsumerGroupMetadata,
    CoordinatorSession,
    OffsetAndMetadata,
    TransactionIdentity,
    end_transaction,
    fence_transactional_id,
)

__all__ = [
    "KafkaProducer",
    "AsyncKafkaProducer",
    "DeliveryFuture",
    "RecordMetadata",
    "BatchSendResult",
    "PartitionWrite",
    "PreparedBatch",
    "TransactionIdentity",
    "CoordinatorSession",
    "end_transaction",
    "fence_transactional_id",
    "ConsumerGroupMetadata",
    "OffsetAndMetadata",
    "TopicPartition",
]
