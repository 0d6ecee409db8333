from __future__ import annotations

import logging
import math
import threading
from typing import Any

import pytest

from spark_kafka_sink.producer.interceptors import InterceptorChain, ProducerInterceptor, ProducerRecord
from spark_kafka_sink.producer.metrics import METRIC_NAMES, ProducerMetrics, WindowedStat
from spark_kafka_sink.producer.record_metadata import BatchMetadata, RecordMetadata, TopicPartition

# ----------------------------------------------------------------------------------------------- metrics


def test_windowed_stat_avg_max_rate_and_expiry() -> None:
    stat = WindowedStat(window_ms=1000, num_samples=2)
    assert math.isnan(stat.avg(0)) and math.isnan(stat.max(0)) and stat.rate(0) == 0
    stat.record(10, 0)
    stat.record(30, 500)
    stat.record(20, 1200)  # a second window
    assert stat.avg(1200) == 20 and stat.max(1200) == 30
    assert stat.rate(1500) == pytest.approx(60 / 1.5)  # 60 over the 1.5 s the windows span
    assert stat.count_rate(1500) == pytest.approx(3 / 1.5)
    assert stat.avg(2100) == 20  # the first window (from 0) is obsolete after 2 windows
    assert math.isnan(stat.max(3300))
    assert (stat.lifetime_count, stat.lifetime_total) == (3, 60)
    young = WindowedStat(window_ms=1000, num_samples=2)
    young.record(40, 0)
    assert young.rate(100) == pytest.approx(40 / 1.0)  # a first burst spans at least (num_samples - 1) windows


def test_record_all_is_recording_each_value() -> None:
    one_by_one, at_once = WindowedStat(window_ms=1000, num_samples=2), WindowedStat(window_ms=1000, num_samples=2)
    for values, now_ms in (([10, 30], 0), ([5], 500), ([20, 7, 1], 1200)):  # the last starts a second window
        for v in values:
            one_by_one.record(v, now_ms)
        at_once.record_all(values, now_ms)
    for now_ms in (1200, 1500, 2100):
        for read in ("avg", "max", "rate", "count_rate"):
            assert getattr(at_once, read)(now_ms) == getattr(one_by_one, read)(now_ms), (read, now_ms)
    assert (at_once.lifetime_count, at_once.lifetime_total) == (one_by_one.lifetime_count, 73)


def test_snapshot_has_java_names() -> None:
    m = ProducerMetrics(window_ms=1000, num_samples=2)
    available = [1000]
    m.add_gauge("buffer-available-bytes", lambda: available[0])
    m.record_batches_sent(records=[10, 20], sizes=[800, 1600], queue_ms=[5, 9], ratios=[0.5, 0.25],
                          now_ms=0)  # one request of two batches
    m.record_batches_sent(records=[10], sizes=[1200], queue_ms=[1], ratios=[0.75], now_ms=100)
    m.record_batches_sent(records=[], sizes=[], queue_ms=[], ratios=[], now_ms=100)  # nothing sent: no sample
    m.record_request(records=40, latency_ms=12, now_ms=100)
    m.record_request(records=20, latency_ms=4, now_ms=200)
    m.record_retry(5, 200)
    m.record_error(2, 200)
    m.record_throttle(50, 200)
    available[0] = 400
    snap = m.snapshot(1000)
    assert set(METRIC_NAMES) | {"buffer-available-bytes"} == set(snap)
    assert snap["record-send-total"] == 40 and snap["record-send-rate"] == pytest.approx(40.0)
    assert snap["byte-total"] == 3600 and snap["byte-rate"] == pytest.approx(3600.0)
    assert (snap["batch-size-avg"], snap["batch-size-max"]) == (1200, 1600)
    assert snap["records-per-request-avg"] == 30 and snap["request-total"] == 2
    assert (snap["request-latency-avg"], snap["request-latency-max"]) == (8, 12)
    assert (snap["record-retry-total"], snap["record-error-total"]) == (5, 2)
    assert snap["produce-throttle-time-max"] == 50
    assert (snap["record-queue-time-avg"], snap["record-queue-time-max"]) == (5, 9)
    assert snap["compression-rate-avg"] == pytest.approx(0.5)
    assert snap["buffer-available-bytes"] == 400
    later = m.snapshot(10_000)
    assert later["record-send-total"] == 40 and later["record-send-rate"] == 0  # totals stay, rates decay
    assert math.isnan(later["request-latency-avg"])


