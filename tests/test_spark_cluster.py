"""Daggers on a standalone Spark cluster (`tests/servers/spark_cluster.py`: a master, two one-core workers
whose Python has none of the project's packages), with the project shipped as a user ships it: the packed
environment `build/ship/dagger-env.tar.gz` (`jobs/tools/pack_environment.py`), which `jobs.spark` hands
to a `spark://` master's executors.

Only one SparkContext can live in a Python process, and the suite's local session lives in this one: each
dagger here runs as the CLI a user runs, `dagger --master spark://... run|sql`, in a subprocess. Every check
compares exact rows out with the rows put in.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from jobs.codec.protobuf import ProtoEncoder
from jobs.project import EXAMPLE_DAGGER, PROJECT_ROOT
from jobs.tools.generator import BOOKING_MESSAGE, booking_batch
from tests.conftest import KafkaHelper, kafka_sink, kafka_stream, message_class, order_payloads
from tests.crash_harness import (
    ORDER,
    SQL,
    OrderFeed,
    Tally,
    expected_output,
    read_kafka_output,
    read_lake_output,
)
from tests.servers.spark_cluster import SparkCluster

pytestmark = pytest.mark.cluster

DAGGER = Path(sys.executable).parent / "dagger"
PYTHON_UDFS = PROJECT_ROOT / "examples" / "python_udfs"


@pytest.fixture(scope="module")
def cluster(spark_cluster: SparkCluster, shipped_environment: Path) -> SparkCluster:
    """The session's cluster, once the packed environment holds this checkout's code."""
    return spark_cluster


def cli_environment(**extra: str) -> dict[str, str]:
    return SparkCluster.driver_environment(**extra)


def dagger_cli(
    cluster: SparkCluster, *arguments: str, timeout_s: float = 420, **environment: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DAGGER), "--master", cluster.master_url, *arguments],
        cwd=PROJECT_ROOT,
        env=cli_environment(**environment),
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def write_dagger(folder: Path, document: dict[str, Any]) -> Path:
    path = folder / f"{document['name']}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def orders_dagger(
    folder: Path, kafka: KafkaHelper, descriptor_set: Path, source: str, name: str, **fields: Any
) -> dict[str, Any]:
    return {
        "name": name,
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [kafka_stream(kafka.bootstrap_servers, "orders", ORDER, "created_at", topics=[source])],
        "checkpoint_location": str(folder / f"{name}.checkpoint"),
        "watermark_delay": "1s",
        **fields,
    }


def executors_of(output: str) -> set[str]:
    """Executor ids the driver log names (`... (127.0.0.1 executor 1)`), to see both workers used."""
    return set(re.findall(r"executor (\d+)\)", output))


def test_the_example_dagger_on_the_cluster(cluster, kafka, registry, tmp_path):
    source, sink = kafka.new_topic("bookings", partitions=2), kafka.new_topic("booking-summaries")
    bookings = booking_batch(0, 300)
    kafka.produce(source, ProtoEncoder(registry.message(BOOKING_MESSAGE)).encode(bookings).to_pylist())
    # The example as it is, but for its topics, group and checkpoint (and its descriptor set's path).
    document = yaml.safe_load(EXAMPLE_DAGGER.read_text())
    document["schema_registry"]["descriptor_sets"] = [
        str((EXAMPLE_DAGGER.parent / path).resolve())
        for path in document["schema_registry"]["descriptor_sets"]
    ]
    document["streams"][0].update(topics=[source], group_id=f"booking-filter-{source}")
    [summaries_sink] = [
        sink_document for sink_document in document["sinks"] if sink_document["kind"] == "kafka"
    ]
    summaries_sink["topic"] = sink
    document["checkpoint_location"] = str(tmp_path / "checkpoint")
    path = write_dagger(tmp_path, document)

    done = dagger_cli(cluster, "run", "--bounded", str(path), KAFKA_BOOTSTRAP_SERVERS=kafka.bootstrap_servers)
    assert done.returncode == 0, done.stderr[-5000:]

    summary = message_class(registry, "dagger.examples.BookingSummary")
    written = [summary.FromString(record.value()) for record in kafka.read_all(sink)]
    go_ride = bookings.filter(pc.equal(bookings.column("service_type"), "GO_RIDE"))
    expected = zip(
        go_ride.column("order_number").to_pylist(),
        go_ride.column("customer_id").to_pylist(),
        go_ride.column("amount_paid_by_cash").to_pylist(),
        go_ride.column("event_timestamp").cast(pa.int64()).to_pylist(),
        strict=True,
    )
    assert sorted(
        (m.order_number, m.customer_id, m.amount_paid_by_cash, m.event_timestamp.ToMicroseconds())
        for m in written
    ) == sorted(expected)


def test_exactly_once_kafka_and_parquet_on_the_cluster(cluster, kafka, registry, descriptor_set, tmp_path):
    source, output = kafka.new_topic("cl-eo-in", partitions=2), kafka.new_topic("cl-eo-out")
    feed = OrderFeed(kafka, registry, source)
    feed.produce(400)
    lake = tmp_path / "lake"
    document = orders_dagger(
        tmp_path, kafka, descriptor_set, source, "cluster-eo", sql=SQL,
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, ORDER, delivery="exactly_once"),
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
        ],
    )  # fmt: skip
    document["streams"][0]["max_records_per_batch"] = 100

    done = dagger_cli(cluster, "run", "--bounded", str(write_dagger(tmp_path, document)))
    assert done.returncode == 0, done.stderr[-5000:]

    expected = expected_output(feed.orders)
    from_kafka = read_kafka_output(kafka, registry, output)
    from_lake = read_lake_output(lake)
    for tally in (
        Tally.of("kafka", "no kills", expected, from_kafka.committed),
        Tally.of("lake", "no kills", expected, from_lake.committed),
    ):
        assert tally.exact, tally.line()
    assert from_kafka.uncommitted_visible == 0 and not from_kafka.incomplete_markers


def test_a_window_aggregation_keeps_its_state_in_rocksdb_on_the_executors(
    cluster, kafka, registry, descriptor_set, tmp_path
):
    """Tumbling one-minute windows per customer; the state lives in the executors' RocksDB stores."""
    source = kafka.new_topic("cl-window-in", partitions=2)
    # Orders o0..o239 one second apart (four minutes, customer c), then one at +10 minutes: the watermark
    # passes the four windows, which are written; the late window of the last order stays open.
    payloads = order_payloads(registry, 0, 240) + order_payloads(registry, 600, 1)
    kafka.produce(source, payloads, partition=lambda index: index % 2)
    lake = tmp_path / "windows"
    sql = (
        "SELECT customer_id, window.start AS window_start, count(*) AS orders, sum(amount) AS amount "
        "FROM orders GROUP BY window(rowtime, '1 minute'), customer_id"
    )
    document = orders_dagger(
        tmp_path, kafka, descriptor_set, source, "cluster-window", sql=sql,
        sinks=[{"kind": "parquet", "path": str(lake), "time_column": "window_start"}],
    )  # fmt: skip
    path = write_dagger(tmp_path, document)
    done = dagger_cli(cluster, "run", "--bounded", str(path))
    assert done.returncode == 0, done.stderr[-5000:]

    table = read_lake_table(lake)
    rows = sorted(
        zip(
            table["customer_id"].to_pylist(),
            table["window_start"].cast(pa.int64()).to_pylist(),
            table["orders"].to_pylist(),
            table["amount"].to_pylist(),
            strict=True,
        )
    )
    start = 1_700_000_000
    first_minute = start - start % 60  # orders start mid-minute: the first window is short
    expected = []
    for minute in range(5):
        window = first_minute + 60 * minute
        indexes = [i for i in range(240) if window <= start + i < window + 60]
        if indexes:
            expected.append(("c", window * 1_000_000, len(indexes), float(sum(indexes))))
    assert rows == expected
    state = next((tmp_path / "cluster-window.checkpoint").rglob("state"), None)
    assert state is not None and any(state.rglob("*.zip")), "no RocksDB state checkpoint files"


