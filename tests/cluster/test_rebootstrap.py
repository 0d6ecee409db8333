"""metadata.recovery.strategy on a real broker that moves to another address (KIP-899): a long-lived producer
knows the broker only at its old port; bootstrap.servers also names the new one. With ``rebootstrap`` (Java 4.0's
default) the producer finds the broker again through bootstrap.servers; with ``none`` it keeps trying the old
address until the record's delivery timeout. Read back with confluent-kafka."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import KafkaTimeoutError
from spark_kafka_sink.producer import KafkaProducer
from spark_kafka_sink.testing.broker import KafkaCluster, free_port
from spark_kafka_sink.testing.broker_jars import fetch_jars
from tests.conftest import create_topic, read_topic

pytestmark = [pytest.mark.cluster, pytest.mark.broker, pytest.mark.timeout(300)]


@pytest.mark.parametrize("strategy", ["rebootstrap", "none"])
def test_a_broker_at_a_new_address_is_found_through_bootstrap_servers(strategy: str) -> None:
    fetch_jars()
    new_port = free_port()
    with KafkaCluster(size=1) as cluster:
        old_port = cluster.nodes[1].port
        topic = create_topic(cluster.bootstrap_servers, f"moving-{strategy}", partitions=1)
        settings = {"bootstrap.servers": f"127.0.0.1:{old_port},127.0.0.1:{new_port}",
                    "metadata.recovery.strategy": strategy, "delivery.timeout.ms": 10_000,
                    "request.timeout.ms": 5_000, "linger.ms": 0}
        with KafkaProducer(settings) as producer:
            producer.send(topic, value=b"before", partition=0).result(timeout=30)
            assert cluster.move_node(1, new_port) == new_port  # the old port is closed now
            after = producer.send(topic, value=b"after", partition=0)
            if strategy == "rebootstrap":
                assert after.result(timeout=60).offset == 1
            else:
                with pytest.raises(KafkaTimeoutError):
                    after.result(timeout=60)
        expected = [b"before", b"after"] if strategy == "rebootstrap" else [b"before"]
        assert [r.value for r in read_topic(cluster.bootstrap_servers, topic)] == expected
