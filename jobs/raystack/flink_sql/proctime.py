"""Processing time: `PROCTIME()` attributes, TUMBLE windows on them, and lookup joins of bounded side tables.

A processing-time attribute is a column defined as `PROCTIME()`, in a query (`SELECT *, PROCTIME() AS
p_time FROM bid`) or as a stream's computed column (a script's `p_time AS PROCTIME()`, which is
`current_timestamp()`). Its value is Spark's `current_timestamp()`: the time of the row's micro-batch,
where Flink reads the wall clock for each row. What the attribute may drive:

- a TUMBLE window aggregation, `FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(p_time), size)) GROUP BY
  window_start, window_end, k`: Flink emits each window when the wall clock passes its end. The
  aggregation becomes a **processing-time window view**, computed by the project's operator
  (`FlinkProcTimeWindow.java`): the view's source is the SELECT's FROM and WHERE with each GROUP BY key and
  aggregate argument as a column, and the SELECT reads the operator's rows, each key and aggregate replaced
  by its column. The aggregates are COUNT, SUM, AVG, MIN and MAX, as for OVER windows. A bounded run
  ends with its input as Flink's does: the windows the wall clock has passed come out, those still open
  are dropped.
- a temporal join of a bounded table, `JOIN side FOR SYSTEM_TIME AS OF b.p_time AS s ON ...` (INNER or
  LEFT): a lookup of the table as it is when the row is processed. The side table does not change during
  a run (a script's is a file read when the run starts: `scripts`), so the lookup is Spark's stream-static
  join: the `FOR SYSTEM_TIME AS OF` goes and the join stays.

Refused by name: HOP, CUMULATE and the group windows (`GROUP BY TUMBLE(p_time, ...)`) on processing
time, OVER and ROW_NUMBER() ordered by it, a join condition on it, and a temporal join AS OF anything but a
processing-time attribute (an event-time temporal join of a versioned table).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sqlglot import exp

from jobs.model.sql_tree import spark_text
from jobs.raystack.flink_sql.errors import UserText
from jobs.raystack.flink_sql.intervals import window_length_ms
from jobs.raystack.flink_sql.typed import rewrite_typed

PROCTIME_SQL = "current_timestamp()"
"""A processing-time attribute's value in Spark SQL (a stream's computed column of this text is one)."""
_AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
_VIEW_PREFIX = "__flink_proctime_window_"
_WINDOW_BOUNDS = ("WINDOW_START", "WINDOW_END")


@dataclass(frozen=True)
class ProcTimeWindowView:
    """The rows a processing-time TUMBLE window aggregates, and its aggregates (FlinkProcTimeWindow.apply)."""

    name: str
    """The view the query reads the windows' rows from."""
    source_sql: str
    """The Spark SQL of the rows before the operator: the SELECT's FROM and WHERE, with the keys and the
    aggregates' arguments as columns."""
    keys: tuple[str, ...]
    size_ms: int
    functions: tuple[str, ...]
    arguments: tuple[str, ...]
    """Each aggregate's argument column, `""` for COUNT(*)."""
    outputs: tuple[str, ...]


def proctime_attributes(tree: exp.Expr, given: frozenset[str]) -> frozenset[str]:
    """The processing-time attributes' names (lower case): `given` (streams' computed columns) and every
    column the query defines as `PROCTIME()`."""
    defined = {
        alias.alias.lower()
        for alias in tree.find_all(exp.Alias)
        if isinstance(alias.this, exp.Anonymous) and alias.this.name.upper() == "PROCTIME"
    }
    return frozenset({name.lower() for name in given} | defined)


def rewrite_proctime_calls(tree: exp.Expr, user: UserText) -> None:
    """`PROCTIME()` as Spark's `current_timestamp()`, in place; with arguments it is refused."""
    for call in list(tree.find_all(exp.Anonymous)):
        if call.name.upper() == "PROCTIME":
            if call.expressions:
                raise user.fail(call, "PROCTIME() takes no arguments")
            call.replace(exp.CurrentTimestamp())


