"""The transactional id pool: where a batch exactly_once write without ``transactionalIdPrefix`` gets its prefix.

A write's transactional ids are ``<prefix>-<Spark partition>``. A new random prefix per write would leave new ids
on the coordinators with every write, each kept for the brokers' transactional.id.expiration.ms. The pool instead
hands each write one of a few prefixes, ``sks-pool-<h>-<slot>`` (``h`` from the commit log topic's name, so
deployments that keep separate commit logs never share ids), the lowest free slot first: a deployment's ids stay
within (writes running at once) x (Spark partitions of a write), however many writes ran.

The claims live in the commit log topic (:class:`~spark_kafka_sink.spark.commit_log.CommitLog` of prefix
``sks-pool-<h>``; key ``<slot>``): ``{"state": "claimed", "token", "leaseMs", "prev"}`` or
``{"state": "released", "token"}``. The latest record of a slot says its state.

Claiming slot n is a compare-and-set on the log's order: the driver reads the slot's latest record (offset
``prev``, -1 for none), appends its claim naming ``prev``, then reads the log from ``prev`` on: the claim holds
iff no other record of the slot lies between ``prev`` and its own. Of two drivers racing for a slot, the one
whose claim landed first wins; the other tries the next slot. A losing claim stays the slot's latest record until
the winner releases it: it makes the slot look taken, which it is.

A claim ends when the write's ``commit()`` or ``abort()`` releases it, or when its lease (``idPoolLeaseMs``) has
passed since it was appended: a driver killed outright never releases, and its slot is taken over once the lease
passed. The new claimant first ends what the dead write left: every id of the prefix in an open state
(ListTransactions) is fenced (InitProducerId aborts its transaction), so nothing of the dead write still holds
back read_committed consumers, and no zombie of it can commit, once the ids are used again. A write whose planning
and commit lie further apart than the lease can lose its slot while alive (its tasks are then fenced and the write
fails without making anything visible, unless its commit was under way): such writes name a
``transactionalIdPrefix`` or raise ``idPoolLeaseMs``.
"""

from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass, replace

from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.producer.transactions import OPEN_STATES, CoordinatorSession
from spark_kafka_sink.spark.commit_log import CommitLog, LogEntry
from spark_kafka_sink.spark.options import SinkOptions

__all__ = ["PoolClaim", "claim_prefix", "release_prefix", "pool_name", "POOL_PREFIX"]

#: Every pool's transactional ids start with this.
POOL_PREFIX = "sks-pool-"
_log = logging.getLogger("spark_kafka_sink.spark")
_MAX_ATTEMPTS = 20  # lost races in a row before giving up: each loss means another driver claimed meanwhile


@dataclass(frozen=True)
class PoolClaim:
    """A write's hold on one slot of the pool. Picklable: the writer carries it to commit() and abort()."""

    pool: str
    slot: int
    token: str
    offset: int  # of the claim record

    @property
    def prefix(self) -> str:
        return f"{self.pool}-{self.slot}"


def pool_name(commit_log_topic: str) -> str:
    """The pool of the deployment whose commit log is ``commit_log_topic``."""
    return POOL_PREFIX + hashlib.sha256(commit_log_topic.encode()).hexdigest()[:6]


