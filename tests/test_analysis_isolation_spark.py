"""Analysis isolation on Spark: queries run by the Analysis engine for `shop`, over two projects with the
same table names and columns, never return a row of `rival`, whose every value is marked
(`tests.analysis_lakes.plant_wide`). The hand-written escapes and legitimate queries of
test_analysis_isolation.py, which the checker's own tests judge through sqlglot alone, run here through the
engine on Spark, where a place sqlglot and Spark read SQL differently would show."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from jobs.analysis.engine import AnalysisEngine, AnalysisError
from jobs.analysis.isolation import TableRef
from jobs.analysis.project import load_projects
from tests.analysis_lakes import is_rivals, plant_wide
from tests.analysis_queries import RIVAL_NAMES, SHOP, Query, query_trees
from tests.test_analysis_isolation import ESCAPES, KINDS, LEGITIMATE, SHOP_TABLES

GENERATED = 25
"""Queries drawn, afresh each run, by each of the two generated tests."""


@pytest.fixture(scope="module")
def engine(spark, postgres, tmp_path_factory) -> AnalysisEngine:
    database_url = f"postgresql://{postgres.user}:{postgres.password}@{postgres.host}:{postgres.port}/{postgres.database}"
    lakes = plant_wide(tmp_path_factory.mktemp("isolation"), database_url)
    engine = AnalysisEngine(spark, load_projects(lakes.folder))
    for project in ("shop", "rival"):
        engine.refresh(project, "top_pages")
    return engine


def result_values(engine: AnalysisEngine, sql: str) -> list[list]:
    """The columns of the query's result as `shop` runs it (by position: a join may repeat a name)."""
    return [column.to_pylist() for column in engine.execute("shop", sql, max_rows=100).rows.columns]


# Seen failing once in a suite run, after many generated queries on the same Spark context, with Spark's
# INTERNAL_ERROR "No CTERelationDef found for CTERelationRef" (a CTE named as the table it reads, in the
# second of two WITHs); on a fresh context it runs. Either way it must end as rows or as an AnalysisError
# (QueryFailed, Spark's reason), never as a py4j error naming a JVM call.
SPARK_INTERNAL_ERROR_ONCE = (
    "(WITH daily_revenue AS (SELECT user_id FROM orders AS t0) SELECT user_id FROM orders AS t0) "
    "UNION ALL (WITH daily_revenue AS (SELECT user_id FROM orders AS t0), "
    "orders AS (SELECT user_id FROM orders AS t0) SELECT user_id FROM orders AS t0)"
)


def test_the_planted_rival_rows_are_seen_by_rival_and_never_by_shop(engine) -> None:
    assert not is_rivals(result_values(engine, "SELECT * FROM pageview JOIN orders USING (user_id)"))
    rival = engine.execute("rival", "SELECT * FROM pageview JOIN orders USING (user_id)").rows
    marked = [column for column in rival.columns if is_rivals(column.to_pylist())]
    assert rival.num_rows == 1 and len(marked) == rival.num_columns - 2  # all but the two `hr` columns


def test_a_query_spark_once_failed_inside_ends_as_its_rows_or_its_reason(engine) -> None:
    try:
        values = result_values(engine, SPARK_INTERNAL_ERROR_ONCE)
    except AnalysisError as error:
        assert not str(error).startswith("query refused: "), error  # it reads only shop's tables
    else:
        assert not is_rivals(values)


def reads_only_shops_tables(query: Query) -> bool:
    """Whether Spark would read only `shop`'s tables, by the strategy's own model of its scoping."""
    return all(
        qualifier in KINDS and TableRef(KINDS[qualifier], name) in SHOP_TABLES
        for qualifier, name in query.reads(frozenset())
    )


def check_generated(engine: AnalysisEngine, query: Query) -> None:
    """A query the model says reads only `shop`'s tables runs, and returns no value of `rival`; any other
    is refused by the checker. An error of Spark's fails either way."""
    sql = query.sql(whole_rows=True)
    if reads_only_shops_tables(query):
        assert not is_rivals(result_values(engine, sql)), sql
    else:
        with pytest.raises(AnalysisError, match=r"^query refused: "):
            result_values(engine, sql)


@settings(max_examples=GENERATED, deadline=None, suppress_health_check=list(HealthCheck))
@given(query_trees(SHOP, (), own_names_only=True))
def test_generated_queries_of_shops_own_tables_run_and_return_only_its_rows(engine, query: Query) -> None:
    assert reads_only_shops_tables(query)
    check_generated(engine, query)


@settings(max_examples=GENERATED, deadline=None, suppress_health_check=list(HealthCheck))
@given(query_trees(SHOP, RIVAL_NAMES))
def test_generated_queries_over_both_projects_names_run_clean_or_are_refused(engine, query: Query) -> None:
    check_generated(engine, query)


@pytest.mark.parametrize(("sql", "named"), ESCAPES, ids=[sql[:60] or "empty" for sql, _ in ESCAPES])
def test_an_escape_is_refused_by_the_engine_too(engine, sql: str, named: str) -> None:
    with pytest.raises(AnalysisError) as refused:
        engine.execute("shop", sql)
    assert named in str(refused.value)


@pytest.mark.parametrize(("sql", "reads"), LEGITIMATE, ids=[sql[:60] for sql, _ in LEGITIMATE])
def test_a_legitimate_query_runs_on_spark_over_shops_tables_alone(engine, sql: str, reads) -> None:
    assert not is_rivals(result_values(engine, sql))
