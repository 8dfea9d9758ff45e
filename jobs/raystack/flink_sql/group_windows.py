"""Flink's group windows (`GROUP BY TUMBLE(t, size)`, HOP, SESSION) and their auxiliary functions as
Spark's `window` and `session_window` columns, in the tree."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp

from jobs.model.sql_tree import SPARK_AGGREGATES
from jobs.raystack.flink_sql.dialect import AUXILIARY
from jobs.raystack.flink_sql.errors import UserText
from jobs.raystack.flink_sql.intervals import spark_duration, window_length_ms

GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")
_SPARK_WINDOW_COLUMN = {"TUMBLE": "window", "HOP": "window", "SESSION": "session_window"}
WINDOW_COLUMN = "__window"
"""A window aggregation's window (Spark's struct), selected for an aggregation grouped by its bounds
(`window_bounds`): grouped by it, that aggregation is a window aggregation too."""
# Dagger's aggregate functions, which Spark does not know are aggregates.
_DAGGER_AGGREGATES = {"COLLECTARRAY", "DISTINCTCOUNT", "FEATURES", "FEATURESWITHTYPE", "PERCENTILEAGGREGATOR"}


@dataclass(frozen=True)
class GroupWindow:
    kind: str
    time_column: exp.Expr
    sizes_ms: tuple[int, ...]  # TUMBLE: size; HOP: slide, size (Flink's order); SESSION: gap

    def spark_call(self) -> exp.Expr:
        sizes = self.sizes_ms[::-1] if self.kind == "HOP" else self.sizes_ms  # Spark's: size, then slide
        durations = [exp.Literal.string(spark_duration(size)) for size in sizes]
        return exp.Anonymous(
            this=_SPARK_WINDOW_COLUMN[self.kind], expressions=[self.time_column.copy(), *durations]
        )

    def matches(self, other: GroupWindow) -> bool:
        return (self.kind, self.time_column.sql(), self.sizes_ms) == (
            other.kind, other.time_column.sql(), other.sizes_ms
        )  # fmt: skip


def rewrite_group_windows(tree: exp.Expr, user: UserText) -> exp.Expr:
    """The tree with each group window as Spark's window column (the root may become a wrapping SELECT)."""
    windows = _group_windows(tree, user)
    for node in tree.find_all(exp.Anonymous):
        name = node.name.upper()
        if name in GROUP_WINDOWS and id(node) not in windows:
            raise user.fail(node, f"the group window {name}(...) belongs in a GROUP BY")
    by_select = {id(node.parent_select): window for node, window in windows.values()}
    rowtimes: dict[int, tuple[exp.Select, list[str]]] = {}  # the *_ROWTIME columns' names, by SELECT
    for node in list(tree.find_all(exp.Anonymous)):
        match = AUXILIARY.match(node.name.upper())
        if not match:
            continue
        kind, part = match.groups()
        select = node.parent_select
        window = by_select.get(id(select))
        text = node.sql(dialect="spark")
        if window is None:
            raise user.fail(node, f"{text} needs {kind}(...) in the GROUP BY of its SELECT")
        if not parse_window(node, kind, user).matches(window):
            raise user.fail(
                node,
                f"{text} does not match the GROUP BY window {window.kind}({window.time_column.sql()}, ...) "
                "of its SELECT",
            )
        column = _SPARK_WINDOW_COLUMN[kind]
        if part == "ROWTIME":
            rowtimes.setdefault(id(select), (select, []))[1].append(_rowtime_alias(node, text, user))
            node.replace(exp.column(column))
        else:
            node.replace(exp.column(part.lower(), table=column))
    for node, window in windows.values():
        node.replace(window.spark_call())
    for number, (select, names) in enumerate(rowtimes.values()):
        wrapper = _wrap_for_window_time(select, names, number, user)
        tree = wrapper if select is tree else tree
    return tree


def spark_window_column(kind: str) -> str:
    """The name of the window column Spark gives a group window of `kind` (TUMBLE, HOP, SESSION)."""
    return _SPARK_WINDOW_COLUMN[kind]


def parse_window(node: exp.Anonymous, kind: str, user: UserText) -> GroupWindow:
    text = node.sql(dialect="spark")
    arguments = node.expressions
    expected = 3 if kind == "HOP" else 2
    if len(arguments) != expected:
        shape = {"TUMBLE": "(time, size)", "HOP": "(time, slide, size)", "SESSION": "(time, gap)"}[kind]
        raise user.fail(node, f"{text}: {kind} takes {expected} arguments {shape}")
    sizes = tuple(window_length_ms(user, argument, text) for argument in arguments[1:])
    if kind == "HOP" and sizes[0] > sizes[1]:
        raise user.fail(
            node,
            f"{text}: a slide longer than the window size is not supported (Flink's HOP takes the slide "
            "first, then the size)",
        )
    return GroupWindow(kind, arguments[0], sizes)