def read_lake_table(lake: Path) -> pa.Table:
    """The committed files of a Parquet lake (`read_lake_output` knows only the orders' columns)."""
    committed = {int(p.name) for p in (lake / "_dagger" / "committed").iterdir() if p.name.isdigit()}
    tables = []
    for file in sorted(lake.rglob("part-b*.parquet")):
        batch = int(file.name.removeprefix("part-b").split("-", 1)[0])
        if batch in committed or batch < max(committed, default=-1):
            tables.append(pq.read_table(file))
    return pa.concat_tables(tables) if tables else pa.table({})


def test_the_sql_console_on_the_cluster(cluster):
    """Dagger's functions and a Python UDF file run in Python workers of both executors."""
    statement = (
        "SELECT id, MULTIPLY(id, 2) AS doubled FROM range(0, 6, 1, 2) ORDER BY id;\n"
        "SELECT driver, DistinctCount(driver) AS drivers, sort_array(CollectArray(km)) AS kms FROM VALUES "
        "('a', 1.5D), ('a', 2.5D), ('b', 4.0D) AS t(driver, km) GROUP BY driver ORDER BY driver"
    )
    done = dagger_cli(cluster, "sql", "--python-udfs", str(PYTHON_UDFS), statement)
    assert done.returncode == 0, done.stderr[-5000:]
    # Rows are the JSON lines; the JVM may print a warning of its own on stdout (a stale class archive).
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert rows == [
        *({"id": i, "doubled": float(2 * i)} for i in range(6)),
        {"driver": "a", "drivers": 1, "kms": [1.5, 2.5]},
        {"driver": "b", "drivers": 1, "kms": [4.0]},
    ]