def is_proctime(column: exp.Expr, attributes: frozenset[str]) -> bool:
    return isinstance(column, exp.Column) and column.name.lower() in attributes


def rewrite_temporal_joins(tree: exp.Expr, attributes: frozenset[str], user: UserText) -> None:
    """Each `JOIN t FOR SYSTEM_TIME AS OF <processing-time attribute>` as the join of `t`, in place."""
    for version in list(tree.find_all(exp.Version)):
        table = version.parent
        join = table.parent if table is not None else None
        as_of = version.expression
        if version.text("kind") != "AS OF" or not isinstance(join, exp.Join):
            raise user.fail(version, "FOR SYSTEM_TIME AS OF is supported on the table of a JOIN only")
        if not is_proctime(as_of, attributes):
            raise user.fail(
                version,
                f"a temporal join AS OF {as_of.sql()} (an event-time temporal join of a versioned table) is "
                "not supported; a lookup join AS OF a processing-time attribute (PROCTIME()) is",
            )
        if join.side not in ("", "LEFT") or join.kind not in ("", "INNER"):
            raise user.fail(join, "a lookup join (FOR SYSTEM_TIME AS OF) is INNER or LEFT, as in Flink")
        version.pop()


def refuse_proctime_uses(tree: exp.Expr, attributes: frozenset[str], user: UserText) -> None:
    """Refuses, naming it, a use of a processing-time attribute that does not run on processing time here:
    a group window, an OVER or ROW_NUMBER() order, a join condition."""
    for column in tree.find_all(exp.Column):
        if not is_proctime(column, attributes):
            continue
        node = column.parent
        while node is not None and not isinstance(node, exp.Select):
            reason = _refused_use(node, column)
            if reason:
                raise user.fail(column, reason)
            node = node.parent


def _refused_use(node: exp.Expr, column: exp.Column) -> str | None:
    name = column.sql()
    if isinstance(node, exp.Window):
        return f"an OVER window or ROW_NUMBER() ordered by processing time ({name}) is not supported"
    if isinstance(node, exp.Join) and column.arg_key != "this":
        return f"a join condition on processing time ({name}) is not supported"
    function = node.name.upper() if isinstance(node, exp.Anonymous) else ""
    if function in ("TUMBLE", "HOP", "SESSION") and node.find_ancestor(exp.Group):
        return (
            f"a group window on processing time ({function}({name}, ...)) is not supported; the TUMBLE "
            "window table function on it is"
        )
    return None


