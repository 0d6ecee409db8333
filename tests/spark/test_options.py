"""Option parsing on the driver: no Spark, no broker."""

from __future__ import annotations

import pickle

import pytest

from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.secret import Secret
from spark_kafka_sink.spark.options import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_TRANSACTION_TIMEOUT_MS,
    DeliveryGuarantee,
    SinkOptions,
)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def parse(streaming: bool = False, **extra: str) -> SinkOptions:
    return SinkOptions.parse({**BASE, **extra}, streaming=streaming)


def parse_options(extra: dict[str, str]) -> SinkOptions:
    """Options whose keys are not Python names (kafka.batch.size ...), batch write."""
    return SinkOptions.parse({**BASE, **extra}, streaming=False)


def test_defaults_are_at_least_once_without_transactions() -> None:
    opts = parse()
    assert opts.guarantee is DeliveryGuarantee.AT_LEAST_ONCE
    assert opts.transactional_id_prefix is None
    assert opts.topic == "t"
    assert "transaction.timeout.ms" not in opts.producer_options
    assert opts.producer_config()["bootstrap.servers"] == ("127.0.0.1:9092",)


def test_keys_are_case_insensitive_and_guarantee_value_too() -> None:
    opts = SinkOptions.parse({"KAFKA.Bootstrap.Servers": "h:1", "DeliveryGuarantee": "EXACTLY_ONCE",
                              "Topic": "x", "kafka.Linger.MS": "7"}, streaming=False)
    assert opts.exactly_once and opts.topic == "x"
    assert opts.producer_options["linger.ms"] == 7


def test_exactly_once_prefix_ids_and_timeout_default() -> None:
    opts = parse(deliveryGuarantee="exactly_once", transactionalIdPrefix="job-7")
    assert opts.transactional_id(3) == "job-7-3"
    assert opts.producer_config("job-7-3")["transactional.id"] == "job-7-3"
    assert opts.producer_options["transaction.timeout.ms"] == DEFAULT_TRANSACTION_TIMEOUT_MS
    assert "transactional.id" not in opts.producer_options


def test_batch_size_defaults_to_256_kib_and_the_user_value_wins() -> None:
    assert parse().producer_options["batch.size"] == DEFAULT_BATCH_SIZE == 262_144
    assert parse(deliveryGuarantee="exactly_once").producer_config("p-0")["batch.size"] == DEFAULT_BATCH_SIZE
    assert parse_options({"kafka.batch.size": "16384"}).producer_options["batch.size"] == 16384


def test_user_transaction_timeout_wins() -> None:
    opts = parse_options({"deliveryGuarantee": "exactly_once", "kafka.transaction.timeout.ms": "60000"})
    assert opts.producer_options["transaction.timeout.ms"] == 60000


def test_default_prefix_unique_per_batch_write_and_stable_per_checkpoint() -> None:
    a = parse(deliveryGuarantee="exactly_once").transactional_id_prefix
    b = parse(deliveryGuarantee="exactly_once").transactional_id_prefix
    assert a != b
    s1 = parse(True, deliveryGuarantee="exactly_once", checkpointLocation="/c/1").transactional_id_prefix
    s2 = parse(True, deliveryGuarantee="exactly_once", checkpointLocation="/c/1").transactional_id_prefix
    s3 = parse(True, deliveryGuarantee="exactly_once", checkpointLocation="/c/2").transactional_id_prefix
    assert s1 == s2 != s3


def test_secrets_never_in_repr_and_survive_pickle() -> None:
    opts = parse_options({"kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "PLAIN",
                          "kafka.sasl.username": "u", "kafka.sasl.password": "hunter2-secret"})
    assert "hunter2" not in repr(opts)
    back = pickle.loads(pickle.dumps(opts))
    assert isinstance(back.producer_options["sasl.password"], Secret)
    assert back.producer_options["sasl.password"].reveal() == "hunter2-secret"
    assert back == opts


def test_unrelated_options_are_ignored_like_spark() -> None:
    opts = parse(path="/x", checkpointLocation="/c")
    assert opts.ignored == ("checkpointLocation", "path")


def test_a_consumers_kafka_options_are_ignored_like_sparks_sink() -> None:
    """One option map for a job's Kafka reader and writer: the consumer's kafka.* keys reach the producer, which
    ignores them (Spark's sink hands them to the Java producer, which logs and ignores them); a misspelt producer
    key still fails."""
    opts = parse_options({"kafka.group.id": "readers", "kafka.auto.offset.reset": "earliest",
                          "kafka.session.timeout.ms": "45000", "kafka.linger.ms": "7"})
    assert opts.ignored == ("kafka.auto.offset.reset", "kafka.group.id", "kafka.session.timeout.ms")
    assert opts.producer_options["linger.ms"] == 7
    assert not {"group.id", "auto.offset.reset", "session.timeout.ms"} & set(opts.producer_options)
    with pytest.raises(ConfigError, match="did you mean 'kafka.linger.ms'"):
        parse_options({"kafka.linger.msec": "7"})


