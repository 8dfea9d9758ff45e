"""Dagster runs whose dagger driver is launched with `spark-submit --deploy-mode client` through Dagster
Pipes (`launch: spark_submit` on the `spark` resource): the run worker holds no Spark session, and the run
records the same observations and live checks, stops as gracefully on terminate and restarts from its
checkpoint as an in-process run."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pydantic
import pytest
from dagster import AssetCheckKey, AssetKey, DagsterInstance, DagsterRunStatus, materialize

from dagger_assets.definitions import build_definitions
from dagger_assets.stages import STOPPED_TAG
from dagger_assets.submit import DRIVER_SCRIPT
from resources import default_resources
from resources.spark import SparkLaunch, SparkResource
from tests.conftest import kafka_sink, order_payloads
from tests.crash_orders import ORDER, SQL, START_SECONDS
from tests.crash_outputs import CheckpointState, read_kafka_output, read_lake_output
from tests.dagster_deployment import wait_for, write_orders_dagger

pytestmark = pytest.mark.cluster

SUBMITTED = SparkResource(master="local[2]", launch="spark_submit")


def _ids(count: int, start: int = 0) -> list[str]:
    return [f"o{index}" for index in range(start, start + count)]


def test_the_launch_setting_is_validated_naming_the_field(monkeypatch: pytest.MonkeyPatch):
    with pytest.raises(
        pydantic.ValidationError, match=r"launch\n  Input should be 'in_process' or 'spark_submit'"
    ):
        SparkResource(launch="cluster")
    with pytest.raises(pydantic.ValidationError, match=r"submit.stop_timeout_seconds\n"):
        SparkResource(submit={"stop_timeout_seconds": 0})
    monkeypatch.setenv("DAGGER_SPARK_LAUNCH", "yarn")
    with pytest.raises(ValueError, match=r"launch from \$DAGGER_SPARK_LAUNCH is 'yarn', expected one of"):
        SparkResource().launch_mode()
    monkeypatch.setenv("DAGGER_SPARK_LAUNCH", "spark_submit")
    assert SparkResource().launch_mode() is SparkLaunch.spark_submit
    assert SparkResource(launch="in_process").launch_mode() is SparkLaunch.in_process


def test_the_driver_script_refuses_to_run_outside_a_pipes_session():
    ran = subprocess.run(
        [sys.executable, str(DRIVER_SCRIPT)], capture_output=True, text=True, timeout=120, check=False
    )
    assert ran.returncode == 2
    assert "started outside a Dagster Pipes session" in ran.stderr


def test_a_bounded_submitted_run_reports_its_rows_observations_and_materializations_through_pipes(
    tmp_path: Path, kafka, registry, descriptor_set
):
    topic = kafka.new_topic("submit-bounded")
    kafka.produce(topic, [*order_payloads(registry, 0, 9), b"\xff\xff"])  # 1 of 10 records undecodable
    stream = {"topics": [topic], "invalid_records": {"action": "drop"}}
    write_orders_dagger(tmp_path, "bounded", kafka.bootstrap_servers, descriptor_set, stream)
    definitions = build_definitions(tmp_path)
    instance = DagsterInstance.ephemeral()
    key = AssetKey(["bounded", "sql"])

    result = materialize(
        [definitions.get_assets_def(key)],
        resources={**default_resources(), "spark": SUBMITTED},
        run_config={"ops": {"bounded_query": {"config": {"bounded": True}}}},
        instance=instance,
    )

    messages = [entry.user_message for entry in instance.all_logs(result.run_id)]
    assert any(message.startswith("launching the driver: ") for message in messages)
    rows = [json.loads(message.split(" | ", 1)[1]) for message in messages if message.startswith("batch ")]
    assert [row["order_id"] for row in rows] == _ids(9)  # the log sink's rows, through Pipes logging
    observations = instance.fetch_observations(key, limit=100).records
    assert sum(record.asset_observation.metadata["input_rows"].value for record in observations) == 10
    invalid = [record.asset_observation.metadata["invalid_records"].value for record in observations]
    assert sum(sum(counts.values()) for counts in invalid) == 1
    written = instance.fetch_observations(AssetKey(["bounded", "sink", "0_log"]), limit=100).records
    assert sum(record.asset_observation.metadata["rows_written"].value for record in written) == 9
    materialized = result.asset_materializations_for_node("bounded_query")
    sql = next(event for event in materialized if event.asset_key == key)
    assert sql.metadata["input_rows"].value == 10 and sql.metadata["invalid_records"].value == 1
    columns = sql.metadata["dagster/column_schema"].value.columns  # the driver's result schema
    assert [(column.name, column.type) for column in columns] == [("order_id", "string")]


# --------------------------------------------------------------------------------------------------------
# Through a real deployment (`dagster dev`): terminate, restarts
# --------------------------------------------------------------------------------------------------------


START_S = 600
"""Upper bound on a submitted driver's start and first micro-batch (measured: 50-120 s on 2 loaded cores)."""


