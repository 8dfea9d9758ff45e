"""Flink's window table-valued functions in window aggregations, as the group windows they equal.

    SELECT window_start, window_end, k, COUNT(*) AS n
    FROM TABLE(TUMBLE(TABLE t, DESCRIPTOR(rowtime), INTERVAL '10' MINUTES))
    GROUP BY window_start, window_end, k

computes the rows of

    SELECT TUMBLE_START(rowtime, INTERVAL '10' MINUTES) AS window_start,
           TUMBLE_END(rowtime, INTERVAL '10' MINUTES) AS window_end, k, COUNT(*) AS n
    FROM t GROUP BY TUMBLE(rowtime, INTERVAL '10' MINUTES), k

(`window_time` is the group window's TUMBLE_ROWTIME), and this pass writes the first as the second, in
Flink's syntax, before the other passes read the query. HOP is the same, its slide first. Named arguments
(`DATA => TABLE t, TIMECOL => DESCRIPTOR(rowtime), SIZE => ...`) are read too.

CUMULATE(TABLE t, DESCRIPTOR(rowtime), STEP, SIZE) has no group window: each row belongs to the windows
of its SIZE period that end a whole number of STEPs after the period starts, and after the row. The
input gets a row per such end (`explode` of the ends, in microseconds, `__cumulate_end_us`), and the
aggregation groups by the TUMBLE of the period and that end. Its rows come out as the period's window
closes (Flink emits each window as its own end passes): the same rows, later.

Refused by name: the SESSION table function (its sessions span every key unless partitioned; the SESSION
group window says what it groups), an OFFSET, and a window table function outside a window aggregation
(window joins, window Top-N, plain window assignment).
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot.tokens import TokenType

from jobs.raystack.flink_sql.intervals import window_length_ms
from jobs.raystack.flink_sql.tokens import GROUP_BY_ENDS, Edit, FlinkDialect, TokenScan, apply_edits, tokenize

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


def rewrite_window_tvfs(text: str, key: str) -> str:
    """The query with each window aggregation over a window table function written as a group window."""
    scan = TokenScan(text, tokenize(FlinkDialect, text, key), key)
    edits: list[Edit] = []
    for index in range(len(scan.tokens)):
        if (
            scan.tokens[index].token_type == TokenType.TABLE
            and scan.is_call(index)
            and scan.is_call(index + 2)
            and scan.upper(index + 2) in (*_PARAMETERS, *_REFUSED)
        ):
            edits.extend(_window_aggregation(scan, index))
    return apply_edits(text, edits) if edits else text


def _window_aggregation(scan: TokenScan, table: int) -> Iterator[Edit]:
    function = table + 2
    kind = scan.upper(function)
    if kind in _REFUSED:
        raise scan.fail(function, _REFUSED[kind])
    if scan.partner[function + 1] + 1 != scan.partner[table + 1]:
        raise scan.fail(table, f"TABLE(...) must hold one {kind}(...) call")
    arguments = _named_arguments(scan, function, _PARAMETERS[kind])
    call = scan.call_text(function)
    if "OFFSET" in arguments:
        raise scan.fail(arguments["OFFSET"][0], f"{call}: a window OFFSET is not supported")
    missing = [name for name in _PARAMETERS[kind][:-1] if name not in arguments]
    if missing:
        shape = ", ".join(_PARAMETERS[kind][:-1])
        raise scan.fail(function, f"{call}: {kind} takes ({shape}); {', '.join(missing)} missing")
    time_column = _descriptor_column(scan, *arguments["TIMECOL"], call)
    data = _data(scan, *arguments["DATA"], call)
    if kind == "CUMULATE":
        window = f"{time_column}, {scan.source(*arguments['SIZE'])}"
        data = _with_cumulate_ends(scan, arguments, call, time_column, data)
        grouped_window = f"TUMBLE({window})"
        replacements = {
            "START": f"TUMBLE_START({window})",
            "END": f"timestamp_micros({_CUMULATE_END})",
            "ROWTIME": f"timestamp_micros({_CUMULATE_END} - 1)",
        }
    else:
        sizes = ", ".join(scan.source(*arguments[name]) for name in _PARAMETERS[kind][2:-1])
        window = f"{time_column}, {sizes}"
        grouped_window = f"{kind}({window})"
        replacements = {part: f"{kind}_{part}({window})" for part in ("START", "END", "ROWTIME")}
    yield scan.span(table, scan.partner[table + 1], data)

    block = scan.block[table]
    group_by = next(
        (
            index
            for index in range(block + 1, len(scan.tokens))
            if scan.tokens[index].token_type == TokenType.GROUP_BY
            and scan.block[index] == block
            and scan.enclosing[index] == scan.enclosing[block]
        ),
        None,
    )
    outside = (
        f"{kind}(...) is supported in a window aggregation (GROUP BY window_start, window_end, ...); "
        "window joins, window Top-N and window assignment without an aggregation are not"
    )
    if block < 0 or group_by is None:
        raise scan.fail(function, outside)
    grouped = scan.items(group_by + 1, scan.clause_end(group_by, GROUP_BY_ENDS))
    named = {_window_column(scan, first, last): (first, last) for first, last in grouped}
    if "WINDOW_START" not in named or "WINDOW_END" not in named:
        raise scan.fail(function, outside)
    # The group window takes the place of window_start; window_end and window_time (Flink has a selected
    # window_time grouped too) go, but a cumulating window's end, which the group window does not give.
    replaced = {named["WINDOW_START"]: grouped_window, named["WINDOW_END"]: _CUMULATE_END}
    kept = [
        replaced.get((first, last), scan.source(first, last))
        for first, last in grouped
        if (first, last) not in (named.get("WINDOW_END"), named.get("WINDOW_TIME"))
        or (kind == "CUMULATE" and (first, last) == named["WINDOW_END"])
    ]
    yield scan.span(grouped[0][0], grouped[-1][1], ", ".join(kept))
    yield from _window_column_edits(scan, block, group_by, replacements)


def _with_cumulate_ends(
    scan: TokenScan, arguments: dict[str, tuple[int, int]], call: str, time_column: str, data: str
) -> str:
    """The input with a row per cumulating window that each row is in: its end, in microseconds."""
    step_us, size_us = (window_length_ms(scan, *arguments[name], call) * 1000 for name in ("STEP", "SIZE"))
    if size_us % step_us:
        raise scan.fail(arguments["SIZE"][0], f"{call}: the SIZE must be a whole number of STEPs")
    at = f"unix_micros({time_column})"
    period = f"({at} div {size_us}) * {size_us}"
    first_end = f"{period} + (({at} - {period}) div {step_us} + 1) * {step_us}"
    ends = f"explode(sequence({first_end}, {period} + {size_us}, {step_us}))"
    return f"(SELECT *, {ends} AS {_CUMULATE_END} FROM {data})"


def _named_arguments(
    scan: TokenScan, function: int, parameters: tuple[str, ...]
) -> dict[str, tuple[int, int]]:
    """The call's arguments by parameter name, positional (in Flink's order) or `NAME => value`."""
    found: dict[str, tuple[int, int]] = {}
    for position, (first, last) in enumerate(scan.arguments(function)):
        name = parameters[position] if position < len(parameters) else ""
        if first + 1 <= last and scan.tokens[first + 1].token_type == TokenType.FARROW:
            name, first = scan.upper(first), first + 2
        if name not in parameters:
            raise scan.fail(first, f"{scan.call_text(function)}: no parameter {name or position + 1}")
        found[name] = (first, last)
    return found


def _data(scan: TokenScan, first: int, last: int, call: str) -> str:
    """The window function's input: `TABLE name` or a parenthesized query."""
    if scan.tokens[first].token_type == TokenType.TABLE and first < last:
        return scan.source(first + 1, last)
    if scan.tokens[first].token_type == TokenType.L_PAREN and scan.partner[first] == last:
        return scan.source(first, last)
    raise scan.fail(first, f"{call}: the data is TABLE <name> or a query in parentheses")


