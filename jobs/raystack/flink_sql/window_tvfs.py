"""Flink's window table-valued functions in window aggregations, as the group windows they equal.

    SELECT window_start, window_end, k, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end, k

computes the rows of

    SELECT TUMBLE_START(rowtime, INTERVAL '10' MINUTES) AS window_start,
           TUMBLE_END(rowtime, INTERVAL '10' MINUTES) AS window_end, k, COUNT(*) AS n
    FROM t GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTES), k

(`window_time` is the group window's TUMBLE_ROWTIME), and this pass rewrites the tree of the first into
that of the second, which `group_windows` then reads. HOP is the same, its slide first. Named arguments
(`DATA => TABLE t, TIMECOL => DESCRIPTOR(rowtime), SIZE => ...`) are read too.

CUMULATE(TABLE t, DESCRIPTOR(rowtime), STEP, SIZE) has no group window: each row belongs to the windows
of its SIZE period that end a whole number of STEPs after the period starts, and after the row. The
input gets a row per such end (`explode` of the ends, in microseconds, `__cumulate_end_us`), and the
aggregation groups by the TUMBLE of the period and that end. Its rows come out as the period's window
closes (Flink emits each window as its own end passes): the same rows, later.

A window aggregation on a processing-time attribute is a processing-time window (`proctime`).

Refused by name: the SESSION table function (its sessions span every key unless partitioned; the SESSION
group window says what it groups), an OFFSET, and a window table function outside a window aggregation
(window joins, window Top-N, plain window assignment).
"""

from __future__ import annotations

from collections.abc import Callable

from sqlglot import exp

from jobs.model.sql_tree import call
from jobs.raystack.flink_sql.dialect import WindowTableFunction
from jobs.raystack.flink_sql.errors import UserText
from jobs.raystack.flink_sql.intervals import window_length_ms
from jobs.raystack.flink_sql.proctime import ProcTimeWindowView, is_proctime, rewrite_proctime_window

_PARAMETERS = {
    "TUMBLE": ("DATA", "TIMECOL", "SIZE", "OFFSET"),
    "HOP": ("DATA", "TIMECOL", "SLIDE", "SIZE", "OFFSET"),
    "CUMULATE": ("DATA", "TIMECOL", "STEP", "SIZE", "OFFSET"),
}
_CUMULATE_END = "__cumulate_end_us"
_WINDOW_COLUMNS = {"WINDOW_START": "START", "WINDOW_END": "END", "WINDOW_TIME": "ROWTIME"}
_REFUSED = {
    "SESSION": (
        "the SESSION window table function is not supported; group by the SESSION group window "
        "(GROUP BY SESSION(rowtime, gap), key), whose sessions are per key"
    ),
}


def rewrite_window_tvfs(tree: exp.Expr, user: UserText, proctime: frozenset[str]) -> list[ProcTimeWindowView]:
    """Rewrites each window aggregation over a window table function as a group window, in place; one on a
    processing-time attribute (`proctime`) as a processing-time window view's SELECT: those views."""
    views = []
    for function in list(tree.find_all(WindowTableFunction)):
        view = _window_aggregation(function, user, proctime)
        if view is not None:
            views.append(view)
    return views


def _window_aggregation(
    function: WindowTableFunction, user: UserText, proctime: frozenset[str]
) -> ProcTimeWindowView | None:
    kind, text = function.name, function.text("text")
    if kind in _REFUSED:
        raise user.fail(function, _REFUSED[kind])
    arguments = _named_arguments(function, _PARAMETERS[kind], user)
    if "OFFSET" in arguments:
        raise user.fail(arguments["OFFSET"], f"{text}: a window OFFSET is not supported")
    missing = [name for name in _PARAMETERS[kind][:-1] if name not in arguments]
    if missing:
        shape = ", ".join(_PARAMETERS[kind][:-1])
        raise user.fail(function, f"{text}: {kind} takes ({shape}); {', '.join(missing)} missing")
    time_column = _descriptor_column(arguments["TIMECOL"], text, user)
    data = _data(arguments["DATA"], text, user)
    if kind == "CUMULATE":
        window = [time_column, arguments["SIZE"]]
        data = _with_cumulate_ends(arguments, text, time_column, data, user)
        grouped_window = call("TUMBLE", *window)
        end = exp.column(_CUMULATE_END)
        replacements = {
            "START": lambda: call("TUMBLE_START", *(part.copy() for part in window)),
            "END": lambda: call("timestamp_micros", end.copy()),
            "ROWTIME": lambda: call(
                "timestamp_micros", exp.Sub(this=end.copy(), expression=exp.Literal.number(1))
            ),
        }
    else:
        window = [time_column, *(arguments[name] for name in _PARAMETERS[kind][2:-1])]
        grouped_window = call(kind, *window)
        replacements = {
            part: (lambda part=part: call(f"{kind}_{part}", *(piece.copy() for piece in window)))
            for part in ("START", "END", "ROWTIME")
        }
    alias = function.args.get("alias")
    if alias is not None:
        data.set("alias", alias)
    select = function.parent_select
    group = select.args.get("group") if select is not None else None
    outside = (
        f"{kind}(...) is supported in a window aggregation (GROUP BY window_start, window_end, ...); "
        "window joins, window Top-N and window assignment without an aggregation are not"
    )
    named = {_window_column(item): item for item in (group.expressions if group else [])}
    if "WINDOW_START" not in named or "WINDOW_END" not in named:
        raise user.fail(function, outside)
    if is_proctime(time_column, proctime):
        return rewrite_proctime_window(function, kind, arguments, data, group.expressions, user)
    function.replace(data)
    # The group window takes the place of window_start; window_end and window_time (Flink has a selected
    # window_time grouped too) go, but a cumulating window's end, which the group window does not give.
    named["WINDOW_START"].replace(grouped_window)
    if kind == "CUMULATE":
        named["WINDOW_END"].replace(exp.column(_CUMULATE_END))
    else:
        named["WINDOW_END"].pop()
    if "WINDOW_TIME" in named:
        named["WINDOW_TIME"].pop()
    _replace_window_columns(select, replacements, user)
    return None