def _group_windows(tree: exp.Expr, user: UserText) -> dict[int, tuple[exp.Anonymous, GroupWindow]]:
    """The group windows of the GROUP BYs, by the id of their node; at most one per SELECT."""
    found: dict[int, tuple[exp.Anonymous, GroupWindow]] = {}
    for group in tree.find_all(exp.Group):
        items = group.expressions
        earlier: exp.Anonymous | None = None
        for item in items:
            name = item.name.upper() if isinstance(item, exp.Anonymous) else ""
            if name not in GROUP_WINDOWS:
                continue
            if name == "SESSION" and len(items) == 1:
                raise user.fail(
                    item,
                    "a SESSION window needs a key beside it (GROUP BY SESSION(rowtime, gap), key): Spark "
                    "streams cannot aggregate sessions over all rows",
                )
            if earlier is not None:
                raise user.fail(
                    item, f"one SELECT may group by one window only (also {earlier.sql(dialect='spark')})"
                )
            earlier = item
            found[id(item)] = (item, parse_window(item, name, user))
    return found


def _rowtime_alias(node: exp.Anonymous, text: str, user: UserText) -> str:
    """The name under which `X_ROWTIME(...)` is selected; it must be a column of its SELECT itself."""
    parent = node.parent
    if isinstance(parent, exp.Alias) and isinstance(parent.parent, exp.Select):
        return parent.alias
    reason = f"{text} is supported as a named column of its SELECT (`{text} AS rowtime`), in no expression"
    raise user.fail(node, reason)


def _wrap_for_window_time(select: exp.Select, rowtimes: list[str], number: int, user: UserText) -> exp.Select:
    """Spark computes a window's rowtime (`window_time(window)`) outside the aggregation that made the
    window, so the SELECT becomes `SELECT ..., window_time(x) AS x FROM (<the SELECT>)`."""
    names = [expression.alias_or_name for expression in select.expressions]
    if any(not name for name in names):
        raise user.fail(
            select,
            "a SELECT with a *_ROWTIME column must name all its columns (add AS <name> to each expression)",
        )

    def column(name: str) -> exp.Expr:
        return exp.column(exp.to_identifier(name, quoted=True))

    columns = [
        exp.alias_(
            exp.Anonymous(this="window_time", expressions=[column(name)]),
            exp.to_identifier(name, quoted=True),
        )
        if name in rowtimes
        else column(name)
        for name in names
    ]
    wrapper = exp.Select(expressions=columns)
    select.replace(wrapper)
    alias = exp.TableAlias(this=exp.to_identifier(f"__dagger_rowtime_{number}"))
    wrapper.set("from_", exp.From(this=exp.Subquery(this=select, alias=alias)))
    return wrapper


def has_unwindowed_aggregation(tree: exp.Expr) -> bool:
    """Whether a SELECT aggregates without a group window (its results change as rows arrive)."""
    return any(aggregates_without_window(select, GROUP_WINDOWS) for select in tree.find_all(exp.Select))


def aggregates_without_window(select: exp.Select, windows: tuple[str, ...]) -> bool:
    """Whether `select` aggregates (GROUP BY, aggregate functions, SELECT DISTINCT) without one of the group
    `windows` (Flink's names, or once rewritten Spark's `WINDOW` and `SESSION_WINDOW`) in its GROUP BY,
    nor the window of the window aggregation it reads (`WINDOW_COLUMN`)."""
    group = select.args.get("group")
    windowed = group is not None and any(
        (isinstance(node, exp.Anonymous) and node.name.upper() in windows)
        or (isinstance(node, exp.Column) and node.name == WINDOW_COLUMN)
        for node in group.walk()
    )
    if windowed:
        return False
    aggregates = any(
        is_aggregate(node) for projection in select.expressions for node in own_nodes(projection)
    )
    return group is not None or aggregates or select.args.get("distinct") is not None


def own_nodes(expression: exp.Expr) -> Iterator[exp.Expr]:
    """The nodes of a SELECT's expression, without those of nested queries."""
    yield from expression.walk(prune=lambda node: isinstance(node, exp.Query | exp.Subquery))


def is_aggregate(node: exp.Expr) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    name = node.name.upper() if isinstance(node, exp.Anonymous) else ""
    return name in _DAGGER_AGGREGATES or name in SPARK_AGGREGATES
