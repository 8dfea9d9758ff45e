"""Time partitions of a bounded dagger: each partition reads its own `dt=` files, and a new run of a
partition replaces its output in the Parquet lake and the continuous table, while a restart continues its
generation; Dagster refuses a second run of a partition into a sink that cannot replace it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from dagster import AssetKey, DagsterInstance, DagsterRun, DagsterRunStatus, RunsFilter, materialize
from dagster._core.storage.tags import BACKFILL_ID_TAG

from dagger_assets.definitions import build_definitions
from dagger_assets.tags import GENERATION_TAG, PARTITION_TAG
from jobs.model.spec import DaggerConfigError, parse_dagger
from jobs.model.time_partitions import TimePartitioning
from jobs.project import PROJECT_ROOT
from jobs.sinks.continuous_table.storage import ContinuousTables
from resources import default_resources
from resources.spark import SparkResource
from tests.dagster_deployment import wait_for
from tests.test_sink_continuous_table import table_sink

DAYS = ("2026-11-20", "2026-11-21", "2026-11-22")


def write_day(stream: Path, day: str, orders: dict[str, tuple[float, int]], file: str = "part-0") -> None:
    """Orders `{order_id: (amount, hour)}` created on `day`, as a Parquet stream's `dt=` file."""
    path = stream / f"dt={day}" / f"{file}.parquet"
    path.parent.mkdir(parents=True, exist_ok=True)
    created = [datetime.fromisoformat(f"{day}T{hour:02d}:30:00+00:00") for _, hour in orders.values()]
    table = pa.table(
        {
            "order_id": list(orders),
            "customer_id": ["c"] * len(orders),
            "amount": [amount for amount, _ in orders.values()],
            "created_at": pa.array(created, pa.timestamp("us", tz="UTC")),
        }
    )
    pq.write_table(table, path)


def lake_rows(lake: Path) -> dict[str, list[str]]:
    """Order ids in the lake by `dt=` folder."""
    if not any(lake.rglob("*.parquet")):
        return {}
    table = ds.dataset(lake, format="parquet", partitioning="hive").to_table().to_pylist()
    found: dict[str, list[str]] = {}
    for row in table:
        found.setdefault(str(row["dt"]), []).append(row["order_id"])
    return {day: sorted(ids) for day, ids in sorted(found.items())}


def partitioned_dagger(make_dagger, stream: Path, sinks: list[dict], **fields):
    return make_dagger(
        streams=[
            {
                "kind": "parquet",
                "table": "orders",
                "proto_message": "dagger.testing.Order",
                "event_time_field": "created_at",
                "paths": [str(stream)],
            }
        ],
        sql="SELECT order_id, amount, rowtime FROM orders WHERE amount > 0",
        partitions={"cadence": "daily", "start": DAYS[0], "end": "2026-11-30"},
        sinks=sinks,
        **fields,
    )


# --------------------------------------------------------------------------------------------------------
# The dagger file's `partitions`
# --------------------------------------------------------------------------------------------------------


