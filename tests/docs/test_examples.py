"""The examples in examples/, which the README and the docs pages include, run against the real broker (and the
test session's Spark), and what they wrote is read back with confluent-kafka, an independent client.

Each example is loaded from its file, so a page can only show code that ran here: break an example and its test
fails.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.testing.broker_jars import REPO_ROOT
from spark_kafka_sink.testing.registry import TestRegistry
from tests.conftest import ConsumedRecord

EXAMPLES = REPO_ROOT / "examples"
Readback = Callable[..., list[ConsumedRecord]]


def load(name: str) -> ModuleType:
    """examples/<name>.py as a module (examples/ is a folder of scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(f"examples_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_example_has_a_test() -> None:
    tested = {n.removeprefix("test_").split("__")[0] for n in globals() if n.startswith("test_")}
    assert {p.stem for p in EXAMPLES.glob("*.py")} <= tested


@pytest.mark.broker
def test_producer_quickstart(bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    load("producer_quickstart").main(bootstrap, topic)
    records = readback(topic)
    assert sorted((r.key, r.value) for r in records) == [(b"a", b"1"), (b"b", b"2"), (b"k", b"v")]
    assert [r.headers for r in records if r.key == b"k"] == [(("h", b"x"),)]


@pytest.mark.broker
def test_producer_avro(bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
                       schema_registry: TestRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = topic_factory(partitions=1)
    load("producer_avro").main(bootstrap, topic, schema_registry.url)
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        deserializer = AvroDeserializer(client)
        read = {r.key: deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in readback(topic)}
    assert read == {b"a": {"id": 1, "customer": "alice"}, b"b": {"id": 2, "customer": None},
                    b"c": {"id": 3, "customer": "carol"}}


def test_producer_asyncio(bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    example = load("producer_asyncio")
    asyncio.run(example.main(bootstrap, topic))
    asyncio.run(example.transactional(bootstrap, topic))
    records = readback(topic)  # read_committed: the transaction's record is visible once committed
    assert sorted((r.key or b"", r.value) for r in records) == [(b"", b"committed"), (b"a", b"1"), (b"b", b"2"),
                                                                 (b"k", b"v"), (b"k", b"w")]


@pytest.mark.broker
def test_producer_transactions(bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic, input_topic = topic_factory(partitions=2), topic_factory(partitions=1)
    load("producer_transactions").main(bootstrap, topic, input_topic=input_topic, group=f"group-{topic}")
    assert Counter(r.value for r in readback(topic)) == Counter([b"committed", b"transformed", b"1", b"2"])


@pytest.mark.broker
def test_producer_errors(bootstrap: str, topic_factory: Callable[..., str]) -> None:
    met = load("producer_errors").main(bootstrap, topic_factory(partitions=1))
    assert met == ["ConfigError", "PartitionOutOfRangeError"]


def test_security_options(tmp_path: Path) -> None:
    """The maps parse as producer configurations (connecting needs a secured cluster: tests/security does that)."""
    from spark_kafka_sink.producer.config import ProducerConfig

    examples = load("security_options")
    keytab = tmp_path / "app.keytab"
    keytab.write_bytes(b"")
    configs = [
        examples.scram_over_tls("b:9093", "alice", "s3cret", "/etc/ssl/ca.pem"),
        examples.mutual_tls("b:9093", "/etc/kafka/client.p12", "changeit"),
        examples.oauth_client_credentials("b:9093", "https://idp.example/token", "app", "s3cret"),
    ]
    for config in configs:
        parsed = ProducerConfig.from_dict(config)
        assert "s3cret" not in repr(parsed) and "changeit" not in repr(parsed)
    kerberos = examples.kerberos_keytab("b:9093", str(keytab), "app@EXAMPLE.COM")
    if importlib.util.find_spec("gssapi") is None:   # the optional package (make test-kerberos installs it)
        with pytest.raises(ConfigError, match="needs the gssapi package"):
            ProducerConfig.from_dict(kerberos)
    else:
        ProducerConfig.from_dict(kerberos)
    assert examples.spark_options(configs[0])["kafka.sasl.mechanism"] == "SCRAM-SHA-512"


@pytest.mark.spark
@pytest.mark.broker
def test_spark_quickstart(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    load("spark_quickstart").main(spark, bootstrap, topic)
    records = readback(topic)
    assert sorted(r.key or b"" for r in records) == [b"1", b"1", b"2", b"3"]
    assert {json.loads(r.value or b"")["action"] for r in records} == {"view", "click", "buy"}


@pytest.mark.spark
@pytest.mark.broker
def test_spark_columns(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    load("spark_columns").main(spark, bootstrap, topic)
    records = readback(topic)
    # partition = order_id % 2; order 3 has no amount: a tombstone (null value)
    assert sorted((r.key, r.partition, r.value is None) for r in records) == [
        (b"alice", 1, False), (b"alice", 1, True), (b"bob", 0, False)]
    assert {r.headers for r in records} == {(("source", b"shop"),)}
    # 2024-05-01 10:00:00 in the session's time zone, as an epoch time in ms; the rows 5 and 9 s later
    first = int(spark.sql("SELECT unix_millis(to_timestamp('2024-05-01 10:00:00'))").first()[0])
    assert sorted(r.timestamp_ms - first for r in records) == [0, 5000, 9000]


@pytest.mark.spark
@pytest.mark.broker
def test_spark_avro(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
                    schema_registry: TestRegistry) -> None:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = topic_factory(partitions=1)
    load("spark_avro").main(spark, bootstrap, topic, schema_registry.url)
    with SchemaRegistryClient({"url": schema_registry.url}) as client:
        deserializer = AvroDeserializer(client)
        read = {r.key: deserializer(r.value, SerializationContext(topic, MessageField.VALUE)) for r in readback(topic)}
    assert read == {b"alice": {"order_id": 1, "customer": "alice", "amount": 12.5, "items": ["book"]},
                    b"bob": {"order_id": 2, "customer": "bob", "amount": None, "items": []}}


@pytest.mark.spark
@pytest.mark.broker
def test_spark_exactly_once(spark: Any, bootstrap: str, topic_factory: Callable[..., str],
                            readback: Readback) -> None:
    topic = topic_factory(partitions=3)
    load("spark_exactly_once").main(spark, bootstrap, topic)
    values = [json.loads(r.value or b"")["payment"] for r in readback(topic, "read_committed")]
    assert sorted(values) == list(range(1000))   # written twice with one writeId: every row once


@pytest.mark.spark
@pytest.mark.broker
def test_spark_streaming(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
                         tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    query = load("spark_streaming").start(spark, bootstrap, topic, str(tmp_path / "checkpoint"), availableNow=True)
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    values = sorted(json.loads(r.value or b"")["value"] for r in readback(topic))
    assert values == list(range(100))   # the first micro-batch of the rate-micro-batch source


@pytest.mark.spark
@pytest.mark.broker
def test_spark_foreach_batch(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback,
                             tmp_path: Path) -> None:
    topic = topic_factory(partitions=3)
    query = load("spark_foreach_batch").start(spark, bootstrap, topic, str(tmp_path / "checkpoint"),
                                              availableNow=True)
    assert query.awaitTermination(120), "the availableNow query did not finish"
    assert query.exception() is None, query.exception()
    totals = {r.key: json.loads(r.value or b"")["count"] for r in readback(topic)}
    assert totals == {str(b).encode(): 10 for b in range(10)}


@pytest.mark.spark
@pytest.mark.broker
def test_spark_connect(spark: Any, bootstrap: str, topic_factory: Callable[..., str], readback: Readback) -> None:
    """The write a Connect client makes, run on the classic session: the sink sees the same plan either way
    (tests/cluster/test_spark_connect.py runs it through a real Connect server)."""
    topic = topic_factory(partitions=3)
    load("spark_connect").main(spark, bootstrap, topic)
    assert sorted(int(r.key or b"") for r in readback(topic)) == list(range(100))