def submitting_environment(master: str, kafka) -> dict[str, str]:
    """A deployment whose runs launch their drivers with spark-submit to `master` (the resource's
    defaults); the example dagger reads its broker from the environment."""
    return {
        "DAGGER_SPARK_LAUNCH": "spark_submit",
        "DAGGER_SPARK_MASTER": master,
        "KAFKA_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
    }


@pytest.fixture
def dagster_env(kafka) -> dict[str, str]:
    return submitting_environment("local[2]", kafka)


def _expected(count: int, start: int = 0) -> list[tuple]:
    """The crash harness's SQL over `order_payloads`: customer upper-cased, amount doubled (sorted, as the
    outputs are compared sorted: a multiset, so a duplicate still shows)."""
    return sorted(
        (f"o{index}", "C", 2.0 * index, START_SECONDS + index) for index in range(start, start + count)
    )


SPARK_SUBMIT_CLASS = "org.apache.spark.deploy.SparkSubmit"


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), command)
    return found


def _driver_processes(run_worker: int) -> list[int]:
    """The run worker's spark-submit JVM and, under it, the driver's Python: the Spark driver's processes."""
    processes = _processes()
    jvms = [
        pid
        for pid, (parent, command) in processes.items()
        if parent == run_worker and SPARK_SUBMIT_CLASS in command
    ]
    # A child the JVM is spawning (any subprocess) shows the JVM's own command line until it execs, and
    # that line names driver.py too: the driver is the child that is not a copy of spark-submit's JVM.
    drivers = [
        pid
        for pid, (parent, command) in processes.items()
        if parent in jvms and "jobs/submitted/driver.py" in command and SPARK_SUBMIT_CLASS not in command
    ]
    return [*jvms, *drivers]


def _write_dagger(dagster, kafka, descriptor_set, name: str, source: str, output: str) -> Path:
    lake = dagster.daggers.parent / f"{name}-lake"
    write_orders_dagger(
        dagster.daggers,
        name,
        kafka.bootstrap_servers,
        descriptor_set,
        {"topics": [source]},
        sql=SQL,
        sinks=[
            kafka_sink(kafka.bootstrap_servers, output, ORDER, delivery="exactly_once"),
            {"kind": "parquet", "path": str(lake), "time_column": "created_at"},
            {"kind": "log", "max_rows_per_batch": 1000},
        ],
        checks={"live_interval": "1s"},
    )
    return lake


@pytest.mark.slow
@pytest.mark.soak
@pytest.mark.soak_only  # `make test` runs the same on the standalone cluster (tests/test_spark_cluster.py)
@pytest.mark.timeout(1800)  # two driver starts
def test_a_submitted_run_stops_gracefully_on_terminate_and_the_next_resumes_from_its_checkpoint(
    dagster, kafka, registry, descriptor_set
):
    terminate_then_restart(dagster, kafka, registry, descriptor_set)


