"""Outages while a dagger runs, against real servers: Apache Kafka frozen for 30 s, Apache Kafka killed
and restarted, a sink server stopped, and a Python worker of the driver that starts too late.

The broker outages use an Apache Kafka of this module's own. Frozen with SIGSTOP, it keeps its connections
and answers nothing, like a host that vanished; SIGKILLed, it drops every connection and comes back on the
same ports and data folder after its log recovery, as after a crash. The sink outage stops a real InfluxDB
of its own and starts it again on the same ports and data.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from jobs.running.runner import DaggerQueryError
from jobs.tools.broker import free_port
from tests.conftest import (
    KafkaHelper,
    RunningDagger,
    kafka_sink,
    kafka_stream,
    message_class,
    order_payloads,
    run_bounded_in_own_process,
)
from tests.dagster_deployment import write_orders_dagger
from tests.servers.influxdb import (
    _CONFIG,
    ADMIN_PASSWORD,
    ADMIN_USER,
    InfluxServer,
    _create_admin,
    _influxd,
    _ping,
    _stop,
)
from tests.servers.kafka import ApacheKafka

ORDER = "dagger.testing.Order"
FREEZE_S = 30.0
KILLED_S = 40.0  # longer than a single Kafka request waits, within the stream's and the sink's 2 minutes


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout_s:.0f}s")
        time.sleep(poll_s)


# --------------------------------------------------------------------------------------------------------
# The broker frozen for 30 s, and killed
# --------------------------------------------------------------------------------------------------------


def delivered_order_ids(
    running: RunningDagger, kafka: KafkaHelper, registry, sink: str, isolation_level: str = "read_uncommitted"
) -> list[str]:
    """The order ids in the sink's topic, as long as the dagger still runs."""
    running.assert_still_running()
    decode = message_class(registry, ORDER).FromString
    records = kafka.read_all(sink, isolation_level=isolation_level)
    return [decode(record.value()).order_id for record in records]


@pytest.fixture(scope="module")
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """An Apache Kafka only this module freezes and kills (requested before `start_dagger`, so it
    outlives the daggers)."""
    broker = ApacheKafka(tmp_path_factory.mktemp("outage-kafka"))
    broker.start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.mark.slow
def test_a_broker_frozen_for_30_seconds_is_ridden_out_without_loss_or_duplicates(
    own_broker, registry, make_dagger, start_dagger
):
    kafka = KafkaHelper(own_broker.bootstrap_servers)
    source, sink = kafka.new_topic("frozen-in", partitions=2), kafka.new_topic("frozen-out")
    spec = make_dagger(
        # The default broker_timeout (2 minutes) covers the 30 s outage.
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[source])],
        sql="SELECT order_id, customer_id, amount, created_at FROM orders",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ORDER)],
        trigger_interval="1s",
    )
    running = start_dagger(spec)

    def delivered() -> list[str]:
        return delivered_order_ids(running, kafka, registry, sink)

    kafka.produce(source, order_payloads(registry, 0, 100), partition=lambda index: index % 2)
    wait_until(lambda: len(delivered()) >= 100, 120, "the first 100 orders")

    # Records the dagger has not read yet when the broker stops, and records sent while it is stopped
    # (queued by their producer until it answers again).
    kafka.produce(source, order_payloads(registry, 100, 50), partition=lambda index: index % 2)
    os.kill(own_broker.pid, signal.SIGSTOP)
    try:
        frozen_at = time.monotonic()
        producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "log_level": 0})
        for index, payload in enumerate(order_payloads(registry, 150, 50)):
            producer.produce(source, payload, partition=index % 2)
        producer.poll(0)
        time.sleep(FREEZE_S - (time.monotonic() - frozen_at))
    finally:
        os.kill(own_broker.pid, signal.SIGCONT)  # never leave it frozen, whatever failed
    assert producer.flush(60) == 0

    expected = Counter(f"o{index}" for index in range(200))
    wait_until(lambda: Counter(delivered()) == expected, 180, "all 200 orders once each after the thaw")
    time.sleep(3)  # a few more triggers: nothing else may arrive (no replayed batch)
    assert Counter(delivered()) == expected
    running.assert_still_running()
    running.run.wait(timeout_s=0.1)  # collects the progress reports
    assert sum(report.input_rows for report in running.run.reports) == 200  # no record read twice
    # A micro-batch ran into the outage and waited it out (the source's retries run in Spark's Python
    # worker on the driver, whose log this process cannot see; the batch's duration shows them).
    assert max(report.duration_ms for report in running.run.reports) >= (FREEZE_S - 10) * 1000


