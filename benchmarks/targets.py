"""The goals of the benchmark issue, each tied to a comparison and contenders, and what is not built yet."""

from __future__ import annotations

import importlib

from benchmarks.bench_avro import BASELINE as AVRO_BASELINE
from benchmarks.bench_avro import SPARK_TO_AVRO
from benchmarks.bench_avro import SUBJECT as AVRO_SUBJECT
from benchmarks.bench_avro import TITLE as AVRO_TITLE
from benchmarks.bench_avro import spark_title as avro_spark_title
from benchmarks.harness import Target

__all__ = ["targets", "missing_components", "producer_class", "sink_available",
           "SPARK_BUILTIN", "NOOP_WRITER", "SINK_ALO", "SINK_EOS", "SINK_EOS_LOGGED", "SEND_BATCH", "SEND", "CONFLUENT",
           "SEND_BATCH_SLICES", "SEND_BATCH_ONE_TABLE",
           "KAFKA_PYTHON", "SEND_LOOP", "ASYNC_SEND_LOOP", "KAFKA_PYTHON_LOOP", "AIOKAFKA_LOOP", "per_record_title",
           "JAVA_PERF", "ENC_SPARK_SLICES", "MEMORY_SINK", "MICRO_BATCH_TITLE", "small_tasks_title",
           "two_tasks_title"]

# Contender names, shared by the bench modules and the targets.
SPARK_BUILTIN = "Spark format(kafka)"
NOOP_WRITER = "do-nothing Arrow writer"
SINK_ALO = "pykafka-sink at_least_once"
SINK_EOS = "pykafka-sink exactly_once"
SINK_EOS_LOGGED = "pykafka-sink exactly_once + writeId (commit log)"
SEND_BATCH = "send_batch"
SEND_BATCH_SLICES = "send_batch 10,000-row batches"
SEND_BATCH_ONE_TABLE = "send_batch one table"
SEND = "send"
CONFLUENT = "confluent-kafka produce loop"
KAFKA_PYTHON = "kafka-python"
JAVA_PERF = "Java ProducerPerformance"
SEND_LOOP = "send loop"
ASYNC_SEND_LOOP = "async send loop"
KAFKA_PYTHON_LOOP = "kafka-python send loop"
AIOKAFKA_LOOP = "aiokafka send loop"
ENC_SPARK_SLICES = "arrow_encoder 10k-row batches"
MEMORY_SINK = "pykafka-sink worker above baseline"

_TARGETS = [
    Target("spark", "sink >= 1.5x Spark's format(kafka)", "spark 100 B lz4", SINK_ALO, SPARK_BUILTIN, at_least=1.5),
    Target("spark", "sink >= 1.5x Spark's format(kafka) at 1 KB JSON values", "spark 1 KB JSON lz4", SINK_ALO,
           SPARK_BUILTIN, at_least=1.5),
    Target("spark", "sink >= 1.5x Spark's to_avro + frame + format(kafka) (1 KB Avro, registry)",
           avro_spark_title("lz4"), SINK_ALO, SPARK_TO_AVRO, at_least=1.5),
    Target("spark", "sink >= 0.8x do-nothing Arrow writer", "spark 100 B lz4", SINK_ALO, NOOP_WRITER, at_least=0.8),
    Target("spark", "exactly_once within 10% of at_least_once", "spark 100 B lz4", SINK_EOS, SINK_ALO,
           at_least=0.9),
    Target("spark", "exactly_once with the commit log (writeId) within 10% of at_least_once", "spark 100 B lz4",
           SINK_EOS_LOGGED, SINK_ALO, at_least=0.9),
    Target("producer", "send_batch >= 2x confluent-kafka loop", "producer 100 B lz4", SEND_BATCH, CONFLUENT,
           at_least=2.0),
    Target("producer", "send_batch >= 10x kafka-python", "producer 100 B lz4", SEND_BATCH, KAFKA_PYTHON,
           at_least=10.0),
    # "As fast as" within the noise of a shared machine (the same 10% as exactly_once vs at_least_once).
    Target("producer", "send_batch of one large table within 10% of 10,000-row batches", "producer one large table",
           SEND_BATCH_ONE_TABLE, SEND_BATCH_SLICES, at_least=0.9),
    Target("encoder", "encoder >= 5 M records/s on one core (lz4)", "encoder 100 B lz4", ENC_SPARK_SLICES,
           at_least_abs=5e6),
    Target("encoder", "encoder >= 5 M records/s on one core (no codec)", "encoder 100 B none", ENC_SPARK_SLICES,
           at_least_abs=5e6),
    Target("encoder", "Avro encoder >= 10x fastavro per record on one core", AVRO_TITLE, AVRO_SUBJECT, AVRO_BASELINE,
           at_least=10.0),
]


MICRO_BATCH_TITLE = "spark micro-batches of 50 tasks x 100 rows"