def terminate_then_restart(
    dagster,
    kafka,
    registry,
    descriptor_set,
    terminate: Callable[[str], None] | None = None,
    restart: bool = True,
) -> None:
    """A submitted run streams, is terminated (by `terminate`, else through the GraphQL mutation the UI's
    button sends) and stops gracefully (SUCCESS, tagged where it stopped, its driver gone); with `restart`,
    the next run resumes from the checkpoint. Every row is then once in Kafka (read_committed) and the
    lake."""
    source, output = kafka.new_topic("submit-in"), kafka.new_topic("submit-out")
    lake = _write_dagger(dagster, kafka, descriptor_set, "submitted-orders", source, output)
    checkpoint = dagster.daggers / "submitted-orders.checkpoint"
    kafka.produce(source, order_payloads(registry, 0, 10))
    dagster.wait_until_up()
    first = dagster.client.submit_job_execution("submitted_orders_job")

    wait_for(lambda: dagster.logged_order_ids(first) == _ids(10), START_S, "the first records in the run log")
    assert dagster.client.get_run_status(first) == DagsterRunStatus.STARTED
    # The driver is spark-submit's, not the run worker's: the run worker starts no JVM of its own.
    worker = dagster.run_worker_pid(first)
    driver = _driver_processes(worker)
    assert len(driver) == 2, f"run worker {worker}'s children: {_processes()}"
    kafka.produce(source, order_payloads(registry, 10, 5))
    wait_for(lambda: dagster.logged_order_ids(first) == _ids(15), 60, "records produced while running")
    key = AssetKey(["submitted_orders", "sql"])

    def live_check_saw(rows: int) -> bool:
        check = AssetCheckKey(key, "invalid_records_below_threshold")
        record = dagster.instance.get_latest_asset_check_evaluation_record(check)
        evaluation = None if record is None else record.event.dagster_event.event_specific_data
        # Before the first batch's report the check has no counts yet (its metadata is empty).
        seen = None if evaluation is None else evaluation.metadata.get("input_rows")
        return seen is not None and seen.value == rows

    # The run worker judges the checks from the reports the driver sent, while the run streams.
    wait_for(lambda: live_check_saw(15), 60, "a live check over the 15 records")

    (terminate or dagster.stop_run)(first)  # ends SUCCESS, tagged with where it stopped, as in process
    messages = [entry.user_message for entry in dagster.instance.all_logs(first)]
    assert any("finishing the current micro-batch" in message for message in messages)
    stopped = dagster.instance.get_run_by_id(first).tags[STOPPED_TAG]
    assert re.fullmatch(r"stopped after batch \d+, checkpoint at /\S+", stopped), stopped
    assert f"dagger submitted-orders: {stopped}" in messages
    state = CheckpointState.read(checkpoint)
    assert not state.mid_batch and f"after batch {state.committed}," in stopped
    assert not any(pid in _processes() for pid in driver)  # the driver exited
    observations = [
        r for r in dagster.instance.fetch_observations(key, limit=100).records if r.run_id == first
    ]
    assert sum(record.asset_observation.metadata["input_rows"].value for record in observations) == 15
    written = dagster.instance.fetch_observations(
        AssetKey(["submitted_orders", "sink", "0_kafka"]), limit=100
    )
    assert sum(r.asset_observation.metadata["rows_written"].value for r in written.records) == 15

    produced = 15
    if restart:
        kafka.produce(source, order_payloads(registry, 15, 5))  # arrives while no run is alive
        second = dagster.client.submit_job_execution("submitted_orders_job")
        wait_for(lambda: dagster.logged_order_ids(second) == _ids(5, 15), START_S, "the next run's records")
        dagster.stop_run(second)
        produced = 20

    assert sorted(read_kafka_output(kafka, registry, output).committed) == _expected(produced)
    assert sorted(read_lake_output(lake).committed) == _expected(produced)
