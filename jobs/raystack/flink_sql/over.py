"""OVER aggregations: `AGG(x) OVER (PARTITION BY k ORDER BY rowtime <frame>)` on a stream, as Flink runs
them, by the project's operator (`FlinkOver.java`, a `transformWithState` processor). Spark's own window
functions do not run on streams.

A SELECT with OVER aggregates becomes two parts:

- an **OVER view**: the SELECT's FROM and WHERE, with each aggregate's argument and each partition key
  computed as a column, which the operator reads, and to which it appends a column per aggregate;
- the SELECT itself over that view, each `AGG(x) OVER (...)` replaced by the operator's column.

As in Flink, the aggregates of one SELECT share one window; it is ordered by the time attribute (the
stream's rowtime, ascending), and its frame ends at the current row: `ROWS BETWEEN n PRECEDING`,
`RANGE BETWEEN INTERVAL '...' PRECEDING` or `UNBOUNDED PRECEDING` (the default without a frame is
`RANGE UNBOUNDED PRECEDING`). The aggregates are COUNT, SUM, AVG, MIN and MAX.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from jobs.raystack.flink_sql.errors import FlinkSqlError
from jobs.raystack.flink_sql.intervals import IntervalLiteral
from jobs.raystack.flink_sql.view_sources import view_source_text

UNBOUNDED = -1
"""`preceding` of an UNBOUNDED PRECEDING frame (FlinkOver.UNBOUNDED)."""
_AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
_VIEW_PREFIX = "__flink_over_"


@dataclass(frozen=True)
class OverView:
    """The rows an OVER window reads, and what the operator appends to them (FlinkOver.apply)."""

    name: str
    """The view the query reads the aggregated rows from."""
    source_sql: str
    """The Spark SQL of the rows before the operator: the SELECT's FROM and WHERE, with the arguments
    and keys as columns (and the query's WITH clauses they read)."""
    keys: tuple[str, ...]
    time_column: str
    rows_frame: bool
    """ROWS (a count of rows) or RANGE (an interval of time)."""
    preceding: int
    """Rows, or microseconds, before the current row in the frame; UNBOUNDED for all of them."""
    functions: tuple[str, ...]
    arguments: tuple[str, ...]
    """Each aggregate's argument column, `""` for COUNT(*)."""
    outputs: tuple[str, ...]


def extract_over_views(tree: exp.Query, key: str) -> tuple[OverView, ...]:
    """Rewrites each SELECT of OVER aggregates in place to read its OVER view; the views."""
    views: list[OverView] = []
    selects = [select for select in tree.find_all(exp.Select) if _own_windows(select)]
    for select in reversed(selects):  # innermost first: an outer SELECT's view holds the inner's query
        views.append(_rewrite(select, f"{_VIEW_PREFIX}{len(views)}", key))
    return tuple(views)


def _own_windows(select: exp.Select) -> list[exp.Window]:
    return [
        window
        for window in select.find_all(exp.Window)
        if window.parent_select is select
        and window.arg_key != "windows"  # not WINDOW w AS (...)
        and not isinstance(window.this, exp.RowNumber)  # a Top-N (top_n.py)
    ]


def _rewrite(select: exp.Select, name: str, key: str) -> OverView:
    windows = _own_windows(select)
    for clause in ("group", "having", "joins", "distinct", "laterals"):
        if select.args.get(clause):
            raise FlinkSqlError(
                f"{key}: OVER aggregates are supported in a SELECT over one table or query, without "
                f"{clause.upper().rstrip('S')} beside them"
            )
    named = {window.alias_or_name: window for window in select.args.get("windows") or []}
    specs = [_spec_of(window, named, key) for window in windows]
    if any(_signature(spec) != _signature(specs[0]) for spec in specs):
        raise FlinkSqlError(f"{key}: every OVER aggregate of a SELECT must use the same window, as in Flink")
    spec = specs[0]
    time_column = _time_column(spec, key)
    rows_frame, preceding = _frame(spec, key)
    source = exp.select(exp.Star()).from_(select.args["from_"].this.copy())
    if select.args.get("where"):
        source = source.where(select.args["where"].this.copy())
    keys = [_as_column(source, expression, f"__over_key_{index}") for index, expression in
            enumerate(spec.args.get("partition_by") or [])]  # fmt: skip
    functions, arguments, outputs = [], [], []
    for index, window in enumerate(windows):
        aggregate = window.this
        function = _AGGREGATES.get(type(aggregate))
        if function is None or aggregate.find(exp.Distinct):
            raise FlinkSqlError(
                f"{key}: {aggregate.sql(dialect=Spark)} OVER a window is not supported: COUNT, SUM, AVG, "
                "MIN and MAX are (without DISTINCT)"
            )
        argument = aggregate.this
        functions.append(function)
        is_star = isinstance(argument, exp.Star)
        arguments.append("" if is_star else _as_column(source, argument, f"__over_argument_{index}"))
        outputs.append(f"__over_{index}")
        window.replace(exp.column(outputs[-1]))
    select.set("windows", None)
    select.set("where", None)
    alias = select.args["from_"].this.args.get("alias")
    view = exp.Table(this=exp.to_identifier(name), alias=alias)
    select.set("from_", exp.From(this=view))
    return OverView(
        name, view_source_text(source, select), tuple(keys), time_column, rows_frame, preceding,
        tuple(functions), tuple(arguments), tuple(outputs),
    )  # fmt: skip


def _spec_of(window: exp.Window, named: dict[str, exp.Window], key: str) -> exp.Window:
    """The window itself, or the named window (`OVER w ... WINDOW w AS (...)`) it refers to."""
    if window.args.get("order") or window.args.get("partition_by") or window.args.get("spec"):
        return window
    reference = window.args.get("alias")
    if reference is None or reference.name not in named:
        raise FlinkSqlError(f"{key}: an OVER window needs ORDER BY its time attribute")
    return named[reference.name]


def _signature(spec: exp.Window) -> str:
    return exp.Window(**{part: spec.args.get(part) for part in ("partition_by", "order", "spec")}).sql(
        dialect=Spark
    )


def _time_column(spec: exp.Window, key: str) -> str:
    order = spec.args.get("order")
    orderings = order.expressions if order else []
    if len(orderings) != 1 or not isinstance(orderings[0].this, exp.Column) or orderings[0].args.get("desc"):
        raise FlinkSqlError(
            f"{key}: an OVER window is ordered by its time attribute alone, ascending (ORDER BY rowtime)"
        )
    return orderings[0].this.name


def _frame(spec: exp.Window, key: str) -> tuple[bool, int]:
    """(ROWS or RANGE, how far back) of the window's frame."""
    frame = spec.args.get("spec")
    if frame is None:
        return False, UNBOUNDED
    if str(frame.args.get("end", "")).upper() != "CURRENT ROW" or frame.args.get("start_side") != "PRECEDING":
        raise FlinkSqlError(f"{key}: an OVER window's frame ends at the CURRENT ROW and starts PRECEDING it")
    rows_frame = str(frame.args.get("kind")).upper() == "ROWS"
    start = frame.args.get("start")
    if str(start).upper() == "UNBOUNDED":
        return rows_frame, UNBOUNDED
    if rows_frame:
        if not (isinstance(start, exp.Literal) and start.is_int and int(start.this) >= 0):
            raise FlinkSqlError(f"{key}: a ROWS frame starts a number of rows PRECEDING, not {start.sql()}")
        return True, int(start.this)
    literal = IntervalLiteral.of(start)
    if literal is None:
        raise FlinkSqlError(f"{key}: a RANGE frame starts an INTERVAL PRECEDING, not {start.sql()}")
    try:
        milliseconds = literal.milliseconds()
    except ValueError as error:
        raise FlinkSqlError(f"{key}: the RANGE frame's {error}") from None
    return False, milliseconds * 1000


def _as_column(source: exp.Select, expression: exp.Expression, name: str) -> str:
    """The column of `source` that holds `expression`: the column itself, or one added to it."""
    if isinstance(expression, exp.Column) and not expression.table:
        return expression.name
    source.select(expression.copy().as_(name), copy=False)
    return name