def claim_prefix(options: SinkOptions) -> tuple[SinkOptions, PoolClaim | None]:
    """For a batch exactly_once write without ``transactionalIdPrefix``: ``options`` with the prefix of a slot
    claimed for this write, and the claim (:func:`release_prefix` gives it back). Other writes: as they are, None."""
    if not options.id_pool:
        return options, None
    pool = pool_name(options.commit_log_topic)
    token = uuid.uuid4().hex
    with _log_of(options, pool) as log:
        for _ in range(_MAX_ATTEMPTS):
            latest = _latest(log.entries())
            now = int(time.time() * 1000)
            slot, prev = _free_slot(latest, now)
            offset = log.append_entry(str(slot), {"state": "claimed", "token": token,
                                                  "leaseMs": options.id_pool_lease_ms, "prev": prev})
            between = [e for e in log.entries(start_offset=None if prev < 0 else prev + 1)
                       if e.kind == str(slot) and e.offset < offset]
            if between:
                continue  # another driver's record landed first: the slot is its
            claim = PoolClaim(pool, slot, token, offset)
            if prev >= 0 and _is_claim(latest[slot]):
                _end_leftovers(options, claim, now - latest[slot].timestamp_ms)
            return replace(options, transactional_id_prefix=claim.prefix), claim
    raise KafkaError(f"could not claim a transactional id prefix in pool {pool!r} of commit log "
                     f"{options.commit_log_topic!r}: {_MAX_ATTEMPTS} claims in a row lost a race with other writes. "
                     "Run the write again, or set the transactionalIdPrefix option")


def release_prefix(options: SinkOptions, claim: PoolClaim | None) -> None:
    """Give the write's slot back (after its commit or abort). Never raises: a slot not released is taken over
    once its lease passed; problems are logged."""
    if claim is None:
        return
    try:
        with _log_of(options, claim.pool) as log:
            later = [e for e in log.entries(start_offset=claim.offset + 1) if e.kind == str(claim.slot)]
            if any(_is_claim(e) and int(e.value["prev"]) >= claim.offset for e in later if e.value is not None):
                _log.warning("pykafka-sink: transactional id prefix %r was taken over by another write after "
                             "idPoolLeaseMs (%d ms) passed: not releasing it", claim.prefix, options.id_pool_lease_ms)
                return
            if any(e.value is not None and e.value.get("state") == "released" and e.value.get("token") == claim.token
                   for e in later):
                return  # released already (Spark calls abort() after a commit() that raised)
            log.append_entry(str(claim.slot), {"state": "released", "token": claim.token})
    except KafkaError as exc:
        _log.warning("pykafka-sink: could not release transactional id prefix %r (%s: %s); another write takes it "
                     "over once idPoolLeaseMs passed", claim.prefix, type(exc).__name__, exc)


def _log_of(options: SinkOptions, pool: str) -> CommitLog:
    return CommitLog(options.commit_log_topic, pool, options.producer_config(),
                     max(60.0, 3 * options.request_timeout_ms / 1000))


def _is_claim(entry: LogEntry) -> bool:
    return entry.value is not None and entry.value.get("state") == "claimed"


def _latest(entries: list[LogEntry]) -> dict[int, LogEntry]:
    """Each slot's latest record."""
    latest: dict[int, LogEntry] = {}
    for entry in entries:
        if entry.kind.isdigit():
            latest[int(entry.kind)] = entry
    return latest


def _free_slot(latest: dict[int, LogEntry], now_ms: int) -> tuple[int, int]:
    """The lowest slot that is free (never claimed, released, or its claim's lease passed), and the offset of its
    latest record (-1: none)."""
    slot = 0
    while True:
        entry = latest.get(slot)
        if entry is None:
            return slot, -1
        if not _is_claim(entry) or now_ms - entry.timestamp_ms > int((entry.value or {}).get("leaseMs", 0)):
            return slot, entry.offset
        slot += 1


def _end_leftovers(options: SinkOptions, claim: PoolClaim, age_ms: int) -> None:
    """Fence every id of a taken-over slot whose transaction is still open: the dead write's."""
    timeout_s = max(60.0, 3 * options.request_timeout_ms / 1000)
    with CoordinatorSession(options.producer_config()) as session:
        leftovers = [t for t in session.list_transactions(claim.prefix + "-", timeout_s) if t.state in OPEN_STATES]
        for listed in leftovers:
            session.fence_transactional_id(listed.transactional_id, timeout_s)
    _log.warning("pykafka-sink: took over transactional id prefix %r, whose write claimed it %d s ago and never "
                 "released it (idPoolLeaseMs %d ms); ended %d transaction(s) it left open", claim.prefix,
                 age_ms // 1000, options.id_pool_lease_ms, len(leftovers))
