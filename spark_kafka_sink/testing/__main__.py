"""``python -m spark_kafka_sink.testing {jars,up,down,run-demo,run-avro-demo}``: the Makefile's broker and demo
commands.

``jars --all-kafka-versions`` fetches every release of the version matrix; ``up`` runs ``KAFKA_VERSION``'s.

``up`` starts a single-node broker on 127.0.0.1 (default port 9092) that keeps running after the command returns;
``down`` stops it and deletes its data. Java and Maven problems print one line saying what to install.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import time

from .broker import BrokerStartError, KafkaCluster
from .broker_jars import KAFKA_VERSIONS, ToolMissingError, fetch_jars, kafka_home
from .registry import RegistryStartError

LOCAL_DIR = kafka_home() / "local"
PID_FILE = LOCAL_DIR / "broker.pid"


def _up(port: int) -> int:
    if PID_FILE.exists():
        print(f"a local broker already runs (pid {PID_FILE.read_text().strip()}); `make kafka-down` stops it")
        return 1
    shutil.rmtree(LOCAL_DIR, ignore_errors=True)
    started = time.monotonic()
    cluster = KafkaCluster(size=1, port=port, base_dir=LOCAL_DIR, detach=True, short_lived=False).start()
    # The broker, then its ZooKeeper server (releases before 3.7): stopped in that order.
    PID_FILE.write_text(" ".join(str(pid) for pid in [*cluster.pids(), cluster.zookeeper_pid] if pid is not None))
    print(f"Kafka is up on {cluster.bootstrap_servers} ({time.monotonic() - started:.1f}s); "
          f"logs in {LOCAL_DIR / 'node-1' / 'logs'}; stop it with `make kafka-down`")
    return 0


def _down() -> int:
    if not PID_FILE.exists():
        print("no local broker is running")
        return 0
    for pid in (int(text) for text in PID_FILE.read_text().split()):
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(300):  # up to 30 s for a controlled shutdown
                os.kill(pid, 0)
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(LOCAL_DIR, ignore_errors=True)
    print("Kafka stopped")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m spark_kafka_sink.testing", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    jars = sub.add_parser("jars", help="fetch the broker and Spark connector jars with Maven")
    jars.add_argument("--all-kafka-versions", action="store_true",
                      help=f"every Kafka release of the version matrix ({', '.join(KAFKA_VERSIONS)}), "
                           "not only KAFKA_VERSION's")
    up = sub.add_parser("up", help="start a local broker")
    up.add_argument("--port", type=int, default=9092)
    sub.add_parser("down", help="stop the local broker")
    demo = sub.add_parser("run-demo", help="broker + spark-submit jobs/batch_to_kafka.py + read-back report")
    demo.add_argument("--rows", type=int, default=200_000)
    avro_demo = sub.add_parser("run-avro-demo", help="broker + schema registry + spark-submit jobs/avro_to_kafka.py "
                                                     "+ read-back with confluent-kafka's AvroDeserializer")
    avro_demo.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    try:
        if args.command == "jars":
            fetch_jars(KAFKA_VERSIONS if args.all_kafka_versions else ())
            return 0
        if args.command == "up":
            return _up(args.port)
        if args.command == "run-demo":
            from .demo import run_demo

            return run_demo(args.rows)
        if args.command == "run-avro-demo":
            from .avro_demo import run_avro_demo

            return run_avro_demo(args.rows)
        return _down()
    except (ToolMissingError, BrokerStartError, RegistryStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
