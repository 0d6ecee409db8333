"""``KafkaSinkDataSource``: the PySpark data source ``pykafka-sink`` (write only).

    df.write.format("pykafka-sink").option("kafka.bootstrap.servers", "h:9092").option("topic", "t") \\
        .mode("append").save()

Spark calls ``writer()`` / ``streamWriter()`` on the driver side before any task runs: options, save mode and the
DataFrame's columns are all validated there, and for batch writes with a ``topic`` option the brokers are asked
for the topic's partitions, so an unreachable ``kafka.bootstrap.servers`` fails the write before a task starts.

Save modes: pyspark (4.0 to 4.3) itself refuses the default ErrorIfExists (and Ignore) mode for every Python data source
before this class is reached ("use either the Append or Overwrite mode"), so a write needs ``.mode("append")``
(which Spark's own Kafka sink accepts too). Overwrite is refused here: Kafka topics are append-only.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceStreamWriter, DataSourceWriter
from pyspark.sql.types import StructType

from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.spark.commit import recover_write
from spark_kafka_sink.spark.commit_log import CommittedWrite
from spark_kafka_sink.spark.id_pool import claim_prefix
from spark_kafka_sink.spark.options import SinkOptions
from spark_kafka_sink.spark.record_schemas import resolve_serializers, with_serializers
from spark_kafka_sink.spark.schema import ColumnPlan, plan_columns
from spark_kafka_sink.spark.writer import KafkaBatchWriter, KafkaStreamWriter

__all__ = ["KafkaSinkDataSource", "FORMAT_NAME"]

FORMAT_NAME = "pykafka-sink"
_PREFLIGHT_CLOSE_S = 5.0


class KafkaSinkDataSource(DataSource):
    """Writes DataFrames to Kafka; the columns and options of Spark's built-in ``format("kafka")`` sink."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> str:
        raise ConfigError(f"{FORMAT_NAME} only writes: read Kafka with Spark's format(\"kafka\")")

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise ConfigError(
                f"{FORMAT_NAME} cannot overwrite: Kafka topics are append-only. Use .mode(\"append\")", key="mode")
        options = SinkOptions.parse(self.options, streaming=False)
        plan = _plan(options, schema)
        _preflight(options)
        options, claim = claim_prefix(options)
        return KafkaBatchWriter(options, plan, _resume(options), claim)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        # overwrite is the "complete" output mode: like Spark's Kafka sink, each micro-batch's rows are appended.
        # Spark calls this for every micro-batch: with exactly_once it reads the prefix's commit log (one partition)
        # and finishes a commit a dead driver left unfinished; a replayed batch then skips what was committed.
        options = SinkOptions.parse(self.options, streaming=True)
        plan = _plan(options, schema)
        return KafkaStreamWriter(options, plan, _resume(options, streaming=True), schema=schema)


def _plan(options: SinkOptions, schema: StructType) -> ColumnPlan:
    """The columns checked, and schema'd keys and values settled with the schema registry, on the driver."""
    typed = frozenset(f.column for f in (options.key_format, options.value_format) if f.framed)
    plan = plan_columns(schema, options.topic, options.timestamp_column, typed)
    return with_serializers(plan, resolve_serializers(options, schema)) if typed else plan


def _resume(options: SinkOptions, *, streaming: bool = False) -> CommittedWrite | None:
    """exactly_once with a stable writeId (every micro-batch, or the writeId option): finish the prefix's last write
    if its driver died while committing, and tell the tasks what it committed (a re-run of it skips that)."""
    if not options.exactly_once or (options.write_id is None and not streaming):
        return None  # nothing recorded: no commit log involved
    logged = recover_write(options)
    return None if logged is None else logged.visible()


def _preflight(options: SinkOptions) -> None:
    """Ask the brokers for the topic option's partitions: fails fast on unreachable brokers or bad credentials."""
    if options.topic is None:
        return  # topics come from the data; the tasks meet them
    from spark_kafka_sink.producer import KafkaProducer

    try:
        producer = KafkaProducer(options.producer_config())
        try:
            producer.partitions_for(options.topic)
        finally:
            producer.close(_PREFLIGHT_CLOSE_S)
    except ConfigError:
        raise
    except KafkaError as exc:
        raise ConfigError(
            f"could not get the partitions of topic {options.topic!r} from kafka.bootstrap.servers="
            f"{options.bootstrap_servers}: {type(exc).__name__}: {exc}. Check the address, that the brokers run "
            f"and the kafka.security.* / kafka.sasl.* options (kafka.max.block.ms bounds this wait)",
            key="kafka.bootstrap.servers") from None
