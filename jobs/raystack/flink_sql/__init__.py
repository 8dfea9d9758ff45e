"""Flink SQL (as Dagger runs it in `FLINK_SQL_QUERY`) translated to Spark SQL.

The query is read with sqlglot: its lexer gives the tokens with their exact places in the text, its parser
the structure (which SELECT a GROUP BY belongs to, output column names, aggregations). The Spark text is
the user's own text with only the Flink-specific parts replaced, so everything else (functions, spacing,
comments) reaches Spark as written and Spark's error positions stay meaningful.

What changes:

| Flink                                          | Spark                                                |
|------------------------------------------------|------------------------------------------------------|
| `FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))` | `FROM t` (HOP too), and then:                   |
| `GROUP BY window_start, window_end`            | `GROUP BY window(c, 'size')`, `window.start`...      |
| `GROUP BY TUMBLE(t, size)`                     | `GROUP BY window(t, 'size')`                         |
| `GROUP BY HOP(t, slide, size)` (slide first)   | `GROUP BY window(t, 'size', 'slide')`                |
| `GROUP BY SESSION(t, gap)`                     | `GROUP BY session_window(t, 'gap')`                  |
| `TUMBLE_START(...)`, `HOP_END(...)`...         | `window.start`, `window.end` (`session_window.end`)  |
| `TUMBLE_ROWTIME(...) AS x` (HOP_, SESSION_)    | `window_time(window)`, through a wrapping SELECT     |
| `INTERVAL '1' HOUR(2)`, `INTERVAL '10' MINUTES` | `INTERVAL '1' HOUR`, `INTERVAL '10' MINUTE`         |
| `'it''s'`, `'\\d+'` (a backslash is a character) | `'it\\'s'`, `'\\\\d+'`                                  |
| `CAST(x AS VARCHAR)`, `TIMESTAMP(3)`, `BYTES`   | `STRING`, `TIMESTAMP`, `BINARY`                      |
| `, UNNEST(arr) AS t (a, b)`                    | `, LATERAL inline(arr) AS t (a, b)` (one name: explode) |
| `, LATERAL TABLE(fn(x)) AS T (a)`              | `, LATERAL fn(x) AS T (a)`                           |
| `Split(s, regex)` (Dagger's, Java's split)     | `DaggerSplit(s, regex)` (Spark's `split` wins the name) |
| `COUNT(DISTINCT x)` (no DISTINCT aggregates in Spark streams) | `CAST(size(collect_set(x)) AS BIGINT)` |
| `REGEXP_EXTRACT(s, regex, n)` (NULL: no match)  | `FlinkRegexpExtract(s, regex, n)` (Spark's gives '')  |
| `EXTRACT(SECOND FROM t)` (whole seconds)        | `CAST(FLOOR(EXTRACT(SECOND FROM t)) AS BIGINT)`      |
| `EXTRACT(unit FROM t)`, `HOUR(t)`... (BIGINTs)  | `CAST(EXTRACT(unit FROM t) AS BIGINT)`, ...         |
| `FLOOR(t TO MINUTE)`                           | `date_trunc('MINUTE', t)`                            |
| `a[1]`, `m['k']` (arrays count from 1)          | `try_element_at(a, 1)`, `try_element_at(m, 'k')`     |
| `a / b`, `AVG(x)`, `SUM(x)`, `FLOOR(x)`, `CEIL(x)` | `FlinkDivide(a, b)`, `FlinkAvg(x)`... (Flink's types) |
| `SUM(x) OVER (PARTITION BY k ORDER BY rowtime ...)` | `__over_0`, a column of an OVER view (`over`)        |
| `(SELECT ..., ROW_NUMBER() OVER (...) AS rn ...) WHERE rn <= N` | a Top-N view (`top_n`)                 |

These are found by reading Flink's documentation and by running the same queries on Apache Flink
(`tests/test_flink_oracle.py`); what still differs is listed in the docs' known limits.

The passes, one module each: `window_tvfs` (window table functions as group windows, in Flink's syntax),
`lexical` (refusals, then literals, types, intervals and functions), `group_windows` (on the parsed
query), `over` (OVER aggregations as views the project's operator computes, `FlinkOver.java`), `top_n`
(Top-N and deduplication by ROW_NUMBER(), as views of `FlinkRank.java`), `typed`
(Flink's result types, chosen by `FlinkTypes.java` once Spark knows the arguments').
Constructs Spark streams cannot run (ranking functions over rows, MATCH_RECOGNIZE, temporal joins, CUMULATE
windows, processing time) are refused with the construct named, before anything starts, and so are calls
of Flink's functions that Spark lacks or means otherwise (`functions`, a table: functions.toml).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError

from jobs.raystack.flink_sql.group_windows import group_window_edits, has_unwindowed_aggregation
from jobs.raystack.flink_sql.lexical import lexical_edits, refuse_unsupported
from jobs.raystack.flink_sql.over import OverView, extract_over_views
from jobs.raystack.flink_sql.tokens import (
    FlinkDialect,
    FlinkSqlError,
    SparkWindowsDialect,
    TokenScan,
    apply_edits,
    parse_message,
    tokenize,
)
from jobs.raystack.flink_sql.top_n import TopNView, extract_top_n_views
from jobs.raystack.flink_sql.typed import typed_edits
from jobs.raystack.flink_sql.window_tvfs import rewrite_window_tvfs

__all__ = ["FlinkSqlError", "OverView", "SparkQuery", "TopNView", "translate"]


@dataclass(frozen=True)
class SparkQuery:
    """A translated query and what the dagger around it needs to know."""

    sql: str
    unwindowed_aggregation: bool
    """An aggregation without a group window (its results change as rows arrive: Spark's update mode)."""
    output_columns: tuple[str, ...]
    """Names of the result's columns, `""` where the query leaves one unnamed."""
    over_views: tuple[OverView | TopNView, ...] = ()
    """The OVER aggregations and Top-Ns the query reads, in order: each a view to register (with the
    project's operators, `jobs.raystack.flink_sql.over_operator`) before the query is analysed."""

    @property
    def upserts(self) -> bool:
        """The result is an upsert stream (a Top-N's): a row replaces the earlier one of its key."""
        return any(isinstance(view, TopNView) for view in self.over_views)


def translate(flink_sql: str, key: str = "FLINK_SQL_QUERY") -> SparkQuery:
    """The Spark SQL text of a Flink query; `key` names the setting in errors.

    Five passes: window table functions become group windows (in Flink's syntax); the lexical pass
    rewrites literals, types, intervals and table functions (Flink's lexical rules, positions in the
    user's text); the structural one parses that Spark-lexed text and rewrites the group windows; the
    OVER pass moves OVER aggregations into views; the typed one calls the functions that give Flink's
    result types, in the query and in each view.
    """
    if not flink_sql.strip():
        raise FlinkSqlError(f"{key} is empty")
    flink_sql = rewrite_window_tvfs(flink_sql, key)
    flink = TokenScan(flink_sql, tokenize(FlinkDialect, flink_sql, key), key)
    refuse_unsupported(flink)
    lexed = apply_edits(flink_sql, list(lexical_edits(flink)))
    try:
        statements = [statement for statement in sqlglot.parse(lexed, read=SparkWindowsDialect) if statement]
    except (ParseError, TokenError) as error:
        raise FlinkSqlError(f"{key} cannot be parsed: {parse_message(error)}") from None
    if len(statements) != 1:
        raise FlinkSqlError(f"{key} must hold one query, found {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise FlinkSqlError(f"{key} must be a query (SELECT ...), not {tree.key.upper()}")
    spark = TokenScan(lexed, tokenize(SparkWindowsDialect, lexed, key), key)
    windowed = apply_edits(lexed, list(group_window_edits(spark, tree)))
    over_views: tuple[OverView | TopNView, ...] = ()
    if tree.find(exp.Window):
        over_tree, aggregations = extract_over_views(sqlglot.parse_one(windowed, read=Spark), key)
        over_views = (*aggregations, *extract_top_n_views(over_tree, key))  # a Top-N may read an OVER view
        windowed = over_tree.sql(dialect=Spark)
    return SparkQuery(
        sql=_typed(windowed, key),
        unwindowed_aggregation=has_unwindowed_aggregation(tree),
        output_columns=tuple(expression.alias_or_name for expression in tree.selects),
        over_views=tuple(replace(view, source_sql=_typed(view.source_sql, key)) for view in over_views),
    )


def _typed(spark_sql: str, key: str) -> str:
    typed = TokenScan(spark_sql, tokenize(Spark, spark_sql, key), key)
    return apply_edits(spark_sql, list(typed_edits(typed))).strip().rstrip(";").strip()