@pytest.mark.slow
def test_a_broker_killed_and_restarted_on_its_data_is_ridden_out_exactly_once(
    own_broker, registry, make_dagger, start_dagger
):
    """SIGKILL of the broker mid-run, then a restart on the same data folder: the dagger carries on by
    itself, and a read_committed reader of its exactly-once output sees every row once."""
    kafka = KafkaHelper(own_broker.bootstrap_servers)
    source, sink = kafka.new_topic("killed-in", partitions=2), kafka.new_topic("killed-out")
    spec = make_dagger(
        streams=[kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[source])],
        sql="SELECT order_id, customer_id, amount, created_at FROM orders",
        sinks=[kafka_sink(kafka.bootstrap_servers, sink, ORDER, delivery="exactly_once")],
        trigger_interval="1s",
    )
    running = start_dagger(spec)

    def delivered() -> Counter[str]:
        return Counter(delivered_order_ids(running, kafka, registry, sink, "read_committed"))

    kafka.produce(source, order_payloads(registry, 0, 100), partition=lambda index: index % 2)
    wait_until(lambda: sum(delivered().values()) >= 100, 120, "the first 100 orders")

    batches_before = len(running.run.reports)
    # Killed inside a micro-batch: planned (its offsets are in the checkpoint) and not committed. The broker
    # is frozen the moment the batch is planned; a batch that still commits within a second had written
    # its rows already, and the next one is tried.
    checkpoint, produced = Path(running.run.checkpoint_location), 100
    for _ in range(3):
        batch = max(int(path.name) for path in (checkpoint / "offsets").iterdir() if path.name.isdigit()) + 1
        kafka.produce(source, order_payloads(registry, produced, 50), partition=lambda index: index % 2)
        produced += 50
        planned = checkpoint / "offsets" / str(batch)
        wait_until(planned.exists, 60, f"batch {batch} planned", poll_s=0.005)
        os.kill(own_broker.pid, signal.SIGSTOP)
        time.sleep(1)
        if not (checkpoint / "commits" / str(batch)).exists():
            break
        os.kill(own_broker.pid, signal.SIGCONT)
    else:
        raise AssertionError("no micro-batch was still open when the broker stopped, in 3 tries")
    own_broker.kill()
    assert not (checkpoint / "commits" / str(batch)).exists()  # the broker died inside the batch
    time.sleep(KILLED_S)  # down while the batch waits on it: its clients meet refused connections
    own_broker.start()  # same ports, same data folder: the log is recovered
    kafka.produce(source, order_payloads(registry, produced, 50), partition=lambda index: index % 2)
    produced += 50

    expected = Counter(f"o{index}" for index in range(produced))
    wait_until(lambda: delivered() == expected, 240, f"all {produced} orders once each after the restart")
    time.sleep(3)  # a few more triggers: nothing else may arrive (no replayed batch)
    assert delivered() == expected
    running.assert_still_running()
    running.run.wait(timeout_s=0.1)  # collects the progress reports
    assert len(running.run.reports) > batches_before
    assert sum(report.input_rows for report in running.run.reports) == produced  # no record read twice


# --------------------------------------------------------------------------------------------------------
# A sink server stopped
# --------------------------------------------------------------------------------------------------------


class StoppableInfluxDB:
    """influxd on fixed ports and a data folder of its own, so it can stop and come back unchanged."""

    def __init__(self, root: Path) -> None:
        self.http_port, rpc_port = free_port(), free_port()
        self.config = root / "influxdb.conf"
        self.config.write_text(_CONFIG.format(root=root, http_port=self.http_port, rpc_port=rpc_port))
        self.log = root / "influxd.log"
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.server = InfluxServer(self.url, proxy=None)  # queries only: no v2 compatibility proxy
        self._process = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [_influxd(), "-config", str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )
        wait_until(lambda: _ping(self.url), 30, f"influxd on {self.url}")

    def stop(self) -> None:
        if self._process is not None:
            _stop(self._process)
            self._process = None


@pytest.fixture
def stoppable_influxdb() -> Iterator[StoppableInfluxDB]:
    with tempfile.TemporaryDirectory(prefix="influxdb-outage-") as folder:
        influxdb = StoppableInfluxDB(Path(folder))
        influxdb.start()
        _create_admin(influxdb.url)
        try:
            yield influxdb
        finally:
            influxdb.stop()


def group_offset(bootstrap_servers: str, group: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap_servers, "group.id": group, "log_level": 3})
    try:
        [committed] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
        return committed.offset
    finally:
        consumer.close()


