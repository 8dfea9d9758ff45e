"""Top-N and deduplication: Flink's `ROW_NUMBER()` patterns, run by the project's operator
(`FlinkRank.java`, a `transformWithState` processor):

    SELECT ... FROM (
      SELECT ..., ROW_NUMBER() OVER (PARTITION BY k ORDER BY x DESC) AS rn FROM t WHERE ...
    ) WHERE rn <= N

(`rn < N`, and `rn = 1` for deduplication: `ORDER BY rowtime` keeps each key's first row, `ORDER BY rowtime
DESC` its last). The bound may also be in the ROW_NUMBER()'s own SELECT, `SELECT *, ROW_NUMBER() OVER
(...) AS rn FROM t WHERE rn <= N`, as Nexmark's q6 writes it (which Flink never runs): the bound applies
to the ranked rows, the WHERE's other conditions to the rows before, and the SELECT reads the view.

The inner SELECT becomes a **Top-N view**: its rows, with each key and ORDER BY expression as a column,
which the operator reduces to each key's N best rows, numbered. The outer SELECT reads the view, without
the row-number condition.

The result is an upsert stream, as Flink's: a row replaces the one of the same key and row number that
came before it. Sinks that take upserts (a Kafka sink with a key, a continuous table with a key) write
it as such; `jobs/model/spec.py` refuses the others.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlglot import exp

from jobs.raystack.flink_sql.errors import FlinkSqlError
from jobs.raystack.flink_sql.view_sources import view_source_text

_VIEW_PREFIX = "__flink_top_n_"
_PATTERN = (
    "ROW_NUMBER() runs in Flink's Top-N pattern: SELECT ... FROM (SELECT ..., ROW_NUMBER() OVER "
    "(PARTITION BY k ORDER BY x) AS rn FROM t) WHERE rn <= N"
)


@dataclass(frozen=True)
class TopNView:
    """The rows a Top-N reads, and how the operator ranks them (FlinkRank.apply)."""

    name: str
    source_sql: str
    """The inner SELECT without its ROW_NUMBER(), with the keys and the ORDER BY as columns (and the
    query's WITH clauses it reads)."""
    keys: tuple[str, ...]
    orders: tuple[str, ...]
    descending: tuple[bool, ...]
    limit: int
    rank_column: str
    helpers: tuple[str, ...]
    """The columns added for keys and orders, which the view's rows do not show."""


def extract_top_n_views(
    tree: exp.Query, key: str, only: Callable[[exp.Window], bool] | None = None, first: int = 0
) -> tuple[TopNView, ...]:
    """Rewrites each Top-N of `tree` (those whose ROW_NUMBER() window `only` takes) in place to read its
    view; the views, innermost first, numbered from `first`."""
    views: list[TopNView] = []
    windows = [window for window in tree.find_all(exp.Window) if isinstance(window.this, exp.RowNumber)]
    for window in reversed([window for window in windows if only is None or only(window)]):
        views.append(_rewrite(window, f"{_VIEW_PREFIX}{first + len(views)}", key))
    return tuple(views)


def _rewrite(window: exp.Window, name: str, key: str) -> TopNView:
    inner = window.parent_select
    alias = window.parent
    subquery = inner.parent if inner else None
    outer = subquery.parent_select if isinstance(subquery, exp.Subquery) else None
    if not isinstance(alias, exp.Alias) or alias.parent is not inner:
        raise FlinkSqlError(f"{key}: {_PATTERN}")
    rank_column = alias.alias
    own_bound = _bound(inner, rank_column)
    if own_bound is None and outer is None:
        raise FlinkSqlError(f"{key}: {_PATTERN}")
    limit, others = own_bound or _limit(outer, rank_column, key)
    if window.args.get("spec") or not window.args.get("order"):
        raise FlinkSqlError(f"{key}: ROW_NUMBER() takes an ORDER BY and no frame; {_PATTERN}")
    source = inner.copy()
    source.set("expressions", [e for e in source.expressions if e.alias_or_name != rank_column])
    if own_bound:
        source.set("where", exp.Where(this=exp.and_(*others)) if others else None)
    helpers: list[str] = []

    def helper(expression: exp.Expression, role: str) -> str:
        """The column of the view's rows holding `expression`: the one showing it, when the rows do (a
        copy of the rowtime would be a second event-time column), or one added and hidden."""
        if isinstance(expression, exp.Column):
            shown = _shown_as(source.expressions, expression)
            if shown is not None:
                return shown
            if not expression.table:  # its own name: nothing else in the rows has it
                source.select(expression.copy(), copy=False)
                helpers.append(expression.name)
                return expression.name
        helpers.append(f"__top_n_{role}_{len(helpers)}")
        source.select(expression.copy().as_(helpers[-1]), copy=False)
        return helpers[-1]

    keys = [helper(expression, "key") for expression in window.args.get("partition_by") or []]
    orderings = window.args["order"].expressions
    orders = [helper(ordering.this, "order") for ordering in orderings]
    source_sql = view_source_text(source, inner)  # while `inner` is in the query: the WITHs it sees
    if own_bound:  # the SELECT itself reads the view
        for clause in ("joins", "where", "laterals"):
            inner.set(clause, None)
        inner.set("expressions", [exp.Star()])
        inner.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(name))))
    else:
        subquery.replace(exp.Table(this=exp.to_identifier(name), alias=subquery.args.get("alias")))
        outer.set("where", exp.Where(this=exp.and_(*others)) if others else None)
    return TopNView(
        name, source_sql, tuple(keys), tuple(orders),
        tuple(bool(ordering.args.get("desc")) for ordering in orderings), limit, rank_column, tuple(helpers),
    )  # fmt: skip


