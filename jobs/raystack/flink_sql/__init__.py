"""Flink SQL (as Dagger runs it in `FLINK_SQL_QUERY`) translated to Spark SQL.

The query is parsed once, with Flink's syntax (`dialect`), into a sqlglot tree; every pass rewrites that
tree, and the Spark text is written once at the end (for the query and each of its views). Function calls
reach Spark as written (`jobs.model.sql_tree`), and every node keeps its place in the user's text, so
errors, the translator's and Spark's, name the user's line and column.

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
| `CAST(x AS STRING)` (`TRUE`, `.000`, `{k=v}`)   | `FlinkCastString(x, precision)` (Flink's texts)      |
| `TRUNCATE(x, n)`, `TIMESTAMPADD(unit, n, t)`    | `FlinkTruncate(x, n)`, `FlinkTimestampAdd('unit', n, t)` |
| `TIMESTAMPDIFF(unit, a, b)` (an INT; Calcite's months) | `FlinkTimestampDiff('unit', a, b)`             |
| `STR_TO_MAP(s)` (`k=v` entries)                 | `STR_TO_MAP(s, ',', '=')` (Spark's default: `k:v`)   |
| `, UNNEST(arr) AS t (a, b)`                    | `, LATERAL inline(arr) AS t (a, b)` (one name: explode) |
| `, LATERAL TABLE(fn(x)) AS T (a)`              | `, LATERAL fn(x) AS T (a)`                           |
| `Split(s, regex)` (Dagger's, Java's split)     | `DaggerSplit(s, regex)` (Spark's `split` wins the name) |
| `COUNT(DISTINCT x)` (no DISTINCT aggregates in Spark streams) | `CAST(size(collect_set(x)) AS BIGINT)` |
| `SUM(DISTINCT x)`, `AVG(DISTINCT x)`          | the set's elements added, divided by its size |
| `MIN(DISTINCT x)`, `MAX(DISTINCT x)`          | `MIN(x)`, `MAX(x)`                                   |
| `AGG(DISTINCT x) FILTER (WHERE c)`             | the same over `collect_set(x) FILTER (WHERE c)`      |
| `SUM(x) FILTER (WHERE c)` (AVG too)            | `FlinkSum(CASE WHEN c THEN x END)`                   |
| `SPLIT_INDEX(s, sep, i)`, `INITCAP(s)`         | `FlinkSplitIndex(...)`, `FlinkInitcap(s)`            |
| `JSON_VALUE(j, 'lax $.a' RETURNING INT ...)`   | `CAST(FlinkJsonValue(j, 'lax $.a', 'INT', ...) AS INT)` |
| `GREATEST(a, b)`, `LEAST(a, b)` (NULL: any NULL) | `CASE WHEN a IS NULL OR b IS NULL THEN NULL ELSE ...` |
| `REGEXP_EXTRACT(s, regex, n)` (NULL: no match)  | `FlinkRegexpExtract(s, regex, n)` (Spark's gives '')  |
| `EXTRACT(SECOND FROM t)` (whole seconds)        | `CAST(FLOOR(EXTRACT(SECOND FROM t)) AS BIGINT)`      |
| `EXTRACT(unit FROM t)`, `HOUR(t)`... (BIGINTs)  | `CAST(EXTRACT(unit FROM t) AS BIGINT)`, ...         |
| `FLOOR(t TO MINUTE)`                           | `date_trunc('MINUTE', t)`                            |
| `a[1]`, `m['k']` (arrays count from 1)          | `try_element_at(a, 1)`, `try_element_at(m, 'k')`     |
| `a / b`, `AVG(x)`, `SUM(x)`, `FLOOR(x)`, `CEIL(x)` | `FlinkDivide(a, b)`, `FlinkAvg(x)`... (Flink's types) |
| `SUM(x) OVER (PARTITION BY k ORDER BY rowtime ...)` | `__over_0`, a column of an OVER view (`over`)        |
| `AGG(x) OVER (...)` over a Top-N's rows (FLINK-19059) | an OVER view of updates (a changelog, `__change`) |
| `(SELECT ..., ROW_NUMBER() OVER (...) AS rn ...) WHERE rn <= N` | a Top-N view (`top_n`)                 |
| a WITH clause an OVER or Top-N view reads     | carried into the view's source (`view_sources`)      |
| `SELECT AVG(m) FROM (SELECT MAX(x) AS m ... GROUP BY k) GROUP BY c` | aggregate views (`changelog`)   |
| `GROUP BY w.s, w.e`, a window aggregation's bounds | `GROUP BY w.s, w.e, w.__window` (`window_bounds`)   |
| `PROCTIME()` (a processing-time attribute)     | `current_timestamp()` (the micro-batch's time)        |
| `TABLE(TUMBLE(TABLE t, DESCRIPTOR(p_time), size))` | a processing-time window view (`proctime`)       |
| `JOIN s FOR SYSTEM_TIME AS OF b.p_time AS x`   | `JOIN s AS x` (a stream-static join; `proctime`)      |
| `B.t >= A.t` (a regular join: no interval of `t`s) | `TIMESTAMP_MICROS(UNIX_MICROS(B.t)) >= ...` |

These are found by reading Flink's documentation and by running the same queries on Apache Flink
(`tests/test_flink_oracle.py`); what still differs is listed in the docs' known limits.

The passes, one module each: `dialect` (Flink's syntax read, refusals), `window_tvfs` (window table
functions as group windows), `window_bounds` (an aggregation over a window aggregation's bounds, grouped
by its window too), `flink_forms` (types, casts to strings, functions, UNNEST and LATERAL TABLE; Flink's
functions Spark lacks as the JVM module's, `FlinkFunctions.java`), `regular_joins` (the event-time
comparisons of a join Flink runs as a regular join, hidden from Spark's state eviction), `group_windows`,
`changelog` (aggregations over updating results as views of `FlinkAggregate.java`, which consume and
emit a changelog), `over` (OVER aggregations as views the project's operator computes, `FlinkOver.java`),
`top_n` (Top-N and deduplication by ROW_NUMBER(), as views of `FlinkRank.java`), `typed` (Flink's result
types, chosen by `FlinkTypes.java` once Spark knows the arguments'), with `proctime` (processing-time
attributes, their TUMBLE windows as views of `FlinkProcTimeWindow.java`, lookup joins) before the window
functions; then Dagger's functions (`jobs.model.sql`).
Constructs Spark streams cannot run (ranking functions over rows, MATCH_RECOGNIZE, event-time temporal
joins, processing time outside TUMBLE windows and lookup joins) are refused with the construct named,
before anything starts, and so are calls of Flink's functions that Spark lacks or means otherwise
(`functions`, a table: functions.toml).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from jobs.model.sql import PreparedSql, ReadNames, prepare_tree
from jobs.model.sql_tree import parse_statements
from jobs.raystack.flink_sql.changelog import AggregateView, extract_aggregate_views
from jobs.raystack.flink_sql.dialect import FlinkDialect, Refused
from jobs.raystack.flink_sql.errors import FlinkSqlError, UserText, parse_message
from jobs.raystack.flink_sql.flink_forms import rewrite_flink_forms
from jobs.raystack.flink_sql.group_windows import has_unwindowed_aggregation, rewrite_group_windows
from jobs.raystack.flink_sql.over import OverView, extract_over_views, read_by_an_over
from jobs.raystack.flink_sql.proctime import (
    ProcTimeWindowView,
    extract_proctime_views,
    proctime_attributes,
    refuse_proctime_uses,
    rewrite_proctime_calls,
    rewrite_temporal_joins,
)
from jobs.raystack.flink_sql.regular_joins import hide_regular_join_time_bounds
from jobs.raystack.flink_sql.top_n import TopNView, extract_top_n_views
from jobs.raystack.flink_sql.typed import rewrite_typed
from jobs.raystack.flink_sql.window_bounds import group_by_window_bounds
from jobs.raystack.flink_sql.window_tvfs import rewrite_window_tvfs

__all__ = [
    "AggregateView", "FlinkSqlError", "OperatorView", "OverView", "ProcTimeWindowView", "SparkQuery",
    "TopNView", "translate",
]  # fmt: skip

OperatorView = OverView | TopNView | AggregateView | ProcTimeWindowView
"""A view of the query that one of the project's JVM operators computes."""


