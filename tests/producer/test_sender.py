"""Sender.run_once stepped against a scripted network client (tests/producer/fake_client.py): no broker, no
threads, time passed in explicitly."""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest

from spark_kafka_sink.errors import (
    ConcurrentTransactionsError,
    DeliveryTimeoutError,
    DuplicateSequenceNumberError,
    FencedLeaderEpochError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.record_metadata import RecordMetadata, TopicPartition
from spark_kafka_sink.producer.sender import Sender
from spark_kafka_sink.producer.transactions import TransactionManager, TxnState
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.messages import (
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    FIND_COORDINATOR,
    INIT_PRODUCER_ID,
    METADATA,
    PRODUCE,
)
from spark_kafka_sink.protocol.record_batch import DecodedBatch
from tests.producer.fake_client import FakeClient, FakeRequest, batches_of, metadata_body, produce_answer

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
LEADERS = {("t", 0): 1, ("t", 1): 2}


class Rig:
    def __init__(self, extra: dict[str, Any] | None = None, *, transactional: bool = False) -> None:
        options: dict[str, Any] = {"bootstrap.servers": "broker1:9001", "linger.ms": 0, "request.timeout.ms": 1000,
                                   "delivery.timeout.ms": 5000, "retry.backoff.ms": 100,
                                   "retry.backoff.max.ms": 100}
        if transactional:
            options["transactional.id"] = "tx"
        options.update(extra or {})
        self.config = ProducerConfig.from_dict(options)
        self.client = FakeClient(LEADERS)
        self.acc = RecordAccumulator.from_config(self.config, retry_jitter=0.0)
        self.tm = (TransactionManager(transactional_id=self.config.transactional_id,
                                      transaction_timeout_ms=self.config.transaction_timeout_ms,
                                      retry_backoff_ms=self.config.retry_backoff_ms)
                   if self.config.enable_idempotence else None)
        self.sender = Sender(self.client, self.acc, self.config, transaction_manager=self.tm)
        self.now = 0

    def send(self, tp: TopicPartition, value: bytes) -> Future[RecordMetadata]:
        if self.tm is not None and self.tm.is_transactional:
            self.tm.maybe_add_partition(tp)
        return self.acc.append(tp, self.now, None, value, (), self.now, 1000).future

    def step(self, advance_ms: int = 0, rounds: int = 1) -> None:
        """``rounds`` sender rounds at ``now + advance_ms``: answers are read at the end of a round (its poll), so
        what they cause is sent in the next one."""
        self.now += advance_ms
        for _ in range(rounds):
            self.sender.run_once(self.now)

    def init_idempotent(self, pid: int = 7, epoch: int = 0) -> None:
        self.step()
        init = self.client.take(INIT_PRODUCER_ID)
        assert init.body["transactional_id"] is None
        self.client.respond(init, {"error_code": NO_ERROR, "producer_id": pid, "producer_epoch": epoch})
        self.step()
        assert self.tm is not None and self.tm.state is TxnState.READY

    def first_ack(self, tp: TopicPartition = T0) -> None:
        """One acknowledged batch: until then the producer keeps one batch in flight per partition."""
        future = self.send(tp, b"first")
        self.step()
        req = self.client.produce_requests()[-1]
        self.answer(req)
        self.step()
        assert future.done()

    def produce(self) -> FakeRequest:
        return self.client.take(PRODUCE)

    def answer(self, request: FakeRequest, codes: dict[tuple[str, int], int] | None = None,
               offsets: dict[tuple[str, int], int] | None = None) -> None:
        self.client.respond(request, produce_answer(request, codes, offsets))


def sequences(request: FakeRequest) -> dict[tuple[str, int], tuple[int, int, int]]:
    return {tp: (b.producer_id, b.producer_epoch, b.base_sequence) for tp, b in batches_of(request).items()}


def test_happy_path_assigns_producer_id_and_sequences_and_completes_futures() -> None:
    rig = Rig()
    rig.init_idempotent(pid=7)
    f1, f2 = rig.send(T0, b"a"), rig.send(T0, b"b")
    rig.step()
    req = rig.produce()
    assert req.node_id == 1 and req.body["acks"] == -1 and req.body["timeout_ms"] == 1000
    assert req.version == 12 and req.body["transactional_id"] is None
    assert sequences(req) == {("t", 0): (7, 0, 0)}
    assert [r.value for r in batches_of(req)[("t", 0)].records] == [b"a", b"b"]
    rig.answer(req, offsets={("t", 0): 40})
    rig.step()
    assert f1.result(0) == RecordMetadata("t", 0, 40, 0) and f2.result(0).offset == 41
    f3 = rig.send(T0, b"c")
    rig.step()
    assert sequences(rig.produce())[("t", 0)] == (7, 0, 2)
    assert not f3.done()


def test_not_leader_refreshes_metadata_and_reroutes_the_same_bytes() -> None:
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"x")
    rig.step()
    first = rig.produce()
    rig.client.next_metadata = metadata_body({("t", 0): 3, ("t", 1): 2})  # the leader moved to broker 3
    rig.answer(first, codes={("t", 0): NotLeaderOrFollowerError.code})
    rig.step()
    assert len(rig.client.produce_requests()) == 1  # backing off retry.backoff.ms
    # The refresh is requested now but answered only at a later poll (as with a real broker), so the first
    # retry may still reach the old leader: it answers NOT_LEADER again, and by then the cache knows better.
    rig.step(100)
    retry = rig.produce()
    if retry.node_id == 1:
        rig.answer(retry, codes={("t", 0): NotLeaderOrFollowerError.code})
        rig.step()
        rig.step(100)
        retry = rig.produce()
    assert rig.client.metadata.leader_for("t", 0) == 3
    assert retry.node_id == 3
    assert batches_of(retry)[("t", 0)] == batches_of(first)[("t", 0)]  # identical batch, same sequence
    rig.answer(retry, offsets={("t", 0): 5})
    rig.step()
    assert future.result(0).offset == 5