def test_a_missing_shipment_is_refused_by_name_and_without_it_executors_lack_the_project(cluster, tmp_path):
    missing = tmp_path / "no-such-env.tar.gz"
    refused = dagger_cli(cluster, "sql", "SELECT 1 AS one", DAGGER_SPARK_ARCHIVE=str(missing))
    assert refused.returncode == 2
    assert f"error: the packed environment {missing} for the cluster's executors does not exist" in (
        refused.stderr
    )
    assert "make build/ship/dagger-env.tar.gz" in refused.stderr

    # Shipping nothing on purpose: the workers' own Python has no pyarrow, so Python work fails there.
    # (Spark retries the task four times; one retry keeps this short.)
    unshipped = dagger_cli(
        cluster, "sql", "--python-udfs", str(PYTHON_UDFS),
        "SELECT MULTIPLY(id, 2) AS doubled FROM range(0, 2, 1, 2)",
        DAGGER_SPARK_ARCHIVE="none",
    )  # fmt: skip
    output = unshipped.stderr + unshipped.stdout
    assert unshipped.returncode != 0, output[-4000:]
    assert re.search(r"No module named '(pyarrow|pandas|numpy|jobs)'", output), output[-4000:]


# --------------------------------------------------------------------------------------------------------
# Executor loss
# --------------------------------------------------------------------------------------------------------


def running_task(cluster: SparkCluster, worker: int) -> str | None:
    """A task the worker's executor has started and not finished (`TID n`), from its log."""
    started: set[str] = set()
    finished: set[str] = set()
    for log in cluster.executor_logs(worker):
        text = log.read_text(errors="replace")
        started |= set(re.findall(r"Running task \S+ in stage \S+ \(TID (\d+)\)", text))
        finished |= set(re.findall(r"Finished task \S+ in stage \S+ \(TID (\d+)\)", text))
    unfinished = started - finished
    return f"TID {max(unfinished, key=int)}" if unfinished else None


def wait_for(condition, timeout_s: float, what: str, poll_s: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")


@pytest.fixture
def restores_workers(cluster: SparkCluster) -> Iterator[SparkCluster]:
    """Whatever the test killed is running again afterwards, for the tests after it."""
    yield cluster
    for index, worker in enumerate(cluster.workers):
        if worker.process is None:
            cluster.restart_worker(index)


def test_a_worker_sigkilled_mid_batch_loses_and_duplicates_nothing(
    restores_workers, kafka, registry, descriptor_set, tmp_path, record_property
):
    cluster = restores_workers
    source, output = kafka.new_topic("cl-loss-in", partitions=2), kafka.new_topic("cl-loss-out")
    feed = OrderFeed(kafka, registry, source)
    feed.produce(3_000)
    lake = tmp_path / "lake"
    document = orders_dagger(
        tmp_path, kafka, descriptor_set, source, "cluster-loss", sql=SQL, trigger_interval="0s",
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, ORDER, delivery="exactly_once"),
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
        ],
    )  # fmt: skip
    document["streams"][0]["max_records_per_batch"] = 200  # 15 batches: the kill lands mid-run
    driver_log = tmp_path / "driver.log"
    path = write_dagger(tmp_path, document)
    with open(driver_log, "w") as log:
        driver = subprocess.Popen(
            [str(DAGGER), "--master", cluster.master_url, "run", "--bounded", str(path)],
            cwd=PROJECT_ROOT, env=cli_environment(), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        # Two batches committed first (both executors warm), then the kill as soon as worker 0's executor
        # is seen running a task.
        wait_for(
            lambda: (lake / "_dagger" / "committed" / "1").exists(),
            300,
            "two committed batches",
            poll_s=0.2,
        )
        task = wait_for(lambda: running_task(cluster, 0), 120, "a task running on worker 0", poll_s=0.01)
        cluster.kill_worker(0)
        killed_at = datetime.now(UTC)
        driver.wait(timeout=420)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.wait()
    output_text = driver_log.read_text(errors="replace")
    assert driver.returncode == 0, output_text[-5000:]

    expected = expected_output(feed.orders)
    from_kafka = read_kafka_output(kafka, registry, output)
    from_lake = read_lake_output(lake)
    tallies = [
        Tally.of("kafka", f"worker 0 killed running {task}", expected, from_kafka.committed),
        Tally.of("lake", f"worker 0 killed running {task}", expected, from_lake.committed),
    ]
    lost = re.findall(r"Lost task .*ExecutorLostFailure.*", output_text)
    record_property(
        "report",
        "\n".join([*(t.line() for t in tallies), f"killed at {killed_at:%H:%M:%S}; driver: {lost[:2]}"]),
    )
    for tally in tallies:
        assert tally.exact, tally.line()
    assert from_kafka.uncommitted_visible == 0 and not from_kafka.incomplete_markers
    # The kill cost the driver an executor with a task on it, and the task ran again on the other one.
    assert lost, "the driver lost no task with the executor:\n" + output_text[-3000:]
