"""Streaming runs launched through a real Dagster deployment (`dagster dev`: webserver and daemon).

A run stays in progress while its query streams, processes records as they arrive, records observations,
and ends CANCELED after a graceful stop when terminated; a run whose worker is killed is retried from its
checkpoint with no gap and no repeat.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus, RunsFilter
from dagster_graphql import DagsterGraphQLClient

from jobs.broker import free_port
from jobs.protoc import PROJECT_ROOT
from tests.conftest import kafka_stream, order_payloads

# The instance a deployment would use: runs launch at once, and a run whose worker dies is retried (from
# its checkpoint), while a run whose op failed (bad SQL, missing schema) is not retried in a loop.
_DAGSTER_YAML = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
run_retries:
  enabled: true
  max_retries: 3
  retry_on_asset_or_op_failure: false
telemetry:
  enabled: false
"""


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@dataclass
class DagsterDeployment:
    client: DagsterGraphQLClient
    port: int
    daggers: Path
    instance: DagsterInstance

    def add_orders_dagger(self, name: str, bootstrap_servers: str, topic: str, descriptor_set: Path) -> None:
        stream = kafka_stream(
            bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
        )
        document = {
            "name": name,
            "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
            "streams": [stream],
            "sql": "SELECT order_id FROM orders",
            "checkpoint_location": str(self.daggers.parent / f"{name}-checkpoint"),
            "sinks": [{"kind": "log", "max_rows_per_batch": 1000}],
        }
        (self.daggers / f"{name}.yaml").write_text(yaml.safe_dump(document))

    def wait_until_up(self) -> None:
        def up() -> bool:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2):
                    return True
            except OSError:
                return False

        wait_for(up, 120, "the Dagster webserver")

    def run_worker_pid(self, run_id: str) -> int:
        """The process the run executes in (with the in-process executor, the Spark driver too)."""
        for entry in self.instance.all_logs(run_id):
            match = re.search(r"Executing steps in process \(pid: (\d+)\)", entry.user_message)
            if match:
                return int(match.group(1))
        raise AssertionError(f"run {run_id} logged no process id")

    def logged_order_ids(self, run_id: str) -> list[str]:
        """Order ids the run's log sink wrote, in log order."""
        messages = [entry.user_message for entry in self.instance.all_logs(run_id)]
        lines = [message for message in messages if message.startswith("batch ")]
        return [json.loads(line.split(" | ", 1)[1])["order_id"] for line in lines]


@pytest.fixture
def dagster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[DagsterDeployment]:
    home, daggers = tmp_path / "dagster_home", tmp_path / "daggers"
    home.mkdir()
    daggers.mkdir()
    (home / "dagster.yaml").write_text(_DAGSTER_YAML)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    port = free_port()
    log = open(tmp_path / "dagster-dev.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml", "-h", "127.0.0.1",
         "-p", str(port)],
        cwd=PROJECT_ROOT, env={**os.environ, "DAGGER_DIR": str(daggers)},
        stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    try:
        client = DagsterGraphQLClient("127.0.0.1", port_number=port, timeout=60)
        yield DagsterDeployment(client, port, daggers, DagsterInstance.get())
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # dagster dev and every process it started
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
        log.close()


def _error_chain(error) -> str:
    """An error's message and those of its causes (Dagster wraps the op's own exception)."""
    messages = []
    while error is not None:
        messages.append(error.message)
        error = error.cause
    return "\n".join(messages)


def _ids(count: int, start: int = 0) -> list[str]:
    return [f"o{index}" for index in range(start, start + count)]


