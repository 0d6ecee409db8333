"""Malformed broker bytes: every response we decode, mutated (truncated at every length, absurd int32 counts and
lengths, absurd varints, random byte flips), either decodes or raises ProtocolError -- never another exception,
and never an allocation sized by a length field (tracemalloc's peak stays small)."""

from __future__ import annotations

import random
import struct
import time
import tracemalloc
from typing import Any

import pytest

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.framing import decode_response, encode_response
from spark_kafka_sink.protocol.messages import API_SPECS
from tests.protocol._message_vectors import SAMPLES

CID = 12345
PEAK_LIMIT = 8 << 20  # far below what a 2**31-element array or string would take


def _cases() -> list[Any]:
    cases = []
    for api_key, kinds in sorted(SAMPLES.items()):
        api = API_SPECS[api_key]
        for variant, body in sorted(kinds.get("resp", {}).items()):
            for version in (api.min_version, api.max_version):
                try:
                    frame = encode_response(api, version, CID, body)
                except Exception:  # noqa: BLE001 - a variant that has no form in this version
                    continue
                cases.append(pytest.param(api_key, version, frame[4:], id=f"{api.name}-v{version}-{variant}"))
    return cases


def _mutations(payload: bytes) -> list[bytes]:
    out = [payload[:n] for n in range(len(payload))]  # truncated at every length
    for pos in range(4, len(payload) - 3):
        for absurd in (0x7FFFFFFF, 0x40000000, -2):
            out.append(payload[:pos] + struct.pack(">i", absurd) + payload[pos + 4:])
        out.append(payload[:pos] + b"\xff\xff\xff\xff\x0f" + payload[pos + 5:])  # a varint near 2**32
    rng = random.Random(len(payload))
    for _ in range(300):
        flipped = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(4, len(flipped))] = rng.randrange(256)
        out.append(bytes(flipped))
    return out


@pytest.mark.parametrize("api_key, version, payload", _cases())
def test_mutated_responses_decode_or_raise_protocol_error(api_key: int, version: int, payload: bytes) -> None:
    api = API_SPECS[api_key]
    decode_response(api, version, payload, CID)  # the unmutated payload decodes
    mutations = _mutations(payload)
    refused = 0
    tracemalloc.start()
    started = time.perf_counter()
    try:
        for mutated in mutations:
            try:
                decode_response(api, version, mutated, CID)
            except ProtocolError:
                refused += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    took = time.perf_counter() - started
    print(f"{api.name} v{version}: {len(mutations)} mutations, {refused} refused with ProtocolError, "
          f"peak {peak / 1024:.0f} KiB, {took * 1000:.0f} ms")
    assert peak < PEAK_LIMIT
    assert refused >= len(payload) - 1  # every truncation at least
