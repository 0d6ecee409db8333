"""Spark discovers this module by its ``pyspark_`` name and registers its ``DefaultSource`` as ``pykafka-sink``.

Nothing to call: once the package is installed in the Python that Spark's workers run (PYSPARK_PYTHON),
``df.write.format("pykafka-sink")`` works. ``spark.dataSource.register(KafkaSinkDataSource)`` works as well.
"""

from spark_kafka_sink.spark.datasource import KafkaSinkDataSource

__all__ = ["DefaultSource", "KafkaSinkDataSource"]

DefaultSource = KafkaSinkDataSource
