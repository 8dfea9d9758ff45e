"""Daggers on a standalone Spark cluster (`tests/servers/spark_cluster.py`: a master, two one-core workers
whose Python has none of the project's packages), with the project shipped as a user ships it: the packed
environment `build/ship/dagger-env.tar.gz` (`jobs/tools/pack_environment.py`), which `jobs.engine.spark` hands
to a `spark://` master's executors.

Only one SparkContext can live in a Python process, and the suite's local session lives in this one: each
dagger here runs in a process of its own, as the CLI a user runs (`dagger --master spark://... run|sql`) or
as a Dagster deployment's run (the driver-kill harness). Every check compares exact rows out with the rows
put in. The cluster's tests share this file so that a parallel run (pytest-xdist, one file per worker)
starts one cluster.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.project import EXAMPLE_DAGGER, PROJECT_ROOT
from jobs.tools.generator import BOOKING_MESSAGE, booking_batch
from tests.conftest import (
    REPORT_PROPERTY,
    KafkaHelper,
    kafka_sink,
    kafka_stream,
    message_class,
    order_payloads,
)
from tests.crash_harness import UPFRONT_ORDERS, crash_run, holding_transactions
from tests.crash_kill_plan import KillPlan, kill_tree
from tests.crash_orders import ORDER, SQL, OrderFeed, expected_output
from tests.crash_outputs import Tally, read_kafka_output, read_lake_output
from tests.dagster_deployment import DagsterDeployment
from tests.servers.kafka import ApacheKafka
from tests.servers.spark_cluster import SparkCluster
from tests.test_crash_kills import ONE_KILL_PLAN
from tests.test_dagster_spark_submit import submitting_environment, terminate_then_restart
from tests.test_example_dagger import expected_summary_rows, summary_rows

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


class UnboundedRun:
    """`dagger --master spark://... run --unbounded` in its own process group, its output in a log file:
    a run that ends only when stopped, as a user stops it (Ctrl-C), once a test has seen what it waits for.

    Its executors run the hosts' installed Python (`SparkCluster.driver_environment(installed=True)`):
    what these runs prove is not the shipping, which the example dagger's and the console's tests prove.
    """

    def __init__(self, cluster: SparkCluster, dagger_file: Path, log: Path) -> None:
        self.log = log
        with open(log, "ab") as output:
            self.process = subprocess.Popen(
                [str(DAGGER), "--master", cluster.master_url, "run", "--unbounded", str(dagger_file)],
                cwd=PROJECT_ROOT, env=SparkCluster.driver_environment(installed=True),
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, condition: Callable[[], Any], what: str, poll_s: float = 0.2) -> Any:
        """Polls `condition` until it gives a truthy value; the run must keep running meanwhile (the
        deadline only ends a hung test)."""
        deadline = time.monotonic() + _HUNG_RUN_S
        while not (value := condition()):
            assert self.process.poll() is None, f"the run ended ({self.process.returncode}):\n{self.tail()}"
            assert time.monotonic() < deadline, f"no {what} after {_HUNG_RUN_S:.0f}s:\n{self.tail()}"
            time.sleep(poll_s)
        return value

    def stop(self) -> None:
        """Ctrl-C: the running micro-batch finishes, and the run exits 0."""
        self.process.send_signal(signal.SIGINT)
        assert self.process.wait(timeout=_HUNG_RUN_S) == 0, self.tail()

    def tail(self) -> str:
        return self.output()[-5000:]

    def end(self) -> None:
        if self.process.poll() is None:
            kill_tree(self.process.pid)
            self.process.wait()


_HUNG_RUN_S = 600.0


@pytest.fixture
def unbounded_runs(cluster: SparkCluster) -> Iterator[Callable[[Path, Path], UnboundedRun]]:
    """Starts unbounded runs on the cluster; any still going when the test ends is killed."""
    runs: list[UnboundedRun] = []

    def start(dagger_file: Path, log: Path) -> UnboundedRun:
        runs.append(UnboundedRun(cluster, dagger_file, log))
        return runs[-1]

    yield start
    for run in runs:
        run.end()


def committed_lake_rows(lake: Path) -> int:
    """Rows in the lake's committed batches so far (0 before its first commit)."""
    return len(read_lake_output(lake).committed) if (lake / "_dagger" / "committed").is_dir() else 0


