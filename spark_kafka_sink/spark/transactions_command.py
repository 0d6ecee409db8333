"""``python -m spark_kafka_sink transactions {list,end}``: the open and recent transactions of a prefix, and ending
them, for operators (a driver that died past transaction.timeout.ms, an abandoned job).

    python -m spark_kafka_sink transactions list --bootstrap-servers h:9092 --prefix orders
    python -m spark_kafka_sink transactions end  --bootstrap-servers h:9092 --prefix orders            # dry run
    python -m spark_kafka_sink transactions end  --bootstrap-servers h:9092 --prefix orders --execute

Each transactional id of the prefix the coordinators know (ListTransactions to every broker; DescribeTransactions
for its state, producer id and epoch, how long it has been open and its partitions; DescribeProducers for the
offset where an open transaction begins in each partition, which read_committed consumers wait at) is joined with
what the commit log says of the prefix's latest write: per Spark partition planned, committed, or the write
complete.

``end`` commits what the commit log says the driver had planned to commit and did not finish -- the same recovery
the driver's pre-flight runs before the next write of the prefix (:func:`~spark_kafka_sink.spark.commit.recover_write`)
-- and aborts every other open transaction of the prefix by fencing its id (InitProducerId). Without
``--execute`` it only says what it would do. Connection and security settings are the sink's options
(``--option kafka.security.protocol=SASL_SSL``, or an ``--options-file`` of KEY=VALUE lines for secrets).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TextIO

from spark_kafka_sink.errors import ConfigError, KafkaError
from spark_kafka_sink.producer.transactions import CoordinatorSession
from spark_kafka_sink.spark.commit import recover_write
from spark_kafka_sink.spark.commit_log import CommitLog, LoggedWrite
from spark_kafka_sink.spark.options import SinkOptions

__all__ = ["main", "TransactionRow", "inspect_prefix", "end_prefix"]

COMMIT = "commit"
ABORT = "abort"
NOTHING = "-"


@dataclass(frozen=True)
class TransactionRow:
    """One transactional id of the prefix: the coordinator's view, the commit log's, and what ``end`` does."""

    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    open_seconds: float | None  # how long its open transaction has run; None when none is open
    partitions: tuple[str, ...]  # "topic[partition]" of the open transaction
    # "topic[partition]" -> the offset where the open transaction begins there (DescribeProducers): read_committed
    # consumers of that partition wait at it
    holds_back_from: dict[str, int]
    commit_log: str  # e.g. "writeId 11: planned", or "-" when the log's latest write does not name this id
    action: str  # commit, abort or "-"


def _log_status(logged: LoggedWrite | None, transactional_id: str) -> tuple[str, bool]:
    """The commit log's word on this id, and whether the driver planned to commit it and did not finish."""
    if logged is None:
        return NOTHING, False
    for partition, planned in logged.planned.items():
        if planned.transactional_id != transactional_id:
            continue
        if logged.complete:
            lost = " (aborted by the broker; written again by a re-run)" if partition in logged.lost else ""
            return f"writeId {logged.write_id}: complete{lost}", False
        if partition in logged.committed:
            return f"writeId {logged.write_id}: committed", False
        return f"writeId {logged.write_id}: planned", True
    return NOTHING, False


def inspect_prefix(options: SinkOptions, now_s: float | None = None) -> tuple[list[TransactionRow], LoggedWrite | None]:
    """Every id of the prefix with its state and the commit log's word on it, and the log's latest write."""
    prefix = str(options.transactional_id_prefix)
    timeout_s = _timeout_s(options)
    now_ms = (time.time() if now_s is None else now_s) * 1000
    with CommitLog(options.commit_log_topic, prefix, options.producer_config(), timeout_s) as log:
        logged = log.read()
    rows = []
    with CoordinatorSession(options.producer_config()) as session:
        for listed in session.list_transactions(prefix + "-", timeout_s):
            described = session.describe_transaction(listed.transactional_id, timeout_s)
            if described is None:
                continue  # expired between the two requests
            status, to_commit = _log_status(logged, listed.transactional_id)
            planned = logged.planned if logged is not None else {}
            same = any(t.transactional_id == listed.transactional_id and t.producer_id == described.producer_id
                       for t in planned.values())
            if described.state != "Ongoing":
                action = NOTHING  # ended, or the coordinator is writing its markers now
            else:
                action = COMMIT if to_commit and same else ABORT
            starts = (session.transaction_start_offsets(described.producer_id, described.partitions, timeout_s)
                      if described.open else {})
            rows.append(TransactionRow(
                listed.transactional_id, described.state, described.producer_id, described.producer_epoch,
                (now_ms - described.start_time_ms) / 1000 if described.open and described.start_time_ms >= 0 else None,
                tuple(f"{t}[{p}]" for t, p in described.partitions),
                {f"{t}[{p}]": offset for (t, p), offset in sorted(starts.items())}, status, action))
    return rows, logged


