"""Errors are one hierarchy; their flags say what to do (retry, refresh, or give up on this producer).

    python examples/producer_errors.py --bootstrap-servers 127.0.0.1:9092 --topic t
"""

from __future__ import annotations

import argparse


def main(bootstrap_servers: str, topic: str) -> list[str]:
    """Returns the name of each error class met (the example's test checks them)."""
    met = []
    # --8<-- [start:errors]
    from spark_kafka_sink import KafkaProducer, errors

    try:
        KafkaProducer({"bootstrap.servers": bootstrap_servers, "lingr.ms": 5})
    except errors.ConfigError as e:          # names the key and suggests the nearest one: "did you mean linger.ms?"
        met.append(type(e).__name__)

    with KafkaProducer({"bootstrap.servers": bootstrap_servers}) as p:
        try:
            p.send(topic, value=b"v", partition=1_000).result(timeout=30)
        except errors.KafkaError as e:       # here PartitionOutOfRangeError: the topic has no partition 1000
            met.append(type(e).__name__)
            if e.fatal:
                raise                        # this producer cannot go on: close it, fix the cause
            # e.retriable: the same send may succeed later; otherwise the record itself is wrong
    # --8<-- [end:errors]
    return met


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="t")
    args = parser.parse_args()
    print(main(args.bootstrap_servers, args.topic))