def _descriptor_column(scan: TokenScan, first: int, last: int, call: str) -> str:
    if scan.upper(first) == "DESCRIPTOR" and scan.is_call(first) and scan.partner[first + 1] == last:
        columns = scan.arguments(first)
        if len(columns) == 1:
            return scan.source(*columns[0])
    raise scan.fail(first, f"{call}: the time column is DESCRIPTOR(<one column>)")


def _window_column(scan: TokenScan, first: int, last: int) -> str | None:
    """WINDOW_START, WINDOW_END or WINDOW_TIME if tokens first..last are that column, maybe qualified."""
    name = scan.upper(last)
    qualified = last == first + 2 and scan.tokens[first + 1].token_type == TokenType.DOT
    return name if name in _WINDOW_COLUMNS and (first == last or qualified) else None


def _window_column_edits(
    scan: TokenScan, block: int, group_by: int, replacements: dict[str, str]
) -> Iterator[Edit]:
    """`window_start`, `window_end` and `window_time` in the SELECT's columns and HAVING as `replacements`
    says (the group window's functions, by START, END and ROWTIME); a column that is only one of them
    keeps its name."""
    level = scan.enclosing[block]
    clauses = [
        index
        for index in range(block, len(scan.tokens))
        if scan.block[index] == block
        and scan.enclosing[index] == level
        and scan.tokens[index].token_type
        in (TokenType.FROM, TokenType.WHERE, TokenType.GROUP_BY, TokenType.HAVING, TokenType.ORDER_BY)
    ]
    from_clause = clauses[0]
    columns = scan.items(block + 1, from_clause - 1)
    for index in range(block + 1, len(scan.tokens)):
        name = scan.upper(index)
        if scan.block[index] != block or name not in _WINDOW_COLUMNS or scan.is_call(index):
            continue
        clause = next((at for at in reversed(clauses) if at < index), block)
        first = index - 2 if scan.tokens[index - 1].token_type == TokenType.DOT else index
        if clause == group_by:
            continue
        if clause != block and scan.tokens[clause].token_type != TokenType.HAVING:
            if scan.tokens[clause].token_type == TokenType.WHERE:
                raise scan.fail(
                    index, f"{name.lower()} is not supported in the WHERE of a window aggregation"
                )
            continue  # FROM: a column of a joined table; ORDER BY: the output column it names
        function = replacements[_WINDOW_COLUMNS[name]]
        alone = clause == block and (first, index) in columns
        yield scan.span(first, index, f"{function} AS {scan.tokens[index].text}" if alone else function)
