"""Delegation tokens (KIP-48): a client authenticates with SCRAM using a token's id and HMAC, marked by
``tokenauth=true`` in ScramLoginModule's options, the client setting Kafka documents for tokens. The token comes
from Kafka's own ``DelegationTokenCommand`` (authenticated as alice), and records are read back by confluent-kafka.
"""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.errors import SaslAuthenticationFailedError, TopicAuthorizationFailedError
from spark_kafka_sink.protocol.jaas import SCRAM_LOGIN_MODULE
from spark_kafka_sink.testing.broker_jars import require_java, tools_lib
from tests.security.conftest import (
    PASSWORD,
    SCRAM_MECHANISMS,
    USER,
    SecureBroker,
    acls,
    create_topic_secure,
    read_back_secure,
)


def create_token(broker: SecureBroker, tmp_path: Path) -> tuple[str, str]:
    """(token id, HMAC) of a new token owned by alice, made with Kafka's kafka-delegation-tokens tool over SCRAM."""
    config = tmp_path / "alice.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
                      f'sasl.jaas.config={SCRAM_LOGIN_MODULE} required username="{USER}" password="{PASSWORD}";\n')
    proc = subprocess.run(
        [require_java(), "-cp", f"{tools_lib(broker.cluster.version)}/*",
         "org.apache.kafka.tools.DelegationTokenCommand",
         "--bootstrap-server", broker.address("SASL_PLAINTEXT"), "--command-config", str(config),
         "--create", "--max-life-time-period", "-1"],
        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["TOKENID", "HMAC"])
    row = next(line.split() for line in lines[header + 1:] if line.strip() and not set(line.strip()) <= {"-"})
    token_id, hmac = row[:2]
    return token_id, hmac


