"""A streaming run launched through a real Dagster webserver: it stays in progress, processes records as
they arrive, records observations, and ends CANCELED (after a graceful stop) when terminated."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import yaml
from dagster import AssetKey, DagsterInstance, DagsterRunStatus
from dagster_graphql import DagsterGraphQLClient

from jobs.broker import free_port
from jobs.protoc import PROJECT_ROOT
from tests.conftest import kafka_stream, message_class

_DAGSTER_YAML = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""


def _wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@pytest.fixture
def dagster_home(tmp_path: Path) -> Path:
    home = tmp_path / "dagster_home"
    home.mkdir()
    (home / "dagster.yaml").write_text(_DAGSTER_YAML)
    return home


@pytest.fixture
def webserver(dagster_home: Path, tmp_path: Path) -> Iterator[tuple[DagsterGraphQLClient, Path]]:
    """`dagster-webserver` over the repository's workspace.yaml, reading daggers from a temp folder."""
    daggers = tmp_path / "daggers"
    daggers.mkdir()
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home), "DAGGER_DIR": str(daggers)}
    log = open(tmp_path / "webserver.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-w", "workspace.yaml", "-h", "127.0.0.1",
         "-p", str(port)],
        cwd=PROJECT_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        yield DagsterGraphQLClient("127.0.0.1", port_number=port, timeout=60), daggers
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def _orders(registry, start: int, count: int) -> list[bytes]:
    order = message_class(registry, "dagger.testing.Order")
    payloads = []
    for index in range(start, start + count):
        message = order(order_id=f"o{index}", amount=float(index))
        message.created_at.FromSeconds(1_700_000_000 + index)
        payloads.append(message.SerializeToString())
    return payloads


def test_a_streaming_run_stays_in_progress_and_a_terminate_cancels_it_gracefully(
    webserver, dagster_home, kafka, registry, descriptor_set, tmp_path
):
    client, daggers = webserver
    topic = kafka.new_topic("dagster-streaming")
    kafka.produce(topic, _orders(registry, 0, 10))
    stream = kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )
    (daggers / "orders.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "live-orders",
                "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
                "streams": [stream],
                "sql": "SELECT order_id FROM orders",
                "checkpoint_location": str(tmp_path / "checkpoint"),
                "sinks": [{"kind": "log", "max_rows_per_batch": 1000}],
            }
        )
    )

    def server_up() -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{client._port_number}/server_info", timeout=2):
                return True
        except OSError:
            return False

    _wait_for(server_up, 90, "the webserver")
    run_id = client.submit_job_execution("live_orders_job")

    os.environ["DAGSTER_HOME"] = str(dagster_home)
    instance = DagsterInstance.get()

    def logged_ids() -> list[str]:
        messages = [entry.user_message for entry in instance.all_logs(run_id)]
        lines = [message for message in messages if message.startswith("batch ")]
        return sorted(
            (json.loads(line.split(" | ", 1)[1])["order_id"] for line in lines), key=lambda i: int(i[1:])
        )

    _wait_for(
        lambda: logged_ids() == [f"o{index}" for index in range(10)], 120, "the first records in the run log"
    )
    assert client.get_run_status(run_id) == DagsterRunStatus.STARTED

    kafka.produce(topic, _orders(registry, 10, 5))
    _wait_for(
        lambda: logged_ids() == [f"o{index}" for index in range(15)], 60, "records produced while running"
    )
    assert client.get_run_status(run_id) == DagsterRunStatus.STARTED

    client.terminate_run(run_id)
    _wait_for(
        lambda: client.get_run_status(run_id) == DagsterRunStatus.CANCELED, 60, "the run to be canceled"
    )
    messages = [entry.user_message for entry in instance.all_logs(run_id)]
    assert any("finishing the current micro-batch" in message for message in messages)
    observations = instance.fetch_observations(AssetKey(["live_orders", "sql"]), limit=100).records
    rows = [
        record.asset_observation.metadata["input_rows"].value
        for record in observations
        if record.run_id == run_id
    ]
    assert sum(rows) == 15