# The example's rows are proven on `local[2]` (`test_examples.py`), shipping to executors by the window
# aggregation below: only `make soak` runs the example again on the cluster.
@pytest.mark.soak
@pytest.mark.soak_only
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
    assert summary_rows(written) == expected_summary_rows(bookings)


def test_a_window_aggregation_on_the_cluster_writes_each_closed_window_once(
    unbounded_runs, kafka, registry, descriptor_set, tmp_path
):
    """Tumbling one-minute windows per customer, their state in the executors' state stores: a window is
    written once the watermark passes its end, which takes the micro-batch after the one that read it."""
    source = kafka.new_topic("cl-window-in", partitions=2)
    # Orders o0..o239 one second apart (four minutes, customer c), then one at +10 minutes: the watermark
    # passes the first five windows, which are written; the last order's window stays open.
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
    start = 1_700_000_000
    first_minute = start - start % 60  # orders start mid-minute: the first window is short
    expected = []
    for minute in range(5):
        window = first_minute + 60 * minute
        indexes = [i for i in range(240) if window <= start + i < window + 60]
        expected.append(("c", window * 1_000_000, len(indexes), float(sum(indexes))))

    run = unbounded_runs(write_dagger(tmp_path, document), tmp_path / "driver.log")
    run.wait_for(lambda: len(window_rows(lake)) >= len(expected), f"{len(expected)} closed windows")
    run.stop()

    assert window_rows(lake) == expected
    state = tmp_path / "cluster-window.checkpoint" / "state"
    assert any(path.is_file() for path in state.rglob("*")), "no state store files in the checkpoint"


def window_rows(lake: Path) -> list[tuple[str, int, int, float]]:
    """customer_id, window_start (epoch microseconds), orders, amount of every committed window row."""
    committed_folder = lake / "_dagger" / "committed"
    if not committed_folder.is_dir():
        return []
    committed = {int(path.name) for path in committed_folder.iterdir() if path.name.isdigit()}
    tables = [
        pq.read_table(file)
        for file in sorted(lake.rglob("part-b*.parquet"))
        if int(file.name.removeprefix("part-b").split("-", 1)[0]) in committed
    ]
    if not tables:
        return []
    table = pa.concat_tables(tables)
    return sorted(
        zip(
            table["customer_id"].to_pylist(),
            table["window_start"].cast(pa.int64()).to_pylist(),
            table["orders"].to_pylist(),
            table["amount"].to_pylist(),
            strict=True,
        )
    )


# The console's rows are proven on `local[2]`, Python workers on executors by the window aggregation.
@pytest.mark.soak
@pytest.mark.soak_only
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


def run_executor_logs(cluster: SparkCluster, worker: int, earlier: set[Path]) -> list[Path]:
    """The logs of the worker's executors that are not among the `earlier` applications' logs."""
    return [log for log in cluster.executor_logs(worker) if log not in earlier]


def running_task(cluster: SparkCluster, worker: int, earlier: set[Path]) -> str | None:
    """A task the worker's executor has started and not finished (`TID n`), from its log. Earlier
    applications' logs are left out: one whose tasks failed or were cut short lists tasks never finished."""
    started: set[str] = set()
    finished: set[str] = set()
    for log in run_executor_logs(cluster, worker, earlier):
        text = log.read_text(errors="replace")
        started |= set(re.findall(r"Running task \S+ in stage \S+ \(TID (\d+)\)", text))
        finished |= set(re.findall(r"Finished task \S+ in stage \S+ \(TID (\d+)\)", text))
    unfinished = started - finished
    return f"TID {max(unfinished, key=int)}" if unfinished else None


@pytest.fixture
def restores_workers(cluster: SparkCluster) -> Iterator[SparkCluster]:
    """Whatever the test killed is running again afterwards, for the tests after it."""
    yield cluster
    for index, worker in enumerate(cluster.workers):
        if worker.process is None:
            cluster.restart_worker(index)


