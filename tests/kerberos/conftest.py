"""Kerberos (SASL/GSSAPI) against real parts: a KDC (Apache Kerby, its own JVM), a broker whose KERBEROS listener
enables only GSSAPI with its service key from that KDC, and MIT Kerberos on the client side (the ``gssapi``
package). These tests are marked ``kerberos`` and run with ``make test-kerberos``, which installs the package
(it builds against MIT Kerberos's headers); ``make test`` leaves them out. Listeners: KERBEROS (SASL_PLAINTEXT)
and KERBEROS_SSL (SASL_SSL, the test CA's broker certificate), both GSSAPI only.

Principals (realm EXAMPLE.COM): ``kafka/localhost`` (the broker), ``client`` and ``other`` (two clients, to tell
identities apart in ACLs) and ``late`` (first logs in while the KDC is paused: test_gssapi's KDC fault). The
broker maps ``client@EXAMPLE.COM`` to ``User:client`` (Kafka's default rules). MIT Kerberos in this process, and
Spark's Python workers, find the KDC through ``KRB5_CONFIG``; Java (the broker, Spark's own Kafka connector)
through ``-Djava.security.krb5.conf``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from spark_kafka_sink.protocol.jaas import KRB5_LOGIN_MODULE
from spark_kafka_sink.testing.broker import KafkaCluster
from spark_kafka_sink.testing.broker_jars import fetch_jars
from spark_kafka_sink.testing.certs import TestCertificates, make_test_certificates
from spark_kafka_sink.testing.kdc import TestKdc
from tests.conftest import _unwind_on_sigterm, create_topic, local_spark

BROKER_PRINCIPAL = "kafka/localhost"
CLIENTS = ("client", "other", "late")
#: The principal of the PLAINTEXT and CONTROLLER listeners (no authentication): a super user of the authorizer.
SUPER_USER = "User:ANONYMOUS"


@dataclass(frozen=True)
class KerberizedBroker:
    cluster: KafkaCluster
    kdc: TestKdc
    certs: TestCertificates

    @property
    def kerberos_tls_bootstrap(self) -> str:
        return self.cluster.listener_bootstrap("KERBEROS_SSL")

    @property
    def kerberos_bootstrap(self) -> str:
        return self.cluster.listener_bootstrap("KERBEROS")

    @property
    def plaintext_bootstrap(self) -> str:
        return self.cluster.bootstrap_servers

    def keytab_jaas(self, client: str = "client") -> str:
        """Java's ``sasl.jaas.config`` for a keytab login, as Kafka's documentation gives it."""
        return (f'{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true '
                f'keyTab="{self.kdc.keytab(client)}" principal="{self.kdc.principal(client)}";')

    def producer_config(self, client: str = "client", **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.kerberos_bootstrap, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "GSSAPI", "sasl.kerberos.service.name": "kafka",
                "sasl.jaas.config": self.keytab_jaas(client), **extra}

    def topic(self, partitions: int = 1) -> str:
        return create_topic(self.plaintext_bootstrap, f"krb-{uuid.uuid4().hex[:12]}", partitions)


@pytest.fixture(scope="session")
def kdc() -> Iterator[TestKdc]:
    _unwind_on_sigterm()
    server = TestKdc(principals=(BROKER_PRINCIPAL, *CLIENTS)).start()
    previous = os.environ.get("KRB5_CONFIG")
    os.environ["KRB5_CONFIG"] = str(server.krb5_conf)  # MIT Kerberos here and in Spark's Python workers
    try:
        yield server
    finally:
        if previous is None:
            os.environ.pop("KRB5_CONFIG", None)
        else:
            os.environ["KRB5_CONFIG"] = previous
        server.stop()


@pytest.fixture(scope="session")
def kerberized(kdc: TestKdc) -> Iterator[KerberizedBroker]:
    fetch_jars()
    certs = make_test_certificates()
    broker_login = (f'{KRB5_LOGIN_MODULE} required useKeyTab=true storeKey=true '
                    f'keyTab="{kdc.keytab(BROKER_PRINCIPAL)}" principal="{kdc.principal(BROKER_PRINCIPAL)}";')
    cluster = KafkaCluster(
        size=1,
        listeners=("KERBEROS", "KERBEROS_SSL"),
        properties={
            "listener.security.protocol.map": "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,KERBEROS:SASL_PLAINTEXT,"
                                              "KERBEROS_SSL:SASL_SSL",
            "listener.name.kerberos.sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.kerberos.gssapi.sasl.jaas.config": broker_login,
            "listener.name.kerberos_ssl.sasl.enabled.mechanisms": "GSSAPI",
            "listener.name.kerberos_ssl.gssapi.sasl.jaas.config": broker_login,
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(certs.server_keystore),
            "sasl.kerberos.service.name": "kafka",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "allow.everyone.if.no.acl.found": "true",
            "super.users": SUPER_USER,
        },
        jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}"],
    ).start()
    try:
        yield KerberizedBroker(cluster, kdc, certs)
    finally:
        cluster.stop()
        certs.cleanup()


@pytest.fixture(scope="session")
def kerberos_spark(kerberized: KerberizedBroker) -> Iterator[Any]:
    """Local Spark whose JVM (Spark's own Kafka connector) knows the KDC; its Python workers inherit KRB5_CONFIG."""
    yield from local_spark("spark-kafka-sink-kerberos", "2g", {
        "spark.driver.extraJavaOptions": f"-Djava.security.krb5.conf={kerberized.kdc.krb5_conf}",
        "spark.python.worker.reuse": "true",
    })
