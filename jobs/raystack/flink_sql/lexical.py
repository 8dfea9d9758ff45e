"""The lexical pass: what Spark cannot run is refused by name, and Flink's spellings of literals, types,
intervals and some functions are written the way Spark reads them. It works on Flink-lexed tokens (`''`
escapes a quote, a backslash is a character), so it runs before anything is parsed."""

from __future__ import annotations

import re
from collections.abc import Iterator

from sqlglot.tokens import TokenType

from jobs.raystack.flink_sql.functions import refusal
from jobs.raystack.flink_sql.intervals import IntervalLiteral
from jobs.raystack.flink_sql.tokens import Edit, TokenScan

AUXILIARY = re.compile(r"^(TUMBLE|HOP|SESSION)_(START|END|ROWTIME|PROCTIME)$")
_SPARK_TYPES = {"VARCHAR": "STRING", "BYTES": "BINARY", "TIMESTAMP_LTZ": "TIMESTAMP"}
# Functions whose names Spark's built-ins take with other meanings: a Flink query means Dagger's function
# (Split) or Flink's (REGEXP_EXTRACT, which gives NULL where nothing matches).
_DAGGER_FUNCTIONS_SHADOWED_BY_SPARK = {"SPLIT": "DaggerSplit", "REGEXP_EXTRACT": "FlinkRegexpExtract"}
_TIME_UNIT_NAMES = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}
# Functions whose results have another type in Flink than Spark's of the same names: those of a time unit
# give BIGINTs (Spark's INTs), ARRAY_POSITION an INT (Spark's a BIGINT).
_BIGINT_TIME_FUNCTIONS = [
    "EXTRACT", "YEAR", "QUARTER", "MONTH", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE", "SECOND",
]  # fmt: skip
_FLINK_RESULT_TYPES = {**dict.fromkeys(_BIGINT_TIME_FUNCTIONS, "BIGINT"), "ARRAY_POSITION": "INT"}


def refuse_unsupported(scan: TokenScan) -> None:
    """Refuses, naming it, the first construct Spark streams cannot run; before parsing, since the parser
    would fail on some without naming them."""
    for index, token in enumerate(scan.tokens):
        name = token.text.upper()
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        reason = None
        if name == "MATCH_RECOGNIZE":
            reason = "MATCH_RECOGNIZE (row pattern matching) is not supported"
        elif name == "FOR" and scan.upper(index + 1) == "SYSTEM_TIME":
            reason = "temporal table joins (FOR SYSTEM_TIME AS OF) are not supported"
        elif name == "PROCTIME" and scan.is_call(index):
            reason = "processing time (PROCTIME()) is not supported: windows run on event time"
        elif (m := AUXILIARY.match(name)) and m.group(2) == "PROCTIME" and scan.is_call(index):
            reason = f"{name} (processing time) is not supported: windows run on event time"
        elif scan.is_call(index):
            reason = refusal(name)  # Flink's functions Spark lacks or means otherwise (functions.toml)
        if reason:
            raise scan.fail(index, reason)


def lexical_edits(scan: TokenScan) -> Iterator[Edit]:
    """Strings, intervals, type names, UNNEST and LATERAL TABLE, written the way Spark reads them."""
    index = 0
    while index < len(scan.tokens):
        token = scan.tokens[index]
        name = token.text.upper()
        if token.token_type == TokenType.STRING and ("\\" in token.text or "'" in token.text):
            escaped = token.text.replace("\\", "\\\\").replace("'", "\\'")
            yield Edit(token.start, token.end + 1, f"'{escaped}'")
        elif token.token_type == TokenType.INTERVAL:
            literal = IntervalLiteral.parse(scan, index)
            if literal is not None and literal.needs_rewrite:
                yield scan.span(index, literal.last, literal.spark())
                index = literal.last
        elif _in_cast_type(scan, index) and token.token_type != TokenType.IDENTIFIER:
            yield from _type_edit(scan, index, name)
        elif name in _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK and scan.is_call(index):
            yield scan.span(index, index, _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK[name])
        elif name == "UNNEST" and scan.is_call(index):
            yield _unnest_edit(scan, index)
        elif name == "COUNT" and scan.is_call(index) and scan.upper(index + 2) == "DISTINCT":
            if len(scan.arguments(index)) == 1:  # a BIGINT, as Flink's count
                closing = scan.partner[index + 1]
                yield scan.span(index, index + 2, "CAST(size(collect_set(")
                yield scan.span(closing, closing, ")) AS BIGINT)")
        elif name in _FLINK_RESULT_TYPES and scan.is_call(index):
            # Whole seconds, as Flink's (Spark's EXTRACT of SECOND has the fraction).
            seconds = name == "EXTRACT" and scan.upper(index + 2) == "SECOND"
            closing = scan.tokens[scan.partner[index + 1]]
            cast = f" AS {_FLINK_RESULT_TYPES[name]})"
            yield Edit(token.start, token.start, "CAST(FLOOR(" if seconds else "CAST(")
            yield Edit(closing.end + 1, closing.end + 1, f"){cast}" if seconds else cast)
        elif name == "FLOOR" and scan.is_call(index):
            yield from _floor_to_unit_edit(scan, index)
        elif token.token_type == TokenType.L_BRACKET:
            yield from _subscript_edit(scan, index)
        elif name == "LATERAL" and scan.upper(index + 1) == "TABLE" and scan.is_call(index + 1):
            opening = index + 2
            if not scan.is_call(opening + 1) or scan.partner[opening + 2] + 1 != scan.partner[opening]:
                raise scan.fail(index, "LATERAL TABLE(...) must hold one function call")
            yield scan.span(index + 1, opening, "")
            yield scan.span(scan.partner[opening], scan.partner[opening], "")
        index += 1


