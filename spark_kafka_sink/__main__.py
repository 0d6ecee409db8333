"""``python -m spark_kafka_sink transactions ...``: see :mod:`spark_kafka_sink.spark.transactions_command`."""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "transactions":
        print("usage: python -m spark_kafka_sink transactions {list,end} ... (--help for details)", file=sys.stderr)
        return 2
    from spark_kafka_sink.spark.transactions_command import main as transactions

    return transactions(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
