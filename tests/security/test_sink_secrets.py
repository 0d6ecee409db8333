"""The Spark sink's own path over SASL_SSL, in this process so every log record is captured at DEBUG: the task
(``write_partition``: options -> producer -> commit message) and the driver (``commit_write``: EndTxn, summary
log). The password must not appear in any log record, in the repr/str of the options or the writers, or in the
commit message -- which Spark pickles back to the driver and the driver logs."""

from __future__ import annotations

import logging
import pickle
import uuid

import pyarrow as pa
import pytest
from pyspark.sql.types import StringType, StructField, StructType

from tests.security.conftest import PASSWORD, USER, SecureBroker, create_topic_secure, read_back_secure
from tests.security.test_secrets import _record_texts

pytestmark = pytest.mark.broker

_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"


@pytest.mark.parametrize("credentials", ["username-password", "jaas"])
def test_sink_task_and_driver_never_show_the_password(secure_broker: SecureBroker, credentials: str,
                                                      caplog: pytest.LogCaptureFixture) -> None:
    from spark_kafka_sink.spark.commit import commit_write
    from spark_kafka_sink.spark.options import SinkOptions
    from spark_kafka_sink.spark.schema import plan_columns
    from spark_kafka_sink.spark.writer import KafkaBatchWriter, KafkaStreamWriter, write_partition

    topic = create_topic_secure(secure_broker)
    options = {
        "kafka.bootstrap.servers": secure_broker.address("SASL_SSL"), "topic": topic,
        "kafka.security.protocol": "SASL_SSL", "kafka.ssl.ca.location": str(secure_broker.certs.ca_cert),
        "kafka.sasl.mechanism": "SCRAM-SHA-512", "deliveryGuarantee": "exactly_once",
        "transactionalIdPrefix": f"sec-{uuid.uuid4().hex[:8]}",
    }
    if credentials == "jaas":
        options["kafka.sasl.jaas.config"] = f'{_SCRAM_MODULE} required username="{USER}" password="{PASSWORD}";'
    else:
        options.update({"kafka.sasl.username": USER, "kafka.sasl.password": PASSWORD})
    parsed = SinkOptions.parse(options, streaming=False)
    schema = StructType([StructField("key", StringType()), StructField("value", StringType())])
    plan = plan_columns(schema, topic)
    rows = pa.RecordBatch.from_pydict({"key": ["k1", "k2"], "value": ["v1", "v2"]})
    with caplog.at_level(logging.DEBUG):  # root logger: the package's loggers and any other
        message = write_partition(parsed, plan, iter([rows]))
        summary = commit_write(parsed, [message])
    assert message.rows == 2 and summary.rows == 2 and message.transactional_id is not None
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # DEBUG really was captured
    writers = [KafkaBatchWriter(parsed, plan), KafkaStreamWriter(parsed, plan)]
    shown = [repr(parsed), str(parsed), *(repr(w) for w in writers), *(str(w) for w in writers),
             repr(message), str(message), summary.line(), repr(summary),
             pickle.dumps(message).decode("latin-1")]  # the bytes Spark ships to the driver
    texts = _record_texts(caplog.records) + shown
    assert not [text[:200] for text in texts if PASSWORD in text]
    assert sorted(read_back_secure(secure_broker, "SASL_SSL", topic, expected=2)) == [(b"k1", b"v1"), (b"k2", b"v2")]
