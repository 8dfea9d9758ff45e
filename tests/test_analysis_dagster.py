"""Materialized tables in Dagster: assets downstream of what their SQL reads, with a schedule and a
freshness policy each, refreshed by materializing them."""

from __future__ import annotations

from pathlib import Path

import yaml
from dagster import AssetKey, DefaultScheduleStatus, materialize

from dagger_assets.analysis import materialized_key
from dagger_assets.definitions import build_definitions
from dagger_assets.lineage import external_key
from jobs.analysis.materialized import Snapshots
from tests.analysis_lakes import plant
from tests.dagster_deployment import write_orders_dagger

CLUSTER = "localhost:9"  # never contacted: building definitions reads the files only

TABLES = [
    {
        "name": "top_pages",
        "refresh_interval": "15m",
        "sql": "SELECT url, count(*) AS views FROM pageview GROUP BY url",
    },
    {
        "name": "big_spenders",
        "refresh_interval": "1d",
        "sql": "SELECT user_id FROM continuous.revenue WHERE spent > 20",
    },
    {
        "name": "buyers",
        "refresh_interval": "2h",
        "description": "Who bought, and which pages they saw most.",
        "sql": """WITH spend AS (SELECT user_id, sum(amount) AS spent FROM orders GROUP BY user_id)
                  SELECT s.user_id, s.spent, t.url FROM spend s
                  JOIN pageview p ON p.user_id = s.user_id
                  JOIN materialized.top_pages t ON t.url = p.url""",
    },
]


def test_materialized_tables_are_assets_with_lineage_schedules_and_freshness(tmp_path: Path, descriptor_set):
    lakes = plant(tmp_path / "data", materialized=TABLES)
    daggers = tmp_path / "daggers"
    daggers.mkdir()
    lakes.folder.rename(daggers / "analysis")
    # A dagger that writes shop's orders lake: the tables reading `orders` are downstream of its sink.
    write_orders_dagger(
        daggers, "orders_lake", CLUSTER, descriptor_set, {"topics": ["orders"]},
        sinks=[{"kind": "parquet", "path": str(lakes.lake / "shop.orders")}],
    )  # fmt: skip
    # A dagger that keeps shop's continuous table `revenue`.
    revenue_table = {"kind": "continuous_table", "project": "shop", "name": "revenue", "key": ["order_id"]}
    write_orders_dagger(
        daggers, "revenue", CLUSTER, descriptor_set, {"topics": ["orders"]},
        sinks=[{**revenue_table, "database": "host=localhost port=9"}],
    )  # fmt: skip
    definitions = build_definitions(daggers)
    graph = definitions.resolve_asset_graph()

    top_pages = graph.get(materialized_key("shop", "top_pages"))
    assert top_pages.parent_keys == {external_key(f"parquet:{lakes.lake}/shop.pageview")}
    buyers = graph.get(materialized_key("shop", "buyers"))
    assert buyers.parent_keys == {
        AssetKey(["orders_lake", "sink", "0_parquet"]),
        top_pages.key,
        *top_pages.parent_keys,
    }
    assert graph.get(materialized_key("shop", "big_spenders")).parent_keys == {
        AssetKey(["revenue", "sink", "0_continuous_table"])
    }
    assert buyers.group_name == "analysis_shop"
    assert "Who bought" in buyers.description
    assert buyers.freshness_policy.fail_window.to_timedelta().total_seconds() == 4 * 3600

    schedules = {schedule.name: schedule for schedule in definitions.schedules}
    assert schedules["refresh_shop_top_pages"].cron_schedule == "*/15 * * * *"
    assert schedules["refresh_shop_buyers"].cron_schedule == "0 */2 * * *"
    assert schedules["refresh_shop_buyers"].default_status == DefaultScheduleStatus.RUNNING


def test_materializing_refreshes_the_snapshot_and_reports_rows_and_columns(spark, tmp_path: Path):
    lakes = plant(tmp_path, materialized=TABLES)
    definitions = build_definitions(tmp_path / "no-daggers", analysis=lakes.folder)
    assets = [
        definitions.resolve_assets_def(materialized_key("shop", name)) for name in ("top_pages", "buyers")
    ]
    result = materialize(assets)  # with the definitions' own Spark resource
    assert result.success
    by_key = {
        materialization.asset_key: materialization.metadata
        for materialization in result.get_asset_materialization_events()
        for materialization in [materialization.materialization]
    }
    assert by_key[materialized_key("shop", "top_pages")]["rows"].value == 3
    assert by_key[materialized_key("shop", "buyers")]["rows"].value == 4  # u1 twice, u2 twice
    columns = by_key[materialized_key("shop", "buyers")]["dagster/column_schema"].value.columns
    assert [column.name for column in columns] == ["user_id", "spent", "url"]
    assert Snapshots(str(lakes.tables), "shop", "buyers").current() is not None


def test_a_broken_project_file_is_a_broken_asset_and_the_rest_loads(tmp_path: Path):
    analysis = tmp_path / "analysis"
    analysis.mkdir()
    every_7m = {"name": "x", "sql": "SELECT 1", "refresh_interval": "7m"}
    document = {"project": "shop", "lake": "l", "tables": "t", "materialized": [every_7m]}
    (analysis / "shop.yaml").write_text(yaml.safe_dump(document))
    graph = build_definitions(tmp_path).resolve_asset_graph()
    broken = graph.get(AssetKey(["broken_daggers", "analysis"]))
    assert "materialized[0].refresh_interval" in broken.description
    assert "must divide an hour" in broken.description