def _answered_leader_moved(code: int, current_leader: tuple[int, int] | None = None
                           ) -> tuple[Rig, FakeRequest, Future[RecordMetadata]]:
    """A first batch of T0 answered ``code``, naming ``current_leader`` (id, epoch) and its address if given; the
    retry backoff is 10 s."""
    rig = Rig({"retry.backoff.ms": 10_000, "retry.backoff.max.ms": 10_000, "delivery.timeout.ms": 60_000})
    rig.init_idempotent()
    future = rig.send(T0, b"x")
    rig.step()
    first = rig.produce()
    answer = produce_answer(first, codes={("t", 0): code})
    if current_leader is not None:
        leader, epoch = current_leader
        answer["responses"][0]["partition_responses"][0]["current_leader"] = {"leader_id": leader,
                                                                               "leader_epoch": epoch}
        answer["node_endpoints"] = [{"node_id": leader, "host": f"broker{leader}", "port": 9000 + leader,
                                     "rack": None}]
    rig.client.respond(first, answer)
    return rig, first, future


@pytest.mark.parametrize("code", [NotLeaderOrFollowerError.code, FencedLeaderEpochError.code])
def test_a_produce_answer_naming_the_new_leader_is_followed_at_once_kip_951(code: int) -> None:
    rig, first, future = _answered_leader_moved(code, current_leader=(4, 1))
    rig.step()  # the answer is read at the end of this round
    assert rig.client.metadata.leader_for("t", 0) == 4  # from the answer: no Metadata request was sent
    assert [r.api for r in rig.client.sent].count(METADATA) == 0
    rig.step()  # the next round: no 10 s backoff, the retry goes to the new leader
    retry = rig.produce()
    assert retry.node_id == 4
    assert batches_of(retry)[("t", 0)] == batches_of(first)[("t", 0)]
    rig.answer(retry, offsets={("t", 0): 9})
    rig.step()
    assert future.result(0).offset == 9