def end_prefix(options: SinkOptions, rows: Sequence[TransactionRow]) -> dict[str, str]:
    """Commit the planned transactions (the driver's recovery), abort the other open ones; {id: outcome}."""
    outcomes: dict[str, str] = {}
    if any(r.action == COMMIT for r in rows):
        recovered = recover_write(options)
        for partition, planned in (recovered.planned.items() if recovered is not None else ()):
            if any(r.transactional_id == planned.transactional_id and r.action == COMMIT for r in rows):
                lost = recovered is not None and partition in recovered.lost
                outcomes[planned.transactional_id] = "aborted by the broker meanwhile" if lost else "committed"
    with CoordinatorSession(options.producer_config()) as session:
        for row in rows:
            if row.action != ABORT:
                continue
            try:
                session.fence_transactional_id(row.transactional_id, _timeout_s(options))
                outcomes[row.transactional_id] = "aborted"
            except KafkaError as exc:
                outcomes[row.transactional_id] = f"failed: {type(exc).__name__}: {exc}"
    return outcomes


def _timeout_s(options: SinkOptions) -> float:
    return max(60.0, 3 * options.request_timeout_ms / 1000)


# ------------------------------------------------------------------------------------------ command line


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m spark_kafka_sink transactions",
        description="List the transactions of a pykafka-sink transactionalIdPrefix, joined with its commit log, "
                    "and end the ones left open.")
    actions = parser.add_subparsers(dest="action", required=True)
    for name, text in (("list", "list the prefix's transactional ids, their state and the commit log's word"),
                       ("end", "commit what the commit log planned, abort the other open transactions "
                               "(a dry run unless --execute)")):
        sub = actions.add_parser(name, help=text, description=text)
        sub.add_argument("--bootstrap-servers", required=True, help="Kafka brokers, host:port[,host:port]")
        sub.add_argument("--prefix", required=True, help="the write's transactionalIdPrefix")
        sub.add_argument("--commit-log-topic", help="the sink's commitLogTopic option, if the job set one")
        sub.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                         help="a sink option, e.g. kafka.security.protocol=SASL_SSL (repeatable)")
        sub.add_argument("--options-file", type=Path, help="sink options as KEY=VALUE lines (keeps secrets off "
                                                           "the command line); --option wins")
        sub.add_argument("--json", action="store_true", help="print JSON instead of a table")
        if name == "end":
            sub.add_argument("--execute", action="store_true", help="end the transactions (default: dry run)")
    return parser


def _options(args: argparse.Namespace) -> SinkOptions:
    raw: dict[str, str] = {}
    lines = args.options_file.read_text().splitlines() if args.options_file else []
    for origin, items in (("--options-file", [x for x in lines if x.strip() and not x.lstrip().startswith("#")]),
                          ("--option", args.option)):
        for number, item in enumerate(items, 1):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():  # (the entry itself is not shown: it may be a secret)
                raise ConfigError(f"{origin}: entry {number} is not KEY=VALUE", key=origin)
            raw[key.strip()] = value.strip()
    raw.update({"kafka.bootstrap.servers": args.bootstrap_servers, "deliveryGuarantee": "exactly_once",
                "transactionalIdPrefix": args.prefix})
    if args.commit_log_topic:
        raw["commitLogTopic"] = args.commit_log_topic
    return SinkOptions.parse(raw, streaming=False)


def _table(rows: Sequence[TransactionRow], outcomes: dict[str, str] | None, out: TextIO) -> None:
    header = ["TRANSACTIONAL ID", "STATE", "PRODUCER ID/EPOCH", "OPEN FOR", "PARTITIONS", "COMMIT LOG",
              "ACTION" if outcomes is None else "RESULT"]
    lines = [[r.transactional_id, r.state, f"{r.producer_id}/{r.producer_epoch}",
              NOTHING if r.open_seconds is None else f"{r.open_seconds:.0f} s",
              ", ".join(_held(r, p) for p in r.partitions) or NOTHING, r.commit_log,
              r.action if outcomes is None else outcomes.get(r.transactional_id, NOTHING)] for r in rows]
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines, strict=False)]
    for line in [header, *lines]:
        out.write("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip() + "\n")


def _held(row: TransactionRow, partition: str) -> str:
    start = row.holds_back_from.get(partition)
    return partition if start is None else f"{partition} from offset {start}"


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = _parser().parse_args(argv)
    try:
        options = _options(args)
        rows, logged = inspect_prefix(options)
        outcomes: dict[str, str] | None = None
        if args.action == "end" and args.execute:
            outcomes = end_prefix(options, rows)
    except (ConfigError, KafkaError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    pending = [r for r in rows if r.action != NOTHING]
    if args.json:
        report: dict[str, Any] = {
            "prefix": options.transactional_id_prefix, "commitLogTopic": options.commit_log_topic,
            "loggedWrite": None if logged is None else {
                "writeId": logged.write_id, "complete": logged.complete,
                "planned": {str(p): t.transactional_id for p, t in sorted(logged.planned.items())},
                "committed": sorted(logged.committed)},
            "transactions": [asdict(r) for r in rows], "dryRun": outcomes is None}
        if outcomes is not None:
            report["outcomes"] = outcomes
        json.dump(report, out, indent=2)
        out.write("\n")
        return 0
    if not rows:
        out.write(f"no transactional ids of prefix {options.transactional_id_prefix!r} on the coordinators\n")
        return 0
    _table(rows, outcomes, out)
    if args.action == "end" and outcomes is None:
        out.write(f"dry run: {len(pending)} transaction(s) to end; add --execute to end them\n" if pending
                  else "nothing to end\n")
    return 0
