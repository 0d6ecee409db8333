"""spark-kafka-sink: write PySpark DataFrames to Apache Kafka, fast and (when asked) exactly once.

The package has four layers, data flowing one way (see README):
``spark`` (DataSource adapter) -> ``producer`` (engine) -> ``net`` (sockets) -> broker,
all using ``protocol`` (pure, sans-IO wire formats).
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
