"""The producer's idempotence and transactions, as the Java client's ``TransactionManager`` does them.

One :class:`TransactionManager` per producer with idempotence on (the default). It is sans-IO: the sender asks it
for the one coordinator request that is due (at most one is in flight), sends it and feeds the answer back; at
drain it says whether a batch may go and stamps producer id, epoch and sequence on it, and it hears the final
answer of every batch. Its parts:

* :class:`TransactionManager` -- producer id/epoch, the state, the open transaction's partitions, the user calls
  (init / begin / commit / abort) and the hooks of the sender, accumulator and facade;
* :class:`TxnState` and ``TRANSITIONS`` -- the states and the one table of legal moves; any other move raises
  :class:`~spark_kafka_sink.errors.IllegalStateError` naming both states;
* the coordinator requests (:class:`TxnRequest`, one handler class each for FindCoordinator, InitProducerId,
  AddPartitionsToTxn and EndTxn) -- how each is built and how its answer is handled (the answer table is in
  ``_handlers``), and the queue they wait in;
* a consumer group's offsets in the transaction (``_offsets``: :class:`ConsumerGroupMetadata`,
  :class:`OffsetAndMetadata`, the AddOffsetsToTxn and TxnOffsetCommit handlers, sent to the group's coordinator);
* the ``SequenceBook`` -- every partition's sequences and the rules that keep a partition's batches in order;
* :func:`end_transaction`, :func:`fence_transactional_id`, :class:`TransactionIdentity` -- ending or fencing a
  transaction from a process that did not write it (the Spark driver); :class:`CoordinatorSession` for many,
  which also lists (ListTransactions) and describes (DescribeTransactions) the transactions of an id prefix.

Idempotence: sequences are assigned when a batch is drained, retried batches keep them, and draining a partition
stops while an earlier batch of it awaits a retry, so a partition never has its batches reordered.
OUT_OF_ORDER_SEQUENCE_NUMBER / UNKNOWN_PRODUCER_ID that show a real gap make an idempotent producer ask for a new
epoch: InitProducerId (v3+ carrying the current id and epoch, which a broker -- 3.x and 4.x alike -- answers
with a fresh producer id for a null transactional id); the affected partitions' unfinished batches are then
renumbered from sequence 0 and retried. (The Java client bumps the epoch locally instead; asking the broker costs
one round trip per rare bump and keeps the broker the only source of ids.) DUPLICATE_SEQUENCE_NUMBER is success. A
transactional producer never bumps on its own: such errors make the transaction abortable, and the abort is
followed by InitProducerId with the current id/epoch (TV1; under TV2 the abort's EndTxn v5 already gave a new
epoch), which resets every sequence.

Two transaction protocols, chosen per transaction when it begins (one transaction never mixes them; the broker
picks the flow by the request versions): where the cluster finalized ``transaction.version`` >= 2 (Kafka 4.x's
default; learned from the ApiVersions answers of the brokers the producer talks to), KIP-890's version 2 --
partitions join the transaction when the partition leader gets their first batch as Produce v12 (no
AddPartitionsToTxn), and EndTxn v5 bumps the epoch, answering with the producer id and epoch (a new producer id
with epoch 0 once the epoch is exhausted) that the producer adopts, every sequence starting afresh. Elsewhere (3.x,
4.x formatted with transaction.version=1) version 1: AddPartitionsToTxn (v <= 3) before the first batch to each
new partition, Produce v <= 11, EndTxn v <= 4, the epoch unchanged. :class:`TransactionIdentity` carries the
version, so another process (the Spark driver) ends the transaction with the EndTxn version it began with; a
TV2 end from there bumps the epoch too, so the writing producer must not begin another transaction with its old
epoch. A repeated EndTxn after a lost answer resends the same epoch, which both protocols accept as a retry.

Errors: PRODUCER_FENCED, INVALID_PRODUCER_EPOCH (both reported as ``ProducerFencedError``),
TRANSACTIONAL_ID_AUTHORIZATION_FAILED and other unexpected coordinator answers are fatal: every later call raises
the same named error. TRANSACTION_ABORTABLE and failed produce requests inside a
transaction are abortable: commit raises, ``abort_transaction()`` recovers. NOT_COORDINATOR /
COORDINATOR_NOT_AVAILABLE re-run FindCoordinator (key type transaction); CONCURRENT_TRANSACTIONS /
COORDINATOR_LOAD_IN_PROGRESS retry after a backoff.

Threads: user threads and the sender thread share the manager; its re-entrant lock guards all its state, the
sequence book and request queue included (see ``_manager``).
"""

from spark_kafka_sink.producer.transactions._admin import (
    OPEN_STATES,
    CoordinatorSession,
    ListedTransaction,
    TransactionDescription,
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
from spark_kafka_sink.producer.transactions._offsets import (
    ConsumerGroupMetadata,
    OffsetAndMetadata,
    offsets_to_commit,
)
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
    "CoordinatorSession",
    "end_transaction",
    "fence_transactional_id",
    "ListedTransaction",
    "TransactionDescription",
    "OPEN_STATES",
    "ConsumerGroupMetadata",
    "OffsetAndMetadata",
    "offsets_to_commit",
]