def _shown_as(projections: list[exp.Expression], column: exp.Column) -> str | None:
    """The name under which the rows show `column`: a projection of it (`B.price`, `B.dateTime AS t`),
    or a star that covers it (`*`, `A.*` for `A.id`); None when none does."""
    for projection in projections:
        shown = projection.this if isinstance(projection, exp.Alias) else projection
        if isinstance(shown, exp.Star):
            return column.name
        if not isinstance(shown, exp.Column) or shown.table not in ("", column.table):
            continue
        if isinstance(shown.this, exp.Star) or shown.name == column.name:
            return column.name if isinstance(shown.this, exp.Star) else projection.alias_or_name
    return None


def _limit(outer: exp.Select, rank_column: str, key: str) -> tuple[int, list[exp.Expression]]:
    """N of the outer WHERE's `rn <= N` (`rn < N`, `rn = 1`), and the WHERE's other conditions."""
    bound = _bound(outer, rank_column)
    if bound is None:
        raise FlinkSqlError(f"{key}: the Top-N needs its bound, WHERE {rank_column} <= N; {_PATTERN}")
    return bound


def _bound(select: exp.Select, rank_column: str) -> tuple[int, list[exp.Expression]] | None:
    """N of `select`'s `WHERE rn <= N` (`rn < N`, `rn = 1`), and the WHERE's other conditions; None when
    the WHERE bounds no row number."""
    where = select.args.get("where")
    conditions = list(where.this.flatten()) if where and isinstance(where.this, exp.And) else []
    if where and not conditions:
        conditions = [where.this]
    for condition in conditions:
        if not isinstance(condition, (exp.LTE, exp.LT, exp.EQ)):
            continue
        column, bound = condition.this, condition.expression
        if not (isinstance(column, exp.Column) and column.name == rank_column and bound.is_int):
            continue
        limit = {exp.LTE: int(bound.this), exp.LT: int(bound.this) - 1}.get(type(condition))
        if isinstance(condition, exp.EQ) and int(bound.this) == 1:
            limit = 1
        if limit is not None:
            return limit, [other for other in conditions if other is not condition]
    return None
