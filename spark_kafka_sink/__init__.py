"""spark-kafka-sink: write PySpark DataFrames to Apache Kafka, fast and (when asked) exactly once.

The package has four layers, data flowing one way (see the docs' Architecture page):
``spark`` (DataSource adapter) -> ``producer`` (engine) -> ``net`` (sockets) -> broker,
all using ``protocol`` (pure, sans-IO wire formats).

    from spark_kafka_sink import KafkaProducer, RecordMetadata, errors
    from spark_kafka_sink import AsyncKafkaProducer                  # the same engine, awaitable, for asyncio
    from spark_kafka_sink import KafkaSinkDataSource      # the Spark data source "pykafka-sink"
"""

from typing import TYPE_CHECKING, Any

from spark_kafka_sink import errors

__version__ = "0.1.0"

__all__ = ["__version__", "errors", "KafkaProducer", "AsyncKafkaProducer", "RecordMetadata", "KafkaSinkDataSource"]

if TYPE_CHECKING:
    from spark_kafka_sink.producer import AsyncKafkaProducer, KafkaProducer, RecordMetadata
    from spark_kafka_sink.spark.datasource import KafkaSinkDataSource

# The producer (and with it pyarrow, numpy, sockets) loads on first use, so importing the package -- e.g. for
# the Spark data source registration -- stays cheap.
_LAZY = {"KafkaProducer": "spark_kafka_sink.producer", "AsyncKafkaProducer": "spark_kafka_sink.producer",
         "RecordMetadata": "spark_kafka_sink.producer",
         "KafkaSinkDataSource": "spark_kafka_sink.spark.datasource"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'spark_kafka_sink' has no attribute {name!r}")
