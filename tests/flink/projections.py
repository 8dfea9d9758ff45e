"""The corpus's plain projections, run together: one query per table on each engine instead of one per check.

A plain projection is `SELECT <items> FROM <table>`: no filter, join, UNNEST, aggregate or window, so each
input row gives exactly one output row. Such queries over the same table are merged into one `SELECT` that
holds every item, each renamed `<query id>__<name>`; a query's rows are then the merged rows cut down to its
own columns, named back, which is what it gives alone (the same expressions over the same rows). The
oracle's per-query cost is mostly each engine's start of a query (Flink's job, the dagger's micro-batches),
so the forty-odd projections cost the time of a few queries.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import ParseError, exp, parse_one

from jobs.raystack.flink_sql.dialect import FlinkDialect

_ITEMS = re.compile(r"SELECT\s+(?P<items>.+)\s+FROM\s+\S+\s*", re.IGNORECASE | re.DOTALL)
_ONE_ROW_PER_ROW_BREAKERS = (exp.AggFunc, exp.Window, exp.Unnest, exp.Subquery, exp.Select, exp.Lateral)
"""Nodes in a select item that change how many rows come out, or read other rows."""
SEPARATOR = "__"


@dataclass(frozen=True)
class Projection:
    """One plain projection of the corpus: its query id, table and select items (expression text, name)."""

    query_id: str
    table: str
    items: tuple[tuple[str, str], ...]


def _top_level_items(items: str) -> list[str]:
    """`items` split at the commas outside parentheses, brackets and quotes."""
    parts, depth, quoted, start = [], 0, None, 0
    for index, char in enumerate(items):
        if quoted:
            quoted = None if char == quoted else quoted
        elif char in "'`\"":
            quoted = char
        elif char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(items[start:index].strip())
            start = index + 1
    parts.append(items[start:].strip())
    return parts


def plain_projection(query_id: str, sql: str, tables: Iterable[str]) -> Projection | None:
    """The query as a `Projection`, or None when it is not a plain projection of one of `tables`. The
    translator's Flink parser decides; each item's expression keeps the query's own text, so that the merged
    query asks both engines the same syntax."""
    try:
        tree = parse_one(sql, read=FlinkDialect)
    except ParseError:
        return None
    source = tree.args.get("from_")
    clauses = {name for name, value in tree.args.items() if value} - {"expressions", "from_"}
    if (
        not isinstance(tree, exp.Select)
        or clauses
        or not (source and isinstance(source.this, exp.Table) and source.this.name in set(tables))
        or any(item.find(*_ONE_ROW_PER_ROW_BREAKERS) for item in tree.expressions)
        or not all(isinstance(item, (exp.Alias, exp.Column)) for item in tree.expressions)
    ):
        return None
    texts = _top_level_items(_ITEMS.fullmatch(sql.strip())["items"])
    if len(texts) != len(tree.expressions):
        return None
    items = []
    for text, item in zip(texts, tree.expressions, strict=True):
        expression = text[: text.upper().rindex(" AS ")] if isinstance(item, exp.Alias) else text
        items.append((expression.strip(), item.alias_or_name))
    return Projection(query_id, source.this.name, tuple(items))


def merged_sql(projections: Sequence[Projection]) -> str:
    """One query over the projections' table with every item of each, renamed `<query id>__<name>`."""
    (table,) = {projection.table for projection in projections}
    items = ", ".join(
        f"{expression} AS `{projection.query_id}{SEPARATOR}{name}`"
        for projection in projections
        for expression, name in projection.items
    )
    return f"SELECT {items} FROM {table}"


def cut(result: dict[str, Any], projection: Projection) -> dict[str, Any]:
    """A merged result (columns, rows of values) cut down to one projection's columns, named back; an error
    is kept as it is."""
    if "error" in result:
        return result
    prefix = projection.query_id + SEPARATOR
    kept = [index for index, column in enumerate(result["columns"]) if column.startswith(prefix)]
    return {
        "columns": [result["columns"][index].removeprefix(prefix) for index in kept],
        "rows": [[row[index] for index in kept] for row in result["rows"]],
    }
