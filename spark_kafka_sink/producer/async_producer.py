"""``AsyncKafkaProducer``: the producer for asyncio services, on the same engine and sender thread.

    async with AsyncKafkaProducer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}) as p:
        delivery = await p.send("t", b"v", key=b"k")     # queued: returns once the record is in a batch
        md = await delivery                                # acknowledged: RecordMetadata
        md = await p.send_and_wait("t", b"v")             # both at once
        result = await (await p.send_batch("t", table))   # BatchSendResult
        await p.flush()

A separate class, not async twins of ``KafkaProducer``'s methods: every call of this one must keep off the event
loop's thread whatever can wait (metadata, buffer memory, acknowledgements, coordinators), so each method differs
from its blocking namesake, and one object whose ``send`` returns a ``Future`` in one spelling and a coroutine in
another invites the wrong one. The shape is aiokafka's (``await send`` queues and returns a future, ``await
send_and_wait`` waits for the broker), which is what asyncio services moving from it know.

Never blocking the loop:

- A headerless ``send`` of bytes without a partition or timestamp is staged (``StagedRecords``): its record joins
  the loop's current burst (one topic; opened only when buffer.memory has room for a new batch, bounded by
  STAGE_ROWS, half the free memory then and linger.ms) and the burst is queued by one call into the engine
  (``KafkaProducer._send_run``) at the loop's next turn, or sooner when it is full or anything else must come after
  it (``_settle``: another send, ``send_batch``, ``flush``, the transaction calls, ``close``). Queuing never waits
  on the loop: a burst that needs memory is queued by a task that waits for it as ``send`` does, and sends wait
  behind that task. Per-record costs on the loop: the coroutine, three list appends and a ``StagedDelivery``.
- ``send`` runs ``KafkaProducer.send`` on the loop's thread -- list appends under a partition lock held for
  microseconds -- only when it cannot wait: the topic's partitions are known and buffer.memory has room for a new
  batch. Otherwise it waits off the loop: for metadata on a worker thread (``partitions_for``), for memory in
  buffer.memory's FIFO queue on a worker thread, then checks again. max.block.ms bounds the whole wait and its
  errors are ``send``'s (KafkaTimeoutError for metadata, BufferExhaustedError for memory). While one ``send``
  waits, later ones wait behind it (``_gate``), so records keep the order of the calls that queued them.
- ``send_batch`` encodes on a worker thread (``prepare_batch``), waits for memory as ``send`` does, and queues
  on the loop's thread; an input larger than buffer.memory is queued from a worker thread, streaming as memory
  frees, with the gate held.
- ``flush``, ``close`` and the transaction calls run their blocking namesakes on a worker thread.
- Results cross to the loop through :class:`~spark_kafka_sink.producer.async_delivery.DeliveryFuture`: one loop
  wake-up per completed batch, and nothing at all for records whose delivery nobody awaits.

Because the loop's thread is the only one that takes buffer memory for this producer's records (the worker-thread
paths hold the gate until their worker returns, even when cancelled, which keeps the loop's sends waiting), a room
check followed by ``send`` on the loop's thread cannot be overtaken.

Cancellation: a cancelled ``send`` that was still waiting for metadata or memory queued nothing; once ``send``
returned, the record is queued and goes to the broker whatever happens to the tasks awaiting its delivery
(cancelling an await of a ``DeliveryFuture`` cancels that wait only). A cancelled ``flush`` or transaction call
goes on on its worker thread: a cancelled ``commit_transaction`` may still commit -- call it again to wait for the
same commit's outcome, as after its timeout. A cancelled ``close`` goes on closing.

One event loop: the producer binds to the loop running its first call; calls from another loop raise
IllegalStateError. Callbacks passed to ``send`` run on the sender thread, as ``KafkaProducer``'s. Interceptors see
a record when it reaches ``KafkaProducer.send``, after any wait: a ``send`` whose wait for metadata or memory ran
out raises without their ``on_send`` / ``on_send_error`` having seen it.
"""

