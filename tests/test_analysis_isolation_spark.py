"""Analysis isolation on Spark: queries run by the Analysis engine for `shop`, over two projects with the
same table names and columns, never return a row of `rival`, whose every value is marked
(`tests.analysis_lakes.plant_wide`). The hand-written escapes and legitimate queries of
test_analysis_isolation.py, which the checker's own tests judge through sqlglot alone, run here through the
engine on Spark, where a place sqlglot and Spark read SQL differently would show."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, example, given, settings

from jobs.analysis.engine import AnalysisEngine, AnalysisError
from jobs.analysis.isolation import TableRef
from jobs.analysis.project import load_projects
from tests.analysis_lakes import is_rivals, plant_wide
from tests.analysis_queries import RIVAL_NAMES, SHOP, Derived, Query, Select, TableName, With, query_trees
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


# The generated test's known failure: in a suite run, after many generated queries on the same Spark
# context, Spark failed it with the INTERNAL_ERROR "No CTERelationDef found for CTERelationRef" (a CTE
# named as the table it reads, in the second of two WITHs). Inlined, it holds no CTE for Spark to lose.
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


def test_the_query_spark_once_failed_inside_returns_its_rows(engine) -> None:
    assert [sorted(column) for column in result_values(engine, SPARK_INTERNAL_ERROR_ONCE)] == [
        ["u1", "u1", "u2", "u2"]
    ]


# Spark 4.3 plans a LIMIT over WITHs nested in two joined derived tables with an INTERNAL_ERROR ("No
# CTERelationDef found for CTERelationRef"), on a fresh session too; the engine's results are always
# limited (it takes the CTEs' bodies and the left side's query being one plan). Isolation inlines
# every CTE, so Spark never plans one.
CTES_IN_JOINED_DERIVED_TABLES = (
    "SELECT l.user_id, r.amount FROM (WITH a AS (SELECT * FROM orders) SELECT * FROM orders) AS l "
    "CROSS JOIN (WITH orders AS (SELECT * FROM orders) SELECT * FROM orders) AS r"
)

SCOPED_CTES = [
    # A CTE's body reads the table of its name, never itself.
    ("WITH orders AS (SELECT * FROM orders WHERE amount > 20) SELECT user_id FROM orders", [["u2"]]),
    # A CTE named like a collection shadows it in its own branch only.
    (
        "(WITH orders AS (SELECT 'x' AS user_id) SELECT user_id FROM orders) "
        "UNION ALL (SELECT user_id FROM orders) ORDER BY user_id",
        [["u1", "u2", "x"]],
    ),
    (
        "SELECT user_id FROM pageview WHERE user_id IN "
        "(WITH orders AS (SELECT 'u3' AS user_id) SELECT user_id FROM orders)",
        [["u3"]],
    ),
    # A nested WITH shadows an outer CTE inside itself; the outer one still holds outside it.
    (
        "WITH x AS (SELECT 'outer' AS s) "
        "SELECT (SELECT s FROM x) AS a, b.s FROM (WITH x AS (SELECT 'inner' AS s) SELECT s FROM x) AS b",
        [["outer"], ["inner"]],
    ),
    # An inner CTE's body sees the outer CTEs; a later CTE reads an earlier one, twice.
    (
        "WITH a AS (SELECT 1 AS n) SELECT * FROM (WITH b AS (SELECT n + 1 AS n FROM a) SELECT n FROM b) AS s",
        [[2]],
    ),
    (
        "WITH big AS (SELECT user_id, amount FROM orders WHERE amount > 20), "
        "pair AS (SELECT b1.user_id, b2.amount FROM big AS b1 JOIN big AS b2 USING (user_id)) "
        "SELECT * FROM pair",
        [["u2"], [30.0]],
    ),
    # Column lists: the CTE's, then the reference's own.
    (
        "WITH t(u, a) AS (SELECT user_id, amount FROM orders) SELECT t.u, a FROM t WHERE a < 20",
        [["u1"], [12.5]],
    ),
    (
        "WITH t(u, a) AS (SELECT user_id, amount FROM orders) SELECT z.p FROM t AS z(p, q) WHERE q > 20",
        [["u2"]],
    ),
]


def test_ctes_in_joined_derived_tables_return_their_rows_under_a_limit(engine) -> None:
    """Twice: on this engine Spark planned it once and failed it from the second time on."""
    for _ in range(2):
        rows = engine.execute("shop", CTES_IN_JOINED_DERIVED_TABLES, max_rows=5).rows
        assert sorted(zip(*(column.to_pylist() for column in rows.columns), strict=True)) == [
            ("u1", 12.5),
            ("u1", 30.0),
            ("u2", 12.5),
            ("u2", 30.0),
        ]


@pytest.mark.parametrize(("sql", "columns"), SCOPED_CTES, ids=[sql[:60] for sql, _ in SCOPED_CTES])
def test_an_inlined_cte_shadows_a_name_only_in_its_scope(engine, sql: str, columns: list[list]) -> None:
    assert result_values(engine, sql) == columns


def orders_by(cte: str) -> With:
    """`WITH <cte> AS (SELECT user_id FROM orders AS t0) SELECT user_id FROM orders AS t0`"""
    orders = Select((TableName("", "orders", upper=False, quoted=False),), None)
    return With(((cte, orders),), orders)


CTES_IN_JOINED_DERIVED_TABLES_GENERATED = Select(
    (Derived(orders_by("daily_revenue")), Derived(orders_by("orders"))), None
)
"""The generated test's known failure, from a suite's Hypothesis database (Spark's INTERNAL_ERROR)."""


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
@example(CTES_IN_JOINED_DERIVED_TABLES_GENERATED)
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
