"""Aggregations over a window aggregation's bounds, as Spark's chained window aggregations (Nexmark q5).

    SELECT MAX(c.num) AS maxn, c.starttime, c.endtime
    FROM (SELECT COUNT(*) AS num, window_start AS starttime, window_end AS endtime
          FROM TABLE(HOP(TABLE bid, DESCRIPTOR(rowtime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
          GROUP BY auction, window_start, window_end) AS c
    GROUP BY c.starttime, c.endtime

In Flink the outer GROUP BY is a regular aggregation (its input has no `window_time`, so no time
attribute): it updates its row of a window as the window's counts arrive, and a join of it with another
window aggregation on the bounds (`ON a.starttime = c.starttime AND a.endtime = c.endtime`) is a regular
join. Spark refuses it (its global-watermark check: the regular aggregation's rows would be late for the
join), and in update mode the join could not take its updates.

Each group of the outer aggregation lies in one window of the inner one, and each window's rows come
out of the inner aggregation once, when the watermark closes it. So grouping by the inner window itself,
Spark's `window` struct, which carries the event time, gives the same groups, each emitted once the
window has closed with its final values: Flink's final table, and in Spark's append mode, where the
join and the aggregations chain (Spark 4 moves the watermark through them, and a bounded run's final
watermark closes every window). This pass, on the tree after `window_tvfs` and before `group_windows`,
selects the inner window as a hidden column (`WINDOW_COLUMN`) and adds it to the outer GROUP BY, when
that GROUP BY holds both bounds of the inner window (with the start alone, sessions of one start
would merge).
"""

from __future__ import annotations

from sqlglot import exp

from jobs.raystack.flink_sql.dialect import AUXILIARY
from jobs.raystack.flink_sql.group_windows import GROUP_WINDOWS, WINDOW_COLUMN, spark_window_column


def group_by_window_bounds(tree: exp.Expr) -> None:
    """Adds, in place, the inner window to each aggregation grouped by both bounds of the window
    aggregation it reads (its one FROM, a subquery)."""
    for outer in list(tree.find_all(exp.Select)):
        group = outer.args.get("group")
        source = outer.args.get("from_")
        if group is None or outer.args.get("joins") or source is None:
            continue
        subquery = source.this
        inner = subquery.this if isinstance(subquery, exp.Subquery) else None
        kind = _window_kind(inner) if isinstance(inner, exp.Select) else None
        if kind is None or not _groups_by_both_bounds(group, inner, subquery.alias_or_name):
            continue
        inner.select(exp.column(spark_window_column(kind)).as_(WINDOW_COLUMN), copy=False)
        group.append("expressions", exp.column(WINDOW_COLUMN, table=subquery.alias_or_name or None))


def _window_kind(select: exp.Select) -> str | None:
    """The group window `select` aggregates by (TUMBLE, HOP, SESSION), None when it has none."""
    group = select.args.get("group")
    for item in group.expressions if group else []:
        if isinstance(item, exp.Anonymous) and item.name.upper() in GROUP_WINDOWS:
            return item.name.upper()
    return None


def _groups_by_both_bounds(group: exp.Group, inner: exp.Select, alias: str) -> bool:
    """Whether `group` holds columns of the subquery `alias` that `inner` selects as its window's START
    and END."""
    bounds = {}
    for projection in inner.expressions:
        body = projection.this if isinstance(projection, exp.Alias) else projection
        match = AUXILIARY.match(body.name.upper()) if isinstance(body, exp.Anonymous) else None
        if match and match.group(2) in ("START", "END"):
            bounds[projection.alias_or_name] = match.group(2)
    grouped = {
        bounds.get(item.name)
        for item in group.expressions
        if isinstance(item, exp.Column) and item.table in ("", alias)
    }
    return {"START", "END"} <= grouped
