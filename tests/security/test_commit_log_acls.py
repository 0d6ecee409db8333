"""exactly_once with a stable writeId needs the commit log topic (``commitLogTopic``): without the ACL to create,
describe, read or write it, the write fails on the driver before any task runs -- nothing reaches the data topic,
not even an aborted transaction -- with a message that names the topic, the operation to allow and the option,
and never the password. Real ACLs on the secured broker (StandardAuthorizer), a real Spark write over SASL_SSL.

Each case denies one operation to the sink's principal and allows the others, so the message must name that one.
Once the ACLs are gone, the same write goes through: what failed it was the ACL, nothing else.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from tests.security.conftest import PASSWORD, USER, SecureBroker, acls, create_topic_secure, read_back_secure

pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.timeout(300)]

_PRINCIPAL = f"User:{USER}"
_ROWS = [(f"k{i}", f"v{i}") for i in range(6)]

# (case id, whether the commit log topic exists before the write, operation denied, operations allowed)
CASES = [
    ("create", False, "CREATE", ("DESCRIBE", "READ", "WRITE")),
    ("describe", True, "DESCRIBE", ()),
    ("read", True, "READ", ("DESCRIBE", "WRITE")),
    ("write", True, "WRITE", ("DESCRIBE", "READ")),
]


def _bindings(log_topic: str, denied: str, allowed: tuple[str, ...]) -> list[Any]:
    from confluent_kafka.admin import (  # type: ignore[attr-defined]  # re-exported, not in the stubs' __all__
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    def binding(restype: Any, name: str, operation: str, permission: Any) -> Any:
        return AclBinding(restype, name, ResourcePatternType.LITERAL, _PRINCIPAL, "*", AclOperation[operation],
                          permission)

    result = [binding(ResourceType.TOPIC, log_topic, denied, AclPermissionType.DENY)]
    if denied == "CREATE":  # CreateTopics is allowed by Create on the cluster as well as on the topic
        result.append(binding(ResourceType.BROKER, "kafka-cluster", denied, AclPermissionType.DENY))
    result += [binding(ResourceType.TOPIC, log_topic, op, AclPermissionType.ALLOW) for op in allowed]
    return result


def _write(spark: Any, broker: SecureBroker, topic: str, log_topic: str, prefix: str) -> None:
    options = {
        "kafka.bootstrap.servers": broker.address("SASL_SSL"), "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.ca.location": str(broker.certs.ca_cert), "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.username": USER, "kafka.sasl.password": PASSWORD, "kafka.max.block.ms": "20000",
        "topic": topic, "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": prefix, "writeId": "7",
        "commitLogTopic": log_topic,
    }
    writer = spark.createDataFrame(_ROWS, "key string, value string").write.format("pykafka-sink")
    writer.options(**options).mode("append").save()


def _high_watermarks(broker: SecureBroker, topic: str) -> list[int]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.plaintext_bootstrap, "group.id": f"acl-{uuid.uuid4().hex}"})
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        return [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions]
    finally:
        consumer.close()


@pytest.mark.parametrize(("exists", "denied", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_missing_commit_log_acl_fails_before_any_task(secure_broker: SecureBroker, spark: Any, exists: bool,
                                                      denied: str, allowed: tuple[str, ...]) -> None:
    topic = create_topic_secure(secure_broker, partitions=2)
    log_topic = f"sec-commits-{uuid.uuid4().hex[:12]}"
    if exists:
        from tests.conftest import create_topic

        create_topic(secure_broker.plaintext_bootstrap, log_topic, 3, config={"cleanup.policy": "compact"})
    prefix = f"acl-{uuid.uuid4().hex[:8]}"
    group = f"acl-{uuid.uuid4().hex[:8]}"
    tracker = spark.sparkContext.statusTracker()
    with acls(secure_broker, _bindings(log_topic, denied, allowed)):
        spark.sparkContext.setJobGroup(group, "commit log ACL case")
        try:
            with pytest.raises(Exception) as failure:
                _write(spark, secure_broker, topic, log_topic, prefix)
        finally:
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        assert list(tracker.getJobIdsForGroup(group)) == []  # the driver refused before Spark started a job
        assert _high_watermarks(secure_broker, topic) == [0, 0]  # not even an aborted transaction's records
    message = str(failure.value)
    assert "CommitLogAccessError" in message, message
    assert repr(log_topic) in message and "commitLogTopic" in message, message
    assert f"allow {denied.capitalize()}" in message, message
    assert PASSWORD not in message
    # The ACLs are gone: the same write goes through, so it was the ACL that failed it.
    _write(spark, secure_broker, topic, log_topic, prefix)
    assert sorted(read_back_secure(secure_broker, "SASL_SSL", topic, expected=len(_ROWS))) == sorted(
        (k.encode(), v.encode()) for k, v in _ROWS)


def test_a_plan_the_broker_refuses_fails_the_commit(secure_broker: SecureBroker) -> None:
    """Write taken away between the pre-flight and the commit: the plan is not acknowledged, so the commit must
    stop there (before any EndTxn) -- a producer's flush returns without raising for records that failed."""
    from spark_kafka_sink.spark.commit_log import CommitLog, CommitLogAccessError, PlannedTransaction

    log_topic = f"sec-commits-{uuid.uuid4().hex[:12]}"
    config = {"bootstrap.servers": secure_broker.address("SASL_SSL"), "security.protocol": "SASL_SSL",
              "ssl.ca.location": str(secure_broker.certs.ca_cert), "sasl.mechanism": "SCRAM-SHA-512",
              "sasl.username": USER, "sasl.password": PASSWORD, "max.block.ms": "20000",
              "delivery.timeout.ms": "20000", "request.timeout.ms": "10000"}
    planned = {0: PlannedTransaction("acl-x-0", 1000, 0, 1, 3, "digest")}
    with CommitLog(log_topic, f"acl-{uuid.uuid4().hex[:8]}", config, timeout_s=30) as log:
        assert log.read() is None  # creates the topic; every operation allowed so far
        with acls(secure_broker, _bindings(log_topic, "WRITE", ("DESCRIBE", "READ"))):
            with pytest.raises(CommitLogAccessError) as failure:
                log.append_plan(7, planned, {})
    message = str(failure.value)
    assert repr(log_topic) in message and "allow Write" in message and "commitLogTopic" in message, message
    assert PASSWORD not in message