@dataclass(frozen=True)
class SparkQuery:
    """A translated query and what the dagger around it needs to know."""

    prepared: PreparedSql = field(repr=False)
    """The query as the SQL stage analyses it (Dagger's functions expanded), with its tree."""
    unwindowed_aggregation: bool
    """An aggregation without a group window (its results change as rows arrive: Spark's update mode)."""
    output_columns: tuple[str, ...]
    """Names of the result's columns, `""` where the query leaves one unnamed."""
    over_views: tuple[OperatorView, ...] = ()
    """The OVER aggregations, Top-Ns, aggregations over updating results and processing-time windows the
    query reads, in order: each a view to register (with the project's operators,
    `jobs.raystack.flink_sql.over_operator`) before the query is analysed."""

    @property
    def sql(self) -> str:
        """The Spark SQL text."""
        return self.prepared.text

    @property
    def changelog(self) -> bool:
        """The result is a changelog: each row carries its change kind (`+I`, `-U`, `+U`, `-D`) in the
        column `__change` (an OVER over a Top-N's rows, `FlinkUpdatingOver.java`)."""
        return any(isinstance(view, OverView) and view.row_keys for view in self.over_views)

    @property
    def upserts(self) -> bool:
        """The result is an upsert stream (a Top-N's, an aggregation's over updating results): a row replaces
        the earlier one of its key."""
        return bool(self.updated_by)

    @property
    def updated_by(self) -> str:
        """What makes the result an upsert stream, as errors name it; `""` when it is not one."""
        if any(isinstance(view, AggregateView) for view in self.over_views):
            return "aggregation over another aggregation's results"
        if self.changelog:
            return "OVER aggregation over a Top-N's rows"
        return "Top-N (ROW_NUMBER())" if any(isinstance(view, TopNView) for view in self.over_views) else ""


