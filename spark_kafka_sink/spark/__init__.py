"""The PySpark DataSource adapter ``pykafka-sink``: thin and picklable.

``datasource`` (name, option and schema validation on the driver), ``options`` (the sink's options), ``schema``
(DataFrame columns -> producer input), ``writer`` (batch and streaming Arrow writers, one producer per task;
``row_batches`` turns pyspark 4.0's streaming Rows back into Arrow),
``commit`` (commit messages; the driver's commit / abort of transactions and the summary line).
"""

from spark_kafka_sink.producer.arrow_send import PartitionWrite
from spark_kafka_sink.spark.commit import KafkaCommitMessage, SharedPrefixError, TransactionCommitError
from spark_kafka_sink.spark.datasource import FORMAT_NAME, KafkaSinkDataSource
from spark_kafka_sink.spark.options import DeliveryGuarantee, SinkOptions
from spark_kafka_sink.spark.schema import InvalidColumnError
from spark_kafka_sink.spark.writer import KafkaBatchWriter, KafkaStreamWriter

__all__ = [
    "FORMAT_NAME", "KafkaSinkDataSource", "KafkaBatchWriter", "KafkaStreamWriter", "KafkaCommitMessage",
    "PartitionWrite", "TransactionCommitError", "SharedPrefixError", "DeliveryGuarantee", "SinkOptions",
    "InvalidColumnError",
]