def per_record_title(value_size: int, keys: bool, callbacks: bool) -> str:
    return (f"per-record {value_size} B, {'16 B keys' if keys else 'no keys'}, "
            f"{'callbacks' if callbacks else 'no callbacks'}")


# Per-record loops (issue 54), at 100 B, with and without keys (median of the run's rounds).
_TARGETS += [
    Target("per-record", f"send loop >= 0.3x confluent-kafka produce loop ({what})", per_record_title(100, keys, False),
           SEND_LOOP, CONFLUENT, at_least=0.3)
    for keys, what in ((False, "no keys"), (True, "keys"))
] + [
    Target("per-record", f"send loop >= 3x kafka-python send loop ({what})", per_record_title(100, keys, False),
           SEND_LOOP, KAFKA_PYTHON_LOOP, at_least=3.0)
    for keys, what in ((False, "no keys"), (True, "keys"))
] + [
    Target("per-record", f"async send loop >= 3x aiokafka send loop ({what})", per_record_title(100, keys, False),
           ASYNC_SEND_LOOP, AIOKAFKA_LOOP, at_least=3.0)
    for keys, what in ((False, "no keys"), (True, "keys"))
]


def two_tasks_title(value_size: int, codec: str) -> str:
    """The main Spark workload's rows in 2 Spark partitions (one task per core of local[2])."""
    return f"spark {value_size} B {codec}, 2 tasks"


# The same rows in 2 Spark partitions (issues 13 and 16: "2 and 12 tasks").
_TARGETS += [
    Target("spark", "sink >= 1.5x Spark's format(kafka) in 2 Spark partitions", two_tasks_title(100, "lz4"),
           SINK_ALO, SPARK_BUILTIN, at_least=1.5),
]


def small_tasks_title(tasks: int, rows_per_task: int) -> str:
    return f"spark {tasks} tasks x {rows_per_task:,} rows"


# Small tasks (issue 13): per-task cost against the do-nothing Python writer (what any Python data source pays).
_TARGETS += [
    Target("spark", "200 small tasks: at_least_once >= 0.9x do-nothing Arrow writer", small_tasks_title(200, 10_000),
           SINK_ALO, NOOP_WRITER, at_least=0.9),
    Target("spark", "200 small tasks: exactly_once >= 0.8x do-nothing Arrow writer", small_tasks_title(200, 10_000),
           SINK_EOS, NOOP_WRITER, at_least=0.8),
    # "finishes within 1.5x the do-nothing writer's batch time" = micro-batches/s >= 1/1.5 of its rate.
    Target("spark", "micro-batch of 50 tasks x 100 rows within 1.5x do-nothing writer's time (at_least_once)",
           MICRO_BATCH_TITLE, SINK_ALO, NOOP_WRITER, at_least=round(1 / 1.5, 3)),
    Target("spark", "micro-batch of 50 tasks x 100 rows within 1.5x do-nothing writer's time (exactly_once, "
           "writeId)", MICRO_BATCH_TITLE, SINK_EOS_LOGGED, NOOP_WRITER, at_least=round(1 / 1.5, 3)),
]


def targets(buffer_memory_mb: int) -> list[Target]:
    """Every goal. The memory comparison's values are MB of peak RSS above the do-nothing writer's worker
    (interpreter, pyarrow, Spark's Arrow batches): what the sink itself adds, held to buffer.memory + 48 MB
    (issue 16; it was + 64 MB)."""
    bound = buffer_memory_mb + 48
    return _TARGETS + [
        Target("memory", f"sink worker peak RSS <= buffer.memory + 48 MB ({bound} MB)", "memory", MEMORY_SINK,
               at_most_abs=bound),
    ]


def producer_class() -> type | None:
    """``spark_kafka_sink.producer.KafkaProducer`` if it exists yet."""
    try:
        module = importlib.import_module("spark_kafka_sink.producer")
    except ImportError:
        return None
    cls = getattr(module, "KafkaProducer", None)
    return cls if isinstance(cls, type) else None


def sink_available() -> str | None:
    """None if the ``pykafka-sink`` DataSource and the producer it needs can be imported, else why not."""
    if producer_class() is None:
        return "spark_kafka_sink.KafkaProducer (needed by the sink) is not written yet"
    try:
        module = importlib.import_module("pyspark_kafka_sink")
    except ImportError as exc:
        return f"pyspark_kafka_sink does not import: {exc}"
    if getattr(module, "DefaultSource", None) is None:
        return "pyspark_kafka_sink.DefaultSource (the pykafka-sink DataSource) does not exist yet"
    return None


def missing_components() -> list[str]:
    missing = []
    if producer_class() is None:
        missing.append("spark_kafka_sink.producer.KafkaProducer (send / send_batch contenders)")
    why = sink_available()
    if why is not None:
        missing.append(f"pykafka-sink DataSource ({why})")
    return missing
