"""SASL/GSSAPI against a real KDC and a broker whose listener takes only Kerberos: the producer and a Spark job log
in from a keytab (Java's Krb5LoginModule options and librdkafka's) or a ticket cache, the broker sees the
principal (its ACLs apply to it), and each misconfiguration fails at once saying what to fix. Read back with
confluent-kafka over the PLAINTEXT listener (its wheel has no GSSAPI) and with Spark's own Kafka source."""

from __future__ import annotations

import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest

from spark_kafka_sink.errors import ConfigError, KafkaError, TopicAuthorizationFailedError
from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.protocol.jaas import KRB5_LOGIN_MODULE
from tests.conftest import pause_process, read_topic, spark_read_topic, wait_for
from tests.kerberos.conftest import SUPER_USER, KerberizedBroker

pytestmark = pytest.mark.kerberos


def produce(config: dict[str, Any], topic: str, count: int = 10, prefix: str = "v") -> None:
    bounds = {"request.timeout.ms": 15_000, "delivery.timeout.ms": 20_000, "max.block.ms": 20_000}
    with KafkaProducer({**bounds, **config}) as producer:
        futures = [producer.send(topic, f"{prefix}{i}".encode(), key=f"k{i}".encode()) for i in range(count)]
        producer.flush(30)
        for future in futures:
            future.result(1)


def values(bootstrap: str, topic: str) -> list[bytes]:
    return sorted(r.value or b"" for r in read_topic(bootstrap, topic, "read_uncommitted"))


def test_producer_logs_in_from_a_keytab_with_javas_options(kerberized: KerberizedBroker) -> None:
    topic = kerberized.topic()
    produce(kerberized.producer_config(), topic)
    assert values(kerberized.plaintext_bootstrap, topic) == sorted(f"v{i}".encode() for i in range(10))


def test_kerberos_over_tls(kerberized: KerberizedBroker) -> None:
    """SASL_SSL: TLS first (the broker's certificate checked against the test CA), then the same GSSAPI exchange."""
    topic = kerberized.topic()
    produce({**kerberized.producer_config(), "bootstrap.servers": kerberized.kerberos_tls_bootstrap,
             "security.protocol": "SASL_SSL", "ssl.ca.location": str(kerberized.certs.ca_cert)}, topic, count=3)
    assert values(kerberized.plaintext_bootstrap, topic) == [b"v0", b"v1", b"v2"]


def test_librdkafkas_keytab_options(kerberized: KerberizedBroker) -> None:
    topic = kerberized.topic()
    config = {"bootstrap.servers": kerberized.kerberos_bootstrap, "security.protocol": "SASL_PLAINTEXT",
              "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
              "sasl.kerberos.keytab": str(kerberized.kdc.keytab("other")),
              "sasl.kerberos.principal": kerberized.kdc.principal("other")}
    produce(config, topic, count=3)
    assert values(kerberized.plaintext_bootstrap, topic) == [b"v0", b"v1", b"v2"]


def test_ticket_cache_left_by_a_login(kerberized: KerberizedBroker, tmp_path: Path) -> None:
    """useTicketCache=true: the tickets a kinit left (here: MIT's own keytab login stored into a file cache)."""
    import gssapi

    cache = tmp_path / "krb5cc"
    kdc = kerberized.kdc
    name = gssapi.Name(kdc.principal("client"), gssapi.NameType.kerberos_principal)
    login = gssapi.Credentials(name=name, usage="initiate",
                               store={"client_keytab": str(kdc.keytab("client")), "ccache": f"FILE:{cache}"})
    assert login.lifetime > 0 and cache.stat().st_size > 0
    topic = kerberized.topic()
    jaas = f'{KRB5_LOGIN_MODULE} required useTicketCache=true ticketCache="FILE:{cache}";'
    produce({**kerberized.producer_config(), "sasl.jaas.config": jaas}, topic, count=2)
    assert values(kerberized.plaintext_bootstrap, topic) == [b"v0", b"v1"]


