"""read_partition through a real NetworkClient and socket against the scripted broker, whose Fetch answers carry a
record batch with one byte flipped on the wire: every flip inside the CRC-covered part of the batch fails the read
with a ProtocolError naming the partition, the offset and both CRCs -- never records decoded from corrupt bytes --
and the connection stays usable (the same client then reads the intact batch)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.net.client import NetworkClient
from spark_kafka_sink.net.partition_reader import read_partition
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.protocol.error_codes import NO_ERROR
from spark_kafka_sink.protocol.framing import RequestHeader
from spark_kafka_sink.protocol.messages import FETCH, LIST_OFFSETS, METADATA
from spark_kafka_sink.protocol.messages.fetch import EARLIEST_TIMESTAMP
from spark_kafka_sink.protocol.record_batch import Record, encode_batch
from tests.net.fake_broker import FakeBroker, Peer

TOPIC = "commit-log"
BATCH = encode_batch([Record(f"k{i}".encode(), f"value-{i}".encode(), 1_700_000_000_000 + i) for i in range(5)])
FLIPS = list(range(21, len(BATCH)))  # what the CRC covers: attributes (byte 21) .. the last record's last byte


def script(flips: list[int | None], port: list[int]) -> Callable[[Peer], None]:
    """Answers Metadata, ListOffsets (0 .. 5) and Fetch; the n-th Fetch answer has BATCH's byte flips[n] inverted
    in the encoded frame (None: intact)."""

    order = iter(flips)  # shared by the connections: the n-th Fetch on any of them gets flips[n]

    def serve(peer: Peer) -> None:
        peer.serve_api_versions()
        while True:
            header, body = peer.read_request()
            if header.api_key == METADATA.key:
                peer.respond(header, metadata(port[0]))
            elif header.api_key == LIST_OFFSETS.key:
                timestamp = body["topics"][0]["partitions"][0]["timestamp"]
                peer.respond(header, {"topics": [{"name": TOPIC, "partitions": [{
                    "partition_index": 0, "error_code": NO_ERROR,
                    "offset": 0 if timestamp == EARLIEST_TIMESTAMP else 5}]}]})
            elif header.api_key == FETCH.key:
                peer.send(fetch_frame(peer, header, next(order)))
            else:
                raise AssertionError(f"unexpected API key {header.api_key}")

    return serve


def metadata(port: int) -> dict[str, Any]:
    return {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": port, "rack": None}],
            "cluster_id": "fake", "controller_id": 1, "topics": [
                {"error_code": NO_ERROR, "name": TOPIC, "is_internal": False, "partitions": [
                    {"error_code": NO_ERROR, "partition_index": 0, "leader_id": 1, "leader_epoch": 0,
                     "replica_nodes": [1], "isr_nodes": [1], "offline_replicas": []}]}]}


def fetch_frame(peer: Peer, header: RequestHeader, flip: int | None) -> bytes:
    frame = bytearray(peer.response_bytes(header, {"responses": [{"topic": TOPIC, "partitions": [{
        "partition_index": 0, "error_code": NO_ERROR, "high_watermark": 5, "last_stable_offset": 5,
        "log_start_offset": 0, "aborted_transactions": None, "records": BATCH}]}]}))
    if flip is not None:
        at = frame.index(BATCH)
        assert frame.count(BATCH) == 1
        frame[at + flip] ^= 0xFF
    return bytes(frame)


@pytest.fixture
def port() -> list[int]:
    return []


def test_every_flipped_byte_under_the_crc_fails_the_read_and_the_intact_batch_reads(port: list[int]) -> None:
    flips: list[int | None] = [*FLIPS, None]
    with FakeBroker(script(flips, port), connections=3) as broker:  # bootstrap, then node 1
        port.append(broker.port)
        with NetworkClient(ProducerConfig.from_dict({"bootstrap.servers": broker.address,
                                                     "request.timeout.ms": 5_000}).net_config()) as client:
            messages = []
            for _ in FLIPS:
                with pytest.raises(ProtocolError) as caught:
                    read_partition(client, TOPIC, 0, timeout_ms=10_000)
                messages.append(str(caught.value))
            records = read_partition(client, TOPIC, 0, timeout_ms=10_000)
    assert [(r.offset, r.key, r.value) for r in records] == [(i, f"k{i}".encode(), f"value-{i}".encode())
                                                             for i in range(5)]
    stored = f"stored {int.from_bytes(BATCH[17:21], 'big'):#010x}"
    prefix = f"corrupt record batch in the Fetch response for {TOPIC}-0 at offset 0 from node 1: record batch at " \
             "offset 0: CRC 0x"
    wrong = [(flip, m) for flip, m in zip(FLIPS, messages, strict=True) if not (m.startswith(prefix) and stored in m)]
    assert wrong == []
    print(f"\n{len(FLIPS)} single-byte flips (bytes {FLIPS[0]}..{FLIPS[-1]} of a {len(BATCH)}-byte batch) each failed "
          f"the read; e.g. {messages[-1]}")
