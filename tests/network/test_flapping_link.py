"""Every node's client link going down and up every few seconds (replication untouched) while an exactly_once Spark
write and an idempotent send_batch run side by side: some outages outlast request.timeout.ms (requests time out,
connections close, connects hang until the link is back), some do not (TCP retransmits across them). Both writes
are exact, read back with confluent-kafka at read_committed; afterwards no connection and no thread is left."""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from spark_kafka_sink import KafkaProducer
from tests.cluster.faults import PacedWriter, check_ids, new_topic, out_of_order, read_all
from tests.conftest import wait_for
from tests.network.conftest import NetCluster
from tests.network.flapper import Flapper
from tests.network.leaks import connections_to, leftover_threads, thread_names
from tests.spark.conftest import write_df

pytestmark = pytest.mark.network

PARTITIONS = 3
ROWS = 60_000
TASKS = 4
REQUEST_TIMEOUT_MS = 3000


def _flap_all(net: NetCluster) -> Flapper:
    nodes = sorted(net.cluster.nodes)

    def down() -> None:
        for node_id in nodes:
            net.network.cut_client(node_id)

    def up() -> None:
        for node_id in nodes:
            net.network.heal(node_id)

    # 1 s: shorter than request.timeout.ms, TCP carries the requests across; 4.5 s: longer, they time out.
    return Flapper(down, up, down_s=(1.0, 4.5), up_s=2.5)


def test_flapping_client_links(net: NetCluster, net_spark: Any) -> None:
    cluster = net.cluster
    client_net = net.network.client_host(1).rsplit(".", 1)[0] + "."
    threads_before = thread_names()
    sink_topic, batch_topic = new_topic(cluster, PARTITIONS), new_topic(cluster, PARTITIONS)
    frame = net_spark.range(0, ROWS, 1, TASKS).selectExpr(
        "CAST(id AS STRING) AS value", f"CAST(id % {PARTITIONS} AS INT) AS partition")
    producer = KafkaProducer({"bootstrap.servers": net.bootstrap, "acks": "all", "linger.ms": 5,
                              "request.timeout.ms": REQUEST_TIMEOUT_MS,
                              "socket.connection.setup.timeout.ms": 1000,
                              "socket.connection.setup.timeout.max.ms": 2000})
    writer = PacedWriter(producer, batch_topic, PARTITIONS, "send_batch", 3_000, batch_rows=300).start()
    wait_for("the first acknowledgements", lambda: writer.acked_after(0.0) >= 5)
    flapper = _flap_all(net).start()
    sink_error: list[BaseException] = []
    started = time.monotonic()
    flaps_at_return = 0

    def spark_write() -> None:
        nonlocal flaps_at_return
        net_spark._jvm.org.apache.spark.sql.SparkSession.setActiveSession(net_spark._jsparkSession)
        try:
            # Spark's tasks start after the first outage has begun, and write while the links keep flapping.
            wait_for("the first outage", lambda: flapper.flaps >= 1)
            write_df(frame, net.bootstrap, topic=sink_topic, deliveryGuarantee="exactly_once",
                     transactionalIdPrefix=f"flap-{uuid.uuid4().hex[:8]}", writeId=1, producerIdleTimeoutMs=1000,
                     **{"kafka.request.timeout.ms": str(REQUEST_TIMEOUT_MS),
                        "kafka.socket.connection.setup.timeout.ms": "1000",
                        "kafka.socket.connection.setup.timeout.max.ms": "2000", "kafka.batch.size": "16384"})
        except BaseException as exc:  # noqa: B036 -- the test asserts on it
            sink_error.append(exc)
        finally:
            flaps_at_return = flapper.flaps

    sink = threading.Thread(target=spark_write, name="sink-write", daemon=True)
    sink.start()
    try:
        sink.join(400)
        assert not sink.is_alive(), "the Spark write did not return within 400 s"
        wait_for("two more outages for the send_batch writer", lambda: flapper.flaps >= flaps_at_return + 2,
                 timeout=60)
    finally:
        flapper.stop()
        writer.stop()
        producer.close()
    wall_s = time.monotonic() - started
    assert sink_error == [], [_message(e) for e in sink_error]
    sink_records = read_all(cluster, sink_topic)
    sink_verdict = check_ids(sink_records, set(range(ROWS)))
    sink_verdict.out_of_order = out_of_order(sink_records, ROWS, TASKS)
    sink_verdict.report(f"exactly_once Spark write, {flaps_at_return} outages")
    batch_verdict = check_ids(read_all(cluster, batch_topic), writer.acked_ids(), PARTITIONS)
    batch_verdict.report(f"send_batch, {flapper.flaps} outages", writer.recovery_after(started))
    wrong_partition = Counter(int(r.value or b"-1") % PARTITIONS == r.partition for r in sink_records)[False]

    # Leaks: the producers are closed (the Spark workers' after producerIdleTimeoutMs), so no socket may remain
    # to the nodes, and the driver is back to the threads it had.
    connections_s = wait_for("no connection left to the nodes", lambda: connections_to(client_net) == 0,
                             timeout=120)
    try:
        threads_s = wait_for("the driver's threads back to those before",
                             lambda: set(thread_names()) <= set(threads_before), timeout=60)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; left: {leftover_threads(threads_before)}") from None
    print(f"  the Spark write and its commit took {wall_s:.1f} s; "
          f"outages during the Spark write: {flaps_at_return}, in all: {flapper.flaps}; connections left: "
          f"{connections_to(client_net)} (after {connections_s:.1f} s), threads left: "
          f"{sorted(set(thread_names()) - set(threads_before))} (after {threads_s:.1f} s)")
    assert flaps_at_return >= 1, "the Spark write ended before a full outage: it saw no flapping"
    assert (sink_verdict.lost, sink_verdict.duplicated, sink_verdict.out_of_order, sink_verdict.extra) == (0,) * 4
    assert wrong_partition == 0 and sink_verdict.read == ROWS
    assert writer.errors() == [], writer.errors()[:3]
    assert (batch_verdict.lost, batch_verdict.duplicated, batch_verdict.out_of_order, batch_verdict.extra) == (0,) * 4
    assert batch_verdict.read == len(writer.acked_ids())


def _message(error: BaseException) -> str:
    """An error's text: pyspark's AnalysisException keeps it in getMessage()."""
    get = getattr(error, "getMessage", None)
    return f"{type(error).__name__}: {get() if callable(get) else error}"[:3000]