def test_broker_knows_the_principal(kerberized: KerberizedBroker) -> None:
    """An ACL denying User:client writes stops client's producer and not other's: the broker authenticated each
    as its own principal."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    topic = kerberized.topic()
    admin = AdminClient({"bootstrap.servers": kerberized.plaintext_bootstrap})
    # Once a topic has an ACL, only ACLs decide: everyone may do everything, except client write (a DENY wins).
    allow = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:*", "*",
                       AclOperation.ALL, AclPermissionType.ALLOW)
    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:client", "*",
                      AclOperation.WRITE, AclPermissionType.DENY)
    assert SUPER_USER != "User:client"
    for done in admin.create_acls([allow, deny]).values():
        done.result(timeout=30)
    filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                b.permission_type) for b in (allow, deny)]
    wait_for("the broker's authorizer to have both ACLs",
             lambda: all(admin.describe_acls(f).result(timeout=30) for f in filters), timeout=30)
    with pytest.raises(TopicAuthorizationFailedError):
        produce(kerberized.producer_config("client"), topic, count=1)
    produce(kerberized.producer_config("other"), topic, count=1, prefix="other")
    assert values(kerberized.plaintext_bootstrap, topic) == [b"other0"]


def failure(config: dict[str, Any], topic: str) -> tuple[KafkaError, float]:
    start = time.monotonic()
    with pytest.raises(KafkaError) as info:
        produce(config, topic, count=1)
    return info.value, time.monotonic() - start


def test_unknown_service_name_fails_at_once(kerberized: KerberizedBroker) -> None:
    topic = kerberized.topic()
    error, took = failure(kerberized.producer_config(**{"sasl.kerberos.service.name": "kafkaa"}), topic)
    text = str(error)
    assert "Server kafkaa/localhost@EXAMPLE.COM not found in Kerberos database" in text, text
    assert "sasl.kerberos.service.name" in text and took < 15, (text, took)


def test_keytab_of_another_principal_fails_at_once(kerberized: KerberizedBroker) -> None:
    topic = kerberized.topic()
    kdc = kerberized.kdc
    jaas = (f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="{kdc.keytab("other")}" '
            f'principal="{kdc.principal("client")}";')
    error, took = failure({**kerberized.producer_config(), "sasl.jaas.config": jaas}, topic)
    text = str(error)
    assert f"the keytab {kdc.keytab('other')} holds no valid key of client@EXAMPLE.COM" in text, text
    assert took < 15, took


def test_empty_ticket_cache_says_to_kinit(kerberized: KerberizedBroker, tmp_path: Path) -> None:
    topic = kerberized.topic()
    jaas = f'{KRB5_LOGIN_MODULE} required useTicketCache=true ticketCache="FILE:{tmp_path / "none"}";'
    error, _ = failure({**kerberized.producer_config(), "sasl.jaas.config": jaas}, topic)
    assert "kinit" in str(error), str(error)


def test_missing_keytab_is_a_config_error(kerberized: KerberizedBroker, tmp_path: Path) -> None:
    jaas = f'{KRB5_LOGIN_MODULE} required useKeyTab=true keyTab="{tmp_path / "gone.keytab"}" principal="client";'
    with pytest.raises(ConfigError, match="gone.keytab does not exist") as info:
        KafkaProducer({**kerberized.producer_config(), "sasl.jaas.config": jaas})
    assert info.value.key == "sasl.jaas.config"


@pytest.mark.spark
def test_spark_job_options_work_for_both_formats(kerberized: KerberizedBroker, kerberos_spark: Any) -> None:
    """A format("kafka") job's Kerberos options, unchanged, with format("pykafka-sink") in both guarantees (the
    driver ends exactly_once's transactions over Kerberos too); all read back, read_committed, by Spark's own Kafka
    source."""
    options = {"kafka.bootstrap.servers": kerberized.kerberos_bootstrap,
               "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "GSSAPI",
               "kafka.sasl.kerberos.service.name": "kafka", "kafka.sasl.jaas.config": kerberized.keytab_jaas()}
    for fmt, extra in (("kafka", {}), ("pykafka-sink", {}), ("pykafka-sink", {"deliveryGuarantee": "exactly_once"})):
        topic = kerberized.topic(partitions=2)
        df = kerberos_spark.createDataFrame([(f"k{i}", f"{fmt}-{i}") for i in range(50)], "key string, value string")
        df.write.format(fmt).mode("append").options(**options, **extra).option("topic", topic).save()
        read = spark_read_topic(kerberos_spark, kerberized.plaintext_bootstrap, topic)
        got = sorted(row.value.decode() for row in read.select("value").collect())
        assert got == sorted(f"{fmt}-{i}" for i in range(50)), (fmt, extra)


def test_keytab_login_gets_new_tickets_once_they_expire(kerberized: KerberizedBroker, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Tickets of 4 s (krb5.conf's ticket_lifetime): a producer after they expired connects again with the same
    login (the same memory ticket cache, shared by the configuration's producers), which gets new ones from the
    keytab. Without that the second producer would fail with an expired ticket."""
    short = tmp_path / "krb5.conf"
    short.write_text(kerberized.kdc.krb5_conf.read_text().replace("[libdefaults]\n",
                                                                   "[libdefaults]\n    ticket_lifetime = 4s\n"))
    monkeypatch.setenv("KRB5_CONFIG", str(short))
    topic = kerberized.topic()
    config = kerberized.producer_config("other")
    produce(config, topic, count=1, prefix="first")
    first_login = time.time()
    wait_for("the first tickets to expire", lambda: time.time() > first_login + 5, timeout=10)
    produce(config, topic, count=1, prefix="second")
    assert values(kerberized.plaintext_bootstrap, topic) == [b"first0", b"second0"]