def test_a_retry_backs_off_when_the_answer_names_no_newer_leader() -> None:
    """Without a newer leader (here an epoch not above the cached one) the backoff holds."""
    rig, _, _ = _answered_leader_moved(NotLeaderOrFollowerError.code, current_leader=(2, 0))
    rig.step(rounds=3)
    rig.step(9_000, rounds=2)
    assert len(rig.client.produce_requests()) == 1 and rig.client.metadata.leader_for("t", 0) == 1
    rig.step(1_000)
    assert len(rig.client.produce_requests()) == 2


def test_a_refresh_showing_a_new_leader_ends_the_backoff() -> None:
    """The leader epoch rose since the batch left (here by a refresh): as Java's, the retry goes at once."""
    rig, _, _ = _answered_leader_moved(NotLeaderOrFollowerError.code)
    rig.step()
    body = metadata_body({("t", 0): 3, ("t", 1): 2})
    body["topics"][0]["partitions"][0]["leader_epoch"] = 1
    rig.client.metadata.update(body, rig.now)
    rig.step()
    assert rig.produce().node_id == 3


def test_a_topic_without_a_known_leader_is_looked_up_and_then_sent() -> None:
    rig = Rig()
    rig.init_idempotent()
    new = TopicPartition("new", 0)
    future = rig.send(new, b"x")
    rig.client.polls.clear()
    rig.step()
    assert not rig.client.produce_requests() and "new" in rig.client.metadata.topics_of_interest()
    assert max(rig.client.polls) <= 100  # polls again within retry.backoff.ms to see the leader
    rig.client.next_metadata = metadata_body({("t", 0): 1, ("t", 1): 2, ("new", 0): 3})  # answered at this poll
    rig.step(100)
    rig.step()
    request = rig.produce()
    assert request.node_id == 3 and sequences(request) == {("new", 0): (7, 0, 0)}
    rig.answer(request, offsets={("new", 0): 12})
    rig.step()
    assert future.result(0).offset == 12


def test_request_timeout_retries_and_delivery_timeout_fails() -> None:
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"x")
    rig.step()
    first = rig.produce()
    rig.client.fail(first, KafkaTimeoutError("request.timeout.ms passed"))
    rig.step()
    rig.step(100)
    retry = rig.produce()
    assert sequences(retry) == sequences(first)
    rig.client.fail(retry, KafkaTimeoutError("request.timeout.ms passed"), now_ms=5100)
    rig.step(5000)  # past delivery.timeout.ms: no more retries
    with pytest.raises(DeliveryTimeoutError, match="delivery.timeout.ms"):
        future.result(0)


def test_queued_batches_expire_when_the_leader_is_unreachable() -> None:
    rig = Rig()
    rig.init_idempotent()
    rig.client.down.add(1)
    future = rig.send(T0, b"x")
    rig.step()
    assert not rig.client.produce_requests()
    rig.step(5000)
    with pytest.raises(DeliveryTimeoutError, match="queued"):
        future.result(0)


def test_first_batch_of_a_partition_goes_alone() -> None:
    # Until the broker acknowledged one batch it accepts any sequence from an unknown producer: a second batch in
    # flight could overtake a first one that failed with NOT_LEADER (a brand-new topic does exactly that).
    rig = Rig()
    rig.init_idempotent()
    rig.send(T0, b"a")
    rig.step()
    first = rig.produce()
    rig.send(T0, b"b")
    rig.step()
    assert len(rig.client.produce_requests()) == 1
    rig.answer(first, codes={("t", 0): NotLeaderOrFollowerError.code})
    rig.step()
    rig.step(100)
    retry = rig.produce()
    assert sequences(retry)[("t", 0)][2] == 0 and len(rig.client.outstanding) == 1
    rig.answer(retry)
    rig.step(rounds=2)
    assert sequences(rig.produce())[("t", 0)][2] == 1