from __future__ import annotations

import asyncio
import operator
import time
from collections.abc import Callable, Iterable, Mapping
from time import time_ns as _time_ns
from typing import Any, SupportsIndex, TypeVar

import pyarrow as pa

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.arrow_send import BatchSendResult
from spark_kafka_sink.producer.async_delivery import DeliveryFuture, LoopRelay, StagedDelivery, StagedRecords
from spark_kafka_sink.producer.config import ProducerConfig
from spark_kafka_sink.producer.producer import Callback, KafkaProducer
from spark_kafka_sink.producer.record_metadata import RecordMetadata
from spark_kafka_sink.producer.record_stage import RECORD_BOUND
from spark_kafka_sink.producer.transactions import ConsumerGroupMetadata, OffsetAndMetadata, TransactionIdentity
from spark_kafka_sink.protocol.record_batch import HEADER_SIZE, record_size_bound

__all__ = ["AsyncKafkaProducer"]

_T = TypeVar("_T")
#: A stage is queued once it holds this many records or bytes (records outside buffer.memory: keep them few).
STAGE_ROWS = 1024
STAGE_BYTES = 256 * 1024
_new_delivery = object.__new__
_Bytes = bytes | bytearray | memoryview | str | None
_Headers = Iterable[tuple[str | bytes, _Bytes]] | Mapping[str, _Bytes] | None


def _payload_bound(value: object) -> int | None:
    """The most bytes ``value`` takes encoded; None for a type ``send`` would refuse (it then says why)."""
    if value is None:
        return 0
    if isinstance(value, (bytes, bytearray)):
        return len(value)
    if isinstance(value, str):
        return 4 * len(value)  # UTF-8 takes at most 4 bytes a code point
    if isinstance(value, memoryview):
        return value.nbytes
    return None


def _record_bound(key: object, value: object, headers: _Headers) -> int | None:
    """An upper bound of the record's size in a batch of its own (None: let ``send`` refuse it)."""
    if type(value) is bytes and (key is None or type(key) is bytes) and not headers:  # the common case, inline
        return RECORD_BOUND + len(value) + (len(key) if key is not None else 0)
    key_bytes, value_bytes = _payload_bound(key), _payload_bound(value)
    if key_bytes is None or value_bytes is None:
        return None
    header_bytes = count = 0
    for pair in (headers.items() if isinstance(headers, Mapping) else headers) if headers else ():
        if not isinstance(pair, tuple) or len(pair) != 2:
            return None
        hk, hv = _payload_bound(pair[0]), _payload_bound(pair[1])
        if hk is None or hv is None:
            return None
        header_bytes, count = header_bytes + hk + hv, count + 1
    return HEADER_SIZE + record_size_bound(key_bytes, value_bytes, header_bytes, count)


