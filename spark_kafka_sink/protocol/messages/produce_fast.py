"""Fast paths for the two hottest messages, Produce request and response at the flexible versions (9-12).

The generic codec (:mod:`.codec`) walks the schema field by field for every partition: ~1 ms of Python per
12-partition request and as much per response, a third of the sender thread's time in bulk writes. These two
functions handle the common shapes directly and answer None for anything else, so the caller falls back to the
generic codec, which stays the one authority (its errors, its defaults). The tests check that both paths give
identical bytes / dicts, and that every unusual shape falls back. The layouts are :mod:`.produce`'s:

    request (v9+):  transactional_id compact nullable string, acks int16, timeout_ms int32,
                    topic_data compact array of [name compact string,
                        partition_data compact array of [index int32, records compact nullable bytes, tags],
                    tags], tags
    response (v9+): responses compact array of [name compact string,
                        partition_responses compact array of [index int32, error_code int16, base_offset int64,
                            log_append_time_ms int64, log_start_offset int64, record_errors compact array,
                            error_message compact nullable string, tags (current_leader = 0)],
                    tags], throttle_time_ms int32, tags (node_endpoints = 0)

Fast-path response: every record_errors empty, every error_message null, no tagged fields (what a broker sends
for written batches); anything else (errors with messages, leader hints) takes the generic decoder.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

__all__ = ["FIRST_FLEXIBLE", "produce_request_parts", "decode_produce_response"]

FIRST_FLEXIBLE = 9
_ACKS_TIMEOUT = struct.Struct(">hi")  # acks, timeout_ms
_INDEX = struct.Struct(">i")  # partition index
# index, error_code, base_offset, log_append_time_ms, log_start_offset
_PARTITION_RESPONSE = struct.Struct(">ihqqq")
_THROTTLE = struct.Struct(">i")
_BODY_KEYS = frozenset({"transactional_id", "acks", "timeout_ms", "topic_data"})
_REQUIRED_BODY_KEYS = frozenset({"acks", "timeout_ms", "topic_data"})
_TOPIC_KEYS = frozenset({"name", "partition_data"})
_PARTITION_KEYS = frozenset({"index", "records"})
_NO_TAGS = b"\x00"
_NULL = b"\x00"  # compact nullable string/bytes: length + 1 = 0
_EMPTY_ARRAY = 1  # compact array: count + 1
_INT32 = range(-(1 << 31), 1 << 31)
_INT16 = range(-(1 << 15), 1 << 15)


def _uvarint(v: int) -> bytes:
    if v < 0x80:
        return bytes((v,))
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _compact_string(s: str) -> bytes:
    data = s.encode("utf-8")
    return _uvarint(len(data) + 1) + data


def produce_request_parts(version: int, body: Mapping[str, Any]) -> list[bytes | memoryview] | None:
    """The request body as a list of buffers to write in order (records are referenced, not copied), or None when
    ``version`` or ``body`` is not the plain shape the sender builds: then encode with the generic codec. A
    partition's ``records`` is bytes, or a tuple of byte buffers (one batch in pieces, see
    ``ProducerBatch.payload_parts``; the generic codec joins them)."""
    if version < FIRST_FLEXIBLE or type(body) is not dict:
        return None
    keys = body.keys()
    if not (_REQUIRED_BODY_KEYS <= keys <= _BODY_KEYS):
        return None
    tid, acks, timeout, topics = body.get("transactional_id"), body["acks"], body["timeout_ms"], body["topic_data"]
    if (type(acks) is not int or acks not in _INT16 or type(timeout) is not int or timeout not in _INT32
            or type(topics) is not list or not (tid is None or type(tid) is str)):
        return None
    parts: list[bytes | memoryview] = [_NULL if tid is None else _compact_string(tid),
                                       _ACKS_TIMEOUT.pack(acks, timeout), _uvarint(len(topics) + 1)]
    for topic in topics:
        if type(topic) is not dict or topic.keys() != _TOPIC_KEYS:
            return None
        name, partitions = topic["name"], topic["partition_data"]
        if type(name) is not str or type(partitions) is not list:
            return None
        parts += (_compact_string(name), _uvarint(len(partitions) + 1))
        for partition in partitions:
            if type(partition) is not dict or partition.keys() != _PARTITION_KEYS:
                return None
            index, records = partition["index"], partition["records"]
            if type(index) is not int or index not in _INT32:
                return None
            if records is None:
                parts.append(_INDEX.pack(index) + _NULL + _NO_TAGS)
            elif type(records) is bytes:
                parts += (_INDEX.pack(index) + _uvarint(len(records) + 1), records, _NO_TAGS)
            elif type(records) is tuple:  # the batch in pieces (a stamped header, a view of the records)
                parts += (_INDEX.pack(index) + _uvarint(sum(map(len, records)) + 1), *records, _NO_TAGS)
            else:
                return None
        parts.append(_NO_TAGS)
    parts.append(_NO_TAGS)
    return parts


class _NotPlain(Exception):
    """The response needs the generic decoder (internal to this module)."""


def _read_uvarint(data: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise _NotPlain


def decode_produce_response(version: int, data: bytes | bytearray | memoryview) -> dict[str, Any] | None:
    """The response body as the generic decoder would return it, or None when ``data`` is not the plain shape
    (or is malformed): then decode with the generic codec, which also reports errors."""
    if version < FIRST_FLEXIBLE:
        return None
    try:
        return _decode(data)
    except (_NotPlain, IndexError, struct.error, UnicodeDecodeError):
        return None


def _decode(data: bytes | bytearray | memoryview) -> dict[str, Any]:
    count, pos = _read_uvarint(data, 0)
    if count == 0:
        raise _NotPlain  # a null array
    responses = []
    for _ in range(count - 1):
        length, pos = _read_uvarint(data, pos)
        if length == 0 or pos + length - 1 > len(data):
            raise _NotPlain
        name = bytes(data[pos:pos + length - 1]).decode("utf-8")
        pos += length - 1
        n_partitions, pos = _read_uvarint(data, pos)
        if n_partitions == 0:
            raise _NotPlain
        partitions = []
        for _ in range(n_partitions - 1):
            index, error_code, base_offset, append_ms, start_offset = _PARTITION_RESPONSE.unpack_from(data, pos)
            pos += _PARTITION_RESPONSE.size
            # empty record_errors, null error_message, no tagged fields: 3 bytes 0x01 0x00 0x00
            if data[pos] != _EMPTY_ARRAY or data[pos + 1] != 0 or data[pos + 2] != 0:
                raise _NotPlain
            pos += 3
            partitions.append({"index": index, "error_code": error_code, "base_offset": base_offset,
                               "log_append_time_ms": append_ms, "log_start_offset": start_offset,
                               "record_errors": [], "error_message": None,
                               "current_leader": {"leader_id": -1, "leader_epoch": -1}})
        if data[pos] != 0:
            raise _NotPlain
        pos += 1
        responses.append({"name": name, "partition_responses": partitions})
    (throttle,) = _THROTTLE.unpack_from(data, pos)
    pos += _THROTTLE.size
    if data[pos] != 0 or pos + 1 != len(data):
        raise _NotPlain
    return {"responses": responses, "throttle_time_ms": throttle, "node_endpoints": []}
