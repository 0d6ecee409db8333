"""The rows the network tests' Spark writes carry: ids 0..rows-1 in ``tasks`` Spark partitions of contiguous ids."""

from __future__ import annotations

from tests.conftest import ConsumedRecord


def out_of_order(records: list[ConsumedRecord], rows: int, tasks: int) -> int:
    """Within each Kafka partition, the ids from one Spark task must ascend (each task writes its rows in order)."""
    last: dict[tuple[int, int], int] = {}
    wrong = 0
    for r in records:
        i = int(r.value or b"-1")
        key = (r.partition, i * tasks // rows)
        wrong += key in last and i <= last[key]
        last[key] = i
    return wrong