class AsyncKafkaProducer:
    """A Kafka producer for asyncio: ``await send`` / ``send_batch`` / ``flush`` / ``close`` and the transaction
    calls, none of which blocks the event loop. The config is ``KafkaProducer``'s (the Java client's option
    names); so are the errors. Use it as ``async with``, or ``await close()``. See the module docstring."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._producer = KafkaProducer(config)
        self._max_block_ms = self._producer.config.max_block_ms
        self._size_limit = min(self._producer.config.max_request_size, self._producer.config.buffer_memory)
        self._relay: LoopRelay | None = None  # bound to the loop of the first call (loop thread only)
        self._gate: asyncio.Lock | None = None  # held while a send waits off the loop (loop thread only)
        # Loop thread only: the records staged now (one topic, headerless, not yet queued), and the hand-overs
        # that wait for buffer.memory (tasks: a cancelled send leaves them running).
        self._stage: StagedRecords | None = None
        self._hand_overs: set[asyncio.Task[None]] = set()
        self._linger_ms = self._producer.config.linger_ms

    def _loop_relay(self) -> LoopRelay:
        loop = asyncio.get_running_loop()
        relay = self._relay
        if relay is None:
            relay = self._relay = LoopRelay(loop)
            self._gate = asyncio.Lock()
        elif relay.loop is not loop:
            raise IllegalStateError("this AsyncKafkaProducer belongs to another event loop (the one running its "
                                    "first call): make one producer per loop")
        return relay

    @property
    def config(self) -> ProducerConfig:
        """The parsed configuration."""
        return self._producer.config

    # ------------------------------------------------------------------------------------------ sending

    async def send(self, topic: str, value: _Bytes, key: _Bytes = None, partition: SupportsIndex | None = None,
                   timestamp_ms: SupportsIndex | None = None, headers: _Headers = None,
                   callback: Callback | None = None) -> DeliveryFuture[RecordMetadata]:
        """Queue one record, waiting off the loop for metadata and buffer memory (up to max.block.ms); returns
        once it is queued, with its delivery to await. Raises what ``KafkaProducer.send`` raises."""
        relay = self._relay
        if relay is None or relay.loop is not asyncio.get_running_loop():
            relay = self._loop_relay()
        if (partition is None and timestamp_ms is None and not headers and type(value) is bytes
                and (key is None or type(key) is bytes)):
            # The common record: staged on the loop, queued with the others of its burst (the module docstring).
            size = RECORD_BOUND + len(value) + (len(key) if key is not None else 0)
            now_ms = _time_ns() // 1_000_000
            # The open burst takes it in a few steps (its topic, the producer's plain sends and the gate were
            # checked when it opened, and nothing waits for memory while it is open); else _stage_for decides.
            stage = self._stage
            if not (stage is not None and stage.topic is topic and len(stage.values) < STAGE_ROWS
                    and stage.size < stage.limit and now_ms - stage.opened_ms <= self._linger_ms
                    and size <= self._size_limit):
                stage = await self._stage_for(topic, size, now_ms, relay)
            if stage is not None:
                values = stage.values
                stage.timestamps.append(now_ms)
                stage.keys.append(key)
                values.append(value)
                if callback is not None or stage.callbacks is not None:
                    if stage.callbacks is None:
                        stage.callbacks = [None] * (len(values) - 1)
                    stage.callbacks.append(callback)
                stage.size += size
                delivery = _new_delivery(StagedDelivery)  # StagedDelivery(...) without the constructor call
                delivery._staged = stage
                delivery._index = len(values) - 1
                delivery._relay = relay
                return delivery
        if self._stage is not None or self._hand_overs:
            await self._settle()  # records staged before this one go first
        gate = self._gate
        assert gate is not None  # made with the relay
        if partition is None and timestamp_ms is None and not headers and not gate.locked():
            # The common record, in one call when it cannot wait (else None: the checks below decide).
            future = self._producer._send_now(topic, value, key, callback)
            if future is not None:
                return DeliveryFuture(future, relay)
        bound = _record_bound(key, value, headers)  # (the common record is staged above: this path is not hot)
        if bound is not None and bound > self._size_limit:
            bound = None  # send refuses it at once, or its exact size fits: send decides, off the loop
        # A rate limited producer's send waits for the limit: always off the loop.
        limited = self._producer.rate_limited
        if (bound is not None and not limited and not gate.locked() and type(topic) is str
                and self._producer._sends_without_blocking(topic, partition, bound)):
            return DeliveryFuture(self._producer.send(topic, value, key, partition, timestamp_ms, headers, callback),
                                  relay)
        async with _GateHold(gate) as hold:
            if (bound is not None and not limited and type(topic) is str
                    and await self._wait_until_sendable(hold, topic, partition, bound)):
                future = self._producer.send(topic, value, key, partition, timestamp_ms, headers, callback)
            else:  # an argument send refuses, or a partition the metadata lacks: send decides, off the loop
                future = await hold.run(self._producer.send, topic, value, key, partition, timestamp_ms, headers,
                                        callback)
        return DeliveryFuture(future, relay)

    async def _stage_for(self, topic: str, size: int, now_ms: int, relay: LoopRelay) -> StagedRecords | None:
        """The stage a record of ``size`` bound bytes to ``topic`` joins now: the open one if it still takes it,
        else a new one once the open one is handed over -- opened only when the record would not wait (the
        gate free, no burst waiting for memory, room for a new batch). None: ``send``'s other path takes it."""
        if self._hand_overs:  # a burst waits for buffer.memory: wait behind it, as a send waits for memory
            await self._wait_for_hand_overs()
        stage = self._stage
        if stage is not None and (stage.topic != topic or len(stage.values) >= STAGE_ROWS
                                  or stage.size >= stage.limit or now_ms - stage.opened_ms > self._linger_ms):
            await self._hand_over()
            stage = None
        producer = self._producer
        if size > self._size_limit or not producer._plain_sends or type(topic) is not str:
            return None  # send decides, on its waiting path (after the open stage: it settles first)
        if stage is None:
            gate = self._gate
            assert gate is not None  # made with the relay
            room = 0 if gate.locked() or self._hand_overs else producer._staging_room(topic, size)
            if not room:
                return None
            producer._check_sendable()  # a send's errors before anything is queued, at once
            # At most half the free memory: the burst's batches then find room, without waiting.
            stage = self._stage = StagedRecords(topic, now_ms, min(STAGE_BYTES, room // 2), self._settle)
            relay.loop.call_soon(self._hand_over_soon, stage)
        return stage

    def _hand_over_soon(self, stage: StagedRecords) -> None:
        """The loop's next turn after a stage opened: queue it if it is still the stage (a burst of sends without
        a yield in between shares one hand-over; a service that yields between sends gets each record queued
        within one turn of the loop, as a direct ``send`` would)."""
        if stage is self._stage:
            self._stage = None
            try:
                self._queue(stage)
            except Exception:  # noqa: BLE001,S110 -- in the staged records' futures; no send awaits this turn
                pass

    async def _hand_over(self) -> None:
        """Queue the staged records (waiting for buffer.memory, off the loop, if they need it)."""
        stage = self._stage
        if stage is not None:
            self._stage = None
            waiting = self._queue(stage)
            if waiting is not None:
                await asyncio.shield(waiting)

    async def _settle(self) -> None:
        """Queue every staged record, and wait for the hand-overs that wait for memory: before anything that
        must come after them (a send off the common path, ``send_batch``, ``flush``, the transaction calls)."""
        try:
            await self._hand_over()
        except Exception:  # noqa: BLE001,S110 -- in the staged records' futures, which their awaits raise
            pass
        await self._wait_for_hand_overs()

    async def _wait_for_hand_overs(self) -> None:
        while self._hand_overs:
            await asyncio.wait(set(self._hand_overs))  # (a cancelled wait leaves them running)

    def _queue(self, stage: StagedRecords) -> asyncio.Task[None] | None:
        """Queue ``stage``'s records now if that needs no wait (None), else in a task that waits its turn at the
        gate and for memory (returned). A failure ends the rows not yet queued with its error."""
        gate = self._gate
        assert gate is not None  # made with the relay
        if not gate.locked() and not self._hand_overs:
            try:
                if not self._producer._send_run(stage.topic, stage.timestamps, stage.keys, stage.values,
                                                stage.callbacks, stage.handed()):
                    return None
            except BaseException as error:
                stage.fail(error)
                raise
        task = asyncio.ensure_future(self._queue_waiting(stage))
        self._hand_overs.add(task)
        task.add_done_callback(self._hand_over_done)
        return task

    def _hand_over_done(self, task: asyncio.Task[None]) -> None:
        self._hand_overs.discard(task)
        _retrieve(task)  # its error is in the records' futures, and raised to the send that awaited it

    async def _queue_waiting(self, stage: StagedRecords) -> None:
        """``_queue``'s waiting path: at the gate, in order, then as ``send`` would wait (max.block.ms from the
        start of the wait); rows the many-at-a-time path does not take go through ``send`` one by one."""
        producer = self._producer
        gate = self._gate
        assert gate is not None
        try:
            async with _GateHold(gate) as hold:
                deadline = time.monotonic() + self._max_block_ms / 1000
                places = stage.handed()
                while needs := producer._send_run(stage.topic, stage.timestamps, stage.keys, stage.values,
                                                  stage.callbacks, places):
                    if needs < 0:
                        placed = places.placed
                        for row, place in enumerate(placed):
                            if place is None:
                                callback = stage.callbacks[row] if stage.callbacks is not None else None
                                placed[row] = await hold.run(producer.send, stage.topic, stage.values[row],
                                                             stage.keys[row], None, stage.timestamps[row], None,
                                                             callback)
                        return
                    remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                    await hold.run(producer._wait_for_memory, needs, remaining_ms)
        except BaseException as error:
            stage.fail(error)
            raise

    async def _wait_until_sendable(self, hold: _GateHold, topic: str, partition: object, bound: int) -> bool:
        """Wait off the loop until ``send`` would not block (the caller holds the gate, so it stays so): True.
        max.block.ms from now bounds the waits, which raise ``send``'s errors. False: a partition the metadata
        still lacks after a refresh (``send`` refuses it, off the loop)."""
        producer = self._producer
        deadline = time.monotonic() + self._max_block_ms / 1000
        refreshed = False
        while not producer._sends_without_blocking(topic, partition, bound):
            remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
            if not producer._partitions_cached(topic, None):
                await hold.run(producer._await_partitions, topic, remaining_ms)
            elif not producer._partitions_cached(topic, partition):
                if refreshed:
                    return False
                await hold.run(producer._await_partitions, topic, remaining_ms, _needed(partition))
                refreshed = True
            else:
                await hold.run(producer._wait_for_memory, producer._new_batch_bound(topic, bound), remaining_ms)
        return True

    async def send_and_wait(self, topic: str, value: _Bytes, key: _Bytes = None,
                            partition: SupportsIndex | None = None, timestamp_ms: SupportsIndex | None = None,
                            headers: _Headers = None) -> RecordMetadata:
        """``send``, then await its delivery: the record's RecordMetadata once the broker acknowledged it."""
        return await (await self.send(topic, value, key, partition, timestamp_ms, headers))

    async def send_batch(self, topic: str | None, data: pa.RecordBatch | pa.Table) -> DeliveryFuture[BatchSendResult]:
        """Queue an Arrow table as ``KafkaProducer.send_batch`` does, encoding it on a worker thread and waiting
        for buffer memory off the loop; returns once it is queued, with its result to await."""
        relay = self._loop_relay()
        await self._settle()  # records staged before this table go first
        producer = self._producer
        prepared = await asyncio.to_thread(producer.prepare_batch, topic, data)
        gate = self._gate
        assert gate is not None
        async with _GateHold(gate) as hold:
            size = sum(len(encoded.data) for _, batches in prepared.parts for encoded in batches)
            if size <= producer.config.buffer_memory and not producer.rate_limited:
                deadline = time.monotonic() + self._max_block_ms / 1000
                while not producer._has_memory(size):
                    remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                    await hold.run(producer._wait_for_memory, size, remaining_ms)
                future = producer.send_prepared(prepared)
            else:  # more than buffer.memory holds (it streams through as memory frees), or rate limited: off the loop
                future = await hold.run(producer.send_prepared, prepared)
        return DeliveryFuture(future, relay)

    async def flush(self, timeout_s: float | None = None) -> None:
        """Send everything queued and wait until all of it completed, off the loop (``KafkaProducer.flush``)."""
        self._loop_relay()
        await self._settle()
        await self._off_loop(self._producer.flush, timeout_s)

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partition numbers, waiting off the loop for metadata up to max.block.ms."""
        return await self._off_loop(self._producer.partitions_for, topic)

    def metrics(self) -> dict[str, float]:
        """``KafkaProducer.metrics``: the Java client's metric names."""
        return self._producer.metrics()

    # ------------------------------------------------------------------------------------------ transactions

    async def init_transactions(self, timeout_s: float | None = None) -> None:
        await self._off_loop(self._producer.init_transactions, timeout_s)

    def begin_transaction(self) -> None:
        """Local only (nothing to await): the transaction starts on the broker with its first record."""
        self._producer.begin_transaction()

    async def commit_transaction(self, timeout_s: float | None = None) -> None:
        """Flush, then commit, off the loop. Cancelled, the commit goes on: call it again for its outcome."""
        self._loop_relay()
        await self._settle()  # the transaction's staged records go first
        await self._off_loop(self._producer.commit_transaction, timeout_s)

    async def abort_transaction(self, timeout_s: float | None = None) -> None:
        self._loop_relay()
        await self._settle()  # queued, then aborted with the rest: their deliveries fail as the others'
        await self._off_loop(self._producer.abort_transaction, timeout_s)

    async def send_offsets_to_transaction(self, offsets: Mapping[tuple[str, int], int | OffsetAndMetadata],
                                          group_metadata: ConsumerGroupMetadata | str,
                                          timeout_s: float | None = None) -> None:
        self._loop_relay()
        await self._settle()
        await self._off_loop(self._producer.send_offsets_to_transaction, offsets, group_metadata, timeout_s)

    def transaction_identity(self) -> TransactionIdentity:
        return self._producer.transaction_identity()

    # ------------------------------------------------------------------------------------------ closing

    async def close(self, timeout_s: float | None = None, *, abort_open_transaction: bool = True) -> None:
        """``KafkaProducer.close`` off the loop: sends what is queued, waits up to ``timeout_s``, then fails
        what is left. Cancelled, the close goes on."""
        self._loop_relay()
        await self._settle()
        await self._off_loop(lambda: self._producer.close(timeout_s, abort_open_transaction=abort_open_transaction))

    async def __aenter__(self) -> AsyncKafkaProducer:
        self._loop_relay()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _off_loop(self, call: Callable[..., _T], *args: Any) -> _T:
        self._loop_relay()
        # Shielded: a cancelled await leaves the call running on its thread (it cannot be stopped there), and the
        # caller's CancelledError comes at once rather than when the call returns.
        task = asyncio.ensure_future(asyncio.to_thread(call, *args))
        task.add_done_callback(_retrieve)  # an error nobody awaits any more is not reported as never retrieved
        return await asyncio.shield(task)

    def __repr__(self) -> str:
        return f"Async{self._producer!r}"


class _GateHold:
    """The gate held by one call that waits off the loop. A worker started while holding it keeps it held until
    the worker returns, even if the awaiting task is cancelled first: a worker still waiting in buffer.memory's
    queue (or sending) takes memory when it gets its turn, and the loop's sends must not race it for that memory
    -- one that did could find itself queued behind it, blocking the loop."""

    def __init__(self, gate: asyncio.Lock) -> None:
        self._gate = gate
        self._worker: asyncio.Future[Any] | None = None  # the worker running now, if any (loop thread only)

    async def __aenter__(self) -> _GateHold:
        await self._gate.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        worker = self._worker
        if worker is not None and not worker.done():  # cancelled while it runs: release once it returned
            worker.add_done_callback(lambda _: self._gate.release())
        else:
            self._gate.release()

    async def run(self, call: Callable[..., _T], *args: Any) -> _T:
        """``call(*args)`` on a worker thread; a cancelled await leaves it running, the gate held for it."""
        worker: asyncio.Future[_T] = asyncio.ensure_future(asyncio.to_thread(call, *args))
        self._worker = worker
        worker.add_done_callback(_retrieve)
        result = await asyncio.shield(worker)
        self._worker = None
        return result


def _retrieve(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _needed(partition: object) -> int:
    """The partition count a named partition needs (0 for what is not an integer: ``send`` refuses it)."""
    return operator.index(partition) + 1 if hasattr(partition, "__index__") else 0