def test_metrics_are_thread_safe() -> None:
    m = ProducerMetrics()
    barrier = threading.Barrier(4)

    def work() -> None:
        barrier.wait()
        for i in range(2000):
            m.record_batches_sent([1], [10], [0], [1.0], i)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert m.snapshot(2000)["record-send-total"] == 8000


# ----------------------------------------------------------------------------------------------- interceptors


class Tagger:
    def __init__(self, tag: bytes) -> None:
        self.tag = tag
        self.acks: list[tuple[RecordMetadata, BaseException | None]] = []
        self.closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        return ProducerRecord(record.topic, (record.value or b"") + self.tag, record.key, record.headers)

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        self.acks.append((metadata, error))

    def close(self) -> None:
        self.closed = True


class Broken:
    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        raise RuntimeError("boom")

    def on_acknowledgement(self, metadata: RecordMetadata, error: BaseException | None) -> None:
        raise RuntimeError("boom")

    def close(self) -> None:
        raise RuntimeError("boom")


def test_chain_runs_in_order_and_logs_failures(caplog: pytest.LogCaptureFixture) -> None:
    first, last = Tagger(b"-a"), Tagger(b"-b")
    chain = InterceptorChain([first, Broken(), last])
    assert isinstance(first, ProducerInterceptor) and chain
    with caplog.at_level(logging.WARNING, logger="spark_kafka_sink.producer.interceptors"):
        out = chain.on_send(ProducerRecord("t", b"v"))
        md = RecordMetadata("t", 0, 5, 1)
        chain.on_acknowledgement(md, None)
        chain.close()
    assert out.value == b"v-a-b"  # the broken one is skipped, the record passed on as it was
    assert first.acks == [(md, None)] and last.acks == [(md, None)]
    assert first.closed and last.closed
    assert sum("failed" in r.getMessage() for r in caplog.records) == 3


def test_on_send_returning_garbage_is_ignored() -> None:
    class Garbage:
        def on_send(self, record: ProducerRecord) -> Any:
            return "not a record"

    assert InterceptorChain([Garbage()]).on_send(ProducerRecord("t", b"v")).value == b"v"


def test_on_send_error_acknowledges_without_offset() -> None:
    tagger = Tagger(b"")
    chain = InterceptorChain([tagger])
    err = RuntimeError("no metadata")
    chain.on_send_error(ProducerRecord("t", b"v", partition=3), None, err)
    chain.on_send_error(ProducerRecord("t", b"v"), TopicPartition("t", 1), err)
    chain.on_send_error(ProducerRecord("t", b"v"), None, err)
    assert [md.partition for md, _ in tagger.acks] == [3, 1, -1]
    assert all(md.offset == -1 and e is err for md, e in tagger.acks)


def test_optional_batch_hooks_and_validation() -> None:
    seen: list[object] = []

    class BatchWatcher:
        def on_send_batch(self, topic: str, table: Any) -> Any:
            return table + ["x"]

        def on_batch_acknowledgement(self, metadata: BatchMetadata, error: BaseException | None) -> None:
            seen.append(metadata)

    chain = InterceptorChain([BatchWatcher(), Tagger(b"")])
    assert chain.on_send_batch("t", []) == ["x"]
    md = BatchMetadata("t", 0, 0, 3, 0, -1)
    chain.on_batch_acknowledgement(md, None)
    assert seen == [md]
    with pytest.raises(TypeError, match="none of the interceptor methods"):
        InterceptorChain([object()])
    assert not InterceptorChain()

