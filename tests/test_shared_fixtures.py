"""The guard behind the shared broker and Spark session (tests/conftest.py ``shared_state_guard``): what one test
leaves changed is put back and reported, so a later test in the same process neither passes nor fails by it.

Each case changes the shared process the way a careless test would, then runs the guard's own restore step, as the
guard does after every test, and checks that the change is named and undone."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from spark_kafka_sink.testing.broker import KafkaCluster
from tests.conftest import restore_broker_state, restore_spark_state, spark_state, wait_for

pytestmark = [pytest.mark.spark, pytest.mark.broker]


def test_a_changed_spark_setting_a_view_and_a_running_query_are_put_back(spark: Any) -> None:
    before = spark_state(spark)
    shuffle = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "7")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch",  # its default, set explicitly: not reported
                   spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
    spark.conf.set("spark.sql.ansi.enabled", str(spark.conf.get("spark.sql.ansi.enabled") != "true").lower())
    spark.range(3).createOrReplaceTempView("left_behind")
    query = spark.readStream.format("rate").load().writeStream.format("noop").start()

    leaked = restore_spark_state(spark, before)

    assert any("spark.sql.shuffle.partitions='7'" in line for line in leaked), leaked
    assert any("spark.sql.ansi.enabled" in line for line in leaked), leaked
    assert any("temporary view left_behind" in line for line in leaked), leaked
    assert any("streaming query" in line for line in leaked), leaked
    assert spark.conf.get("spark.sql.shuffle.partitions") == shuffle
    assert spark_state(spark) == before
    assert not query.isActive and spark.streams.active == []
    assert restore_spark_state(spark, before) == []  # nothing left to report the second time


def _retention_bytes(admin: AdminClient) -> str:
    described = admin.describe_configs([ConfigResource(ResourceType.BROKER, "1")])
    return str(next(iter(described.values())).result(timeout=30)["log.retention.bytes"].value)


def test_a_broker_config_set_at_run_time_is_put_back(kafka: KafkaCluster) -> None:
    assert restore_broker_state(kafka) == []  # the baseline: what the session started with
    admin = AdminClient({"bootstrap.servers": kafka.bootstrap_servers})
    node = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.retention.bytes", "123456789", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([node]).values():
        future.result(timeout=30)
    wait_for("the broker to apply the config", lambda: _retention_bytes(admin) == "123456789", timeout=30)

    leaked = restore_broker_state(kafka)

    assert leaked == ["broker 1 config log.retention.bytes='123456789' (was None)"], leaked
    wait_for("the broker to drop the config", lambda: _retention_bytes(admin) == "-1", timeout=30)
    assert restore_broker_state(kafka) == []
