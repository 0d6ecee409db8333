"""Requests per API as the broker counted them, so every contender is measured the same way, Spark's JVM sink too.

The benchmark's broker runs with ``conf/kafka/log4j2-requests.properties``: ``kafka.request.logger`` at DEBUG writes
one line per completed request to ``requests.log`` (``Completed request:{"requestHeader":{"requestApiKey":0,
..., "clientId":"...","requestApiKeyName":"PRODUCE"}, ...}``; Produce bodies carry record sizes, not records).
:class:`RequestLog` remembers where the file ended (:meth:`RequestLog.mark`) and counts the client requests written
after that point by API (:meth:`RequestLog.counts_since`). The broker's own requests (its controller heartbeats,
transaction marker sender, TV2's AddPartitionsToTxn verification) are not counted: they are not the client's.

A run's window holds only the measured contender's requests: the benchmark creates and checks topics outside it.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RequestLog", "REPORTED_APIS", "per_task", "produce_per_mb"]

#: The APIs the reports show, by the broker's names -> the names used in tables.
REPORTED_APIS = {
    "PRODUCE": "Produce", "INIT_PRODUCER_ID": "InitProducerId", "FIND_COORDINATOR": "FindCoordinator",
    "ADD_PARTITIONS_TO_TXN": "AddPartitionsToTxn", "END_TXN": "EndTxn", "METADATA": "Metadata",
    "API_VERSIONS": "ApiVersions",
}
_HEADER = re.compile(r'"clientId":"([^"]*)","requestApiKeyName":"([A-Z_]+)"')
# Client ids of the broker's own clients: node id (controller heartbeats), the transaction marker sender, the
# AddPartitionsToTxn verification of transactions v2.
_BROKER_CLIENT = re.compile(r"^(\d+|broker-\d+-.*|AddPartitionsManager-.*)$")
_SETTLE_S = 0.2  # a request is logged when its response was sent: the last lines may trail the client by a moment
_SETTLE_LIMIT_S = 5.0


@dataclass
class RequestLog:
    """The broker's request log at ``path`` (see the module docstring)."""

    path: Path

    def mark(self) -> int:
        """Where the log ends now."""
        self._settle()
        return self.path.stat().st_size if self.path.exists() else 0

    def counts_since(self, mark: int) -> dict[str, int]:
        """Client requests logged after ``mark``, by API (the names of :data:`REPORTED_APIS`, others as "other")."""
        self._settle()
        with self.path.open("rb") as f:
            f.seek(mark)
            text = f.read().decode("utf-8", "replace")
        counts: Counter[str] = Counter()
        for client_id, api in _HEADER.findall(text):
            if not _BROKER_CLIENT.match(client_id):
                counts[REPORTED_APIS.get(api, "other")] += 1
        return {name: counts.get(name, 0) for name in (*REPORTED_APIS.values(), "other")}

    def _settle(self) -> None:
        """Wait until the log stopped growing for a moment (at most a few seconds)."""
        deadline = time.monotonic() + _SETTLE_LIMIT_S
        size = -1
        while time.monotonic() < deadline:
            now = self.path.stat().st_size if self.path.exists() else 0
            if now == size:
                return
            size = now
            time.sleep(_SETTLE_S)


def per_task(counts: dict[str, int], tasks: int) -> dict[str, float]:
    return {api: round(n / tasks, 2) for api, n in counts.items()}


def produce_per_mb(counts: dict[str, int], megabytes: float) -> float:
    """Produce requests per MB of record data written (keys + values as the workload sized them)."""
    return round(counts.get("Produce", 0) / megabytes, 3) if megabytes > 0 else 0.0