RETRY = re.compile(r"Running task \d+\.[1-9]\d* in stage \S+ \(TID \d+\)")
"""An executor's log line for a task's second or later attempt (`Running task 0.1 in stage 16.0`)."""


@pytest.fixture
def own_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApacheKafka]:
    """An Apache Kafka only this test freezes."""
    with ApacheKafka(tmp_path_factory.mktemp("loss-kafka")) as broker:
        yield broker


def kill_worker_inside_a_task(
    cluster: SparkCluster, broker: ApacheKafka, run: UnboundedRun, earlier: set[Path]
) -> str:
    """SIGKILLs worker 0 while its executor runs a task, and returns the task. A task is seen in the
    executor's log as it starts, and could end before the kill: so the broker is frozen (SIGSTOP) as soon
    as one is seen, holding every task that reads or writes Kafka. A task that does not (a lake write)
    ends meanwhile, and the attempt is made again on a later task."""
    for _ in range(_KILL_ATTEMPTS):
        run.wait_for(lambda: running_task(cluster, 0, earlier), "a task running on worker 0", poll_s=0.01)
        os.kill(broker.pid, signal.SIGSTOP)
        try:
            time.sleep(_SETTLE_S)  # not a bound on anything: tasks that do not wait on Kafka end meanwhile
            held = running_task(cluster, 0, earlier)
            if held is not None:
                cluster.kill_worker(0)
                return held
        finally:
            os.kill(broker.pid, signal.SIGCONT)  # never leave it frozen, whatever failed
    raise AssertionError(f"no task of worker 0 was held by the frozen broker in {_KILL_ATTEMPTS} attempts")


_KILL_ATTEMPTS = 10
_SETTLE_S = 2.0


@pytest.mark.slow
def test_a_worker_sigkilled_mid_batch_loses_and_duplicates_nothing(
    restores_workers, unbounded_runs, own_broker, registry, descriptor_set, tmp_path, record_property
):
    cluster = restores_workers
    kafka = KafkaHelper(own_broker.bootstrap_servers)
    source, output = kafka.new_topic("cl-loss-in", partitions=2), kafka.new_topic("cl-loss-out")
    feed = OrderFeed(kafka, registry, source)
    feed.produce(3_000)
    expected = expected_output(feed.orders)
    lake = tmp_path / "lake"
    document = orders_dagger(
        tmp_path, kafka, descriptor_set, source, "cluster-loss", sql=SQL, trigger_interval="0s",
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, ORDER, delivery="exactly_once"),
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
        ],
    )  # fmt: skip
    document["streams"][0]["max_records_per_batch"] = 200  # 15 batches: the kill lands mid-run

    earlier_logs = {*cluster.executor_logs(0), *cluster.executor_logs(1)}
    run = unbounded_runs(write_dagger(tmp_path, document), tmp_path / "driver.log")
    # Two committed batches first (both executors warm), then the kill inside a task of worker 0.
    run.wait_for(lambda: (lake / "_dagger" / "committed" / "1").exists(), "two committed batches")
    task = kill_worker_inside_a_task(cluster, own_broker, run, earlier_logs)
    run.wait_for(lambda: committed_lake_rows(lake) >= expected.total(), "every order in the lake")
    run.stop()

    from_kafka = read_kafka_output(kafka, registry, output)
    from_lake = read_lake_output(lake)
    tallies = [
        Tally.of("kafka", f"worker 0 killed running {task}", expected, from_kafka.committed),
        Tally.of("lake", f"worker 0 killed running {task}", expected, from_lake.committed),
    ]
    logs = run_executor_logs(cluster, 1, earlier_logs)
    retried = [
        line for log in logs for line in log.read_text(errors="replace").splitlines() if RETRY.search(line)
    ]
    record_property(REPORT_PROPERTY, "\n".join([*(tally.line() for tally in tallies), *retried[:3]]))
    for tally in tallies:
        assert tally.exact, tally.line()
    assert from_kafka.uncommitted_visible == 0 and not from_kafka.incomplete_markers
    # The kill cost the driver an executor, and a task ran again (attempt 1 or later) on the other one.
    assert re.search(r"Lost executor \d+ on .*worker lost", run.output()), run.tail()
    assert retried, f"no task attempt ran again on worker 1: {logs}"


