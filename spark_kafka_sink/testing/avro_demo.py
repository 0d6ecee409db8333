"""``make run-avro``: a local broker and schema registry, ``spark-submit jobs/avro_to_kafka.py`` against them, and
a read-back with confluent-kafka's AvroDeserializer (which shares no code with this project) against the same
registry. Exit status 0 only if every generated order was read back exactly once, as the job wrote it.
"""

from __future__ import annotations

import uuid
from collections import Counter

from .broker import KafkaCluster
from .broker_jars import REPO_ROOT
from .demo import _create_topic, _read_back, submit_job, summary_rate
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
        run = submit_job(JOB, ["--bootstrap-servers", bootstrap, "--topic", topic, "--registry-url", registry.url],
                         rows, guarantee)
        if run.returncode != 0:
            return 1
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
    print(f"  written rows       : {rows} Avro ({guarantee}, spark-submit took {run.seconds:.1f} s incl. JVM start)")
    print(f"  write rate         : {summary_rate(run.lines)}")
    print(f"  read back          : {len(orders)} records, missing / duplicate: {missing} / {duplicates}")
    if orders:
        print(f"  first record       : {orders[0]}")
    ok = missing == 0 and duplicates == 0 and len(orders) == rows
    print("  result             : " + ("OK: every order exactly once, read with the registered schema" if ok
                                       else "MISMATCH"))
    return 0 if ok else 1
