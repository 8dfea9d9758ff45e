"""Aggregations over updating results, as Flink runs them: an aggregation without a window whose input is
another one's results (Nexmark q4: the average of each auction's highest bid, per category), run by the
project's operator (`FlinkAggregate.java`, a `transformWithState` processor).

Spark's own aggregation runs one aggregation without a window, in update mode, and refuses one fed by
another (its global-watermark check: the inner one's updated rows would be "late" for the outer), since its
update mode says only the new row of a group, never which row it replaces. Flink's model is a changelog:
an updating relation's rows carry a change kind, `+I` (insert), `-U` and `+U` (a row's value before and
after an update), `-D` (delete), and an aggregation downstream takes away what a `-U` or `-D` retracts.

So every aggregation without a window that reads another, or that another reads, becomes an **aggregate
view**: its FROM, joins and WHERE, with each group key and each aggregate's argument as a column, which the
operator groups and aggregates, emitting the changelog in a hidden column (`__change`) that the SELECTs
between two such aggregations pass on. The SELECT itself reads the view, each aggregate and group key
replaced by the operator's column. The last aggregation of the query emits upserts instead, a group's new
row replacing its earlier one, which the sinks that take a Top-N's rows take (`jobs/model/spec.py` refuses
the others), and the SELECTs above it may only project them.

What is refused, by name: HAVING on such an aggregation, a join or a filter of its updating rows, an
aggregate other than COUNT, SUM, AVG, MIN and MAX (or with DISTINCT), OVER windows beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp
from sqlglot.dialects.spark import Spark

from jobs.model.sql_tree import spark_text
from jobs.raystack.flink_sql.errors import FlinkSqlError
from jobs.raystack.flink_sql.group_windows import aggregates_without_window, is_aggregate, own_nodes
from jobs.raystack.flink_sql.typed import rewrite_typed

CHANGE_COLUMN = "__change"
"""The hidden column of an updating relation's rows: its change kind (FlinkAggregate.INSERT...)."""
_AGGREGATES = {exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX"}
_SPARK_WINDOWS = ("WINDOW", "SESSION_WINDOW")
_VIEW_PREFIX = "__flink_aggregate_"


@dataclass(frozen=True)
class AggregateView:
    """The rows an aggregation over updating results reads, and how the operator groups them
    (FlinkAggregate.apply)."""

    name: str
    source_sql: str
    """The Spark SQL of the rows before the operator: the SELECT's FROM, joins and WHERE, with the keys and
    the arguments as columns (and the change kind, when it reads another aggregate view)."""
    keys: tuple[str, ...]
    functions: tuple[str, ...]
    arguments: tuple[str, ...]
    """Each aggregate's argument column, `""` for COUNT(*)."""
    outputs: tuple[str, ...]
    reads_changes: bool
    """The rows carry a change kind (another aggregate view's); otherwise they are all inserts."""
    upserts: bool
    """The query's last aggregation: its rows are upserts, without the change kind."""


def extract_aggregate_views(tree: exp.Query, key: str) -> tuple[AggregateView, ...]:
    """Rewrites each aggregation over updating results (and each one feeding it) in place to read its
    aggregate view; the views, innermost first."""
    aggregations = [
        select for select in tree.find_all(exp.Select) if aggregates_without_window(select, _SPARK_WINDOWS)
    ]
    chained = [
        select
        for select in aggregations
        if any(other is not select and _feeds(other, select) for other in aggregations)
        or any(other is not select and _feeds(select, other) for other in aggregations)
    ]
    if not chained:
        return ()
    if tree.find(exp.Window):
        raise FlinkSqlError(f"{key}: an aggregation over another aggregation's results beside OVER or "
                            "ROW_NUMBER() windows is not supported")  # fmt: skip
    views: list[AggregateView] = []
    rewritten: list[exp.Select] = []
    for select in sorted(chained, key=_depth, reverse=True):  # innermost first
        last = not any(_feeds(select, other) for other in chained)
        reads_changes = any(_feeds(inner, select) for inner in rewritten)
        views.append(_rewrite(tree, select, f"{_VIEW_PREFIX}{len(views)}", reads_changes, last, key))
        rewritten.append(select)
        _pass_changes_on(select, key, last)
    return tuple(views)


def _feeds(inner: exp.Select, outer: exp.Select) -> bool:
    """Whether `inner` is a query in `outer`'s FROM or joins (not a scalar subquery)."""
    node = inner.parent
    while node is not None and node is not outer:
        node = node.parent
    if node is None:
        return False
    return any(inner is found for part in ("from_", "joins") for found in _args_nodes(outer, part))


def _args_nodes(select: exp.Select, part: str):
    value = select.args.get(part)
    for item in value if isinstance(value, list) else [value] if value is not None else []:
        yield from item.find_all(exp.Select)


def _depth(select: exp.Select) -> int:
    depth, node = 0, select
    while node.parent is not None:
        depth, node = depth + 1, node.parent
    return depth


def _rewrite(
    tree: exp.Query, select: exp.Select, name: str, reads_changes: bool, last: bool, key: str
) -> AggregateView:
    for clause in ("having", "distinct"):
        if select.args.get(clause):
            raise FlinkSqlError(
                f"{key}: {clause.upper()} on an aggregation over another aggregation's results is not "
                "supported"
            )
    if reads_changes and select.args.get("joins"):
        raise FlinkSqlError(f"{key}: a join of an aggregation's updating results is not supported")
    source = exp.select().from_(select.args["from_"].this.copy())
    source.set("joins", [join.copy() for join in select.args.get("joins") or []] or None)
    if select.args.get("where"):
        source = source.where(select.args["where"].this.copy())
    if tree.args.get("with_"):  # the query's CTEs (a script's views), which the rows may read
        source.set("with_", tree.args["with_"].copy())
    group = select.args.get("group")
    key_expressions = list(group.expressions) if group else []
    keys = [f"__aggregate_key_{index}" for index in range(len(key_expressions))]
    for expression, column in zip(key_expressions, keys, strict=True):
        source.select(expression.copy().as_(column), copy=False)
    functions, arguments, outputs = [], [], []
    projections = []
    for position, projection in enumerate(select.expressions):
        name_of = projection.alias_or_name if isinstance(projection, exp.Alias | exp.Column) else None
        body = projection.this if isinstance(projection, exp.Alias) else projection
        for node in [node for node in own_nodes(body) if is_aggregate(node)]:
            function = _AGGREGATES.get(type(node))
            if function is None or node.find(exp.Distinct):
                raise FlinkSqlError(
                    f"{key}: {node.sql(dialect=Spark)} over another aggregation's results is not supported: "
                    "COUNT, SUM, AVG, MIN and MAX are (without DISTINCT)"
                )
            outputs.append(f"__aggregate_{len(outputs)}")
            functions.append(function)
            if isinstance(node.this, exp.Star):
                arguments.append("")
            else:
                arguments.append(f"__aggregate_argument_{len(arguments)}")
                source.select(node.this.copy().as_(arguments[-1]), copy=False)
            replaced = exp.column(outputs[-1])
            body = replaced if node is body else body
            node.replace(replaced)
        body = _keys_replaced(body, key_expressions, keys, key)
        projections.append(body.as_(name_of or f"EXPR${position}"))
    if reads_changes:
        source.select(exp.column(CHANGE_COLUMN), copy=False)
    if not last:
        projections.append(exp.column(CHANGE_COLUMN))
    select.set("expressions", projections)
    for clause in ("joins", "where", "group"):
        select.set(clause, None)
    select.set("from_", exp.From(this=exp.Table(this=exp.to_identifier(name))))
    return AggregateView(
        name, spark_text(rewrite_typed(source)), tuple(keys), tuple(functions), tuple(arguments),
        tuple(outputs), reads_changes, last,
    )  # fmt: skip


def _keys_replaced(body: exp.Expr, key_expressions: list[exp.Expr], keys: list[str], key: str) -> exp.Expr:
    """`body` with each group key's expression as the key's column; a column left is neither grouped nor
    aggregated."""
    pairs = zip(key_expressions, keys, strict=True)
    texts = {expression.sql(dialect=Spark): column for expression, column in pairs}

    def replace(node: exp.Expr) -> exp.Expr:
        column = texts.get(node.sql(dialect=Spark))
        return exp.column(column) if column else node

    body = body.transform(replace)
    for column in body.find_all(exp.Column):
        if not column.name.startswith(("__aggregate_key_", "__aggregate_")):
            raise FlinkSqlError(
                f"{key}: {column.sql(dialect=Spark)} is neither a GROUP BY key nor in an aggregate"
            )
    return body


def _pass_changes_on(select: exp.Select, key: str, last: bool) -> None:
    """The SELECTs above `select` up to the next aggregation (or, after the last, the query's root): each
    passes the change kind on, or, above the last, leaves the upserts as they are: only projections."""
    node = select.parent
    while node is not None:
        if isinstance(node, exp.Select):
            if aggregates_without_window(node, _SPARK_WINDOWS) and not last:
                return
            for clause in ("joins", "where", "group", "having", "distinct"):
                if node.args.get(clause):
                    raise FlinkSqlError(
                        f"{key}: {clause.upper().rstrip('S')} over an aggregation's updating results is not "
                        "supported; only projections are"
                    )
            if not last and not any(isinstance(projection, exp.Star) for projection in node.expressions):
                node.select(exp.column(CHANGE_COLUMN), copy=False)
        node = node.parent