def test_bootstrap_through_an_alias_needs_canonical_names(kerberized: KerberizedBroker,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """bootstrap.servers names the cluster by an alias (kafka-alias, resolving to 127.0.0.1) that no principal
    holds. As given, the bootstrap connection asks for kafka/kafka-alias, which the KDC does not know; with
    client.dns.lookup=resolve_canonical_bootstrap_servers_only it connects to localhost, kafka/localhost."""
    real = socket.getaddrinfo

    def resolve(host: Any, *args: Any, **kwargs: Any) -> Any:
        return real("127.0.0.1" if host == "kafka-alias" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    port = kerberized.kerberos_bootstrap.rpartition(":")[2]
    alias = {**kerberized.producer_config(), "bootstrap.servers": f"kafka-alias:{port}"}
    topic = kerberized.topic()
    error, _ = failure(alias, topic)
    text = str(error)
    assert "Server kafka/kafka-alias@EXAMPLE.COM not found in Kerberos database" in text, text
    assert "client.dns.lookup=resolve_canonical_bootstrap_servers_only" in text, text
    produce({**alias, "client.dns.lookup": "resolve_canonical_bootstrap_servers_only"}, topic, count=2)
    assert values(kerberized.plaintext_bootstrap, topic) == [b"v0", b"v1"]


def test_a_paused_kdc_stops_new_logins_not_the_tickets_in_hand(kerberized: KerberizedBroker) -> None:
    """The KDC SIGSTOPped: a new producer of a configuration that logged in before connects with the tickets its
    login holds. A login without tickets waits for the KDC off the network thread (MIT Kerberos gives up on a
    silent KDC after ~50 s here): each connection attempt ends at socket.connection.setup.timeout.ms saying it
    waited for the KDC, and the send fails at max.block.ms with that reason; the producer closes at once rather
    than after MIT's 50 s. Once the KDC runs again, the same login succeeds."""
    topic = kerberized.topic()
    produce(kerberized.producer_config("client"), topic, count=1, prefix="before")
    pid = kerberized.kdc.process.pid if kerberized.kdc.process else 0
    pause_process(pid)
    try:
        produce(kerberized.producer_config("client"), topic, count=1, prefix="paused")
        error, took = failure(kerberized.producer_config("late", **{"socket.connection.setup.timeout.ms": 3000,
                                                                     "max.block.ms": 8000}), topic)
        print(f"a login without the KDC failed after {took:.1f} s: {error}")
        text = str(error)
        assert "not present in metadata after 8000 ms (max.block.ms=8000)" in text, text
        assert "stuck in SASL/GSSAPI, waiting for the KDC (a Kerberos ticket)" in text, text
        assert took < 12, took
    finally:
        os.kill(pid, signal.SIGCONT)
    produce(kerberized.producer_config("late"), topic, count=1, prefix="after")
    assert values(kerberized.plaintext_bootstrap, topic) == [b"after0", b"before0", b"paused0"]