def token_settings(broker: SecureBroker, mechanism: str, token_id: str, hmac: str,
                   tokenauth: bool = True) -> dict[str, Any]:
    option = ' tokenauth="true"' if tokenauth else ""
    return {"bootstrap.servers": broker.address("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.jaas.config": f'{SCRAM_LOGIN_MODULE} required username="{token_id}" password="{hmac}"{option};'}


def send_with_token(settings: dict[str, Any], topic: str, count: int, timeout: float = 30.0) -> None:
    """Send ``count`` records. A token is made on the controller and reaches the broker through the metadata log a
    moment later: until then the broker refuses the login, so a refused login is retried until ``timeout``."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    deadline = time.monotonic() + timeout
    while True:
        try:
            with KafkaProducer({**settings, "max.block.ms": 10_000}) as producer:
                futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(count)]
                producer.flush()
                for future in futures:
                    future.result(timeout=30)
            return
        except SaslAuthenticationFailedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)  # poll interval of a condition wait (the broker learning the token)


@pytest.fixture(scope="module")
def token(secure_broker: SecureBroker, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    return create_token(secure_broker, tmp_path_factory.mktemp("token"))


@pytest.mark.parametrize("mechanism", SCRAM_MECHANISMS)
def test_producer_authenticates_with_a_delegation_token(secure_broker: SecureBroker, token: tuple[str, str],
                                                        mechanism: str) -> None:
    topic = create_topic_secure(secure_broker, partitions=2)
    send_with_token(token_settings(secure_broker, mechanism, *token), topic, 50)
    records = read_back_secure(secure_broker, "SASL_PLAINTEXT", topic, 50)
    assert sorted(records) == sorted((b"k%d" % i, b"v%d" % i) for i in range(50))


def test_without_tokenauth_the_broker_refuses_the_token(secure_broker: SecureBroker, token: tuple[str, str]) -> None:
    """The same id and HMAC without tokenauth are checked as a SCRAM user's, and no user has that name: the flag is
    what makes the token work. The error never shows the HMAC."""
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker)
    send_with_token(token_settings(secure_broker, "SCRAM-SHA-512", *token), topic, 1)  # the broker knows the token
    settings = {**token_settings(secure_broker, "SCRAM-SHA-512", *token, tokenauth=False), "max.block.ms": 10_000}
    refused = f"SCRAM-SHA-512 authentication of user '{re.escape(token[0])}'"
    with pytest.raises(SaslAuthenticationFailedError, match=refused) as info:
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"never").result(timeout=30)
    assert token[1] not in str(info.value) and token[1] not in repr(info.value)


def test_a_wrong_hmac_is_refused(secure_broker: SecureBroker, token: tuple[str, str]) -> None:
    from spark_kafka_sink.producer.producer import KafkaProducer

    topic = create_topic_secure(secure_broker)
    send_with_token(token_settings(secure_broker, "SCRAM-SHA-256", *token), topic, 1)  # the broker knows the token
    wrong = "A" + token[1][1:] if token[1][0] != "A" else "B" + token[1][1:]
    settings = {**token_settings(secure_broker, "SCRAM-SHA-256", token[0], wrong), "max.block.ms": 10_000}
    refused = f"SCRAM-SHA-256 authentication of delegation token '{re.escape(token[0])}'.*invalid credentials"
    with pytest.raises(SaslAuthenticationFailedError, match=refused) as info:
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"never").result(timeout=30)
    assert wrong not in str(info.value)


def test_the_broker_authorizes_the_tokens_owner(secure_broker: SecureBroker, token: tuple[str, str]) -> None:
    """A token acts as its owner. With an ACL allowing only alice to write to a topic the token's producer writes
    (anyone else is denied once a topic has ACLs); with one denying alice it is refused."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in the stubs' __all__
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    from spark_kafka_sink.producer.producer import KafkaProducer

    def write_acl(topic: str, permission: Any) -> Any:
        return AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{USER}", "*",
                          AclOperation.WRITE, permission)

    settings = token_settings(secure_broker, "SCRAM-SHA-512", *token)
    allowed, denied = create_topic_secure(secure_broker), create_topic_secure(secure_broker)
    send_with_token(settings, allowed, 1)  # the broker knows the token (no ACL names the topic yet)
    with acls(secure_broker, [write_acl(allowed, AclPermissionType.ALLOW), write_acl(denied, AclPermissionType.DENY)]):
        send_with_token(settings, allowed, 2)
        with pytest.raises(TopicAuthorizationFailedError):
            with KafkaProducer({**settings, "max.block.ms": 10_000}) as producer:
                producer.send(denied, value=b"denied").result(timeout=30)
    assert sorted(read_back_secure(secure_broker, "SASL_PLAINTEXT", allowed, 3)) == [
        (b"k0", b"v0"), (b"k0", b"v0"), (b"k1", b"v1")]


@pytest.mark.spark
def test_spark_jobs_with_a_token_in_both_formats(secure_broker: SecureBroker, token: tuple[str, str],
                                                 spark: Any) -> None:
    """A format("kafka") job's token login (kafka.sasl.jaas.config with tokenauth=true, as Spark's own delegation
    token support writes it) runs unchanged with format("pykafka-sink"), in both guarantees."""
    topic = create_topic_secure(secure_broker, partitions=3)
    send_with_token(token_settings(secure_broker, "SCRAM-SHA-512", *token), topic, 1)  # the broker knows the token
    df = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(30)], "key string, value string")
    settings = token_settings(secure_broker, "SCRAM-SHA-512", *token)
    for fmt, guarantee in (("kafka", None), ("pykafka-sink", "at_least_once"), ("pykafka-sink", "exactly_once")):
        writer = df.write.format(fmt).option("topic", topic)
        for key, value in settings.items():
            writer = writer.option(f"kafka.{key}", str(value))
        if guarantee is not None:
            writer = writer.option("deliveryGuarantee", guarantee)
        writer.mode("append").save()
    records = read_back_secure(secure_broker, "SASL_PLAINTEXT", topic, 1 + 3 * 30)
    expected = [(b"k0", b"v0")] + 3 * [(f"k{i}".encode(), f"v{i}".encode()) for i in range(30)]
    assert sorted(records) == sorted(expected)
