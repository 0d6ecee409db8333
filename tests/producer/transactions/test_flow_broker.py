"""Which transaction protocol the producer speaks to the session's broker, shown by counting its requests: on a
cluster that finalized transaction.version 2 (Kafka 4.x by default) a transactional send makes no
AddPartitionsToTxn, goes as Produce v12 and ends with EndTxn v5, whose new epoch the producer adopts; on 3.x and
on 4.x formatted with transaction.version=1 the classic flow (AddPartitionsToTxn, Produce <= v11, EndTxn <= v4)
keeps the epoch. Also: ending a transaction from another process twice (a retry after a lost answer) succeeds
under either version, and the records are visible once."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import InvalidTxnStateError, ProducerFencedError
from spark_kafka_sink.producer.transactions import end_transaction
from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import ConsumedRecord

pytestmark = pytest.mark.broker

Readback = Callable[..., list[ConsumedRecord]]


def cluster_transaction_version(kafka: KafkaCluster) -> int:
    if kafka.major < 4:
        return 1
    return 2 if kafka.transaction_version is None else max(1, kafka.transaction_version)


def spied_producer(config: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> tuple[KafkaProducer, Counter[str]]:
    """A producer whose network client counts every request it sends as ``"<Api> v<version>"``."""
    producer = KafkaProducer(config)
    client = producer._client  # the one network client of the producer and its sender thread
    sent: Counter[str] = Counter()
    lock = threading.Lock()
    real_send = client.send

    def counting_send(*args: Any, **kwargs: Any) -> Any:
        request = real_send(*args, **kwargs)
        with lock:
            sent[f"{request.api.name} v{request.version}"] += 1
        return request

    monkeypatch.setattr(client, "send", counting_send)
    return producer, sent


def test_a_transactional_send_uses_the_clusters_transaction_protocol(
        kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
        monkeypatch: pytest.MonkeyPatch) -> None:
    topic = topic_factory(partitions=3)
    tv = cluster_transaction_version(kafka)
    producer, sent = spied_producer({"bootstrap.servers": bootstrap, "transactional.id": f"flow-{topic}",
                                     "linger.ms": 5}, monkeypatch)
    with producer:
        producer.init_transactions()
        first = producer.transaction_identity()
        for round_ in range(2):
            producer.begin_transaction()
            for p in range(3):
                producer.send(topic, b"r%d-p%d" % (round_, p), partition=p)
            producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"aborted", partition=0)
        producer.flush()
        producer.abort_transaction()
        last = producer.transaction_identity()
    produce = {name for name in sent if name.startswith("Produce ")}
    end_txn = {name for name in sent if name.startswith("EndTxn ")}
    add_partitions = sum(n for name, n in sent.items() if name.startswith("AddPartitionsToTxn "))
    if tv == 2:
        assert add_partitions == 0, sent
        assert produce == {"Produce v12"} and end_txn == {"EndTxn v5"}, sent
        assert sum(sent[name] for name in end_txn) >= 3  # a busy coordinator may have had one retried
        # Each EndTxn v5 bumped the epoch and the producer took the new one.
        assert (last.producer_id, last.producer_epoch) == (first.producer_id, first.producer_epoch + 3)
        assert last.transaction_version == 2
    else:
        # Once per transaction (its partitions together); the first of a transaction may meet the previous one's
        # markers still being written (CONCURRENT_TRANSACTIONS) and go again.
        assert add_partitions >= 3, sent
        assert all(int(name.split("v")[-1]) <= 11 for name in produce), sent
        assert all(int(name.split("v")[-1]) <= 4 for name in end_txn), sent
        assert (last.producer_id, last.producer_epoch) == (first.producer_id, first.producer_epoch)
        assert last.transaction_version == 1
    values = sorted(r.value or b"" for r in readback(topic))
    assert values == sorted(b"r%d-p%d" % (r, p) for r in range(2) for p in range(3))


def test_ending_a_transaction_from_another_process_twice_commits_it_once(
        kafka: KafkaCluster, bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=2)
    config = {"bootstrap.servers": bootstrap, "transactional.id": f"retry-{topic}"}
    with KafkaProducer(config) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for p in range(2):
            producer.send(topic, b"once-%d" % p, partition=p)
        producer.flush()
        identity = producer.transaction_identity()
        assert identity.transaction_version == cluster_transaction_version(kafka)
        # The driver's commit; its answer "lost", the driver sends the same EndTxn again: both succeed.
        end_transaction({"bootstrap.servers": bootstrap}, identity, commit=True, timeout_s=60)
        end_transaction({"bootstrap.servers": bootstrap}, identity, commit=True, timeout_s=60)
        # Ending it the other way is refused, naming the transaction.
        with pytest.raises((InvalidTxnStateError, ProducerFencedError), match=identity.transactional_id):
            end_transaction({"bootstrap.servers": bootstrap}, identity, commit=False, timeout_s=60)
        producer.close(abort_open_transaction=False)  # its transaction was ended by the other client
    assert sorted(r.value or b"" for r in readback(topic)) == [b"once-0", b"once-1"]