def test_out_of_order_behind_a_failed_batch_is_retried_in_order() -> None:
    rig = Rig()
    rig.init_idempotent()
    rig.first_ack()
    fa = rig.send(T0, b"a")
    rig.step()
    ra = rig.produce()
    fb = rig.send(T0, b"b")
    rig.step()
    rb = rig.client.produce_requests()[-1]  # a second request in flight for the same partition (max.in.flight 5)
    assert sequences(ra)[("t", 0)][2] == 1 and sequences(rb)[("t", 0)][2] == 2
    rig.answer(ra, codes={("t", 0): NotEnoughReplicasError.code})  # a was not written
    # so b is out of order: retried after a, no epoch bump
    rig.answer(rb, codes={("t", 0): OutOfOrderSequenceNumberError.code})
    rig.step()
    rig.step(100)
    resend = rig.produce()
    assert sequences(resend)[("t", 0)][2] == 1  # a first, alone
    assert len(rig.client.outstanding) == 1
    rig.step()
    assert len(rig.client.outstanding) == 1  # b waits until a is acknowledged
    rig.answer(resend, offsets={("t", 0): 10})
    rig.step(rounds=2)
    rb2 = rig.produce()
    assert sequences(rb2)[("t", 0)] == (7, 0, 2)
    rig.answer(rb2, offsets={("t", 0): 11})
    rig.step()
    assert (fa.result(0).offset, fb.result(0).offset) == (10, 11)
    assert not any(r.api is INIT_PRODUCER_ID for r in rig.client.sent[1:])


def test_batch_overtaken_by_acknowledged_ones_is_written_under_a_new_epoch() -> None:
    rig = Rig()
    rig.init_idempotent(pid=7)
    rig.first_ack()
    fa = rig.send(T0, b"a")
    rig.step()
    ra = rig.produce()
    rig.send(T0, b"b")
    rig.step()
    rb = rig.client.produce_requests()[-1]
    rig.answer(rb, offsets={("t", 0): 5})  # b acknowledged first: a precedes acknowledged data
    rig.answer(ra, codes={("t", 0): OutOfOrderSequenceNumberError.code})
    rig.step(rounds=2)
    bump = rig.client.take(INIT_PRODUCER_ID)
    rig.client.respond(bump, {"error_code": NO_ERROR, "producer_id": 8, "producer_epoch": 0})
    rig.step(rounds=2)
    rig.step(100)
    retry = rig.produce()
    assert sequences(retry)[("t", 0)] == (8, 0, 0)
    rig.answer(retry, offsets={("t", 0): 6})
    rig.step()
    assert fa.result(0).offset == 6


def test_out_of_order_gap_bumps_the_epoch_and_resends_from_sequence_zero() -> None:
    rig = Rig()
    rig.init_idempotent(pid=7)
    fa = rig.send(T0, b"a")
    rig.step()
    rig.answer(rig.produce(), offsets={("t", 0): 0})
    rig.step()
    fb = rig.send(T0, b"b")
    rig.step()
    # b IS the next sequence: the broker lost state
    rig.answer(rig.produce(), codes={("t", 0): OutOfOrderSequenceNumberError.code})
    rig.step(rounds=2)
    bump = rig.client.take(INIT_PRODUCER_ID)
    assert (bump.body["producer_id"], bump.body["producer_epoch"]) == (7, 0)
    rig.step(100)
    assert len(rig.client.produce_requests()) == 2  # nothing is sent while the new id is being fetched
    rig.client.respond(bump, {"error_code": NO_ERROR, "producer_id": 8, "producer_epoch": 0})
    rig.step(rounds=2)
    retry = rig.produce()
    assert sequences(retry)[("t", 0)] == (8, 0, 0)
    rig.answer(retry, offsets={("t", 0): 1})
    rig.step()
    assert fa.result(0).offset == 0 and fb.result(0).offset == 1