def test_a_streaming_run_stays_in_progress_and_a_terminate_cancels_it_gracefully(
    dagster, kafka, registry, descriptor_set
):
    topic = kafka.new_topic("dagster-streaming")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    dagster.add_orders_dagger("live-orders", kafka.bootstrap_servers, topic, descriptor_set)
    dagster.wait_until_up()
    run_id = dagster.client.submit_job_execution("live_orders_job")

    wait_for(lambda: dagster.logged_order_ids(run_id) == _ids(10), 120, "the first records in the run log")
    assert dagster.client.get_run_status(run_id) == DagsterRunStatus.STARTED
    kafka.produce(topic, order_payloads(registry, 10, 5))
    wait_for(lambda: dagster.logged_order_ids(run_id) == _ids(15), 60, "records produced while running")
    assert dagster.client.get_run_status(run_id) == DagsterRunStatus.STARTED

    dagster.client.terminate_run(run_id)
    wait_for(lambda: dagster.client.get_run_status(run_id) == DagsterRunStatus.CANCELED, 60, "cancellation")
    messages = [entry.user_message for entry in dagster.instance.all_logs(run_id)]
    assert any("finishing the current micro-batch" in message for message in messages)
    observations = dagster.instance.fetch_observations(AssetKey(["live_orders", "sql"]), limit=100).records
    rows = [
        record.asset_observation.metadata["input_rows"].value
        for record in observations
        if record.run_id == run_id
    ]
    assert sum(rows) == 15


def test_a_run_whose_worker_is_killed_is_retried_from_its_checkpoint(
    dagster, kafka, registry, descriptor_set
):
    topic = kafka.new_topic("dagster-crash")
    kafka.produce(topic, order_payloads(registry, 0, 10))
    dagster.add_orders_dagger("crashing-orders", kafka.bootstrap_servers, topic, descriptor_set)
    dagster.wait_until_up()
    first_run = dagster.client.submit_job_execution("crashing_orders_job")
    wait_for(lambda: dagster.logged_order_ids(first_run) == _ids(10), 120, "the first run's records")

    worker = dagster.run_worker_pid(first_run)
    os.kill(worker, signal.SIGKILL)
    kafka.produce(topic, order_payloads(registry, 10, 5))  # arrives while no run is alive

    def retry_run() -> str | None:
        runs = dagster.instance.get_runs(RunsFilter(tags={"dagster/parent_run_id": first_run}))
        return runs[0].run_id if runs else None

    wait_for(
        lambda: retry_run() is not None,
        120,
        f"the retry run (first run: {dagster.instance.get_run_by_id(first_run).status})",
    )
    second_run = retry_run()
    wait_for(lambda: dagster.logged_order_ids(second_run) == _ids(5, 10), 120, "the retry's records")
    assert dagster.instance.get_run_by_id(first_run).status == DagsterRunStatus.FAILURE
    assert dagster.logged_order_ids(first_run) + dagster.logged_order_ids(second_run) == _ids(15)
    dagster.client.terminate_run(second_run)
    wait_for(
        lambda: dagster.client.get_run_status(second_run) == DagsterRunStatus.CANCELED, 60, "cancellation"
    )


def test_a_bad_sql_dagger_fails_once_with_the_sql_error_and_is_not_retried(dagster, kafka, descriptor_set):
    topic = kafka.new_topic("dagster-bad-sql")
    dagster.add_orders_dagger("bad-sql", kafka.bootstrap_servers, topic, descriptor_set)
    document = yaml.safe_load((dagster.daggers / "bad-sql.yaml").read_text())
    document["sql"] = "SELECT order_idd FROM orders"
    (dagster.daggers / "bad-sql.yaml").write_text(yaml.safe_dump(document))
    dagster.wait_until_up()
    run_id = dagster.client.submit_job_execution("bad_sql_job")

    wait_for(
        lambda: dagster.client.get_run_status(run_id) == DagsterRunStatus.FAILURE, 120, "the run to fail"
    )
    failures = [
        _error_chain(entry.dagster_event.step_failure_data.error)
        for entry in dagster.instance.all_logs(run_id)
        if entry.dagster_event is not None and entry.dagster_event.is_step_failure
    ]
    assert len(failures) == 1
    assert "SQL error at line 1, column 8 ('order_idd')" in failures[0]
    assert "`order_id`" in failures[0]  # Spark's suggestion
    time.sleep(10)  # the daemon checks failed runs every few seconds: a retry would exist by now
    assert dagster.instance.get_runs(RunsFilter(tags={"dagster/parent_run_id": run_id})) == []
