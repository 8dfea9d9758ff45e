"""A real Dagster deployment for tests: `dagster dev` (webserver, daemon, code server) on a free port, with
a temporary `DAGSTER_HOME` and its own dagger folder."""

from __future__ import annotations

import functools
import http.client
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
from typing import Any

import pytest
import yaml
from dagster import DagsterInstance, DagsterRunStatus, EventLogEntry
from dagster_graphql import DagsterGraphQLClient

from dagger_assets.stages import STOPPED_TAG
from jobs.project import PROJECT_ROOT
from jobs.tools.broker import free_port
from tests.conftest import kafka_stream

# The instance a deployment would use: runs launch at once. Restarts of crashed runs come from the code
# location's restart sensor (with back-off), so Dagster's own run retries stay off.
_DAGSTER_YAML = """
run_coordinator:
  module: dagster._core.run_coordinator
  class: DefaultRunCoordinator
telemetry:
  enabled: false
"""


def write_orders_dagger(
    folder: Path,
    name: str,
    bootstrap_servers: str,
    descriptor_set: Path,
    stream: dict[str, Any],
    **fields: Any,
) -> Path:
    """A dagger file logging the `order_id` of every `dagger.testing.Order`; `stream` holds the stream's
    topic selection and other stream keys, `fields` override top-level keys."""
    document = {
        "name": name,
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "streams": [
            {**kafka_stream(bootstrap_servers, "orders", "dagger.testing.Order", "created_at"), **stream}
        ],
        "sql": "SELECT order_id FROM orders",
        "checkpoint_location": str(folder / f"{name}.checkpoint"),
        "sinks": [{"kind": "log", "max_rows_per_batch": 1000}],
        "restart": {"initial_backoff": "1s"},
        **fields,
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _described(entry: EventLogEntry) -> str:
    """A log entry as a failure message shows it: an event's type (and a failed step's error)."""
    event = entry.dagster_event
    if event is None:
        return entry.user_message
    error = getattr(event.event_specific_data, "error", None)
    if error is None:
        return event.event_type_value
    causes = []
    while error is not None:  # Dagster wraps what the op raised: the innermost cause says what happened
        causes.append(error.message.strip() + "".join(error.stack[-3:]))
        error = error.cause
    return f"{event.event_type_value}: {' <- '.join(causes)}"


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.5) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(poll_s)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


@functools.cache
def _graphql_client(port: int) -> DagsterGraphQLClient:
    return DagsterGraphQLClient("127.0.0.1", port_number=port, timeout=60)


class DagsterDev:
    """`dagster dev` (webserver, daemon, code server) on a free port, its output appended to `log`.

    A port `free_port` found free can be taken by another process before the webserver binds it; the
    webserver then exits with "address already in use". `start` again picks another port."""

    def __init__(self, log: Path, daggers: Path, environment: dict[str, str]) -> None:
        self._log, self._daggers, self.environment = log, daggers, environment
        self._log_start = 0
        self.port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self.start()

    def start(self) -> None:
        self.stop()
        self.port = free_port()
        self._log_start = self._log.stat().st_size if self._log.exists() else 0
        with open(self._log, "ab") as output:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).parent / "dagster"), "dev", "-w", "workspace.yaml",
                 "-h", "127.0.0.1", "-p", str(self.port)],
                cwd=PROJECT_ROOT, env={**os.environ, "DAGGER_DIR": str(self._daggers), **self.environment},
                stdout=output, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip

    def lost_its_port(self) -> bool:
        """Whether the webserver of this start found its port taken."""
        with open(self._log, "rb") as output:
            output.seek(self._log_start)
            return b"address already in use" in output.read()

    def stop(self) -> None:
        """dagster dev and every process it started, at once: a SIGTERM never ended it within 30 s
        (measured), and the instance's files are thrown away with the test's folder."""
        if self.process is not None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
            self.process = None