def translate(
    flink_sql: str,
    key: str = "FLINK_SQL_QUERY",
    proctime_columns: frozenset[str] = frozenset(),
    rowtime_column: str = "rowtime",
) -> SparkQuery:
    """The Spark SQL of a Flink query; `key` names the setting in errors, `proctime_columns` the streams'
    processing-time attributes (computed columns `PROCTIME()`; the query's own are found in it),
    `rowtime_column` their event-time column (its comparisons in a regular join are hidden from Spark's
    state eviction, `regular_joins`).

    The query is parsed once; the passes rewrite its tree in turn: window table functions become group
    windows, Flink's forms Spark's, group windows Spark's window columns, OVER aggregations and Top-Ns
    views of the project's operators, and the typed pass gives Flink's result types; Dagger's functions
    are expanded last, and the Spark text is written once.
    """
    if not flink_sql.strip():
        raise FlinkSqlError(f"{key} is empty")
    user = UserText(flink_sql, key)
    tree = _parse(user)
    read = ReadNames.of(tree)
    output_columns = tuple(expression.alias_or_name for expression in tree.selects)
    proctime = proctime_attributes(tree, proctime_columns)
    rewrite_temporal_joins(tree, proctime, user)
    proctime_windows = rewrite_window_tvfs(tree, user, proctime)
    group_by_window_bounds(tree)
    refuse_proctime_uses(tree, proctime, user)
    rewrite_proctime_calls(tree, user)
    unwindowed_aggregation = has_unwindowed_aggregation(tree)
    rewrite_flink_forms(tree, user)
    hide_regular_join_time_bounds(tree, rowtime_column)
    tree = rewrite_group_windows(tree, user)
    views: list[OperatorView] = [*extract_aggregate_views(tree, key)]
    if tree.find(exp.Window):
        read_by_over = extract_top_n_views(tree, key, only=read_by_an_over)  # an OVER may read a Top-N
        views += read_by_over
        views += extract_over_views(tree, key, read_by_over)
        views += extract_top_n_views(tree, key, first=len(read_by_over))  # a Top-N may read an OVER view
    over_views = (*extract_proctime_views(tree, proctime_windows), *views)
    return SparkQuery(
        prepared=prepare_tree(rewrite_typed(tree), flink_sql, read),
        unwindowed_aggregation=unwindowed_aggregation,
        output_columns=output_columns,
        over_views=over_views,
    )


def _parse(user: UserText) -> exp.Query:
    try:
        statements = parse_statements(user.text, FlinkDialect)
    except Refused as refused:
        raise user.fail_at(refused.start, refused.reason) from None
    except (ParseError, TokenError) as error:
        raise FlinkSqlError(f"{user.key} cannot be parsed: {parse_message(error)}") from None
    if len(statements) != 1:
        raise FlinkSqlError(f"{user.key} must hold one query, found {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise FlinkSqlError(f"{user.key} must be a query (SELECT ...), not {tree.key.upper()}")
    return tree