def test_unknown_producer_id_bumps_the_epoch() -> None:
    rig = Rig()
    rig.init_idempotent(pid=7)
    future = rig.send(T0, b"a")
    rig.step()
    request = rig.produce()
    rig.client.respond(request, produce_answer(request, {("t", 0): UnknownProducerIdError.code}, log_start_offset=-1))
    rig.step(rounds=2)
    bump = rig.client.take(INIT_PRODUCER_ID)
    rig.client.respond(bump, {"error_code": NO_ERROR, "producer_id": 9, "producer_epoch": 0})
    rig.step()
    rig.step(100)
    retry = rig.produce()
    assert sequences(retry)[("t", 0)] == (9, 0, 0)
    rig.answer(retry, offsets={("t", 0): 3})
    rig.step()
    assert future.result(0).offset == 3


def test_duplicate_sequence_is_success() -> None:
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"a")
    rig.step()
    rig.answer(rig.produce(), codes={("t", 0): DuplicateSequenceNumberError.code})
    rig.step()
    assert future.result(0).partition == 0 and future.result(0).offset == -1
    rig.send(T0, b"b")
    rig.step()
    assert sequences(rig.produce())[("t", 0)][2] == 1  # the sequence moved on


def test_message_too_large_fails_with_the_size_and_the_settings() -> None:
    rig = Rig()
    rig.init_idempotent()
    future = rig.send(T0, b"a" * 1000)
    rig.step()
    rig.answer(rig.produce(), codes={("t", 0): MessageTooLargeError.code})
    rig.step()
    # One record cannot be split: the error names its size and the topic limit to raise.
    with pytest.raises(MessageTooLargeError, match=r"a record of 10\d\d bytes.*max\.message\.bytes.* is below 10"):
        future.result(0)


def test_message_too_large_splits_the_batch_and_the_parts_take_over_its_sequences() -> None:
    rig = Rig({"batch.size": 100_000})
    rig.init_idempotent(pid=7)
    rig.first_ack()  # sequence 0
    futures = [rig.send(T0, b"%02d" % i + b"v" * 1000) for i in range(8)]
    rig.step()
    big = rig.produce()
    assert sequences(big) == {("t", 0): (7, 0, 1)} and len(batches_of(big)[("t", 0)].records) == 8
    rig.answer(big, codes={("t", 0): MessageTooLargeError.code})
    rig.step()  # the answer: split into halves, queued first
    assert not any(f.done() for f in futures)
    parts: list[DecodedBatch] = []
    offset = 100
    while not all(f.done() for f in futures):
        assert len(parts) < 8, "the parts never completed"
        rig.step()
        part = rig.produce()
        parts.append(batches_of(part)[("t", 0)])
        rig.answer(part, offsets={("t", 0): offset})
        offset += len(parts[-1].records)
        rig.step()
    # Parts of at most half the refused batch's (uncompressed) size, one at a time in order, taking over its
    # sequences (1..8) under the same producer id; the same records in order.
    assert [(p.producer_id, p.base_sequence, len(p.records)) for p in parts] == [(7, 1, 3), (7, 4, 3), (7, 7, 2)]
    assert [r.value for p in parts for r in p.records] == [b"%02d" % i + b"v" * 1000 for i in range(8)]
    assert [f.result(0).offset for f in futures] == [100, 101, 102, 103, 104, 105, 106, 107]
    assert rig.acc.pool.available_memory == rig.acc.pool.total_memory  # the refused batch's memory is back


def test_at_most_max_in_flight_requests_per_node_and_then_the_sender_waits_instead_of_spinning() -> None:
    rig = Rig({"max.in.flight.requests.per.connection": 2})
    rig.client.max_in_flight = 2
    rig.init_idempotent()
    rig.first_ack()
    for i in range(4):
        rig.send(T0, b"%d" % i)
        rig.step()
    assert len(rig.client.outstanding) == 2 and rig.acc.has_undrained()  # sendable batches wait for a slot
    rig.client.polls.clear()
    rig.step()
    assert rig.client.polls and min(rig.client.polls) > 0  # blocks in poll until the network has news


