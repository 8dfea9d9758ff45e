"""A materialized table in the Dagster UI (Debian's Chromium, driven by playwright-core): a user opens the
table's asset page, sees its refresh schedule (humanized cron, the schedule's name and cron in its tooltip,
the schedule's page showing it running) and its freshness policy, clicks "Materialize" and follows the run
to Success, then sees the asset fresh with the row count. The test checks that against the instance (a
materialization from that run with that `rows`) and the table's snapshots (the current one holds exactly
the query's rows). Snapshots replacing snapshots are tested in process (`test_analysis_engine.py`), where
a refresh takes seconds rather than a run's minute. Screenshots land in `test-artifacts/ui-analysis/`."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from dagger_assets.analysis import materialized_key
from jobs.analysis.materialized import Snapshots
from jobs.analysis.project import ANALYSIS_DIR_ENV, refresh_cron
from jobs.project import PROJECT_ROOT
from tests.analysis_lakes import AnalysisLakes, plant
from tests.dagster_deployment import DagsterDeployment

UI_DRIVER = PROJECT_ROOT / "tests" / "ui" / "materialized_refresh.mjs"
ARTIFACTS = PROJECT_ROOT / "test-artifacts" / "ui-analysis"
DRIVER_TIMEOUT_S = 600  # beyond the sum of the driver's own step timeouts, so its message names the step
TABLE = "top_pages"
# Once a day, at midnight UTC: the schedule (running by default) cannot tick during the test unless it
# runs across midnight, and a tick would refresh the snapshot behind the test's back.
INTERVAL = dt.timedelta(days=1)
TOP_PAGES = {
    "name": TABLE,
    "refresh_interval": "1d",
    "sql": "SELECT url, count(*) AS views FROM pageview GROUP BY url",
}
FIRST_ROWS = [("/", 2), ("/cart", 2), ("/help", 1)]  # tests/analysis_lakes.py's shop pageviews


@pytest.fixture
def lakes(tmp_path: Path) -> AnalysisLakes:
    return plant(tmp_path / "analysis_data", materialized=[TOP_PAGES])


@pytest.fixture
def dagster_env(lakes: AnalysisLakes) -> dict[str, str]:
    # The project files exist before `dagster dev` starts, so its code location loads them at start-up.
    return {ANALYSIS_DIR_ENV: str(lakes.folder)}


def refresh_in_the_ui(dagster: DagsterDeployment, round_name: str) -> dict[str, Any]:
    """One user session on the asset page: what the browser showed, as the driver's JSON line."""
    asset_path = "/".join(materialized_key("shop", TABLE).path)
    driven = subprocess.run(
        ["node", str(UI_DRIVER), f"http://127.0.0.1:{dagster.port}", asset_path, str(ARTIFACTS), round_name],
        cwd=UI_DRIVER.parent, capture_output=True, text=True, timeout=DRIVER_TIMEOUT_S,
    )  # fmt: skip
    assert driven.returncode == 0, f"{round_name} refresh: {driven.stderr}\n(screenshots in {ARTIFACTS})"
    return json.loads(driven.stdout.strip().splitlines()[-1])


def check_refresh(
    dagster: DagsterDeployment, seen: dict[str, Any], snapshots: Snapshots, rows: list[tuple[str, int]]
) -> Path:
    """The run the browser followed materialized the table with `rows`, as the snapshot it made current
    holds; returns that snapshot."""
    records = dagster.instance.fetch_materializations(materialized_key("shop", TABLE), limit=100).records
    from_run = [record for record in records if record.run_id == seen["run_id"]]
    assert len(from_run) == 1, f"materializations of run {seen['run_id']}: {from_run}"
    metadata = from_run[0].asset_materialization.metadata
    assert metadata["rows"].value == len(rows)
    current = snapshots.current()
    assert current is not None
    assert metadata["snapshot"].value == str(current)
    assert sorted(pq.read_table(current).to_pylist(), key=lambda row: row["url"]) == [
        {"url": url, "views": views} for url, views in rows
    ]
    # What the browser showed: the run's log line and the asset page's metadata name this snapshot.
    assert seen["run_log_line"] == f"materialized.{TABLE}: snapshot {current.name} is current"
    assert seen["rows_shown"] == str(len(rows))
    assert seen["snapshot_shown"] == str(current)
    assert seen["freshness_after"]["status"] == "Passing"
    return current


# A long browser flow: the refresh and its schedule are proven without a browser (`test_analysis_dagster.py`).
@pytest.mark.soak
@pytest.mark.soak_only
def test_a_user_refreshes_a_materialized_table_in_the_ui(dagster, lakes: AnalysisLakes):
    snapshots = Snapshots(str(lakes.tables), "shop", TABLE)
    dagster.wait_until_up()
    shutil.rmtree(ARTIFACTS, ignore_errors=True)  # a screenshot left by an earlier run would mislead

    first = refresh_in_the_ui(dagster, "first")
    schedule_name = f"refresh_shop_{TABLE}"
    cron = refresh_cron(INTERVAL)
    assert first["schedule"] == {
        "label": "At 12:00 AM UTC",  # the UI's words for the cron
        "href": f"/locations/dagger_assets/schedules/{schedule_name}",
        "tooltip": f"Name: {schedule_name} Cron: ({cron}) Timezone: UTC",
        "running": True,  # DefaultScheduleStatus.RUNNING
        "page_cron": f"Schedule At 12:00 AM UTC ({cron})",
        "target": "Target tables / shop / materialized / top_pages",
    }
    # Never materialized: the policy is there, not yet evaluated; its window is two refresh intervals.
    assert first["freshness_before"] == {
        "status": "Not evaluated",
        "policy": "Fails if more than 2 days since last materialization",
    }
    check_refresh(dagster, first, snapshots, FIRST_ROWS)
    # Only the user's run refreshed it (the schedule did not tick meanwhile).
    records = dagster.instance.fetch_materializations(materialized_key("shop", TABLE), limit=100).records
    assert {record.run_id for record in records} == {first["run_id"]}

    # asset page, schedule tooltip, schedule page, run succeeded, asset materialized
    screenshots = first["screenshots"]
    assert len(screenshots) == 5
    for screenshot in map(Path, screenshots):
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert screenshot.stat().st_size > 20_000  # a rendered page, not a blank one