def rewrite_proctime_window(
    function: exp.Expr,
    kind: str,
    arguments: dict[str, exp.Expr],
    data: exp.Expr,
    grouped: list[exp.Expr],
    user: UserText,
) -> ProcTimeWindowView:
    """The window aggregation over `function` (a window table function on a processing-time attribute,
    grouped by `grouped`) as a SELECT of a processing-time window view, in place. The view's source stays
    a marked subquery in the FROM, which the later passes translate with the rest, until
    `extract_proctime_views` takes it out; the view returned lacks its `source_sql` until then."""
    text = function.text("text")
    if kind != "TUMBLE":
        raise user.fail(function, f"{text}: {kind} windows on processing time are not supported; TUMBLE is")
    select = function.parent_select
    for node in [*grouped, *_own_nodes(select)]:
        if isinstance(node, exp.Column) and node.name.upper() == "WINDOW_TIME":
            raise user.fail(node, "window_time of a processing-time window is not supported")
    if select.args.get("joins") or select.args.get("laterals"):
        raise user.fail(function, f"{text}: a processing-time window aggregation reads one table or query")
    size_ms = window_length_ms(user, arguments["SIZE"], text)
    keys = [item for item in grouped if not _is_window_bound(item)]
    source = exp.select(*(key.copy().as_(f"__key_{index}") for index, key in enumerate(keys))).from_(data)
    if select.args.get("where"):
        source = source.where(select.args["where"].this.copy())
    functions, argument_columns, outputs = [], [], []
    for index, aggregate in enumerate(_own_aggregates(select)):
        function_name = _AGGREGATES.get(type(aggregate))
        if function_name is None or aggregate.find(exp.Distinct):
            raise user.fail(
                aggregate,
                f"{aggregate.sql()} in a processing-time window is not supported: COUNT, SUM, AVG, MIN and "
                "MAX are (without DISTINCT)",
            )
        functions.append(function_name)
        if isinstance(aggregate.this, exp.Star):
            argument_columns.append("")
        else:
            argument_columns.append(f"__argument_{index}")
            source.select(aggregate.this.copy().as_(argument_columns[-1]), copy=False)
        outputs.append(f"__aggregate_{index}")
        _replace_keeping_name(aggregate, exp.column(outputs[-1]))
    if not source.expressions:
        source.select(exp.true().as_("__row"), copy=False)
    key_columns = [f"__key_{index}" for index in range(len(keys))]
    for key, column in zip(keys, key_columns, strict=True):
        for node in _own_nodes(select):
            if _same_key(node, key):
                _replace_keeping_name(node, exp.column(column))
    for node in _own_nodes(select):
        if _is_window_bound(node):
            node.set("table", None)
        elif isinstance(node, exp.Column) and node.name not in (*key_columns, *outputs):
            raise user.fail(node, f"{node.sql()} is neither a GROUP BY key nor aggregated")
    marked = [node for node in select.root().find_all(exp.Subquery) if node.alias.startswith(_VIEW_PREFIX)]
    name = f"{_VIEW_PREFIX}{len(marked)}"
    having = select.args.get("having")
    select.set("group", None)
    select.set("having", None)
    # The WHERE went into the view; a HAVING filters the view's rows.
    select.set("where", exp.Where(this=having.this) if having else None)
    function.replace(exp.Subquery(this=source, alias=exp.TableAlias(this=exp.to_identifier(name))))
    return ProcTimeWindowView(
        name, "", tuple(key_columns), size_ms, tuple(functions), tuple(argument_columns), tuple(outputs)
    )


def extract_proctime_views(
    tree: exp.Query, views: list[ProcTimeWindowView]
) -> tuple[ProcTimeWindowView, ...]:
    """Each view's marked subquery in `tree` replaced by the view's name; the views with their sources,
    each with the query's common table expressions it may read (a script's views are among them)."""
    extracted = []
    for view in views:
        subquery = next(node for node in tree.find_all(exp.Subquery) if node.alias == view.name)
        source = subquery.this.copy()
        ctes = [cte.copy() for cte in tree.ctes if not any(node is subquery for node in cte.walk())]
        if ctes:
            source.set("with_", exp.With(expressions=ctes))
        subquery.replace(exp.Table(this=exp.to_identifier(view.name)))
        extracted.append(replace(view, source_sql=spark_text(rewrite_typed(source))))
    return tuple(extracted)


def _own_aggregates(select: exp.Select) -> list[exp.AggFunc]:
    return [node for node in _own_nodes(select) if isinstance(node, exp.AggFunc)]


def _own_nodes(select: exp.Select) -> list[exp.Expr]:
    """The nodes of the SELECT's columns and HAVING, not of its subqueries."""
    roots = [*select.expressions, *([select.args["having"]] if select.args.get("having") else [])]
    return [node for root in roots for node in root.walk() if node.parent_select is select]


def _is_window_bound(node: exp.Expr) -> bool:
    return isinstance(node, exp.Column) and node.name.upper() in _WINDOW_BOUNDS


def _same_key(node: exp.Expr, key: exp.Expr) -> bool:
    if isinstance(key, exp.Column):
        return isinstance(node, exp.Column) and node.name.lower() == key.name.lower()
    return node == key


def _replace_keeping_name(node: exp.Expr, replacement: exp.Expr) -> None:
    """`node` replaced; a SELECT column that was only `node` keeps the name it had."""
    if node.parent is not None and node.arg_key == "expressions" and isinstance(node.parent, exp.Select):
        name = node.alias_or_name if isinstance(node, exp.Column) else ""
        node.replace(exp.alias_(replacement, name) if name else replacement)
    else:
        node.replace(replacement)
