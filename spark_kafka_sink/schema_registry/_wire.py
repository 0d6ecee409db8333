"""The schema registry's wire format and subject names, declared once. Pure.

A framed record value (or key), as Confluent's serializers write it:
    magic            int8     0
    schema id        int32    big-endian, the id the registry gave the schema
    message indexes  (Protobuf only) zigzag varints: the count, then each index of the path to the message in its
                     file; the first message of the file is the single byte 0
    body             the Avro binary, the Protobuf message or the UTF-8 JSON document
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.protocol.primitives import write_varint

__all__ = ["MAGIC", "SubjectNameStrategy", "frame_prefix", "protobuf_frame_prefix", "subject_name"]

MAGIC = 0
_HEADER = struct.Struct(">bI")


def frame_prefix(schema_id: int) -> bytes:
    """The 5 bytes before an Avro or JSON Schema body."""
    return _HEADER.pack(MAGIC, schema_id)


def protobuf_frame_prefix(schema_id: int, message_indexes: Sequence[int] = (0,)) -> bytes:
    """The bytes before a Protobuf message: the frame, then the message-index path (``(0,)``: the file's first
    message, written as the single byte 0 as Confluent's serializer does)."""
    if list(message_indexes) == [0]:
        return frame_prefix(schema_id) + b"\x00"
    return frame_prefix(schema_id) + write_varint(len(message_indexes)) + b"".join(
        write_varint(i) for i in message_indexes)


class SubjectNameStrategy(enum.Enum):
    TOPIC = "topic"  # <topic>-key / <topic>-value (Confluent's default)
    RECORD = "record"  # <record full name>
    TOPIC_RECORD = "topic_record"  # <topic>-<record full name>

    @classmethod
    def parse(cls, text: str, *, key: str) -> SubjectNameStrategy:
        """From an option: ``topic``, ``record``, ``topic_record`` or Confluent's class names."""
        name = text.strip().rsplit(".", 1)[-1].lower().replace("-", "_")
        aliases = {"topicnamestrategy": "topic", "recordnamestrategy": "record",
                   "topicrecordnamestrategy": "topic_record", "topicrecord": "topic_record"}
        try:
            return cls(aliases.get(name, name))
        except ValueError:
            raise ConfigError(f"{key} must be topic, record or topic_record, got {text!r}", key=key) from None


def subject_name(strategy: SubjectNameStrategy, topic: str, *, is_key: bool, record_name: str | None) -> str:
    """The subject a schema is registered under."""
    if strategy is SubjectNameStrategy.TOPIC:
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        raise ConfigError(f"the {strategy.value} subject name strategy needs a named schema (a record), and the "
                          f"{'key' if is_key else 'value'} schema has no name: use the topic strategy")
    return record_name if strategy is SubjectNameStrategy.RECORD else f"{topic}-{record_name}"
