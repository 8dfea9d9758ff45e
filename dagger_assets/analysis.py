"""Materialized tables as assets, refreshed by a schedule, from the UI or in CI, with a freshness policy.

Every materialized table of the analysis project files (`jobs.analysis.project`) is an asset
`tables/<project>/materialized/<name>` of group `analysis_<project>`, downstream of what its SQL reads: the
collections (`collections/<project>/<name>`, else the collection's lake as an external asset), the
continuous tables (the dagger sink that keeps each) and the other materialized tables. A schedule refreshes
it every `refresh_interval`; it is overdue (failing its freshness policy) after two intervals without one.
A refresh swaps in a whole new snapshot, or fails and leaves the last one (`jobs.analysis.materialized`).
"""

from collections.abc import Callable

import pyarrow.parquet as pq
import sqlglot
from dagster import (
    AssetExecutionContext,
    AssetKey,
    AssetsDefinition,
    DefaultScheduleStatus,
    FreshnessPolicy,
    MaterializeResult,
    MetadataValue,
    ScheduleDefinition,
    TableColumn,
    TableSchema,
    asset,
)
from sqlglot import exp
from sqlglot.optimizer.scope import traverse_scope

from dagger_assets.collections import collection_key
from jobs.analysis.engine import AnalysisEngine
from jobs.analysis.project import AnalysisProject, MaterializedTable, refresh_cron
from resources.spark import SparkResource

UpstreamOf = Callable[[str, AssetKey | None], AssetKey]


def materialized_key(project: str, name: str) -> AssetKey:
    return AssetKey(["tables", project, "materialized", name])


def analysis_definitions(
    projects: dict[str, AnalysisProject], upstream_of: UpstreamOf
) -> tuple[list[AssetsDefinition], list[ScheduleDefinition]]:
    """The materialized tables' assets and schedules; `upstream_of(address, fallback)` is the asset that
    writes an address (`parquet:<path>`, `continuous:<project>.<name>`), else `fallback`, else an external
    asset standing for it (`Lineage.source_of`)."""
    assets, schedules = [], []
    for project in projects.values():
        for table in project.materialized:
            table_asset = _materialized_asset(project, table, _deps(project, table, upstream_of))
            assets.append(table_asset)
            schedules.append(
                ScheduleDefinition(
                    name=f"refresh_{project.project}_{table.name}",
                    cron_schedule=refresh_cron(table.refresh_interval),
                    target=table_asset,
                    default_status=DefaultScheduleStatus.RUNNING,
                    description=f"Refreshes materialized.{table.name} of {project.project}.",
                )
            )
    return assets, schedules


def _deps(project: AnalysisProject, table: MaterializedTable, upstream_of: UpstreamOf) -> list[AssetKey]:
    deps = []
    for database, name in referenced_tables(table.sql):
        if database == "materialized":
            deps.append(materialized_key(project.project, name))
        elif database == "continuous":
            deps.append(upstream_of(f"continuous:{project.project}.{name}", None))
        elif not database:  # the lake a dagger writes, else the collection itself
            collection = collection_key(project.project, name)
            deps.append(upstream_of(f"parquet:{project.lake}/{project.project}.{name}", collection))
    return list(dict.fromkeys(deps))


def referenced_tables(sql: str) -> list[tuple[str, str]]:
    """(database, name) of the tables `sql` reads, CTEs left out; [] for SQL that does not parse (the
    refresh reports it)."""
    try:
        tree = sqlglot.parse_one(sql, dialect="spark")
    except sqlglot.errors.SqlglotError:
        return []
    return [
        (source.db, source.name)
        for scope in traverse_scope(tree)
        for source in scope.sources.values()
        if isinstance(source, exp.Table)
    ]


def _materialized_asset(
    project: AnalysisProject, table: MaterializedTable, deps: list[AssetKey]
) -> AssetsDefinition:
    description = table.description or f"materialized.{table.name} of project {project.project}"

    @asset(
        key=materialized_key(project.project, table.name),
        group_name=f"analysis_{project.project}",
        deps=deps,
        kinds={"spark", "parquet"},
        description=f"{description}\n\n```sql\n{table.sql.strip()}\n```",
        freshness_policy=FreshnessPolicy.time_window(fail_window=2 * table.refresh_interval),
        metadata={
            "refresh_interval": str(table.refresh_interval),
            "tables": MetadataValue.path(project.tables),
        },
    )
    def refresh(context: AssetExecutionContext, spark: SparkResource) -> MaterializeResult:
        engine = AnalysisEngine(spark.session(), {project.project: project})
        snapshot = engine.refresh(project.project, table.name)
        context.log.info(f"materialized.{table.name}: snapshot {snapshot.name} is current")
        dataset = pq.ParquetDataset(snapshot)
        return MaterializeResult(
            metadata={
                "rows": sum(fragment.count_rows() for fragment in dataset.fragments),
                "snapshot": MetadataValue.path(str(snapshot)),
                "dagster/column_schema": TableSchema(
                    columns=[TableColumn(field.name, str(field.type)) for field in dataset.schema]
                ),
            }
        )

    return refresh
