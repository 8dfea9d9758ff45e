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

_PLAIN = re.compile(r"SELECT\s+(?P<items>.+)\s+FROM\s+`?(?P<table>\w+)`?\s*", re.IGNORECASE | re.DOTALL)
_NOT_PLAIN = re.compile(
    r"\b(WHERE|GROUP|JOIN|UNNEST|OVER|DISTINCT|LIMIT|ORDER|UNION|HAVING|TABLE|MATCH_RECOGNIZE|COUNT|SUM|"
    r"AVG|MIN|MAX|COLLECT|LISTAGG|FIRST_VALUE|LAST_VALUE|PERCENTILE|TUMBLE\w*|HOP\w*|SESSION\w*|SELECT\s.*"
    r"SELECT)\b",
    re.IGNORECASE | re.DOTALL,
)
_ALIASED = re.compile(r"(?P<expression>.+?)\s+AS\s+`?(?P<name>\w+)`?", re.IGNORECASE | re.DOTALL)
_COLUMN = re.compile(r"`?(?P<name>\w+)`?")
SEPARATOR = "__"


@dataclass(frozen=True)
class Projection:
    """One plain projection of the corpus: its query id, table and select items (expression, name)."""

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
    """The query as a `Projection`, or None when it is not a plain projection of one of `tables`."""
    match = _PLAIN.fullmatch(sql.strip())
    if not match or match["table"] not in set(tables) or _NOT_PLAIN.search(match["items"]):
        return None
    items = []
    for item in _top_level_items(match["items"]):
        aliased, column = _ALIASED.fullmatch(item), _COLUMN.fullmatch(item)
        if aliased:
            items.append((aliased["expression"], aliased["name"]))
        elif column:
            items.append((item, column["name"]))
        else:
            return None  # an unnamed expression: its column name is each engine's own
    return Projection(query_id, match["table"], tuple(items))


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
