"""The structural pass: Flink's group windows (`GROUP BY TUMBLE(t, size)`, HOP, SESSION) and their
auxiliary functions as Spark's `window` and `session_window` columns. It works on the Spark-lexed text
and its parsed tree (which SELECT a GROUP BY belongs to, the names of its columns)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.tokens import TokenType

from jobs.raystack.flink_sql.intervals import spark_duration, window_length_ms
from jobs.raystack.flink_sql.lexical import AUXILIARY
from jobs.raystack.flink_sql.tokens import GROUP_BY_ENDS, Edit, TokenScan, quote

GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")
_SPARK_WINDOW_COLUMN = {"TUMBLE": "window", "HOP": "window", "SESSION": "session_window"}
# Dagger's aggregate functions, which the parser cannot know are aggregates.
_DAGGER_AGGREGATES = {"COLLECTARRAY", "DISTINCTCOUNT", "FEATURES", "FEATURESWITHTYPE", "PERCENTILEAGGREGATOR"}


@dataclass(frozen=True)
class GroupWindow:
    kind: str
    time_column: str
    sizes_ms: tuple[int, ...]  # TUMBLE: size; HOP: slide, size (Flink's order); SESSION: gap

    def spark_call(self) -> str:
        if self.kind == "SESSION":
            return f"session_window({self.time_column}, '{spark_duration(self.sizes_ms[0])}')"
        if self.kind == "HOP":
            slide, size = self.sizes_ms
            return f"window({self.time_column}, '{spark_duration(size)}', '{spark_duration(slide)}')"
        return f"window({self.time_column}, '{spark_duration(self.sizes_ms[0])}')"


def group_window_edits(scan: TokenScan, tree: exp.Expression) -> Iterator[Edit]:
    windows = _group_windows(scan)
    for index, token in enumerate(scan.tokens):
        name = token.text.upper()
        if name in GROUP_WINDOWS and scan.is_call(index) and index not in windows:
            raise scan.fail(index, f"the group window {name}(...) belongs in a GROUP BY")
    rowtimes: dict[int, list[str]] = {}  # names of the *_ROWTIME columns, by SELECT
    for index, token in enumerate(scan.tokens):
        match = AUXILIARY.match(token.text.upper())
        if not match or not scan.is_call(index) or token.token_type == TokenType.STRING:
            continue
        kind, part = match.groups()
        window = next((found for at, found in windows.items() if scan.block[at] == scan.block[index]), None)
        call = scan.call_text(index)
        if window is None:
            raise scan.fail(index, f"{call} needs {kind}(...) in the GROUP BY of its SELECT")
        if parse_window(scan, index, kind) != window:
            raise scan.fail(
                index,
                f"{call} does not match the GROUP BY window {window.kind}({window.time_column}, ...) of its "
                "SELECT",
            )
        column = _SPARK_WINDOW_COLUMN[kind]
        closing = scan.partner[index + 1]
        if part == "ROWTIME":
            rowtimes.setdefault(scan.block[index], []).append(_rowtime_alias(scan, tree, index, call))
            yield scan.span(index, closing, column)
        else:
            yield scan.span(index, closing, f"{column}.{part.lower()}")
    for window_index, window in windows.items():
        yield scan.span(window_index, scan.partner[window_index + 1], window.spark_call())
    for block, names in rowtimes.items():
        yield from _wrap_for_window_time(scan, tree, block, names)


def parse_window(scan: TokenScan, name_index: int, kind: str) -> GroupWindow:
    call = scan.call_text(name_index)
    arguments = scan.arguments(name_index)
    expected = 3 if kind == "HOP" else 2
    if len(arguments) != expected:
        shape = {"TUMBLE": "(time, size)", "HOP": "(time, slide, size)", "SESSION": "(time, gap)"}[kind]
        raise scan.fail(name_index, f"{call}: {kind} takes {expected} arguments {shape}")
    time_column = " ".join(scan.source(*arguments[0]).split())
    sizes = tuple(window_length_ms(scan, first, last, call) for first, last in arguments[1:])
    if kind == "HOP" and sizes[0] > sizes[1]:
        raise scan.fail(
            name_index,
            f"{call}: a slide longer than the window size is not supported (Flink's HOP takes the slide "
            "first, then the size)",
        )
    return GroupWindow(kind, time_column, sizes)


def _group_windows(scan: TokenScan) -> dict[int, GroupWindow]:
    """Group windows by the index of their name token; at most one per SELECT."""
    found: dict[int, GroupWindow] = {}
    per_block: dict[int, int] = {}
    for index, token in enumerate(scan.tokens):
        if token.token_type != TokenType.GROUP_BY:
            continue
        block = scan.block[index]
        items = scan.items(index + 1, scan.clause_end(index, GROUP_BY_ENDS))
        for first, _ in items:
            name = scan.upper(first)
            if name not in GROUP_WINDOWS or not scan.is_call(first):
                continue
            if name == "SESSION" and len(items) == 1:
                raise scan.fail(
                    first,
                    "a SESSION window needs a key beside it (GROUP BY SESSION(rowtime, gap), key): Spark "
                    "streams cannot aggregate sessions over all rows",
                )
            if block in per_block:
                raise scan.fail(
                    first,
                    f"one SELECT may group by one window only (also {scan.call_text(per_block[block])})",
                )
            per_block[block] = first
            found[first] = parse_window(scan, first, name)
    return found


def _rowtime_alias(scan: TokenScan, tree: exp.Expression, index: int, call: str) -> str:
    """The name under which `X_ROWTIME(...)` is selected; it must be a column of its SELECT itself."""
    start = scan.tokens[index].start
    node = next((found for found in tree.find_all(exp.Anonymous) if found.meta.get("start") == start), None)
    parent = node.parent if node is not None else None
    if isinstance(parent, exp.Alias) and isinstance(parent.parent, exp.Select):
        return parent.alias
    reason = f"{call} is supported as a named column of its SELECT (`{call} AS rowtime`), in no expression"
    raise scan.fail(index, reason)


def _wrap_for_window_time(
    scan: TokenScan, tree: exp.Expression, block: int, rowtimes: list[str]
) -> Iterator[Edit]:
    """Spark computes a window's rowtime (`window_time(window)`) outside the aggregation that made the
    window, so the SELECT becomes `SELECT ..., window_time(x) AS x FROM (<the SELECT>)`."""
    select = _select_node(scan, tree, block)
    names = [expression.alias_or_name for expression in select.expressions]
    if any(not name for name in names):
        raise scan.fail(
            block,
            "a SELECT with a *_ROWTIME column must name all its columns (add AS <name> to each expression)",
        )
    columns = [
        f"window_time({quote(name)}) AS {quote(name)}" if name in rowtimes else quote(name) for name in names
    ]
    start = scan.tokens[block].start
    yield Edit(start, start, f"SELECT {', '.join(columns)} FROM (")
    end = scan.tokens[scan.clause_end(block, {TokenType.SEMICOLON})].end + 1
    yield Edit(end, end, f") AS __dagger_rowtime_{block}")


def _select_node(scan: TokenScan, tree: exp.Expression, block: int) -> exp.Select:
    """The parsed SELECT that starts at token `block`: the one whose columns begin first after it."""
    following = scan.tokens[block + 1].start

    def first_position(select: exp.Select) -> int:
        starts = [
            node.meta["start"]
            for projection in select.expressions
            for node in _own_nodes(projection)
            if node.meta.get("start", -1) >= following
        ]
        return min(starts, default=len(scan.text))

    return min(tree.find_all(exp.Select), key=first_position)


def has_unwindowed_aggregation(tree: exp.Expression) -> bool:
    """Whether a SELECT aggregates without a group window (its results change as rows arrive)."""
    for select in tree.find_all(exp.Select):
        group = select.args.get("group")
        windowed = group is not None and any(
            isinstance(node, exp.Anonymous) and node.name.upper() in GROUP_WINDOWS for node in group.walk()
        )
        if windowed:
            continue
        aggregates = any(
            _is_aggregate(node) for projection in select.expressions for node in _own_nodes(projection)
        )
        if group is not None or aggregates or select.args.get("distinct") is not None:
            return True
    return False


def _own_nodes(expression: exp.Expression) -> Iterator[exp.Expression]:
    """The nodes of a SELECT's expression, without those of nested queries."""
    yield from expression.walk(prune=lambda node: isinstance(node, exp.Query | exp.Subquery))


def _is_aggregate(node: exp.Expression) -> bool:
    if isinstance(node, exp.AggFunc):
        return True
    return isinstance(node, exp.Anonymous) and node.name.upper() in _DAGGER_AGGREGATES