# --------------------------------------------------------------------------------------------------------
# Drivers launched by a Dagster run with spark-submit (tests/test_dagster_spark_submit.py)
# --------------------------------------------------------------------------------------------------------


def deployment_on(
    cluster: SparkCluster, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest, **environment: str
) -> DagsterDeployment:
    """A Dagster deployment (`dagster dev`) whose runs' sessions use the cluster. Its processes inherit
    this environment: the master, the driver on loopback as the cluster is, and $PYSPARK_PYTHON naming
    this interpreter, as on hosts with the project installed (`SparkCluster.driver_environment`): each
    run is a new application, and these tests prove stops and crashes, not the shipping."""
    monkeypatch.setenv("PYSPARK_PYTHON", sys.executable)
    for name, value in {
        "DAGGER_SPARK_MASTER": cluster.master_url,
        "SPARK_LOCAL_IP": "127.0.0.1",
        **environment,
    }.items():
        monkeypatch.setenv(name, value)
    return request.getfixturevalue("dagster")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_run_submitted_to_the_cluster_stops_on_terminate_and_the_next_resumes_from_its_checkpoint(
    cluster, kafka, registry, descriptor_set, monkeypatch, request
):
    """A run spark-submitted to the cluster streams, stops gracefully on Dagster's terminate (the GraphQL
    mutation the UI's button sends; tests/test_dagster_ui.py clicks it), and the next run resumes from its
    checkpoint (tests/test_dagster_spark_submit.py's `terminate_then_restart`: the mechanism is
    spark-submit's whatever the master, so `local[2]` runs it in `make soak` only)."""
    dagster = deployment_on(
        cluster, monkeypatch, request, **submitting_environment(cluster.master_url, kafka)
    )
    terminate_then_restart(dagster, kafka, registry, descriptor_set)


# --------------------------------------------------------------------------------------------------------
# Driver kills (tests/test_crash_kills.py's harness)
# --------------------------------------------------------------------------------------------------------


# The cluster adds to the crash harness's claim (proven locally through both Kafka connectors) the
# executors' tasks that may be inside an open transaction when their driver dies: `make test` makes the one
# kill that cuts an open transaction by construction, `make soak` five.
CLUSTER_SOAK_PLAN = KillPlan(kills=5, at_kafka_rows=2, in_recovery=1, with_workers=2)


@pytest.fixture
def dagster_env(tmp_path: Path) -> dict[str, str]:
    """The deployments here hold a batch's transactions open while the crash harness makes a kill with
    rows at the broker (the flag file exists only then: other runs never wait)."""
    return holding_transactions(tmp_path)


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.timeout(3600)
def test_sigkilled_drivers_on_a_standalone_cluster_lose_and_duplicate_nothing(
    cluster, kafka, registry, descriptor_set, monkeypatch, request, soak, record_property
):
    """The same harness with the driver in the Dagster run and the executors on the standalone cluster.

    A kill "with workers" SIGKILLs the run worker, its Spark JVM and the Python processes that JVM
    started: on a cluster those are the driver's own (a Python data source's planning), while the Python
    workers of the tasks live under the executors on the workers. Those are not killed: the master ends
    the application's executors once its driver is gone, and a task caught inside a Kafka transaction may
    commit it meanwhile, which the sink's markers must absorb (or fence, at the restart).
    """
    dagster = deployment_on(cluster, monkeypatch, request)
    where = "on a standalone cluster (2 workers x 1 core)"
    # Each run is a new application: its executors fetch and unpack the packed environment (and the
    # project's jars) before the first batch, a minute or more on a busy 2-core machine.
    _, outcome = crash_run(
        dagster, kafka, registry, descriptor_set, CLUSTER_SOAK_PLAN if soak else ONE_KILL_PLAN, where,
        upfront_orders=UPFRONT_ORDERS // 2, start_timeout_s=600, tasks_outlive_driver=True,
    )  # fmt: skip
    outcome.record(record_property)
    outcome.assert_lost_nothing()