def test_partitions_name_their_windows_and_refuse_what_they_cannot_partition(make_dagger, tmp_path):
    hourly = TimePartitioning(cadence="hourly", start=datetime(2026, 11, 20, tzinfo=UTC))
    assert hourly.window("2026-11-20-05:00") == (
        datetime(2026, 11, 20, 5, tzinfo=UTC),
        datetime(2026, 11, 20, 6, tzinfo=UTC),
    )
    with pytest.raises(
        ValueError, match=r"'2026-11-20' is not a hourly partition key like '2026-11-20-00:00'"
    ):
        hourly.window("2026-11-20")

    parquet = {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["p"]}
    base = {
        "name": "p",
        "schema_registry": {"descriptor_sets": ["d"]},
        "streams": [parquet],
        "sql": "SELECT * FROM t",
        "sinks": [{"kind": "log"}],
    }
    kafka = {"kind": "kafka", "table": "k", "proto_message": "m", "event_time_field": "e", "topics": ["t"]}
    daily = {"cadence": "daily", "start": "2026-11-20"}
    problems = [
        (
            {"partitions": {"cadence": "hourly", "start": "2026-11-20T00:30"}},
            "partitions: start 2026-11-20T00:30:00+00:00 is not a full hour (UTC)",
        ),
        (
            {"partitions": {"cadence": "weekly", "start": "2026-11-20"}},
            "partitions.cadence: Input should be 'daily' or 'hourly'",
        ),
        (
            {"partitions": daily, "streams": [{**kafka, "bootstrap_servers": "b:9092"}]},
            "'partitions' take Parquet streams, whose dt=/hr= files each partition reads; streams[0] (k) is "
            "kafka",
        ),
    ]
    for change, message in problems:
        with pytest.raises(DaggerConfigError) as refused:
            parse_dagger({**base, **change})
        assert message in str(refused.value), refused.value

    spec = parse_dagger(
        {
            **base,
            "partitions": daily,
            "streams": [{**parquet, "date_ranges": [{"start": "2026-11-21T12:00", "end": "2026-12-31"}]}],
        }
    )
    instance = spec.for_time_partition("2026-11-21", "g1")
    [window] = instance.streams[0].date_ranges
    assert (window.start, window.end) == (
        datetime(2026, 11, 21, 12, tzinfo=UTC),
        datetime(2026, 11, 21, 23, 59, 59, 999999, tzinfo=UTC),
    )
    assert instance.checkpoint_location.endswith("/checkpoints/p/partitions/20261121/g1")
    with pytest.raises(DaggerConfigError, match=r"partition 2026-11-20 is outside stream 't''s date_ranges"):
        spec.for_time_partition("2026-11-20", "g1")
    with pytest.raises(DaggerConfigError, match=r"partition '2026-11-19' is outside the partitions"):
        spec.for_time_partition("2026-11-19", "g1")


# --------------------------------------------------------------------------------------------------------
# Runs of partitions: their files, and a new run replacing the output
# --------------------------------------------------------------------------------------------------------


def test_a_new_run_of_a_partition_replaces_its_output_and_a_restart_continues_it(
    make_dagger,
    start_dagger,
    tmp_path,
    postgres,
):
    stream, lake = tmp_path / "orders", tmp_path / "lake"
    write_day(stream, DAYS[0], {"a1": (1.0, 1), "a2": (2.0, 23)})
    write_day(stream, DAYS[1], {"b1": (3.0, 0), "b2": (0.0, 5), "b3": (4.0, 12)})
    write_day(stream, DAYS[2], {"c1": (5.0, 2)})
    project = f"p_{uuid.uuid4().hex[:12]}"
    spec = partitioned_dagger(
        make_dagger,
        stream,
        [
            {"kind": "parquet", "path": str(lake), "partition_by_hour": False},
            table_sink(postgres.conninfo, project, key=["order_id"]),
        ],
    )
    tables = ContinuousTables(postgres.conninfo)

    def run(day: str, generation: str) -> None:
        assert start_dagger(spec.for_time_partition(day, generation), bounded=True).run.wait()

    def table_rows() -> list[tuple[str, str, float]]:
        rows = tables.read(project, "totals").to_pylist()
        return sorted((row["dagger_partition"], row["order_id"], row["amount"]) for row in rows)

    run(DAYS[1], "g1")
    run(DAYS[0], "g1")
    assert lake_rows(lake) == {DAYS[0]: ["a1", "a2"], DAYS[1]: ["b1", "b3"]}  # each day's files only
    assert table_rows() == [
        (DAYS[0], "a1", 1.0), (DAYS[0], "a2", 2.0), (DAYS[1], "b1", 3.0), (DAYS[1], "b3", 4.0)
    ]  # fmt: skip

    # The day's input changes: b1 is gone, b2 now passes the filter, b4 is new.
    (stream / f"dt={DAYS[1]}" / "part-0.parquet").unlink()
    write_day(stream, DAYS[1], {"b2": (6.0, 5), "b3": (4.0, 12), "b4": (7.0, 20)}, file="part-1")
    run(DAYS[1], "g2")
    assert lake_rows(lake) == {DAYS[0]: ["a1", "a2"], DAYS[1]: ["b2", "b3", "b4"]}
    assert table_rows() == [
        (DAYS[0], "a1", 1.0), (DAYS[0], "a2", 2.0),
        (DAYS[1], "b2", 6.0), (DAYS[1], "b3", 4.0), (DAYS[1], "b4", 7.0),
    ]  # fmt: skip
    names = sorted(path.name for path in (lake / f"dt={DAYS[1]}").glob("*.parquet"))
    assert names == ["part-p20261121-g2-b0000000000-t00000.parquet"], names

    # A restart of generation g2 resumes from its checkpoint: nothing is read again, nothing is dropped.
    run(DAYS[1], "g2")
    assert lake_rows(lake)[DAYS[1]] == ["b2", "b3", "b4"]
    assert [row for row in table_rows() if row[0] == DAYS[1]] == [
        (DAYS[1], "b2", 6.0), (DAYS[1], "b3", 4.0), (DAYS[1], "b4", 7.0)
    ]  # fmt: skip
    assert DAYS[2] not in lake_rows(lake)


