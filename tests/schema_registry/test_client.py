"""The registry client against a real schema registry (Apicurio's Confluent-compatible API), checked with
confluent-kafka's own SchemaRegistryClient where it reads what ours wrote."""

from __future__ import annotations

import json
import logging
import pickle
import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient

from spark_kafka_sink.errors import (
    ConfigError,
    IncompatibleSchemaError,
    SchemaRegistryError,
    SchemaRegistryUnavailableError,
)
from spark_kafka_sink.schema_registry import (
    RegistrySettings,
    SchemaRegistryClient,
    SubjectNameStrategy,
    frame_prefix,
    protobuf_frame_prefix,
    subject_name,
)
from spark_kafka_sink.testing.broker import free_port
from spark_kafka_sink.testing.certs import make_test_certificates
from spark_kafka_sink.testing.registry import TestRegistry

V1 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"}]})
V2 = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                 "fields": [{"name": "id", "type": "long"},
                            {"name": "note", "type": ["null", "string"], "default": None}]})
INCOMPATIBLE = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                           "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "int"}]})


def _client(registry: TestRegistry, **extra: str) -> SchemaRegistryClient:
    return SchemaRegistryClient(RegistrySettings.from_config({"url": registry.url, **extra}))


def _subject() -> str:
    return f"orders-{uuid.uuid4().hex[:8]}-value"


def test_a_registered_schema_is_found_by_id_lookup_and_latest(schema_registry: TestRegistry) -> None:
    client, subject = _client(schema_registry), _subject()
    schema_id = client.register(subject, V1)
    assert client.register(subject, V1) == schema_id  # registering again is a no-op
    found = client.lookup(subject, V1)
    assert found is not None and found.schema_id == schema_id and found.version == 1
    assert client.lookup(subject, V2) is None
    latest = client.latest(subject)
    assert (latest.schema_id, latest.version) == (schema_id, 1)
    assert json.loads(client.by_id(schema_id).schema) == json.loads(V1)
    # An independent client sees the same registration.
    with ConfluentClient({"url": schema_registry.url}) as confluent:
        assert json.loads(confluent.get_schema(schema_id).schema_str) == json.loads(V1)


def test_an_incompatible_schema_is_refused_with_the_level_and_the_registry_s_reason(
        schema_registry: TestRegistry) -> None:
    client, subject = _client(schema_registry), _subject()
    client.register(subject, V1)
    client.set_compatibility("BACKWARD", subject)
    assert client.compatibility(subject) == "BACKWARD"
    v2 = client.register(subject, V2)  # an optional field with a default: BACKWARD-compatible
    with pytest.raises(IncompatibleSchemaError) as refused:
        client.register(subject, INCOMPATIBLE)
    message = str(refused.value)
    assert f"subject {subject!r} under its BACKWARD compatibility" in message
    assert "qty" in message  # the registry's own reason names the field
    assert refused.value.status == 409 and refused.value.subject == subject
    assert client.latest(subject).schema_id == v2
    assert str(pickle.loads(pickle.dumps(refused.value))) == message  # Spark ships it from the driver's task


def test_an_unknown_subject_is_a_registry_error_naming_it(schema_registry: TestRegistry) -> None:
    with pytest.raises(SchemaRegistryError, match=r"answered 404") as missing:
        _client(schema_registry).latest("no-such-subject-value")
    assert missing.value.subject == "no-such-subject-value"


def test_a_registry_that_is_down_is_retried_with_backoff_then_named_without_secrets(
        caplog: pytest.LogCaptureFixture) -> None:
    waits: list[float] = []
    port = free_port()  # nothing listens there
    settings = RegistrySettings.from_config({
        "url": f"http://admin:url-secret@127.0.0.1:{port}", "basic.auth.user.info": "user:info-secret",
        "max.retries": "3", "retries.wait.ms": "100", "retries.max.wait.ms": "250"})
    client = SchemaRegistryClient(settings, sleep=waits.append)
    with caplog.at_level(logging.DEBUG), pytest.raises(SchemaRegistryUnavailableError) as down:
        client.register("s-value", V1)
    assert waits == [0.1, 0.2, 0.25]
    assert down.value.retriable
    assert "did not answer after 4 attempts" in str(down.value) and f"127.0.0.1:{port}" in str(down.value)
    for text in (str(down.value), repr(settings), caplog.text):
        assert "secret" not in text


def test_a_registry_that_comes_back_within_the_retries_answers(schema_registry: TestRegistry) -> None:
    registry = TestRegistry()
    calls: list[float] = []

    def start_on_first_wait(seconds: float) -> None:
        calls.append(seconds)
        if registry.process is None:
            registry.start()

    try:
        settings = RegistrySettings.from_config({"url": registry.url, "max.retries": "2", "retries.wait.ms": "1"})
        assert SchemaRegistryClient(settings, sleep=start_on_first_wait).register("back-value", V1) >= 1
        assert len(calls) == 1
    finally:
        registry.stop(keep_files=False)


@pytest.mark.parametrize(("config", "message"), [
    ({}, r"url is required"),
    ({"url": "registry:8081"}, r"url must be http\(s\)://host"),
    ({"url": "http://r:8081", "basic.auth.user.infos": "a:b"},
     r"unknown schema registry option basic.auth.user.infos; did you mean basic.auth.user.info\?"),
    ({"url": "http://r:8081", "basic.auth.user.info": "no-colon-secret"}, r"must be user:password"),
])
def test_bad_settings_are_named(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as bad:
        RegistrySettings.from_config(config)
    assert "no-colon-secret" not in str(bad.value)


def test_frames_and_subject_names_are_confluent_s() -> None:
    assert frame_prefix(7) == b"\x00\x00\x00\x00\x07"
    assert protobuf_frame_prefix(7) == b"\x00\x00\x00\x00\x07\x00"
    assert protobuf_frame_prefix(7, (1, 0)) == b"\x00\x00\x00\x00\x07\x04\x02\x00"
    assert subject_name(SubjectNameStrategy.TOPIC, "t", is_key=True, record_name="a.R") == "t-key"
    assert subject_name(SubjectNameStrategy.RECORD, "t", is_key=False, record_name="a.R") == "a.R"
    strategy = SubjectNameStrategy.parse("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", key="k")
    assert subject_name(strategy, "t", is_key=False, record_name="a.R") == "t-a.R"


def test_tls_certificates_are_verified_against_the_system_or_the_given_ca() -> None:
    with make_test_certificates() as certs, TestRegistry(tls=certs) as registry:
        assert registry.url.startswith("https://")
        with pytest.raises(SchemaRegistryError, match=r"certificate that is not trusted .*set ssl.ca.location"):
            _client(registry).register("tls-value", V1)
        with pytest.raises(SchemaRegistryError, match=r"not trusted"):
            _client(registry, **{"ssl.ca.location": str(certs.untrusted_ca_cert)}).register("tls-value", V1)
        assert _client(registry, **{"ssl.ca.location": str(certs.ca_cert)}).register("tls-value", V1) >= 1