@dataclass
class DagsterDeployment:
    server: DagsterDev
    daggers: Path
    instance: DagsterInstance

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def client(self) -> DagsterGraphQLClient:
        return _graphql_client(self.port)

    def add_orders_dagger(
        self, name: str, bootstrap_servers: str, topic: str, descriptor_set: Path, **fields: Any
    ) -> None:
        write_orders_dagger(
            self.daggers, name, bootstrap_servers, descriptor_set, {"topics": [topic]}, **fields
        )

    def wait_until_up(self) -> None:
        def up() -> bool:
            if self.server.lost_its_port():
                self.server.start()  # on another port; the daggers are written by now, it loads them too
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/server_info", timeout=2):
                    return True
            except (OSError, http.client.HTTPException):  # the latter: another server holds the port
                return False

        wait_for(up, 120, "the Dagster webserver")

    def stopped(self, run_id: str) -> bool:
        """Whether the run ended as a graceful stop on request: SUCCESS, tagged with where it stopped."""
        run = self.instance.get_run_by_id(run_id)
        return run is not None and run.status == DagsterRunStatus.SUCCESS and STOPPED_TAG in run.tags

    def stop_run(self, run_id: str, timeout_s: float = 60) -> None:
        """Terminates the run as a user would and waits until it has stopped gracefully."""
        problem = self.terminate(run_id, timeout_s)
        if problem is not None:
            raise AssertionError(problem)

    def terminate(self, run_id: str, timeout_s: float = 60) -> str | None:
        """Terminates the run as a user would and waits until it has ended; None if it stopped gracefully,
        else what happened instead."""
        self.client.terminate_run(run_id)
        return self._once_ended(run_id, timeout_s)

    def _once_ended(self, run_id: str, timeout_s: float) -> str | None:
        """Waits until the run has ended; None if it stopped gracefully, else what happened instead."""
        wait_for(lambda: self.instance.get_run_by_id(run_id).is_finished, timeout_s, f"run {run_id} to stop")
        return None if self.stopped(run_id) else self.how_it_ended(run_id)

    def how_it_ended(self, run_id: str) -> str:
        """The run's status, tags and last log entries, for an assertion's message."""
        run = self.instance.get_run_by_id(run_id)
        last_entries = [_described(entry) for entry in self.instance.all_logs(run_id)[-12:]]
        return f"run {run_id} ended {run.status} (tags {run.tags}), not stopped; its log ended {last_entries}"

    def run_worker_pid(self, run_id: str) -> int:
        """The process the run executes in (with the in-process executor, the Spark driver too)."""
        for entry in self.instance.all_logs(run_id):
            match = re.search(r"Executing steps in process \(pid: (\d+)\)", entry.user_message)
            if match:
                return int(match.group(1))
        raise AssertionError(f"run {run_id} logged no process id")

    def sensor_cursor(self, name: str) -> str | None:
        """The cursor a sensor saved at its latest tick (None before its first tick)."""
        for state in self.instance.all_instigator_state():
            if state.instigator_name == name and state.instigator_data is not None:
                return state.instigator_data.cursor
        return None

    def sensor_ticks(self, name: str, after: float | None = None) -> int:
        """How many ticks the daemon has evaluated for a sensor (those after the `after` timestamp)."""
        for state in self.instance.all_instigator_state():
            if state.instigator_name == name:
                return len(
                    self.instance.get_ticks(state.instigator_origin_id, state.selector_id, after=after)
                )
        return 0

    def logged_rows(self, run_id: str) -> list[dict[str, Any]]:
        """The rows the run's log sink wrote, in log order."""
        messages = [entry.user_message for entry in self.instance.all_logs(run_id)]
        lines = [message for message in messages if message.startswith("batch ")]
        return [json.loads(line.split(" | ", 1)[1]) for line in lines]

    def logged_order_ids(self, run_id: str) -> list[str]:
        """Order ids the run's log sink wrote, in log order."""
        return [row["order_id"] for row in self.logged_rows(run_id)]


@pytest.fixture
def dagster_env() -> dict[str, str]:
    """Extra environment of the deployment's processes; a test overrides this fixture to set it."""
    return {}


@pytest.fixture
def dagster_instance_yaml() -> str:
    """The deployment's `dagster.yaml`; a test overrides this fixture to change it."""
    return _DAGSTER_YAML


@pytest.fixture
def dagster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dagster_env: dict[str, str], dagster_instance_yaml: str
) -> Iterator[DagsterDeployment]:
    home, daggers = tmp_path / "dagster_home", tmp_path / "daggers"
    home.mkdir()
    daggers.mkdir()
    (home / "dagster.yaml").write_text(dagster_instance_yaml)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    # The instance's storage is created here, before `dagster dev` starts: two processes creating the same
    # new SQLite database at once can record two schema heads, and `dagster dev` then refuses to start.
    instance = DagsterInstance.get()
    server = DagsterDev(tmp_path / "dagster-dev.log", daggers, dagster_env)
    try:
        yield DagsterDeployment(server, daggers, instance)
    finally:
        server.stop()
