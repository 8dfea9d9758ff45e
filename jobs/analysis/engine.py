"""Runs a project's queries on Spark SQL, each on its own session that holds only that project's views.

A query is isolated first (`jobs.analysis.isolation`): parsed, checked, its table names rewritten to
views. Only then does Spark see it, on a new session of the shared Spark context (`newSession`: its own
temporary views, SQL settings and functions), holding one view per table the query reads:

    collection$<name>    the collection's Parquet lake, <lake>/<project>.<collection>
    continuous$<name>    the continuous table, read from PostgreSQL in one snapshot
    materialized$<name>  the materialized table's current snapshot

so two projects' queries running at once never see each other's views, and a view name can never be
typed by a user (a `$` is no identifier of theirs).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession

from jobs.analysis.isolation import IsolatedQuery, ProjectTables, QueryRefused, TableRef, isolate
from jobs.analysis.materialized import Snapshots
from jobs.analysis.project import AnalysisProject
from jobs.engine.results import failure_reason
from jobs.model import sql as sql_stage
from jobs.sinks.continuous_table.storage import ContinuousTables
from jobs.udfs import declared_functions, register_functions
from jobs.udfs.aggregate import AGGREGATE_NAMES

DEFAULT_MAX_ROWS = 10_000


class AnalysisError(ValueError):
    """A query that cannot run: refused, naming a table that holds nothing yet, or failing in Spark."""


class QueryFailed(AnalysisError):
    """A query Spark accepted that failed while computing its rows; the message is Spark's reason."""


@dataclass(frozen=True)
class QueryResult:
    rows: pa.Table
    truncated: bool
    """More rows than `max_rows` matched; `rows` holds the first ones."""


class AnalysisEngine:
    """The projects' queries and refreshes on one Spark context."""

    def __init__(self, spark: SparkSession, projects: Mapping[str, AnalysisProject]) -> None:
        self._spark = spark
        self._projects = dict(projects)
        # Dagger's aggregates are no registered functions: the SQL stage expands their calls.
        dagger_functions = {name.lower() for name in [*declared_functions().names, *AGGREGATE_NAMES]}
        builtins = {function.name.lower() for function in spark.catalog.listFunctions()}
        self._functions = frozenset(builtins | dagger_functions)
        self._continuous_stores: dict[str, ContinuousTables] = {}
        self._lock = threading.Lock()

    @property
    def projects(self) -> Mapping[str, AnalysisProject]:
        return self._projects

    def project(self, name: str) -> AnalysisProject:
        try:
            return self._projects[name]
        except KeyError:
            raise AnalysisError(f"no analysis project {name!r}") from None

    def tables(self, project_name: str) -> ProjectTables:
        """What the project's queries may read now: collections with data in the lake, continuous tables
        in the database, and the materialized tables defined (one not refreshed yet fails when read)."""
        project = self.project(project_name)
        return ProjectTables(
            project=project.project,
            collections=frozenset(_lake_collections(Path(project.lake), project.project)),
            continuous=frozenset(self._continuous(project).names(project.project)),
            materialized=frozenset(table.name for table in project.materialized),
        )

    def isolate(self, project_name: str, sql: str) -> IsolatedQuery:
        return isolate(sql, self.tables(project_name), self._functions)

    def frame(self, project_name: str, sql: str) -> DataFrame:
        """The query as a DataFrame of its own session; AnalysisError when it cannot run."""
        try:
            isolated = self.isolate(project_name, sql)
        except QueryRefused as refused:
            raise AnalysisError(f"query refused: {refused}") from None
        project = self.project(project_name)
        session = self._spark.newSession()
        for table in isolated.tables:
            self._view(session, project, table).createOrReplaceTempView(f"`{table.view_name}`")
        prepared = sql_stage.prepare(isolated.sql)
        register_functions(session, names=sql_stage.named_words(prepared))
        try:
            return sql_stage.analyse(session, prepared)
        except sql_stage.SqlError as error:
            raise AnalysisError(str(error)) from None

    def execute(self, project_name: str, sql: str, max_rows: int = DEFAULT_MAX_ROWS) -> QueryResult:
        frame = self.frame(project_name, sql).limit(max_rows + 1)
        try:
            rows = frame.toArrow()
        except PySparkException as error:
            raise QueryFailed(failure_reason(str(error))) from None
        except Py4JJavaError as error:  # what PySpark does not convert, e.g. Spark's INTERNAL_ERRORs
            raise QueryFailed(_root_cause(error)) from None
        return QueryResult(rows.slice(0, max_rows), rows.num_rows > max_rows)

    def refresh(self, project_name: str, table_name: str) -> Path:
        """Builds the materialized table's new snapshot beside the current one and swaps it in; the
        current snapshot stays when anything fails. Returns the new snapshot's folder."""
        project = self.project(project_name)
        table = project.materialized_table(table_name)
        frame = self.frame(project_name, table.sql)
        return Snapshots(project.tables, project.project, table.name).publish(frame.write.parquet)

    def _view(self, session: SparkSession, project: AnalysisProject, table: TableRef) -> DataFrame:
        if table.kind == "collection":
            path = _collection_path(Path(project.lake), project.project, table.name)
            # Files written before a field was added lack it: every footer is read for the full schema.
            return session.read.option("mergeSchema", "true").parquet(str(path))
        if table.kind == "materialized":
            snapshot = Snapshots(project.tables, project.project, table.name).current()
            if snapshot is None:
                raise AnalysisError(f"materialized.{table.name} has not been refreshed yet")
            return session.read.parquet(str(snapshot))
        return session.createDataFrame(self._continuous(project).read(project.project, table.name))

    def _continuous(self, project: AnalysisProject) -> ContinuousTables | _NoContinuousTables:
        url = project.database_url()
        if not url:
            return _NoContinuousTables()
        with self._lock:
            if url not in self._continuous_stores:
                self._continuous_stores[url] = ContinuousTables(url)
            return self._continuous_stores[url]


class _NoContinuousTables:
    """A project without a database has no continuous tables."""

    def names(self, project: str) -> list[str]:
        return []


def _root_cause(error: Py4JJavaError) -> str:
    """The innermost Java exception's message (py4j's own first line only names the failed call)."""
    cause = error.java_exception
    while cause.getCause() is not None and cause.getCause() != cause:
        cause = cause.getCause()
    return str(cause.getMessage() or cause.toString())


def _collection_path(lake: Path, project: str, collection: str) -> Path:
    return lake / f"{project}.{collection}"


def _lake_collections(lake: Path, project: str) -> list[str]:
    """Collections whose lake folder holds a Parquet file (an empty lake has no schema to read)."""
    if not lake.is_dir():
        return []
    return [
        folder.name.removeprefix(f"{project}.")
        for folder in lake.glob(f"{project}.*")
        if folder.is_dir() and next(folder.rglob("*.parquet"), None) is not None
    ]
