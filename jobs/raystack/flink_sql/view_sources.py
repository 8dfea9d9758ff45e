"""The Spark SQL of an OVER or Top-N view's source (`over`, `top_n`), with the common table expressions it
reads.

A view's source is analysed alone, before the query (`over_operator.register_over_views`), so a table it
names that is a WITH clause of the query around it (a script's `CREATE VIEW`s become such clauses, and a
plain query may have its own) would not be found. The source carries, as its own WITH, each such clause it
reads, and those they read in turn, in the order the query declares them.
"""

from __future__ import annotations

from sqlglot import exp

from jobs.model.sql_tree import spark_text
from jobs.raystack.flink_sql.typed import rewrite_typed


def view_source_text(source: exp.Select, origin: exp.Expr) -> str:
    """The Spark SQL of `source`, a view's rows taken from the query at `origin` (a node still in the
    query's tree), with the WITH clauses around `origin` that it reads; in Flink's result types."""
    needed = _needed_ctes(source, _visible_ctes(origin))
    if needed:
        source = source.copy()
        source.set("with_", exp.With(expressions=[cte.copy() for cte in needed]))
    return spark_text(rewrite_typed(source))


def _visible_ctes(origin: exp.Expr) -> list[exp.CTE]:
    """The WITH clauses the query at `origin` can name, outermost scope first; a nearer clause of the same
    name hides a farther one."""
    scopes: list[list[exp.CTE]] = []
    node: exp.Expr | None = origin
    while node is not None:
        with_ = node.args.get("with_") if isinstance(node, exp.Query) else None
        if with_ is not None:
            scopes.append(list(with_.expressions))
        node = node.parent
    visible: dict[str, exp.CTE] = {}
    for scope in reversed(scopes):  # nearer scopes last: they win
        visible.update({cte.alias_or_name: cte for cte in scope})
    return list(visible.values())


def _needed_ctes(source: exp.Expr, visible: list[exp.CTE]) -> list[exp.CTE]:
    """The clauses of `visible` that `source` reads, directly or through one another, in `visible`'s order."""
    by_name = {cte.alias_or_name: cte for cte in visible}
    needed: set[str] = set()
    pending = [source]
    while pending:
        for table in pending.pop().find_all(exp.Table):
            name = table.name
            if not table.args.get("db") and name in by_name and name not in needed:
                needed.add(name)
                pending.append(by_name[name].this)
    return [cte for cte in visible if cte.alias_or_name in needed]