def _with_cumulate_ends(
    arguments: dict[str, exp.Expr], text: str, time_column: exp.Expr, data: exp.Expr, user: UserText
) -> exp.Expr:
    """The input with a row per cumulating window that each row is in: its end, in microseconds."""
    step_us, size_us = (window_length_ms(user, arguments[name], text) * 1000 for name in ("STEP", "SIZE"))
    if size_us % step_us:
        raise user.fail(arguments["SIZE"], f"{text}: the SIZE must be a whole number of STEPs")

    def at() -> exp.Expr:
        return call("unix_micros", time_column.copy())

    def period() -> exp.Expr:
        size = exp.Literal.number(size_us)
        return exp.Mul(this=exp.Paren(this=exp.IntDiv(this=at(), expression=size)), expression=size.copy())

    steps = exp.IntDiv(
        this=exp.Paren(this=exp.Sub(this=at(), expression=period())), expression=exp.Literal.number(step_us)
    )
    first_end = exp.Add(
        this=period(),
        expression=exp.Mul(
            this=exp.Paren(this=exp.Add(this=steps, expression=exp.Literal.number(1))),
            expression=exp.Literal.number(step_us),
        ),
    )
    last_end = exp.Add(this=period(), expression=exp.Literal.number(size_us))
    ends = call("explode", call("sequence", first_end, last_end, exp.Literal.number(step_us)))
    source = exp.Select(expressions=[exp.Star(), exp.alias_(ends, _CUMULATE_END)]).from_(data, copy=False)
    return exp.Subquery(this=source)


def _named_arguments(
    function: WindowTableFunction, parameters: tuple[str, ...], user: UserText
) -> dict[str, exp.Expr]:
    """The call's arguments by parameter name, positional (in Flink's order) or `NAME => value`."""
    found: dict[str, exp.Expr] = {}
    for position, argument in enumerate(function.expressions):
        name = parameters[position] if position < len(parameters) else ""
        if isinstance(argument, exp.Kwarg):
            name, argument = argument.this.name, argument.expression
        if name not in parameters:
            raise user.fail(argument, f"{function.text('text')}: no parameter {name or position + 1}")
        found[name] = argument
    return found


def _data(argument: exp.Expr, text: str, user: UserText) -> exp.Expr:
    """The window function's input: `TABLE name` or a parenthesized query."""
    if isinstance(argument, exp.Table | exp.Subquery):
        return argument.copy()
    raise user.fail(argument, f"{text}: the data is TABLE <name> or a query in parentheses")


def _descriptor_column(argument: exp.Expr, text: str, user: UserText) -> exp.Expr:
    is_descriptor = isinstance(argument, exp.Anonymous) and argument.name.upper() == "DESCRIPTOR"
    if is_descriptor and len(argument.expressions) == 1:
        return argument.expressions[0].copy()
    raise user.fail(argument, f"{text}: the time column is DESCRIPTOR(<one column>)")


def _window_column(node: exp.Expr) -> str | None:
    """WINDOW_START, WINDOW_END or WINDOW_TIME if `node` is that column, maybe qualified."""
    name = node.name.upper() if isinstance(node, exp.Column) else ""
    return name if name in _WINDOW_COLUMNS else None


def _replace_window_columns(
    select: exp.Select, replacements: dict[str, Callable[[], exp.Expr]], user: UserText
) -> None:
    """`window_start`, `window_end` and `window_time` in the SELECT's columns and HAVING as `replacements`
    says (the group window's functions, by START, END and ROWTIME); a column that is only one of them
    keeps its name. In the FROM (a joined table's) and the ORDER BY (the output column) they stay."""
    for column in list(select.find_all(exp.Column)):
        name = _window_column(column)
        if name is None or column.parent_select is not select:
            continue
        clause = column
        while clause.parent is not select:
            clause = clause.parent
        if clause.arg_key == "where":
            raise user.fail(column, f"{name.lower()} is not supported in the WHERE of a window aggregation")
        if clause.arg_key not in ("expressions", "having"):
            continue
        function = replacements[_WINDOW_COLUMNS[name]]()
        column.replace(exp.alias_(function, column.this.copy()) if clause is column else function)