def test_a_stopped_sink_server_fails_the_batch_after_bounded_retries_and_a_restart_loses_nothing(
    stoppable_influxdb, kafka, registry, make_dagger, start_dagger
):
    influxdb = stoppable_influxdb
    database = influxdb.server.create_database()
    topic, group = kafka.new_topic("influx-outage"), f"outage-{time.monotonic_ns()}"
    kafka.produce(topic, order_payloads(registry, 0, 3))
    backoff_s, retries = 3.0, 2
    spec = make_dagger(
        streams=[
            kafka_stream(
                kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[topic], group_id=group
            )
        ],
        sql="SELECT order_id AS tag_order, amount, created_at AS window_timestamp FROM orders",
        sinks=[
            {
                "kind": "influx",
                "url": influxdb.url,
                "database": database,
                "measurement": "orders",
                "username": ADMIN_USER,
                "password": ADMIN_PASSWORD,
                "max_retries": retries,
                "retry_backoff": f"{backoff_s}s",
                "timeout": "2s",
            }
        ],
    )
    first = start_dagger(spec)
    first.process_available()
    assert [row["tag_order"] for row in influxdb.server.rows(database, "orders")] == ["o0", "o1", "o2"]

    influxdb.stop()
    kafka.produce(topic, order_payloads(registry, 3, 4))
    started = time.monotonic()
    with pytest.raises(
        DaggerQueryError,
        match=rf"influx sink {influxdb.url} database '{database}' measurement 'orders': batch 1: "
        rf"write failed after {retries + 1} attempt\(s\): .*(Connection refused|NewConnectionError)",
    ):
        first.process_available()
    elapsed = time.monotonic() - started
    waits = [backoff_s * 2**attempt for attempt in range(retries)]  # 3 s, then 6 s
    assert elapsed >= sum(waits)  # it backed off between attempts; the message counts the attempts

    # Nothing of batch 1 was acknowledged: neither the checkpoint nor the consumer group moved past it.
    commits = Path(spec.resolved_checkpoint_location, "commits")
    assert sorted(path.name for path in commits.iterdir() if not path.name.startswith(".")) == ["0"]
    assert group_offset(kafka.bootstrap_servers, group, topic) == 3

    influxdb.start()  # same ports, same data
    assert [row["tag_order"] for row in influxdb.server.rows(database, "orders")] == ["o0", "o1", "o2"]
    restarted = start_dagger(spec)  # the restart path: the same dagger from its checkpoint
    restarted.process_available()
    assert [(r.batch_id, r.input_rows) for r in restarted.run.reports if r.input_rows] == [(1, 4)]
    rows = influxdb.server.rows(database, "orders")
    assert [(row["tag_order"], row["amount"]) for row in rows] == [(f"o{i}", i) for i in range(7)]


# --------------------------------------------------------------------------------------------------------
# A Python worker of the driver too late to connect back
# --------------------------------------------------------------------------------------------------------


def test_a_driver_python_worker_late_to_connect_back_restarts_the_query_and_loses_nothing(
    tmp_path: Path, kafka: KafkaHelper, registry, descriptor_set
):
    source, output = kafka.new_topic("late-worker"), kafka.new_topic("late-worker-out")
    kafka.produce(source, order_payloads(registry, 0, 7))
    dagger = write_orders_dagger(
        tmp_path, "late-worker", kafka.bootstrap_servers, descriptor_set,
        {"topics": [source], "connector": "python"},  # the Python source's reader is a driver-side worker
        sinks=[kafka_sink(kafka.bootstrap_servers, output, ORDER)],
    )  # fmt: skip
    # The Python the run's Spark starts its workers with: the first worker that runs the stream's reader on
    # the driver sleeps past Spark's fixed 10 s for connecting back, as on a machine too busy to start it.
    late_once = tmp_path / "late-once"
    python = tmp_path / "python"
    python.write_text(
        "#!/bin/sh\n"
        'case "$*" in *python_streaming_source_runner*)\n'
        f'  mkdir "{late_once}" 2>/dev/null && sleep 12 ;;\n'
        "esac\n"
        f'exec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    finished = run_bounded_in_own_process(dagger, PYSPARK_PYTHON=str(python), DAGGER_SPARK_MASTER="local[2]")
    assert late_once.is_dir()  # the late worker did start
    assert "a Python worker of the driver was late to connect back; starting the query again" in (
        finished.stderr
    )
    orders = message_class(registry, ORDER)
    written = [orders.FromString(record.value()).order_id for record in kafka.read_all(output)]
    assert sorted(written) == [f"o{index}" for index in range(7)]
