"""Producers a Python worker keeps between Spark tasks, so a small task does not pay for a new producer.

Building a producer costs a bootstrap connection, ApiVersions, Metadata, InitProducerId (idempotence is on) and a
sender thread; measured on 2 cores, a 1,000-row task took ~55 ms with a new producer and ~6 ms with one reused.
Spark reuses its Python workers (``spark.python.worker.reuse``, on by default), and a worker runs one task at a
time, so a producer left by one task is there for the next.

What is reused: at_least_once tasks take a whole idempotent producer (its producer id and sequences stay valid
across tasks). exactly_once tasks take everything but the transactional identity: a kept transactional producer
switches to the task's transactional.id (``KafkaProducer.switch_transactional_id``: its connections with their
negotiated API versions, the metadata, the sender thread and buffers stay; producer id, epoch and sequences go,
and the transaction it wrote is left open for the driver to commit by its identity); the task's
``init_transactions()`` is then the one InitProducerId per transactional id (and FindCoordinator only for an id
whose coordinator the producer has not found before).

Lifetimes, without the bugs users met in Spark's own producer cache:

* a producer is lent to one task at a time and comes back only after that task flushed every record (nothing of
  one task attempt is ever buffered when the next takes the producer); a transactional one serves one
  transactional.id at a time (the leasing task's);
* a task that fails gives its producer back as broken: it is closed, never lent again (SPARK-27042), and so is one
  that is no longer :attr:`~spark_kafka_sink.producer.KafkaProducer.usable` (a fatal error, a dead sender thread);
* an idle producer is closed after its idle timeout (the ``producerIdleTimeoutMs`` option, 10 minutes by default
  as Spark's ``spark.kafka.producer.cache.timeout``) by a daemon thread; one in use never expires (SPARK-21869);
* two configurations never share a producer: the key is a digest of every setting, secrets included, and is never
  logged or shown;
* the worker's exit closes everything (``atexit``).
"""

from __future__ import annotations

import atexit
import hashlib
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from spark_kafka_sink.secret import Secret
from spark_kafka_sink.spark.sink_producer import CachedProducer

if TYPE_CHECKING:
    from spark_kafka_sink.producer import KafkaProducer

__all__ = ["ProducerCache", "Lease", "close_failed", "worker_cache"]

_log = logging.getLogger(__name__)
_CLOSE_TIMEOUT_S = 30.0


#: The cached producers' type: KafkaProducer, or a test's fake.
ProducerT = TypeVar("ProducerT", bound=CachedProducer)


@dataclass
class _Idle(Generic[ProducerT]):
    producer: ProducerT
    key: str
    expires_at: float


@dataclass(frozen=True)
class Lease(Generic[ProducerT]):
    """A producer lent to one task. ``created``: made for this task (not reused)."""

    producer: ProducerT
    key: str
    created: bool
    idle_timeout_s: float


_TRANSACTIONAL_ID = "transactional.id"


def config_key(config: Mapping[str, Any]) -> str:
    """A digest of every setting (secret values included, so two credentials never share a producer), except the
    transactional.id's value: a transactional producer takes on the id of each task that leases it (only whether
    there is one counts, so idempotent and transactional producers never share)."""
    digest = hashlib.sha256()
    for name in sorted(config):
        value = config[name]
        if name == _TRANSACTIONAL_ID and value is not None:
            value = "<per task>"
        text = value.reveal() if isinstance(value, Secret) else repr(value)
        digest.update(f"{name}\0{text}\0".encode())
    return digest.hexdigest()


