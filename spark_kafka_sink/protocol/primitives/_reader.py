"""Reading Kafka wire primitives: ``Reader`` consumes one primitive per method call. Pure.

Every method raises :class:`~spark_kafka_sink.errors.ProtocolError` on truncated or malformed input (it never
returns garbage and never reads past the end).
"""

from __future__ import annotations

import struct
import uuid as _uuid
from collections.abc import Callable
from typing import TypeVar

from spark_kafka_sink.errors import ProtocolError
from spark_kafka_sink.protocol.primitives._formats import (
    INT8,
    INT16,
    INT32,
    INT64,
    MAX_UVARINT_BYTES,
    MAX_UVARLONG_BYTES,
    UINT16,
    UINT32,
    unzigzag,
)

__all__ = ["Reader"]

T = TypeVar("T")


class Reader:
    """Consumes primitives from ``data`` starting at ``offset``; raises ProtocolError instead of over-reading."""

    __slots__ = ("_data", "_pos", "_end")

    def __init__(self, data: bytes | bytearray | memoryview, offset: int = 0) -> None:
        self._data = memoryview(data).cast("B") if isinstance(data, memoryview) else memoryview(data)
        self._end = len(self._data)
        if not 0 <= offset <= self._end:
            raise ValueError(f"offset {offset} outside 0..{self._end}")
        self._pos = offset

    @property
    def position(self) -> int:
        return self._pos

    def remaining(self) -> int:
        return self._end - self._pos

    def expect_end(self) -> None:
        """Raise ProtocolError if unread bytes remain (a message must be consumed exactly)."""
        if self._pos != self._end:
            raise ProtocolError(f"{self._end - self._pos} unexpected trailing bytes at offset {self._pos}")

    def _take(self, n: int) -> memoryview:
        start = self._pos
        if n < 0:
            raise ProtocolError(f"negative length {n} at offset {start}")
        if n > self._end - start:
            raise ProtocolError(f"truncated: need {n} bytes at offset {start}, only {self._end - start} left")
        self._pos = start + n
        return self._data[start : start + n]

    def raw(self, n: int) -> bytes:
        return bytes(self._take(n))

    def raw_view(self, n: int) -> memoryview:
        """Like ``raw`` but without copying (the view keeps ``data`` alive)."""
        return self._take(n)

    def skip(self, n: int) -> None:
        self._take(n)

    def _fixed(self, fmt: struct.Struct) -> int:
        start = self._pos
        if fmt.size > self._end - start:
            raise ProtocolError(
                f"truncated: need {fmt.size} bytes at offset {start}, only {self._end - start} left"
            )
        self._pos = start + fmt.size
        value: int = fmt.unpack_from(self._data, start)[0]
        return value

    def int8(self) -> int:
        return self._fixed(INT8)

    def int16(self) -> int:
        return self._fixed(INT16)

    def int32(self) -> int:
        return self._fixed(INT32)

    def int64(self) -> int:
        return self._fixed(INT64)

    def uint16(self) -> int:
        return self._fixed(UINT16)

    def uint32(self) -> int:
        return self._fixed(UINT32)

    def boolean(self) -> bool:
        b = self.int8()
        if b not in (0, 1):
            raise ProtocolError(f"boolean byte {b} at offset {self._pos - 1} is neither 0 nor 1")
        return b == 1

    def _leb128(self, max_bytes: int, limit: int, what: str) -> int:
        start = self._pos
        data, end = self._data, self._end
        pos, shift, value = start, 0, 0
        while True:
            if pos >= end:
                raise ProtocolError(f"truncated {what} at offset {start}")
            b = data[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                break
            shift += 7
            if pos - start >= max_bytes:
                raise ProtocolError(f"{what} at offset {start} is longer than {max_bytes} bytes")
        if value > limit:
            raise ProtocolError(f"{what} at offset {start} overflows")
        self._pos = pos
        return value

    def uvarint(self) -> int:
        return self._leb128(MAX_UVARINT_BYTES, 0xFFFFFFFF, "unsigned varint")

    def varint(self) -> int:
        return unzigzag(self._leb128(MAX_UVARINT_BYTES, 0xFFFFFFFF, "varint"))

    def varlong(self) -> int:
        return unzigzag(self._leb128(MAX_UVARLONG_BYTES, 0xFFFFFFFFFFFFFFFF, "varlong"))

    def _text(self, n: int) -> str:
        start = self._pos
        try:
            return str(self._take(n), "utf-8")
        except UnicodeDecodeError as exc:
            raise ProtocolError(f"string at offset {start} is not valid UTF-8: {exc.reason}") from None

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n == -1 else self._text(n)

    def string(self) -> str:
        start = self._pos
        s = self.nullable_string()
        if s is None:
            raise ProtocolError(f"null where a string is required at offset {start}")
        return s

    def compact_nullable_string(self) -> str | None:
        n = self.uvarint()
        return None if n == 0 else self._text(n - 1)

    def compact_string(self) -> str:
        start = self._pos
        s = self.compact_nullable_string()
        if s is None:
            raise ProtocolError(f"null where a compact string is required at offset {start}")
        return s

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n == -1 else self.raw(n)

    def bytes_(self) -> bytes:
        start = self._pos
        b = self.nullable_bytes()
        if b is None:
            raise ProtocolError(f"null where bytes are required at offset {start}")
        return b

    def compact_nullable_bytes(self) -> bytes | None:
        n = self.uvarint()
        return None if n == 0 else self.raw(n - 1)

    def compact_bytes(self) -> bytes:
        start = self._pos
        b = self.compact_nullable_bytes()
        if b is None:
            raise ProtocolError(f"null where compact bytes are required at offset {start}")
        return b

    def uuid(self) -> _uuid.UUID:
        return _uuid.UUID(bytes=self.raw(16))

    def _elements(self, count: int, fn: Callable[[], T]) -> list[T]:
        # Every element takes at least one byte, so a count beyond the remaining bytes is malformed: refusing it
        # here stops a corrupt count from looping (or allocating) for a long time.
        if count > self.remaining():
            raise ProtocolError(f"array of {count} elements cannot fit in {self.remaining()} bytes")
        return [fn() for _ in range(count)]

    def array(self, fn: Callable[[], T]) -> list[T] | None:
        """int32 count (-1 = null) then ``count`` calls of ``fn``, which reads one element from this reader."""
        start = self._pos
        n = self.int32()
        if n == -1:
            return None
        if n < 0:
            raise ProtocolError(f"negative array length {n} at offset {start}")
        return self._elements(n, fn)

    def compact_array(self, fn: Callable[[], T]) -> list[T] | None:
        """uvarint count + 1 (0 = null) then the elements."""
        n = self.uvarint()
        return None if n == 0 else self._elements(n - 1, fn)

    def tagged_fields(self) -> dict[int, bytes]:
        """Read a tagged-field section; returns {tag: raw bytes}. Unknown tags are simply left unused."""
        count = self.uvarint()
        if count > self.remaining():
            raise ProtocolError(f"{count} tagged fields cannot fit in {self.remaining()} bytes")
        fields: dict[int, bytes] = {}
        for _ in range(count):
            tag = self.uvarint()
            fields[tag] = self.raw(self.uvarint())
        return fields
