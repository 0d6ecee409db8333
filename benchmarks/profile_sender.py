"""The sender thread's own work per batch, without a network: for A/Bs of the sender's bookkeeping.

    taskset -c 1 python -m benchmarks.profile_sender                    # us per batch: queueing, and the sender
    taskset -c 1 python -m benchmarks.profile_sender --value-size 1000 --rounds 15

With a broker, the sender thread's CPU per batch also holds socket writes, the broker's share of the machine and
waits for the GIL, and moves with the machine's load (``profile_sink`` measures that). Here the producer's real
accumulator, transaction manager (idempotence on), sender and produce-response handling run against a scripted
client that frames each Produce request with the real encoder and answers it at once with a broker's encoded
answer, which the real decoder reads. Each round queues ``--batches`` lz4 batches of ``--value-size`` records in
each of ``--partitions`` partitions (``append_encoded``, as ``send_batch`` does), then runs the sender until all
are acknowledged. The minimum over the rounds is printed (the least disturbed one): compare two checkouts by
running this from each in turn, on one pinned core.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.net.metadata import Metadata
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.metrics import ProducerMetrics
from spark_kafka_sink.producer.record_metadata import TopicPartition
from spark_kafka_sink.producer.sender import Sender
from spark_kafka_sink.producer.sender_client import RequestBody
from spark_kafka_sink.producer.transactions import TransactionManager
from spark_kafka_sink.protocol.arrow_encoder import EncodedBatch, encode_arrow_batches
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.framing import decode_response, encode_request_parts, encode_response
from spark_kafka_sink.protocol.messages import INIT_PRODUCER_ID, PRODUCE, ApiSpec

__all__ = ["main", "measure"]

_TOPIC = "bench"
_NODE = 1
_PRODUCER_ID = 7


@dataclass
class _Request:
    node_id: int
    version: int
    context: object


@dataclass
class _Answer:
    request: _Request
    body: dict[str, Any] | None
    error: KafkaError | None = None
    latency_ms: int = 0
    received_ms: int = 0


@dataclass
class _ScriptedClient:
    """One always-ready broker leading every partition; a Produce is answered (NO_ERROR) by the next poll."""

    metadata: Metadata
    _answers: list[_Answer] = field(default_factory=list)
    _frames: dict[tuple[int, ...], bytes] = field(default_factory=dict)  # a broker's answer per partition set
    _correlation_id: int = 0

    def ready(self, node_id: int, now_ms: int) -> bool:
        return True

    def connection_delay(self, node_id: int, now_ms: int) -> int:
        return 1 << 31

    def connection_error(self, node_id: int) -> KafkaError | None:
        return None

    def least_loaded_node(self, now_ms: int) -> int | None:
        return _NODE

    def in_flight_count(self) -> int:
        return len(self._answers)

    def address(self, node_id: int) -> str:
        return "bench:9092"

    def finalized_features(self, node_id: int) -> dict[str, int]:
        return {}

    def send(self, node_id: int, api: ApiSpec, body: RequestBody, now_ms: int, *, expect_response: bool = True,
             max_version: int | None = None, context: object = None) -> object:
        version = api.max_version if max_version is None else min(api.max_version, max_version)
        payload = body(version) if callable(body) else body
        request = _Request(node_id, version, context)
        self._correlation_id += 1
        if api is INIT_PRODUCER_ID:
            self._answers.append(_Answer(request, {"throttle_time_ms": 0, "error_code": NO_ERROR,
                                                   "producer_id": _PRODUCER_ID, "producer_epoch": 0}))
            return request
        assert api is PRODUCE, api.name
        encode_request_parts(api, version, self._correlation_id, "bench", payload)  # the client's framing
        (topic,) = payload["topic_data"]
        partitions = tuple(p["index"] for p in topic["partition_data"])
        frame = self._frames.get(partitions)
        if frame is None:  # the broker's side: encoded once per partition set, not measured
            answer = {"throttle_time_ms": 0, "responses": [{"name": _TOPIC, "partition_responses": [
                {"index": p, "error_code": NO_ERROR, "base_offset": 0, "log_append_time_ms": -1,
                 "log_start_offset": 0, "record_errors": [], "error_message": None} for p in partitions]}]}
            frame = self._frames[partitions] = encode_response(api, version, 0, answer)[4:]
        _, decoded = decode_response(api, version, frame)  # the client's decoding
        self._answers.append(_Answer(request, decoded, received_ms=now_ms))
        return request

    def poll(self, timeout_ms: int, now_ms: int) -> Sequence[_Answer]:
        answers, self._answers = self._answers, []
        return answers

    def wakeup(self) -> None:
        pass

    def close(self) -> None:
        pass


def _batches(value_size: int, count: int) -> list[EncodedBatch]:
    rng = np.random.default_rng(1)
    rows = max(1, count * 16384 // (value_size + 25))  # ~count 16 KiB batches before compression
    values = pa.array([rng.bytes(value_size) for _ in range(rows)], pa.binary())
    encoded = encode_arrow_batches(values, timestamp_ms=np.zeros(rows, np.int64), max_batch_bytes=16384,
                                   compression="lz4", checksum=False)
    return encoded[:count]


def _round(encoded: list[EncodedBatch], partitions: int) -> tuple[float, float, int]:
    """Queue ``encoded`` in every partition, then run the sender until every batch is acknowledged; returns
    (seconds queueing, seconds in the sender, batches)."""
    config = ProducerConfig.from_dict({"bootstrap.servers": "bench:9092", "compression.type": "lz4"})
    metadata = Metadata(config.net_config())
    metadata.update({"brokers": [{"node_id": _NODE, "host": "bench", "port": 9092}], "controller_id": _NODE,
                     "cluster_id": "bench", "topics": [{"error_code": NO_ERROR, "name": _TOPIC, "partitions": [
                         {"error_code": NO_ERROR, "partition_index": p, "leader_id": _NODE, "leader_epoch": 0,
                          "replica_nodes": [_NODE], "isr_nodes": [_NODE]} for p in range(partitions)]}]}, 0)
    metadata.add_topic(_TOPIC, 0)
    accumulator = RecordAccumulator.from_config(config)
    manager = TransactionManager(transactional_id=None, transaction_timeout_ms=config.transaction_timeout_ms,
                                 retry_backoff_ms=config.retry_backoff_ms)
    sender = Sender(_ScriptedClient(metadata), accumulator, config, transaction_manager=manager,
                    metrics=ProducerMetrics())
    for _ in range(10):
        if manager.producer_id_and_epoch.producer_id == _PRODUCER_ID:
            break
        sender.run_once(0)
    else:
        raise AssertionError("the sender did not obtain the scripted producer id")
    start = time.perf_counter()
    futures = [f for p in range(partitions)
               for f in accumulator.append_encoded(TopicPartition(_TOPIC, p), encoded, 0, 60_000)]
    queued = time.perf_counter()
    for _ in range(4 * len(futures) + 10):  # a round sends at least one batch and answers the last request's
        if not accumulator.has_incomplete():
            break
        sender.run_once(0)
    else:
        raise AssertionError("the sender stopped making progress")
    done = time.perf_counter()
    if any(f.result().base_offset != 0 for f in futures):
        raise AssertionError("a batch was not acknowledged by the scripted broker")
    return queued - start, done - queued, len(futures)


def measure(*, value_size: int = 100, batches: int = 36, partitions: int = 12, rounds: int = 9
            ) -> tuple[float, float]:
    """Microseconds per batch (queueing, sender), the minimum over ``rounds`` rounds."""
    encoded = _batches(value_size, batches)
    results = [_round(encoded, partitions) for _ in range(rounds)]
    return (min(q / n for q, _, n in results) * 1e6, min(s / n for _, s, n in results) * 1e6)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.profile_sender", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--value-size", type=int, default=100)
    p.add_argument("--batches", type=int, default=36, help="16 KiB lz4 batches per partition and round")
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args(argv)
    queue_us, sender_us = measure(value_size=args.value_size, batches=args.batches, partitions=args.partitions,
                                  rounds=args.rounds)
    print(f"per 16 KiB batch ({args.value_size} B values, lz4): queueing {queue_us:.2f} us, "
          f"sender {sender_us:.2f} us")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
