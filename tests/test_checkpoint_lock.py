"""One run per checkpoint: a second launch of a dagger whose checkpoint a running query uses is refused,
from the same process, from another one (the CLI), and from Dagster; a killed holder frees it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from dagster import AssetKey, DagsterInstance, materialize

from dagger_assets.definitions import build_definitions
from dagger_assets.stages import DETERMINISTIC, FAILURE_KIND_TAG
from jobs.model.spec import load_dagger
from jobs.project import PROJECT_ROOT
from jobs.running.runner import DaggerBuildError
from resources import SparkResource, default_resources
from tests.conftest import order_payloads
from tests.dagster_deployment import wait_for, write_orders_dagger


@pytest.fixture
def orders_dagger(tmp_path: Path, kafka, registry, descriptor_set) -> Path:
    topic = kafka.new_topic("locked")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    return write_orders_dagger(
        tmp_path, "locked", kafka.bootstrap_servers, descriptor_set, {"topics": [topic]}
    )


def lock_file(dagger: Path) -> Path:
    return Path(f"{load_dagger(dagger).resolved_checkpoint_location}.lock")


def test_a_second_run_on_a_checkpoint_in_use_is_refused_until_the_first_stops(orders_dagger, start_dagger):
    spec = load_dagger(orders_dagger)
    first = start_dagger(spec)
    first.process_available()
    with pytest.raises(DaggerBuildError) as refused:
        start_dagger(spec)
    assert str(refused.value).startswith(
        f"dagger locked: checkpoint {spec.resolved_checkpoint_location} is in use by a running query "
        f"(dagger locked, process {os.getpid()} on "
    )
    assert "stop that run first, or give this one another checkpoint_location" in str(refused.value)

    first.run.stop()
    second = start_dagger(spec)  # the checkpoint is free again, and the second run resumes from it
    second.process_available()
    assert [report.input_rows for report in second.run.reports if report.input_rows] == []


def test_a_launch_from_dagster_is_refused_while_the_cli_runs_the_dagger_and_a_killed_cli_frees_it(
    orders_dagger, kafka
):
    cli = subprocess.Popen(
        [sys.executable, "-m", "jobs", "run", str(orders_dagger), "--unbounded"],
        cwd=PROJECT_ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        lock = lock_file(orders_dagger)

        def held_by_cli() -> bool:
            try:
                return json.loads(lock.read_text() or "{}").get("pid") == cli.pid
            except (OSError, ValueError):
                return False

        wait_for(held_by_cli, 240, "the CLI run to take the checkpoint")
        definitions = build_definitions(orders_dagger.parent)
        instance = DagsterInstance.ephemeral()
        result = materialize(
            [definitions.get_assets_def(AssetKey(["locked", "sql"]))],
            resources={**default_resources(), "spark": SparkResource(master="local[2]")},
            instance=instance,
            raise_on_error=False,
            run_config={"ops": {"locked_query": {"config": {"bounded": True}}}},
        )
        [failure] = [event for event in result.all_events if event.is_step_failure]
        assert f"is in use by a running query (dagger locked, process {cli.pid} on " in (
            failure.step_failure_data.error.cause.message
        )
        # Refused, not crashed: the restart sensor leaves the run alone.
        assert instance.get_run_by_id(result.run_id).tags[FAILURE_KIND_TAG] == DETERMINISTIC
    finally:
        os.killpg(cli.pid, signal.SIGKILL)
        cli.wait()

    result = materialize(  # the kernel dropped the dead process's lock
        [definitions.get_assets_def(AssetKey(["locked", "sql"]))],
        resources={**default_resources(), "spark": SparkResource(master="local[2]")},
        instance=DagsterInstance.ephemeral(),
        run_config={"ops": {"locked_query": {"config": {"bounded": True}}}},
    )
    assert result.success


def test_a_run_killed_while_writing_its_first_offsets_leaves_nothing_that_stops_the_next(
    orders_dagger, start_dagger
):
    spec = load_dagger(orders_dagger)
    offsets = Path(spec.resolved_checkpoint_location) / "offsets"
    offsets.mkdir(parents=True)
    # What a kill between creating and renaming batch 0's offsets file leaves (seen after a SIGKILL).
    (offsets / ".0.08251eac-e04b-40f3-b51e-66128c36bf8d.tmp").write_bytes(b"")
    (offsets / "..0.08251eac-e04b-40f3-b51e-66128c36bf8d.tmp.crc").write_bytes(b"")
    run = start_dagger(spec)
    run.process_available()
    assert sum(report.input_rows for report in run.run.reports) == 3
