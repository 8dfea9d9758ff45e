"""Analysis isolation on Spark: queries run by the Analysis engine for `shop`, over two projects with the
same table names and columns, never return a row of `rival`, whose every value is marked
(`tests.analysis_lakes.plant_wide`). The hand-written escapes and legitimate queries of
test_analysis_isolation.py, which the checker's own tests judge through sqlglot alone, run here through the
engine on Spark, where a place sqlglot and Spark read SQL differently would show."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from jobs.analysis.engine import AnalysisEngine, AnalysisError
from jobs.analysis.project import load_projects
from tests.analysis_lakes import is_rivals, plant_wide
from tests.analysis_queries import queries_of_shop, queries_over_both_projects
from tests.test_analysis_isolation import ESCAPES, LEGITIMATE

GENERATED = 50
ACCEPTED_AT_LEAST = 0.25
"""Of the generated queries, the share that must be accepted and run: a test whose queries were all
refused would prove nothing about what the accepted ones return."""


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


def test_accepted_generated_queries_over_both_projects_names_never_return_a_rival_value(engine) -> None:
    outcomes = {"ran": 0, "refused": 0, "failed on Spark": 0}

    # Derandomized: how many of the generated queries are the project's own is the generator's doing, and a
    # suite run once drew 9 in 51 (the rest refused, rightly), under the quarter this test asks to run.
    @settings(
        max_examples=GENERATED, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
    )
    @given(st.one_of(queries_over_both_projects(), queries_of_shop()))
    @example(SPARK_INTERNAL_ERROR_ONCE)
    def check(sql: str) -> None:
        try:
            values = result_values(engine, sql)
        except AnalysisError as error:
            outcomes["refused" if str(error).startswith("query refused: ") else "failed on Spark"] += 1
            return
        outcomes["ran"] += 1
        assert not is_rivals(values), sql

    check()
    assert outcomes["ran"] >= ACCEPTED_AT_LEAST * sum(outcomes.values()), outcomes


@pytest.mark.parametrize(("sql", "named"), ESCAPES, ids=[sql[:60] or "empty" for sql, _ in ESCAPES])
def test_an_escape_is_refused_by_the_engine_too(engine, sql: str, named: str) -> None:
    with pytest.raises(AnalysisError) as refused:
        engine.execute("shop", sql)
    assert named in str(refused.value)


@pytest.mark.parametrize(("sql", "reads"), LEGITIMATE, ids=[sql[:60] for sql, _ in LEGITIMATE])
def test_a_legitimate_query_runs_on_spark_over_shops_tables_alone(engine, sql: str, reads) -> None:
    assert not is_rivals(result_values(engine, sql))
