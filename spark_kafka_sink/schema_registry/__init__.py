"""The schema registry: a client of its Confluent-compatible API, its wire format, subject names.

    settings = RegistrySettings.from_config({"url": "https://registry:8081", "basic.auth.user.info": "u:p"})
    client = SchemaRegistryClient(settings)
    client.register(subject, schema_json) -> id           # IncompatibleSchemaError (409) with the level and reason
    client.lookup(subject, schema_json) / client.latest(subject) / client.by_id(id) -> RegisteredSchema
    frame_prefix(id) -> bytes                              # magic 0 + the id: before each Avro or JSON body
    protobuf_frame_prefix(id, message_indexes=(0,))        # ... + the message-index path
    subject_name(SubjectNameStrategy.TOPIC, topic, is_key=False, record_name=None) -> "<topic>-value"
    AvroSerializer(settings_or_client, schema=None).encode_table(topic, table) / (topic, dict) -> framed Avro
"""

from __future__ import annotations

from spark_kafka_sink.schema_registry._client import RegisteredSchema, SchemaRegistryClient
from spark_kafka_sink.schema_registry._serializer import AvroSerializer
from spark_kafka_sink.schema_registry._settings import REGISTRY_SETTING_NAMES, RegistrySettings
from spark_kafka_sink.schema_registry._wire import (
    MAGIC,
    SubjectNameStrategy,
    frame_prefix,
    protobuf_frame_prefix,
    subject_name,
)

__all__ = [
    "AvroSerializer", "MAGIC", "REGISTRY_SETTING_NAMES", "RegisteredSchema", "RegistrySettings", "SchemaRegistryClient",
    "SubjectNameStrategy", "frame_prefix", "protobuf_frame_prefix", "subject_name",
]