def test_acks_zero_without_idempotence_completes_on_send() -> None:
    rig = Rig({"acks": "0", "enable.idempotence": "false"})
    future = rig.send(T0, b"a")
    rig.step()
    req = rig.client.produce_requests()[0]
    assert req.body["acks"] == 0 and not req.expect_response
    assert sequences(req)[("t", 0)] == (-1, -1, -1)
    rig.step()
    assert future.result(0).offset == -1


# ------------------------------------------------------------------------------------------------ transactions


def init_transactional(rig: Rig) -> None:
    assert rig.tm is not None
    initialized = rig.tm.initialize_transactions()
    rig.step()
    find = rig.client.take(FIND_COORDINATOR)
    assert find.body["key_type"] == 1
    rig.client.respond(find, {"coordinators": [{"key": "tx", "node_id": 2, "host": "broker2", "port": 9002,
                                                "error_code": NO_ERROR}]})
    rig.step(rounds=2)
    init = rig.client.take(INIT_PRODUCER_ID)
    assert init.node_id == 2 and init.body["transactional_id"] == "tx"
    rig.client.respond(init, {"error_code": NO_ERROR, "producer_id": 50, "producer_epoch": 1})
    rig.step()
    assert rig.tm.state is TxnState.READY
    assert initialized.result(0) is None  # waited for, as init_transactions() does


def add_partitions_answer(request: FakeRequest, code: int) -> dict[str, Any]:
    return {"results_by_topic_v3_and_below": [
        {"name": t["name"], "results_by_partition": [{"partition_index": p, "partition_error_code": code}
                                                     for p in t["partitions"]]}
        for t in request.body["v3_and_below_topics"]]}


def test_transaction_retries_concurrent_transactions_and_commits() -> None:
    rig = Rig(transactional=True)
    init_transactional(rig)
    assert rig.tm is not None
    rig.tm.begin_transaction()
    future = rig.send(T0, b"a")
    rig.step()
    add = rig.client.take(ADD_PARTITIONS_TO_TXN)
    assert add.node_id == 2 and add.version <= 3
    assert not rig.client.produce_requests()  # no batch before its partition is in the transaction
    rig.client.respond(add, add_partitions_answer(add, ConcurrentTransactionsError.code))
    rig.step()
    rig.step(10)
    assert rig.client.sent[-1] is add  # the first add in a transaction retries after 20 ms, not 100
    rig.step(10)
    add2 = rig.client.take(ADD_PARTITIONS_TO_TXN)
    rig.client.respond(add2, add_partitions_answer(add2, NO_ERROR))
    rig.step()
    rig.step()
    produce = rig.produce()
    assert produce.version == 11 and produce.body["transactional_id"] == "tx"
    assert batches_of(produce)[("t", 0)].is_transactional
    rig.answer(produce, offsets={("t", 0): 0})
    commit = rig.tm.begin_commit()
    rig.step(rounds=2)  # the Produce answer is read first: EndTxn waits for every batch
    end = rig.client.take(END_TXN)
    assert end.version <= 4 and end.body["committed"] is True
    rig.client.respond(end, {"error_code": ConcurrentTransactionsError.code})
    rig.step()
    rig.step(100)
    end2 = rig.client.take(END_TXN)
    rig.client.respond(end2, {"error_code": NO_ERROR})
    rig.step()
    assert commit.result(0) is None and future.result(0).offset == 0
    assert rig.tm.state is TxnState.READY