def _floor_to_unit_edit(scan: TokenScan, index: int) -> Iterator[Edit]:
    """`FLOOR(t TO unit)`: the instant truncated to the unit."""
    closing = scan.partner[index + 1]
    unit, to = closing - 1, closing - 2
    if to > index + 2 and scan.upper(to) == "TO" and scan.upper(unit) in _TIME_UNIT_NAMES:
        yield scan.span(index, index + 1, f"date_trunc('{scan.upper(unit)}', ")
        yield Edit(scan.tokens[to - 1].end + 1, scan.tokens[unit].end + 1, "")


def _subscript_edit(scan: TokenScan, index: int) -> Iterator[Edit]:
    """`x[i]` (Flink counts array elements from 1, and gives NULL past the end; `m[k]` a map's value)."""
    tokens = scan.tokens
    before = index - 1
    operand_ends = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN)
    if before < 0 or tokens[before].token_type not in operand_ends:
        return  # ARRAY[...] builds an array
    first = before
    if tokens[before].token_type == TokenType.R_PAREN:
        first = scan.partner[before] - (1 if scan.is_call(scan.partner[before] - 1) else 0)
    while first >= 2 and tokens[first - 1].token_type == TokenType.DOT:
        first -= 2
    closing = next(
        (
            position
            for position in range(index + 1, len(tokens))
            if tokens[position].token_type == TokenType.R_BRACKET
            and scan.enclosing[position] == scan.enclosing[index]
        ),
        None,
    )
    if closing is None:
        return
    yield Edit(tokens[first].start, tokens[first].start, "try_element_at(")
    yield scan.span(index, index, ", ")
    yield scan.span(closing, closing, ")")


def _in_cast_type(scan: TokenScan, index: int) -> bool:
    """Whether the token follows `AS` directly inside CAST(...) / TRY_CAST(...)."""
    opening = scan.enclosing[index]
    return (
        opening is not None
        and scan.tokens[index - 1].token_type == TokenType.ALIAS
        and scan.upper(opening - 1) in ("CAST", "TRY_CAST")
    )


def _type_edit(scan: TokenScan, index: int, name: str) -> Iterator[Edit]:
    if name in _SPARK_TYPES and not (name == "VARCHAR" and scan.is_call(index)):
        last = scan.partner[index + 1] if scan.is_call(index) else index
        yield scan.span(index, last, _SPARK_TYPES[name])
    elif name == "TIMESTAMP":  # Spark's timestamps have no precision; UTC sessions make them agree
        last = scan.partner[index + 1] if scan.is_call(index) else index
        for zone in (("WITH", "LOCAL", "TIME", "ZONE"), ("WITHOUT", "TIME", "ZONE")):
            if tuple(scan.upper(last + 1 + offset) for offset in range(len(zone))) == zone:
                last += len(zone)
        if last != index:
            yield scan.span(index, last, "TIMESTAMP")


def _unnest_edit(scan: TokenScan, index: int) -> Edit:
    """`UNNEST(x) AS t (a, b)`: rows spread into columns (inline); one column: the elements (explode)."""
    position = scan.partner[index + 1] + 1
    if position < len(scan.tokens) and scan.tokens[position].token_type == TokenType.ALIAS:
        position += 1
    names = 0
    if position + 1 < len(scan.tokens) and scan.tokens[position + 1].token_type == TokenType.L_PAREN:
        names = len(scan.arguments(position))
    if names == 0:
        raise scan.fail(
            index, "UNNEST(...) needs a table alias with column names (UNNEST(items) AS item (id, name))"
        )
    return scan.span(index, index, f"LATERAL {'inline' if names > 1 else 'explode'}")