def test_the_cli_runs_one_partition_and_refuses_a_partitioned_dagger_without_one(make_dagger, tmp_path):
    stream, lake = tmp_path / "orders", tmp_path / "lake"
    write_day(stream, DAYS[0], {"a1": (1.0, 1)})
    write_day(stream, DAYS[2], {"c1": (5.0, 2), "c2": (6.0, 3)})
    spec = partitioned_dagger(make_dagger, stream, [{"kind": "parquet", "path": str(lake)}])
    dagger_file = tmp_path / "orders.yaml"
    dagger_file.write_text(spec.model_dump_json(exclude_defaults=True))  # JSON is YAML

    def dagger_run(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "jobs", "--master", "local[2]", "run", str(dagger_file), *arguments],
            cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    refused = dagger_run()
    assert refused.returncode != 0
    assert "has 'partitions': name the one to run, e.g. --partition 2026-11-20" in refused.stderr
    assert not lake.exists()
    ran = dagger_run("--partition", DAYS[2])
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert lake_rows(lake) == {DAYS[2]: ["c1", "c2"]}


# --------------------------------------------------------------------------------------------------------
# Dagster: a partition's run, and a second one into a sink that cannot replace
# --------------------------------------------------------------------------------------------------------


def test_dagster_refuses_a_second_run_of_a_partition_into_a_sink_that_cannot_replace_it(
    make_dagger, tmp_path, kafka, spark
):
    stream, lake = tmp_path / "orders", tmp_path / "lake"
    write_day(stream, DAYS[1], {"b1": (3.0, 0), "b3": (4.0, 12)})
    topic = kafka.new_topic("partitioned-orders")
    spec = partitioned_dagger(
        make_dagger,
        stream,
        [
            {"kind": "parquet", "path": str(lake)},
            {"kind": "kafka", "topic": topic, "bootstrap_servers": kafka.bootstrap_servers, "format": "json"},
        ],
    )
    folder = tmp_path / "daggers"
    folder.mkdir()
    (folder / "orders.yaml").write_text(spec.model_dump_json(exclude_defaults=True))
    definitions = build_definitions(folder)
    assets = definitions.get_assets_def(AssetKey(["test_dagger", "sql"]))
    instance = DagsterInstance.ephemeral()

    def materialize_day(day: str):
        return materialize(
            [assets],
            partition_key=day,
            resources={**default_resources(), "spark": SparkResource(master="local[2]")},
            instance=instance,
            raise_on_error=False,
        )

    first = materialize_day(DAYS[1])
    assert first.success
    assert instance.get_run_by_id(first.run_id).tags[GENERATION_TAG] == first.run_id[:8]
    assert lake_rows(lake) == {DAYS[1]: ["b1", "b3"]}
    written = [
        json.loads(record.value()) for record in kafka.read_all(topic, isolation_level="read_committed")
    ]
    assert sorted(written, key=lambda row: row["order_id"]) == [
        {"order_id": "b1", "amount": 3.0, "rowtime": f"{DAYS[1]}T00:30:00.000Z"},
        {"order_id": "b3", "amount": 4.0, "rowtime": f"{DAYS[1]}T12:30:00.000Z"},
    ]

    again = materialize_day(DAYS[1])
    assert not again.success
    [failure] = [event for event in again.all_events if event.is_step_failure]
    error = failure.step_failure_data.error
    message = error.cause.message if error.cause else error.message  # Dagster's wrapper, then ours
    assert f"partition {DAYS[1]} ran before (run {first.run_id[:8]})" in message
    assert f"kafka sink '{topic}' cannot replace what it wrote" in message
    assert instance.get_run_by_id(again.run_id).tags["dagger/failure"] == "deterministic"


# --------------------------------------------------------------------------------------------------------
# Backfills in a Dagster deployment: from the UI, then from the command line
# --------------------------------------------------------------------------------------------------------

