"""The client's ``basic.auth.user.info`` / ``basic.auth.credentials.source`` against a registry that checks
credentials: the test registry behind nginx's basic authentication (``testing.auth_proxy``: Apicurio 2.x checks
credentials only through Keycloak). The right credentials register and read; what the client registered is read
back by confluent-kafka's own client and AvroDeserializer with the same credentials; wrong or missing ones fail at
once with the registry's URL and the setting to fix, never the secret."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from spark_kafka_sink.errors import SchemaRegistryError
from spark_kafka_sink.schema_registry import AvroSerializer, RegistrySettings, SchemaRegistryClient
from spark_kafka_sink.testing.auth_proxy import BasicAuthProxy
from spark_kafka_sink.testing.registry import TestRegistry

USER, PASSWORD = "alice", "pw-right-7f3a"
WRONG = "pw-wrong-91c2"
SCHEMA = '{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}'


@pytest.fixture(scope="module")
def guarded(schema_registry: TestRegistry) -> Iterator[BasicAuthProxy]:
    with BasicAuthProxy(schema_registry.port, {USER: PASSWORD}) as proxy:
        yield proxy


def _client(config: dict[str, str], prefix: str = "") -> SchemaRegistryClient:
    return SchemaRegistryClient(RegistrySettings.from_config(config, prefix=prefix))


def test_the_proxy_refuses_requests_without_credentials(guarded: BasicAuthProxy) -> None:
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(f"{guarded.url}/subjects", timeout=10)
    refused.value.close()
    assert refused.value.code == 401


def test_the_right_credentials_register_and_confluent_reads_back_with_them(guarded: BasicAuthProxy) -> None:
    client = _client({"url": guarded.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"})
    schema_id = client.register("auth-orders-value", SCHEMA)
    assert client.latest("auth-orders-value").schema_id == schema_id
    # The same credentials in the URL, with basic.auth.credentials.source=URL
    in_url = guarded.url.replace("http://", f"http://{USER}:{PASSWORD}@")
    assert _client({"url": in_url, "basic.auth.credentials.source": "URL"}).by_id(schema_id).schema_id == schema_id

    framed = AvroSerializer(client, schema=SCHEMA).encode_column(
        "auth-orders", pa.array([{"id": 7}], pa.struct([pa.field("id", pa.int64(), False)])))
    # (the serializer registers the schema as it parsed it: the frame may carry another id of the same schema)
    assert framed[0].as_py()[:1] == b"\0"
    with ConfluentClient({"url": guarded.url, "basic.auth.user.info": f"{USER}:{PASSWORD}"}) as confluent:
        assert confluent.get_schema(schema_id).schema_str.replace(" ", "") == SCHEMA.replace(" ", "")
        value = AvroDeserializer(confluent)(framed[0].as_py(), SerializationContext("auth-orders", MessageField.VALUE))
    assert value == {"id": 7}


@pytest.mark.parametrize(("config", "prefix", "names"), [
    ({"basic.auth.user.info": f"{USER}:{WRONG}"}, "",
     "the registry refused the credentials of basic.auth.user.info: check them"),
    ({"basic.auth.user.info": f"{USER}:{WRONG}"}, "schema.registry.",
     "the registry refused the credentials of schema.registry.basic.auth.user.info: check them"),
    ({"basic.auth.credentials.source": "URL", "url": f"http://{USER}:{WRONG}@"}, "",
     "the registry refused the credentials of the user:password in url (basic.auth.credentials.source=URL)"),
    ({}, "schema.registry.",
     "the registry asks for credentials and none were given: set schema.registry.basic.auth.user.info"),
], ids=["user-info", "sink-option", "in-url", "none"])
def test_wrong_or_missing_credentials_fail_naming_the_registry_and_the_setting(
        guarded: BasicAuthProxy, config: dict[str, str], prefix: str, names: str) -> None:
    config = dict(config)
    url = config.pop("url", "http://") + guarded.url.removeprefix("http://")
    # Retries would not help: a refusal fails the first request (a retried one would sleep 60 s here).
    client = _client({"url": url, **config, "max.retries": "3", "retries.wait.ms": "20000"}, prefix)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register("auth-refused-value", SCHEMA)
    text = str(refused.value)
    assert refused.value.status == 401
    assert f"POST {guarded.url}/subjects/auth-refused-value/versions answered 401" in text, text
    assert names in text, text
    assert WRONG not in text and PASSWORD not in text
