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

An OVER over a Top-N's rows (Nexmark q6: the average of each seller's last winning bids), which Flink
refuses (FLINK-19059: its OVER takes only appends), reads an updating input: the Top-N's upserts, a row
replacing the one of its key (the Top-N's PARTITION BY and row number). Its view runs
`FlinkUpdatingOver.java`, whose final table is the OVER computed over the Top-N's final table, and whose
rows are a changelog (the change kind in the hidden column `__change`, `changelog.CHANGE_COLUMN`) that the
SELECTs above it pass on to the sink. The OVER's PARTITION BY are columns of the Top-N's PARTITION BY (so a
row's update stays in its partition), the Top-N's key and row number are among its rows, and nothing but
projections stands between the two or above the OVER.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from jobs.raystack.flink_sql.changelog import CHANGE_COLUMN
from jobs.raystack.flink_sql.errors import FlinkSqlError
from jobs.raystack.flink_sql.intervals import IntervalLiteral
from jobs.raystack.flink_sql.top_n import TopNView
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
    row_keys: tuple[str, ...] = ()
    """The columns by which a row of an updating input (a Top-N's) replaces an earlier one; empty for an
    append-only input. With them the view's rows are a changelog (FlinkUpdatingOver.apply)."""


def extract_over_views(tree: exp.Query, key: str, top_ns: tuple[TopNView, ...] = ()) -> tuple[OverView, ...]:
    """Rewrites each SELECT of OVER aggregates in place to read its OVER view; the views. `top_ns` are the
    Top-N views already extracted, whose upserts an OVER may read."""
    views: list[OverView] = []
    selects = [select for select in tree.find_all(exp.Select) if _own_windows(select)]
    for select in reversed(selects):  # innermost first: an outer SELECT's view holds the inner's query
        views.append(_rewrite(select, f"{_VIEW_PREFIX}{len(views)}", key, top_ns))
    return tuple(views)


def read_by_an_over(window: exp.Window) -> bool:
    """Whether the Top-N of the ROW_NUMBER() `window` is in the FROM of a SELECT of OVER aggregates (which
    then reads its upserts: its view is extracted first)."""
    node = window.parent_select.parent if window.parent_select else None
    while node is not None:
        if isinstance(node, exp.Select) and _own_windows(node):
            return True
        node = node.parent
    return False


def _own_windows(select: exp.Select) -> list[exp.Window]:
    return [
        window
        for window in select.find_all(exp.Window)
        if window.parent_select is select
        and window.arg_key != "windows"  # not WINDOW w AS (...)
        and not isinstance(window.this, exp.RowNumber)  # a Top-N (top_n.py)
    ]


def _rewrite(select: exp.Select, name: str, key: str, top_ns: tuple[TopNView, ...]) -> OverView:
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
    row_keys = _updating_input(select, spec, top_ns, key)
    source_sql = view_source_text(source, select)
    select.set("windows", None)
    select.set("where", None)
    alias = select.args["from_"].this.args.get("alias")
    view = exp.Table(this=exp.to_identifier(name), alias=alias)
    select.set("from_", exp.From(this=view))
    if row_keys:
        _pass_changes_on(select, key)
    return OverView(
        name, source_sql, tuple(keys), time_column, rows_frame, preceding, tuple(functions), tuple(arguments),
        tuple(outputs), row_keys,
    )  # fmt: skip


def _updating_input(
    select: exp.Select, spec: exp.Window, top_ns: tuple[TopNView, ...], key: str
) -> tuple[str, ...]:
    """The row key of the Top-N whose upserts `select`'s OVER reads (its PARTITION BY and row number);
    empty when it reads none. Refuses what would leave a replaced row behind: a filter or join of the
    upserts, a key or row number the OVER's rows do not show, an OVER partition a row could leave."""
    views = {view.name: view for view in top_ns}
    chain: list[exp.Select] = [select]
    read: TopNView | None = None
    while read is None:
        source = chain[-1].args["from_"].this
        if isinstance(source, exp.Table) and source.name in views:
            read = views[source.name]
        elif isinstance(source, exp.Subquery) and isinstance(source.this, exp.Select):
            chain.append(source.this)
        else:
            return ()
    row_key = (*read.keys, read.rank_column)
    what = f"an OVER aggregation over a Top-N's rows (ROW_NUMBER() partitioned by {', '.join(read.keys)})"
    for between in chain:
        for clause in ("joins", "where", "group", "having", "distinct", "laterals"):
            if between.args.get(clause):
                raise FlinkSqlError(
                    f"{key}: {what}: a {clause.upper().rstrip('S')} of the Top-N's updating rows is not "
                    "supported; only projections are"
                )
    for between in chain[1:]:
        shown = {projection.alias_or_name for projection in between.expressions}
        starred = any(isinstance(projection, exp.Star) for projection in between.expressions)
        missing = [column for column in row_key if not starred and column not in shown]
        if missing or set(row_key) & set(read.helpers):
            raise FlinkSqlError(
                f"{key}: {what} needs the Top-N's key and row number ({', '.join(row_key)}) among the rows "
                "it reads, to replace a row by its update"
            )
    partition = spec.args.get("partition_by") or []
    if any(not isinstance(column, exp.Column) or column.name not in read.keys for column in partition):
        raise FlinkSqlError(
            f"{key}: {what} is partitioned by columns of the Top-N's PARTITION BY, so that a row's update "
            "stays in its partition"
        )
    return row_key


def _pass_changes_on(select: exp.Select, key: str) -> None:
    """`select` and the SELECTs above it pass the changelog's kind column on to the query's result; they
    may only project its rows (a subquery's column list names the column too)."""
    node: exp.Expr | None = select
    while node is not None:
        if isinstance(node, exp.Select):
            if node is not select and any(node.args.get(c) for c in ("joins", "where", "group", "having")):
                raise FlinkSqlError(
                    f"{key}: the rows of an OVER aggregation over a Top-N's rows update; only projections "
                    "of them are supported"
                )
            if not any(isinstance(projection, exp.Star) for projection in node.expressions):
                node.select(exp.column(CHANGE_COLUMN), copy=False)
        elif isinstance(node, exp.Subquery) and node.args.get("alias") and node.args["alias"].columns:
            node.args["alias"].append("columns", exp.to_identifier(CHANGE_COLUMN))
        node = node.parent


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
