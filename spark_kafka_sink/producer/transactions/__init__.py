"""The producer's idempotence and transactions. (docstring written below)"""

from spark_kafka_sink.producer.transactions._admin import (
    TransactionIdentity,
    end_transaction,
    fence_transactional_id,
)
from spark_kafka_sink.producer.transactions._errors import broker_error, fenced_error
from spark_kafka_sink.producer.transactions._handlers import (
    MAX_TRANSACTIONAL_PRODUCE_VERSION,
    Coordinator,
    RequestKind,
    TxnRequest,
)
from spark_kafka_sink.producer.transactions._manager import TransactionManager
from spark_kafka_sink.producer.transactions._sequences import ProducerIdAndEpoch
from spark_kafka_sink.producer.transactions._states import TRANSITIONS, TxnState

__all__ = [
    "TransactionManager",
    "TxnState",
    "TRANSITIONS",
    "TxnRequest",
    "RequestKind",
    "Coordinator",
    "ProducerIdAndEpoch",
    "MAX_TRANSACTIONAL_PRODUCE_VERSION",
    "broker_error",
    "fenced_error",
    "TransactionIdentity",
    "end_transaction",
    "fence_transactional_id",
]