class ProducerCache(Generic[ProducerT]):
    """Idle producers by configuration; see the module docstring. Thread-safe (``_lock`` guards ``_idle`` and
    ``_closed``); producers are closed outside the lock."""

    def __init__(self, factory: Callable[[Mapping[str, Any]], ProducerT],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._factory = factory
        self._clock = clock
        self._lock = threading.Condition()
        self._idle: list[_Idle[ProducerT]] = []  # guarded by _lock
        self._closed = False  # guarded by _lock
        self._reaper: threading.Thread | None = None  # started with the first idle producer; guarded by _lock
        # When the reaper looks next (clock time; guarded by _lock). give_back wakes it only for an earlier
        # expiry: each task returns its producer, and waking (or restarting) the reaper per task cost ~0.1 ms.
        self._reaper_wakes_at = float("inf")
        self.created = 0  # producers made (guarded by _lock): for the summary line and tests
        self.reused = 0  # producers lent again (guarded by _lock)

    def lease(self, config: Mapping[str, Any], idle_timeout_s: float) -> Lease[ProducerT]:
        """An idle producer of exactly this configuration, else a new one (made outside the lock). With a
        transactional.id, a kept producer switches to it (``switch_transactional_id``); the caller then calls
        ``init_transactions()`` as for a new one. A producer that cannot switch is closed and another one taken."""
        key = config_key(config)
        transactional_id = config.get(_TRANSACTIONAL_ID)
        stale: list[ProducerT] = []
        with self._lock:
            found: ProducerT | None = None
            for i, entry in enumerate(self._idle):
                if entry.key == key:
                    found = self._idle.pop(i).producer
                    break
            while found is not None and not found.usable:  # broke while idle (e.g. the broker refused it)
                stale.append(found)
                found = next((self._idle.pop(i).producer for i, e in enumerate(self._idle) if e.key == key), None)
            if found is not None:
                self.reused += 1
        if found is not None and transactional_id is not None:
            try:
                found.switch_transactional_id(transactional_id)
            except Exception as exc:  # noqa: BLE001 - a producer that cannot switch is not lent; a new one is made
                _log.info("a cached producer could not take transactional.id %r (%s: %s); making a new one",
                          transactional_id, type(exc).__name__, exc)
                stale.append(found)
                found = None
                with self._lock:
                    self.reused -= 1
        _close_all(stale)
        if found is not None:
            return Lease(found, key, False, idle_timeout_s)
        producer = self._factory(config)
        with self._lock:
            self.created += 1
        return Lease(producer, key, True, idle_timeout_s)

    def give_back(self, lease: Lease[ProducerT], *, healthy: bool) -> None:
        """Return a lent producer after its task. ``healthy``: the task succeeded and flushed everything; anything
        else closes the producer, a failed task's at once (see ``close_failed``)."""
        producer = lease.producer
        keep = healthy and producer.usable and lease.idle_timeout_s > 0
        if keep:
            with self._lock:
                if not self._closed:
                    expires_at = self._clock() + lease.idle_timeout_s
                    self._idle.append(_Idle(producer, lease.key, expires_at))
                    if self._reaper is None or not self._reaper.is_alive():
                        self._start_reaper(expires_at)
                    elif expires_at < self._reaper_wakes_at:
                        self._lock.notify_all()
                    return
        if healthy:
            _close_all([producer])
        else:
            close_failed(producer)

    def idle_count(self) -> int:
        with self._lock:
            return len(self._idle)

    def expire(self) -> int:
        """Close every idle producer whose timeout passed; returns how many (the reaper thread calls this)."""
        now = self._clock()
        with self._lock:
            expired = [e.producer for e in self._idle if e.expires_at <= now]
            self._idle = [e for e in self._idle if e.expires_at > now]
        _close_all(expired)
        return len(expired)

    def close(self) -> None:
        """Close every idle producer and stop lending (the worker exits)."""
        with self._lock:
            self._closed = True
            idle = [e.producer for e in self._idle]
            self._idle = []
            reaper, self._reaper = self._reaper, None
            self._lock.notify_all()
        _close_all(idle)
        if reaper is not None and reaper is not threading.current_thread():
            reaper.join(_CLOSE_TIMEOUT_S)

    def _start_reaper(self, wakes_at: float) -> None:  # with _lock held
        self._reaper_wakes_at = wakes_at
        self._reaper = threading.Thread(target=self._reap, name="pykafka-sink-producer-cache", daemon=True)
        self._reaper.start()

    def _reap(self) -> None:
        """Close idle producers as they expire. It looks only when the earliest expiry comes; if it then finds
        nothing idle (every producer lent out), it ends, and the next give_back starts it again."""
        while True:
            with self._lock:
                if self._closed:
                    return
                now = self._clock()
                if self._idle:
                    wakes_at = min(e.expires_at for e in self._idle)
                elif now >= self._reaper_wakes_at:
                    self._reaper, self._reaper_wakes_at = None, float("inf")
                    return
                else:
                    wakes_at = self._reaper_wakes_at  # woken early with nothing idle: keep the appointment
                if wakes_at > now:
                    self._reaper_wakes_at = wakes_at
                    self._lock.wait(wakes_at - now)  # woken early by give_back (an earlier expiry) / close
                    continue
            self.expire()


def close_failed(producer: CachedProducer) -> None:
    """Close the producer of a failed task at once, failing what it still holds: that task's rows are sent again by
    its retry, and an abort it could not finish (an unreachable coordinator) is ended by the retry's fencing or the
    driver's abort. A graceful close would wait for a down cluster for up to 30 s before Spark could retry."""
    try:
        producer.close(0)
    except Exception as exc:  # noqa: BLE001 - the task's own error is the one to report
        _log.info("closing a failed task's producer failed: %s: %s", type(exc).__name__, exc)


def _close_all(producers: list[ProducerT]) -> None:
    for producer in producers:
        try:
            # A kept producer's last transaction is the driver's to end (it may not have committed it yet).
            producer.close(_CLOSE_TIMEOUT_S, abort_open_transaction=False)
        except Exception as exc:  # noqa: BLE001 - closing a broken producer must not fail the next task
            _log.info("closing a cached producer failed: %s: %s", type(exc).__name__, exc)


_WORKER_CACHE: ProducerCache[KafkaProducer] | None = None
_WORKER_CACHE_LOCK = threading.Lock()


def worker_cache() -> ProducerCache[KafkaProducer]:
    """This Python worker's cache (made on first use; closed at the worker's exit)."""
    global _WORKER_CACHE
    with _WORKER_CACHE_LOCK:
        if _WORKER_CACHE is None:
            from spark_kafka_sink.producer import KafkaProducer

            _WORKER_CACHE = ProducerCache(KafkaProducer)
            atexit.register(_WORKER_CACHE.close)
        return _WORKER_CACHE