_BACKFILL_IN_UI = PROJECT_ROOT / "tests" / "ui" / "backfill_partitions.mjs"


@pytest.fixture
def dagster_instance_yaml() -> str:
    """Runs queued and launched one at a time, as docs/dagster.md advises for backfills: each run of a
    partition starts a Spark driver of its own."""
    return """
run_coordinator:
  module: dagster._core.run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: 1
    dequeue_interval_seconds: 1
telemetry:
  enabled: false
"""


@pytest.mark.soak
@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_a_backfill_of_two_days_from_the_ui_and_one_day_again_from_the_cli(dagster, descriptor_set, tmp_path):
    """A user backfills two days in the UI (a browser): each day's run writes that day's rows. The input
    of the second day then changes and `dagster job backfill` runs that day again: the lake holds its new
    rows only, and the first day is untouched."""
    days = DAYS[:2]
    stream, lake = tmp_path / "orders", tmp_path / "lake"
    inputs = {
        day: {f"{day[-2:]}-{n}": (float(n + 1), n) for n in range(index + 1)}
        for index, day in enumerate(days)
    }
    for day, orders in inputs.items():
        write_day(stream, day, orders)
    dagger = {
        "name": "daily-orders",
        "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
        "checkpoint_location": str(tmp_path / "checkpoint"),
        "streams": [
            {"kind": "parquet", "table": "orders", "proto_message": "dagger.testing.Order",
             "event_time_field": "created_at", "paths": [str(stream)]}
        ],
        "sql": "SELECT order_id, amount, rowtime FROM orders",
        "partitions": {"cadence": "daily", "start": DAYS[0], "end": "2026-11-30"},
        "sinks": [{"kind": "parquet", "path": str(lake), "partition_by_hour": False}],
    }  # fmt: skip
    (dagster.daggers / "daily_orders.yaml").write_text(json.dumps(dagger))  # JSON is YAML
    dagster.wait_until_up()

    screenshots = PROJECT_ROOT / "test-artifacts" / "ui-backfill"
    clicked = subprocess.run(
        ["node", str(_BACKFILL_IN_UI), f"http://127.0.0.1:{dagster.port}", "daily_orders/sql",
         days[0], days[-1], str(screenshots)],
        cwd=_BACKFILL_IN_UI.parent, capture_output=True, text=True, timeout=1200,
    )  # fmt: skip
    assert clicked.returncode == 0, f"{clicked.stderr}\n(screenshots in {screenshots})"
    shown = json.loads(clicked.stdout.strip().splitlines()[-1])
    assert shown["partitions_shown"] == "2 partitions"
    [backfill] = dagster.instance.get_backfills()
    assert backfill.backfill_id == shown["backfill_id"]
    runs = dagster.instance.get_runs(RunsFilter(tags={BACKFILL_ID_TAG: backfill.backfill_id}))
    assert sorted(run.tags[PARTITION_TAG] for run in runs) == list(days)
    assert all(run.status == DagsterRunStatus.SUCCESS for run in runs)
    assert lake_rows(lake) == {day: sorted(orders) for day, orders in inputs.items()}

    # The second day's input changes; the command line runs that day again.
    (stream / f"dt={DAYS[1]}" / "part-0.parquet").unlink()
    write_day(stream, DAYS[1], {"21-new": (9.0, 7)}, file="part-1")
    launched = subprocess.run(
        [str(Path(sys.executable).parent / "dagster"), "job", "backfill", "-w", "workspace.yaml",
         "-j", "daily_orders_job", "--partitions", DAYS[1], "--noprompt"],
        cwd=PROJECT_ROOT, env={**os.environ, "DAGGER_DIR": str(dagster.daggers)},
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-3000:]

    def again() -> list[DagsterRun]:
        found = dagster.instance.get_runs(RunsFilter(tags={PARTITION_TAG: DAYS[1]}))
        return [run for run in found if run.run_id not in {earlier.run_id for earlier in runs}]

    wait_for(lambda: bool(again()) and again()[0].is_finished, 600, f"the second run of {DAYS[1]}")
    [second] = again()
    assert second.status == DagsterRunStatus.SUCCESS, dagster.how_it_ended(second.run_id)
    assert lake_rows(lake) == {DAYS[0]: sorted(inputs[DAYS[0]]), DAYS[1]: ["21-new"]}
