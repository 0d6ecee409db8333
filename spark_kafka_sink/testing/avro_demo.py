"""``make run-avro``: a local broker and schema registry, ``spark-submit jobs/avro_to_kafka.py`` against them, and
a read-back with confluent-kafka's AvroDeserializer (which shares no code with this project) against the same
registry. Exit status 0 only if every generated order was read back exactly once, as the job wrote it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections import Counter

from .broker import KafkaCluster
from .broker_jars import REPO_ROOT
from .demo import _create_topic, _read_back, _spark_submit, summary_rate
from .registry import TestRegistry

__all__ = ["run_avro_demo"]

JOB = REPO_ROOT / "jobs" / "avro_to_kafka.py"


def run_avro_demo(rows: int = 100_000, guarantee: str = "exactly_once") -> int:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = f"demo-avro-orders-{uuid.uuid4().hex[:8]}"
    print("[1/4] starting a local Kafka broker and schema registry ...", flush=True)
    with KafkaCluster(size=1) as cluster, TestRegistry() as registry:
        bootstrap = cluster.bootstrap_servers
        _create_topic(bootstrap, topic)
        print(f"      broker on {bootstrap}, registry on {registry.url}, topic {topic}", flush=True)
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        cmd = [str(_spark_submit()), "--master", "local[2]", "--conf", "spark.ui.enabled=false",
               "--driver-java-options", "-Dlog4j2.level=warn", str(JOB), "--bootstrap-servers", bootstrap,
               "--topic", topic, "--registry-url", registry.url, "--rows", str(rows), "--guarantee", guarantee]
        print(f"[2/4] spark-submit {JOB.relative_to(REPO_ROOT)} --rows {rows} --guarantee {guarantee}", flush=True)
        started = time.perf_counter()
        # cwd = the repository: with an editable install, Spark finds pyspark_kafka_sink through its workers' cwd.
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        job_seconds = time.perf_counter() - started
        lines = [line for line in (proc.stdout + proc.stderr).splitlines()
                 if "avro_to_kafka:" in line or "pykafka-sink " in line]
        if proc.returncode != 0:
            print(proc.stdout[-3000:] + proc.stderr[-6000:], file=sys.stderr)
            print(f"spark-submit failed with exit status {proc.returncode}", file=sys.stderr)
            return 1
        for line in lines:
            print(f"      {line.strip()}")
        print("[3/4] reading the topic back with confluent-kafka's AvroDeserializer ...", flush=True)
        records = _read_back(bootstrap, topic)
        with SchemaRegistryClient({"url": registry.url}) as client:
            deserializer = AvroDeserializer(client)
            context = SerializationContext(topic, MessageField.VALUE)
            orders = [deserializer(value, context) for _, _, value in records]
        print("[4/4] stopping the broker and the registry", flush=True)
    ids = Counter(order["order_id"] for order in orders)
    missing = rows - len(set(ids) & set(range(rows)))
    duplicates = sum(n - 1 for n in ids.values() if n > 1)
    print()
    print(f"  written rows       : {rows} Avro ({guarantee}, spark-submit took {job_seconds:.1f} s incl. JVM start)")
    print(f"  write rate         : {summary_rate(lines)}")
    print(f"  read back          : {len(orders)} records, missing / duplicate: {missing} / {duplicates}")
    if orders:
        print(f"  first record       : {orders[0]}")
    ok = missing == 0 and duplicates == 0 and len(orders) == rows
    print("  result             : " + ("OK: every order exactly once, read with the registered schema" if ok
                                       else "MISMATCH"))
    return 0 if ok else 1
