"""A small schema DSL for Kafka request/response bodies, shaped like Kafka's JSON message definitions.

Each message is a tuple of :class:`Field` declarations. A field says which versions carry it, in which versions it
may be null, whether it travels as a tagged field (flexible versions only), and its default. Body values are plain
dicts keyed by the snake_case form of the JSON field name (``TopicData`` -> ``topic_data``).

Types (``Field.type``)::

    bool int8 int16 uint16 int32 uint32 int64 float64 uuid   fixed width, big-endian (uuid: 16 bytes)
    string bytes records                                     length-prefixed; compact in flexible versions
    []<primitive>                                            array of one of the above
    []                                                       array of structs (``fields`` gives the struct)
    struct                                                   one nested struct (``fields``), e.g. a tagged one

An :class:`ApiSpec` ties an API key to its version range and its request and response schemas.
"""

from __future__ import annotations

import copy
import uuid
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any, NamedTuple

__all__ = [
    "MAX_VERSION",
    "MISSING",
    "PRIMITIVE_TYPES",
    "ZERO_UUID",
    "Versions",
    "Field",
    "Schema",
    "field",
    "ApiSpec",
]

MAX_VERSION = 0x7FFF  # "N+" in a version range means up to the largest int16 version


class _Missing:
    """Sentinel type: no explicit default was declared."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()

# Implicit defaults, as Kafka's generated code uses them when a field is absent from a version.
ZERO_UUID = uuid.UUID(int=0)  # Kafka's "no topic id"
PRIMITIVE_TYPES: dict[str, Any] = {
    "bool": False,
    "int8": 0,
    "int16": 0,
    "uint16": 0,
    "int32": 0,
    "uint32": 0,
    "int64": 0,
    "float64": 0.0,
    "uuid": ZERO_UUID,
    "string": "",
    "bytes": b"",
    "records": None,
}


class Versions(NamedTuple):
    """An inclusive version range; empty when ``lo > hi``."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str) -> Versions:
        """``"3+"`` -> 3..MAX, ``"0-7"`` -> 0..7, ``"5"`` -> 5..5, ``""`` or ``"none"`` -> empty."""
        text = text.strip()
        if text in ("", "none"):
            return cls(1, 0)
        if text.endswith("+"):
            return cls(int(text[:-1]), MAX_VERSION)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    def __str__(self) -> str:
        if self.lo > self.hi:
            return "none"
        return f"{self.lo}+" if self.hi == MAX_VERSION else f"{self.lo}-{self.hi}"


@dataclass(frozen=True)
class Field:
    """One field of a message or nested struct. Build with :func:`field`."""

    name: str
    type: str
    versions: Versions
    nullable: Versions
    tag: int | None
    tagged: Versions
    default: Any
    ignorable: bool
    fields: tuple[Field, ...] = dc_field(default=())

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """For ``[]int32`` -> ``int32``; for an array of structs -> ``"struct"``."""
        return self.type[2:] or "struct"

    def implicit_default(self) -> Any:
        """The value a reader fills in when the field is absent from a version (or a tagged field is not sent)."""
        if self.default is not MISSING:
            # A fresh copy: a decoded body must never share a mutable default with the schema.
            return copy.deepcopy(self.default) if isinstance(self.default, (list, dict)) else self.default
        if self.is_array:
            return []
        if self.type == "struct":
            return {f.name: f.implicit_default() for f in self.fields}
        return PRIMITIVE_TYPES[self.type]


Schema = tuple[Field, ...]


def field(
    name: str,
    type: str,
    versions: str,
    *,
    nullable: str = "",
    tag: int | None = None,
    tagged: str = "",
    default: Any = MISSING,
    ignorable: bool = False,
    fields: Schema = (),
) -> Field:
    """Declare a field the way Kafka's JSON does (version ranges as strings); validates the declaration."""
    element = type[2:] if type.startswith("[]") else type
    if element in ("", "struct"):
        if not fields:
            raise ValueError(f"field {name}: a struct needs its fields")
    elif element not in PRIMITIVE_TYPES:
        raise ValueError(f"field {name}: unknown type {type!r}")
    elif fields:
        raise ValueError(f"field {name}: only structs have nested fields")
    if type == "struct" and nullable:
        raise ValueError(f"field {name}: nullable structs are not supported")
    if (tag is None) != (not tagged):
        raise ValueError(f"field {name}: give both tag and tagged versions, or neither")
    return Field(
        name=name,
        type=type,
        versions=Versions.parse(versions),
        nullable=Versions.parse(nullable),
        tag=tag,
        tagged=Versions.parse(tagged),
        default=default,
        ignorable=ignorable,
        fields=tuple(fields),
    )


@dataclass(frozen=True)
class ApiSpec:
    """One Kafka API: its key, the versions this client implements, and both body schemas."""

    key: int
    name: str
    min_version: int
    max_version: int
    flexible_from: int | None  # first flexible version (compact types, tagged fields); None = never
    request_schema: Schema
    response_schema: Schema
    # KIP-219: from this version on the broker answers a throttled request at once, with throttle_time_ms, and
    # expects the client to send nothing more on that connection until the time has passed (it mutes the
    # connection meanwhile). None: the API is never throttled that way. Java: AbstractResponse.shouldClientThrottle.
    client_throttle_from: int | None = None

    def is_flexible(self, version: int) -> bool:
        return self.flexible_from is not None and version >= self.flexible_from

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version

    def request_header_version(self, version: int) -> int:
        """Request header v2 for flexible versions (adds tagged fields), else v1."""
        return 2 if self.is_flexible(version) else 1

    def response_header_version(self, version: int) -> int:
        """Response header v1 for flexible versions, else v0. ApiVersions always answers with v0: a client that
        does not know the broker yet must be able to read the answer, whatever version it asked for."""
        if self.key == 18:
            return 0
        return 1 if self.is_flexible(version) else 0

    def __repr__(self) -> str:
        return f"ApiSpec({self.name}, key={self.key}, v{self.min_version}-{self.max_version})"