def test_producer_fenced_in_produce_is_fatal_and_named() -> None:
    rig = Rig(transactional=True)
    init_transactional(rig)
    assert rig.tm is not None
    rig.tm.begin_transaction()
    future = rig.send(T0, b"a")
    rig.step()
    add = rig.client.take(ADD_PARTITIONS_TO_TXN)
    rig.client.respond(add, add_partitions_answer(add, NO_ERROR))
    rig.step()
    rig.step()
    rig.answer(rig.produce(), codes={("t", 0): ProducerFencedError.code})
    rig.step()
    with pytest.raises(ProducerFencedError):
        future.result(0)
    assert rig.tm.state is TxnState.FATAL_ERROR
    with pytest.raises(ProducerFencedError):
        rig.tm.begin_commit()
    with pytest.raises(ProducerFencedError):
        rig.tm.fail_if_not_ready_for_send()


def test_producer_fenced_on_end_txn_fails_the_commit() -> None:
    rig = Rig(transactional=True)
    init_transactional(rig)
    assert rig.tm is not None
    rig.tm.begin_transaction()
    rig.send(T0, b"a")
    rig.step()
    add = rig.client.take(ADD_PARTITIONS_TO_TXN)
    rig.client.respond(add, add_partitions_answer(add, NO_ERROR))
    rig.step()
    rig.step()
    rig.answer(rig.produce())
    commit = rig.tm.begin_commit()
    rig.step(rounds=2)
    rig.client.respond(rig.client.take(END_TXN), {"error_code": ProducerFencedError.code})
    rig.step()
    with pytest.raises(ProducerFencedError, match="fenced"):
        commit.result(0)


def test_abort_drops_unsent_batches() -> None:
    rig = Rig(transactional=True)
    init_transactional(rig)
    assert rig.tm is not None
    rig.tm.begin_transaction()
    future = rig.send(T0, b"a")
    rig.step()  # AddPartitionsToTxn goes out; the batch waits for it
    aborted = rig.tm.begin_abort()
    add = rig.client.take(ADD_PARTITIONS_TO_TXN)
    rig.client.respond(add, add_partitions_answer(add, NO_ERROR))
    rig.step()
    rig.step()
    with pytest.raises(Exception, match="aborted"):
        future.result(0)
    end = rig.client.take(END_TXN)
    assert end.body["committed"] is False
    rig.client.respond(end, {"error_code": NO_ERROR})
    rig.step()
    assert aborted.result(0) is None and not rig.client.produce_requests()


def test_a_missing_producer_id_does_not_keep_a_closing_producer_alive() -> None:
    rig = Rig()
    rig.client.down.update({1, 2, 3})  # InitProducerId can go nowhere
    rig.step()
    assert rig.tm is not None and rig.tm.has_pending_requests()
    assert not rig.sender.has_pending_work()
    rig.send(T0, b"queued")
    assert rig.sender.has_pending_work()  # records are, until they are sent or expire


def test_sender_thread_force_close_fails_pending_records() -> None:
    from spark_kafka_sink.errors import ProducerClosedError
    from spark_kafka_sink.producer.sender import SenderThread

    rig = Rig()
    rig.client.down.update({1, 2, 3})
    future = rig.send(T0, b"never")
    thread = SenderThread(rig.sender, clock=lambda: rig.now)
    thread.start()
    rig.acc.close()
    thread.force_close()
    thread.join(10)
    assert not thread.is_alive() and rig.client.closed
    with pytest.raises(ProducerClosedError, match="closed"):
        future.result(0)


def test_without_idempotence_max_in_flight_one_mutes_the_partition() -> None:
    rig = Rig({"enable.idempotence": "false", "max.in.flight.requests.per.connection": 1, "acks": "1"})
    rig.send(T0, b"a")
    rig.step()
    first = rig.produce()
    rig.send(T0, b"b")
    rig.send(T1, b"c")  # another partition (and node) is not held back
    rig.step()
    assert [r.node_id for r in rig.client.outstanding] == [1, 2]
    rig.answer(first, codes={("t", 0): NotLeaderOrFollowerError.code})  # retried first, before "b": order holds
    rig.step()
    rig.step(100)
    assert [r.value for r in batches_of(rig.client.produce_requests()[-1])[("t", 0)].records] == [b"a"]
