"""A KafkaProducer against a scripted broker that answers Produce with malformed bytes: a truncated frame, a wrong
correlation id, an absurd frame length, an absurd array count, an unknown error code. Each send ends in a clear
error within delivery.timeout.ms (retriable garbage is retried until then, as Java does with a corrupt response),
never a hang; the sender thread survives and close() returns."""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import DeliveryTimeoutError, KafkaError, UnknownBrokerError
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.framing import RequestHeader
from spark_kafka_sink.protocol.messages import METADATA, PRODUCE
from tests.net.fake_broker import FakeBroker, Peer

DELIVERY_TIMEOUT_MS = 3_000
Mangle = Callable[[Peer, RequestHeader, dict[str, Any]], None]


def produce_answer(body: dict[str, Any], code: int = NO_ERROR) -> dict[str, Any]:
    return {"throttle_time_ms": 0, "responses": [
        {"name": t["name"], "partition_responses": [
            {"index": p["index"], "error_code": code, "base_offset": 0, "log_append_time_ms": -1,
             "log_start_offset": 0, "record_errors": [], "error_message": None} for p in t["partition_data"]]}
        for t in body["topic_data"]]}


def truncated(peer: Peer, header: RequestHeader, body: dict[str, Any]) -> None:
    frame = peer.response_bytes(header, produce_answer(body))
    peer.send(frame[:len(frame) // 2])  # the rest never comes: request.timeout.ms


def wrong_correlation_id(peer: Peer, header: RequestHeader, body: dict[str, Any]) -> None:
    peer.respond(header, produce_answer(body), correlation_id=header.correlation_id + 7)


def absurd_frame_length(peer: Peer, header: RequestHeader, body: dict[str, Any]) -> None:
    peer.send(struct.pack(">i", 0x7FFFFFF0) + struct.pack(">i", header.correlation_id) + b"\x00" * 64)


def absurd_array_count(peer: Peer, header: RequestHeader, body: dict[str, Any]) -> None:
    frame = bytearray(peer.response_bytes(header, produce_answer(body), version=8))  # classic arrays: int32 counts
    struct.pack_into(">i", frame, 8, 0x7FFFFFFF)  # size, correlation id, then the responses array's count
    peer.send(bytes(frame))


def unknown_error_code(peer: Peer, header: RequestHeader, body: dict[str, Any]) -> None:
    peer.respond(header, produce_answer(body, code=9_999))


def script_for(mangle: Mangle, port: list[int]) -> Callable[[Peer], None]:
    def script(peer: Peer) -> None:
        peer.serve_api_versions(overrides={PRODUCE.key: (3, 8)})
        while True:
            header, body = peer.read_request()
            if header.api_key == METADATA.key:
                peer.respond(header, {
                    "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port[0], "rack": None}],
                    "cluster_id": "fake", "controller_id": 1, "topics": [
                        {"error_code": NO_ERROR, "name": "t", "is_internal": False, "partitions": [
                            {"error_code": NO_ERROR, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                             "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]}]})
            elif header.api_key == PRODUCE.key:
                mangle(peer, header, body)
            else:
                raise AssertionError(f"unexpected API key {header.api_key}")
    return script


@pytest.mark.parametrize("mangle, says", [
    (truncated, "request.timeout.ms"),
    (wrong_correlation_id, "correlation id"),
    (absurd_frame_length, "frame size"),
    (absurd_array_count, "elements cannot fit"),  # checked before anything is allocated
    (unknown_error_code, "9999"),
])
def test_malformed_produce_answers_end_in_a_clear_error_in_time(mangle: Mangle, says: str) -> None:
    port: list[int] = []
    with FakeBroker(script_for(mangle, port), connections=100) as broker:
        port.append(broker.port)
        producer = KafkaProducer({"bootstrap.servers": broker.address, "acks": "1", "linger.ms": 0,
                                  "request.timeout.ms": 1_000, "delivery.timeout.ms": DELIVERY_TIMEOUT_MS,
                                  "retry.backoff.ms": 50, "reconnect.backoff.ms": 10, "max.block.ms": 10_000})
        try:
            started = time.monotonic()
            future = producer.send("t", b"v")
            with pytest.raises(KafkaError) as info:
                future.result(timeout=30)  # a hang fails here
            took = time.monotonic() - started
            error = info.value
            causes = [error, *(c for c in (error.__cause__, error.__context__) if c is not None)]
            print(f"{mangle.__name__}: {type(error).__name__} after {took:.2f} s: {error}"
                  + (f" (cause: {error.__cause__})" if error.__cause__ else ""))
            assert says in str(error) or says in repr(error.__cause__)  # the error says what went wrong
            if mangle is unknown_error_code:
                assert isinstance(error, UnknownBrokerError) and "9999" in str(error)
                assert took < 1.0  # not retriable: no retries
            else:
                assert isinstance(error, DeliveryTimeoutError) and f"delivery.timeout.ms={DELIVERY_TIMEOUT_MS}" in \
                    " ".join(map(str, causes))
                assert took < DELIVERY_TIMEOUT_MS / 1000 + 2.0
            assert producer._thread.is_alive()  # the sender survived the garbage
        finally:
            closing = time.monotonic()
            producer.close(timeout_s=5)
            assert time.monotonic() - closing < 6