def test_producer_reuse_defaults_and_options() -> None:
    assert parse().producer_reuse and parse().producer_idle_timeout_ms == 600_000
    opts = parse(ProducerReuse="FALSE", producerIdleTimeoutMs="0")
    assert not opts.producer_reuse and opts.producer_idle_timeout_ms == 0


def test_worker_gc_freeze_is_on_unless_turned_off() -> None:
    assert parse().worker_gc_freeze
    assert not parse(workergcfreeze=" False ").worker_gc_freeze


def test_timestamp_column_is_opt_in_and_any_key_case() -> None:
    assert parse().timestamp_column is None
    assert parse(TimestampColumn=" event_time ").timestamp_column == "event_time"
    assert "timestamp_column='event_time'" in repr(parse(timestampcolumn="event_time"))


@pytest.mark.parametrize(("extra", "named", "streaming"), [
    ({"kafka.bootstrap.servers": ""}, "kafka.bootstrap.servers", False),
    ({"kafka.lingr.ms": "5"}, "kafka.linger.ms", False),
    ({"kafka.key.serializer": "org.apache.kafka.common.serialization.StringSerializer"}, "kafka.key.serializer", False),
    ({"kafka.value.serializer": "x"}, "kafka.value.serializer", False),
    ({"kafka.transactional.id": "x"}, "transactionalIdPrefix", False),
    ({"deliveryGuarantee": "exactly-twice"}, "deliveryGuarantee", False),
    ({"deliveryGuarentee": "exactly_once"}, "deliveryGuarantee", False),
    ({"transactionalIdPrefix": "p"}, "transactionalIdPrefix", False),
    ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a b"}, "transactionalIdPrefix", False),
    ({"deliveryGuarantee": "exactly_once", "writeId": "x"}, "writeId", False),
    ({"deliveryGuarantee": "exactly_once", "writeId": "3"}, "transactionalIdPrefix", False),
    ({"deliveryGuarantee": "exactly_once", "kafka.acks": "1"}, "acks", False),
    ({"deliveryGuarantee": "exactly_once", "kafka.enable.idempotence": "false"}, "idempotence", False),
    ({"deliveryGuarantee": "exactly_once"}, "checkpointLocation", True),
    ({"kafka.linger.ms": "-3"}, "linger.ms", False),
    ({"topic": " "}, "topic", False),
    ({"timestampColumn": " "}, "timestampColumn", False),
    ({"producerReuse": "yes"}, "producerReuse", False),
    ({"workerGcFreeze": "1"}, "workerGcFreeze", False),
    ({"producerIdleTimeoutMs": "-1"}, "producerIdleTimeoutMs", False),
    ({"producerIdleTimeoutMs": "soon"}, "producerIdleTimeoutMs", False),
    ({"timestampColum": "ts"}, "timestampColumn", False),
])
def test_bad_options_name_the_option(extra: dict[str, str], named: str, streaming: bool) -> None:
    with pytest.raises(ConfigError) as info:
        parse(streaming, **extra)
    assert named in str(info.value)


def test_missing_bootstrap() -> None:
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers is required"):
        SinkOptions.parse({"topic": "t"}, streaming=False)


def test_secret_value_not_echoed_in_errors() -> None:
    with pytest.raises(ConfigError) as info:
        parse_options({"kafka.sasl.jaas.config": "org.Foo required password=\"topsecret\";",
                       "kafka.security.protocol": "SASL_PLAINTEXT"})
    assert "topsecret" not in str(info.value)


@pytest.mark.parametrize("value", ["0", "-5", "soon"])
def test_id_pool_lease_ms_refuses_what_is_not_a_positive_count(value: str) -> None:
    with pytest.raises(ConfigError, match=f"option idPoolLeaseMs='{value}' is not valid: milliseconds > 0"):
        parse(deliveryGuarantee="exactly_once", idPoolLeaseMs=value)
    assert parse(deliveryGuarantee="exactly_once", idPoolLeaseMs="5").id_pool_lease_ms == 5


def test_id_pool_lease_ms_applies_only_to_pooled_writes() -> None:
    with pytest.raises(ConfigError, match="idPoolLeaseMs applies only to batch exactly_once writes without"):
        parse(deliveryGuarantee="exactly_once", transactionalIdPrefix="p", idPoolLeaseMs="5")
