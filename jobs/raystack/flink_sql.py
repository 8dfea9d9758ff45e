"""Flink SQL (as Dagger runs it in `FLINK_SQL_QUERY`) translated to Spark SQL.

The query is read with sqlglot: its lexer gives the tokens with their exact places in the text, its parser
the structure (which SELECT a GROUP BY belongs to, output column names, aggregations). The Spark text is
the user's own text with only the Flink-specific parts replaced, so everything else (functions, spacing,
comments) reaches Spark as written and Spark's error positions stay meaningful.

What changes:

| Flink                                          | Spark                                                |
|------------------------------------------------|------------------------------------------------------|
| `GROUP BY TUMBLE(t, size)`                     | `GROUP BY window(t, 'size')`                         |
| `GROUP BY HOP(t, slide, size)` (slide first)   | `GROUP BY window(t, 'size', 'slide')`                |
| `GROUP BY SESSION(t, gap)`                     | `GROUP BY session_window(t, 'gap')`                  |
| `TUMBLE_START(...)`, `HOP_END(...)`...         | `window.start`, `window.end` (`session_window.end`)  |
| `TUMBLE_ROWTIME(...) AS x` (HOP_, SESSION_)    | `window_time(window)`, through a wrapping SELECT     |
| `INTERVAL '1' HOUR(2)`, `INTERVAL '10' MINUTES` | `INTERVAL '1' HOUR`, `INTERVAL '10' MINUTE`         |
| `'it''s'`, `'\\d+'` (a backslash is a character) | `'it\\'s'`, `'\\\\d+'`                                  |
| `CAST(x AS VARCHAR)`, `TIMESTAMP(3)`, `BYTES`   | `STRING`, `TIMESTAMP`, `BINARY`                      |
| `, UNNEST(arr) AS t (a, b)`                    | `, LATERAL inline(arr) AS t (a, b)` (one name: explode) |
| `, LATERAL TABLE(fn(x)) AS T (a)`              | `, LATERAL fn(x) AS T (a)`                           |
| `Split(s, regex)` (Dagger's, Java's split)     | `DaggerSplit(s, regex)` (Spark's `split` wins the name) |
| `COUNT(DISTINCT x)` (no DISTINCT aggregates in Spark streams) | `size(collect_set(x))`    |
| `REGEXP_EXTRACT(s, regex, n)` (NULL: no match)  | `FlinkRegexpExtract(s, regex, n)` (Spark's gives '')  |
| `EXTRACT(SECOND FROM t)` (whole seconds)        | `CAST(FLOOR(EXTRACT(SECOND FROM t)) AS BIGINT)`      |
| `FLOOR(t TO MINUTE)`                           | `date_trunc('MINUTE', t)`                            |
| `a[1]`, `m['k']` (arrays count from 1)          | `try_element_at(a, 1)`, `try_element_at(m, 'k')`     |

These are found by reading Flink's documentation and by running the same queries on Apache Flink
(`tests/test_flink_oracle.py`); what still differs is listed in the docs' known limits.

Constructs Spark streams cannot run (OVER windows, MATCH_RECOGNIZE, temporal joins, window table-valued
functions, processing time) are refused with the construct named, before anything starts.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import ClassVar

import sqlglot
from sqlglot import exp
from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

GROUP_WINDOWS = ("TUMBLE", "HOP", "SESSION")
_AUXILIARY = re.compile(r"^(TUMBLE|HOP|SESSION)_(START|END|ROWTIME|PROCTIME)$")
_SPARK_WINDOW_COLUMN = {"TUMBLE": "window", "HOP": "window", "SESSION": "session_window"}
_TIME_UNITS_MS = {"DAY": 86_400_000, "HOUR": 3_600_000, "MINUTE": 60_000, "SECOND": 1_000}
_DAY_TIME_ORDER = ["DAY", "HOUR", "MINUTE", "SECOND"]
_INTERVAL_UNITS = {"YEAR", "MONTH", *_DAY_TIME_ORDER}
_WINDOW_TABLE_FUNCTIONS = {"TUMBLE", "HOP", "CUMULATE", "SESSION"}
_SET_OPERATORS = {TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT}
# Dagger's aggregate functions, which the parser cannot know are aggregates.
_DAGGER_AGGREGATES = {"COLLECTARRAY", "DISTINCTCOUNT", "FEATURES", "FEATURESWITHTYPE", "PERCENTILEAGGREGATOR"}
_SPARK_TYPES = {"VARCHAR": "STRING", "BYTES": "BINARY", "TIMESTAMP_LTZ": "TIMESTAMP"}
# Functions whose names Spark's built-ins take with other meanings: a Flink query means Dagger's function
# (Split) or Flink's (REGEXP_EXTRACT, which gives NULL where nothing matches).
_DAGGER_FUNCTIONS_SHADOWED_BY_SPARK = {"SPLIT": "DaggerSplit", "REGEXP_EXTRACT": "FlinkRegexpExtract"}
_TIME_UNIT_NAMES = {"YEAR", "QUARTER", "MONTH", "WEEK", "DAY", "HOUR", "MINUTE", "SECOND"}


class FlinkSqlError(ValueError):
    """Flink SQL that cannot run on Spark; the message names the construct and where it is."""


_KEYWORDS_BUT_SESSION = {key: value for key, value in Spark.Tokenizer.KEYWORDS.items() if key != "SESSION"}


class _Flink(Spark):
    """Flink's lexical rules: `''` escapes a quote and a backslash is an ordinary character; SESSION is a
    function name (the group window), not a keyword."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]
        KEYWORDS: ClassVar[dict[str, TokenType]] = _KEYWORDS_BUT_SESSION


class _SparkWindows(Spark):
    """Spark SQL in which SESSION(...) is still Flink's group window, a function call."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS: ClassVar[dict[str, TokenType]] = _KEYWORDS_BUT_SESSION


@dataclass(frozen=True)
class SparkQuery:
    """A translated query and what the dagger around it needs to know."""

    sql: str
    unwindowed_aggregation: bool
    """An aggregation without a group window (its results change as rows arrive: Spark's update mode)."""
    output_columns: tuple[str, ...]
    """Names of the result's columns, `""` where the query leaves one unnamed."""


@dataclass(frozen=True)
class _Edit:
    start: int
    end: int  # exclusive; start == end inserts
    text: str


@dataclass(frozen=True)
class _GroupWindow:
    kind: str
    time_column: str
    sizes_ms: tuple[int, ...]  # TUMBLE: size; HOP: slide, size (Flink's order); SESSION: gap

    def spark_call(self) -> str:
        if self.kind == "SESSION":
            return f"session_window({self.time_column}, '{_spark_duration(self.sizes_ms[0])}')"
        if self.kind == "HOP":
            slide, size = self.sizes_ms
            return f"window({self.time_column}, '{_spark_duration(size)}', '{_spark_duration(slide)}')"
        return f"window({self.time_column}, '{_spark_duration(self.sizes_ms[0])}')"


def translate(flink_sql: str, key: str = "FLINK_SQL_QUERY") -> SparkQuery:
    """The Spark SQL text of a Flink query; `key` names the setting in errors.

    Two passes: the lexical one rewrites literals, types, intervals and table functions (Flink's lexical
    rules, positions in the user's text); the structural one parses that Spark-lexed text and rewrites
    the group windows.
    """
    if not flink_sql.strip():
        raise FlinkSqlError(f"{key} is empty")
    flink = _TokenScan(flink_sql, _tokenize(_Flink, flink_sql, key), key)
    flink.refuse_unsupported()  # before parsing: the parser would fail on some without naming them
    lexed = _apply(flink_sql, list(flink.lexical_edits()))
    try:
        statements = [statement for statement in sqlglot.parse(lexed, read=_SparkWindows) if statement]
    except (ParseError, TokenError) as error:
        raise FlinkSqlError(f"{key} cannot be parsed: {_parse_message(error)}") from None
    if len(statements) != 1:
        raise FlinkSqlError(f"{key} must hold one query, found {len(statements)} statements")
    tree = statements[0]
    if not isinstance(tree, exp.Query):
        raise FlinkSqlError(f"{key} must be a query (SELECT ...), not {tree.key.upper()}")
    spark = _TokenScan(lexed, _tokenize(_SparkWindows, lexed, key), key)
    return SparkQuery(
        sql=_apply(lexed, list(spark.group_window_edits(tree))).strip().rstrip(";").strip(),
        unwindowed_aggregation=_has_unwindowed_aggregation(tree),
        output_columns=tuple(expression.alias_or_name for expression in tree.selects),
    )


def _tokenize(dialect: type[Spark], text: str, key: str) -> list[Token]:
    try:
        return dialect().tokenize(text)
    except TokenError as error:
        raise FlinkSqlError(f"{key} cannot be parsed: {_parse_message(error)}") from None


def _parse_message(error: ParseError | TokenError) -> str:
    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        description = re.sub(
            r"<Token token_type: [^>]*?text: (.*?), line: [^>]*>", r"'\1'", first["description"]
        )
        return f"{description} at line {first['line']}, column {first['col']}"
    return str(error).splitlines()[0]


# --------------------------------------------------------------------------------------------------------
# Tokens
# --------------------------------------------------------------------------------------------------------


class _TokenScan:
    """The query's tokens with their nesting: matching parentheses and the SELECT block of each token."""

    def __init__(self, text: str, tokens: list[Token], key: str) -> None:
        self.text = text
        self.tokens = tokens
        self.key = key
        self.partner: dict[int, int] = {}
        self.enclosing: list[int | None] = []  # index of the innermost open '(' around each token
        self.block: list[int] = []  # index of the SELECT token each token belongs to (-1: none)
        open_parens: list[int] = []
        blocks: list[tuple[int, int]] = []  # (parenthesis depth, SELECT index)
        for index, token in enumerate(tokens):
            if token.token_type == TokenType.R_PAREN:
                if not open_parens:
                    raise FlinkSqlError(f"{key}: unbalanced ')' {self.where(index)}")
                opening = open_parens.pop()
                self.partner[opening], self.partner[index] = index, opening
                while blocks and blocks[-1][0] > len(open_parens):
                    blocks.pop()
            elif token.token_type == TokenType.SELECT:
                while blocks and blocks[-1][0] >= len(open_parens):
                    blocks.pop()
                blocks.append((len(open_parens), index))
            self.enclosing.append(open_parens[-1] if open_parens else None)
            self.block.append(blocks[-1][1] if blocks else -1)
            if token.token_type == TokenType.L_PAREN:
                open_parens.append(index)
        if open_parens:
            raise FlinkSqlError(f"{key}: '(' {self.where(open_parens[-1])} is never closed")

    def where(self, index: int) -> str:
        token = self.tokens[index]
        return f"at line {token.line}, column {token.col - len(token.text) + 1}"

    def upper(self, index: int) -> str:
        return self.tokens[index].text.upper() if 0 <= index < len(self.tokens) else ""

    def is_call(self, index: int) -> bool:
        """A name followed by '(' (a function call)."""
        return (
            index + 1 < len(self.tokens)
            and self.tokens[index + 1].token_type == TokenType.L_PAREN
            and self.tokens[index].token_type not in (TokenType.STRING, TokenType.NUMBER)
        )

    def call_text(self, name_index: int) -> str:
        return self.source(name_index, self.partner[name_index + 1])

    def source(self, first: int, last: int) -> str:
        """The original text of tokens first..last (inclusive)."""
        return self.text[self.tokens[first].start : self.tokens[last].end + 1]

    def arguments(self, name_index: int) -> list[tuple[int, int]]:
        """(first, last) token indexes of each argument of the call at `name_index`."""
        opening, closing = name_index + 1, self.partner[name_index + 1]
        ranges: list[tuple[int, int]] = []
        start = opening + 1
        index = start
        while index < closing:
            token = self.tokens[index]
            if token.token_type == TokenType.L_PAREN:
                index = self.partner[index]
            elif token.token_type == TokenType.COMMA:
                ranges.append((start, index - 1))
                start = index + 1
            index += 1
        if start <= closing - 1:
            ranges.append((start, closing - 1))
        return ranges

    # ---- refusals --------------------------------------------------------------------------------

    def refuse_unsupported(self) -> None:
        for index, token in enumerate(self.tokens):
            name = token.text.upper()
            if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
                continue
            reason = None
            if name == "MATCH_RECOGNIZE":
                reason = "MATCH_RECOGNIZE (row pattern matching) is not supported"
            elif name == "FOR" and self.upper(index + 1) == "SYSTEM_TIME":
                reason = "temporal table joins (FOR SYSTEM_TIME AS OF) are not supported"
            elif name == "OVER":
                reason = (
                    "OVER windows are not supported: Spark streams cannot compute window functions over "
                    "rows; aggregate with a group window (TUMBLE, HOP or SESSION in the GROUP BY)"
                )
            elif name == "PROCTIME" and self.is_call(index):
                reason = "processing time (PROCTIME()) is not supported: windows run on event time"
            elif (m := _AUXILIARY.match(name)) and m.group(2) == "PROCTIME" and self.is_call(index):
                reason = f"{name} (processing time) is not supported: windows run on event time"
            elif (
                name == "TABLE"
                and self.is_call(index)
                and self.upper(index + 2) in _WINDOW_TABLE_FUNCTIONS
                and self.is_call(index + 2)
            ):
                reason = (
                    f"window table-valued functions (TABLE({self.upper(index + 2)}(...))) are not "
                    "supported; use a group window (TUMBLE, HOP or SESSION in the GROUP BY)"
                )
            if reason:
                raise FlinkSqlError(f"{self.key} {self.where(index)}: {reason}")

    # ---- group windows ---------------------------------------------------------------------------

    def group_window_edits(self, tree: exp.Expression) -> Iterator[_Edit]:
        windows = self._group_windows()
        for index, token in enumerate(self.tokens):
            name = token.text.upper()
            if name in GROUP_WINDOWS and self.is_call(index) and index not in windows:
                raise FlinkSqlError(
                    f"{self.key} {self.where(index)}: the group window {name}(...) belongs in a GROUP BY"
                )
        rowtimes: dict[int, list[str]] = {}  # names of the *_ROWTIME columns, by SELECT
        for index, token in enumerate(self.tokens):
            match = _AUXILIARY.match(token.text.upper())
            if not match or not self.is_call(index) or token.token_type == TokenType.STRING:
                continue
            kind, part = match.groups()
            window = self._window_of_block(windows, self.block[index])
            call = self.call_text(index)
            if window is None:
                raise FlinkSqlError(
                    f"{self.key} {self.where(index)}: {call} needs {kind}(...) in the GROUP BY of its SELECT"
                )
            own = self._parse_window(index, kind)
            if own != window:
                raise FlinkSqlError(
                    f"{self.key} {self.where(index)}: {call} does not match the GROUP BY window "
                    f"{window.kind}({window.time_column}, ...) of its SELECT"
                )
            column = _SPARK_WINDOW_COLUMN[kind]
            end = self.tokens[self.partner[index + 1]].end + 1
            if part == "ROWTIME":
                rowtimes.setdefault(self.block[index], []).append(self._rowtime_alias(tree, index, call))
                yield _Edit(token.start, end, column)
            else:
                yield _Edit(token.start, end, f"{column}.{part.lower()}")
        for window_index, window in windows.items():
            end = self.tokens[self.partner[window_index + 1]].end + 1
            yield _Edit(self.tokens[window_index].start, end, window.spark_call())
        for block, names in rowtimes.items():
            yield from self._wrap_for_window_time(tree, block, names)

    def _group_windows(self) -> dict[int, _GroupWindow]:
        """Group windows by the index of their name token; at most one per SELECT."""
        found: dict[int, _GroupWindow] = {}
        per_block: dict[int, int] = {}
        clause_ends = {TokenType.HAVING, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.SEMICOLON}
        for index, token in enumerate(self.tokens):
            if token.token_type != TokenType.GROUP_BY:
                continue
            block, paren = self.block[index], self.enclosing[index]
            position = index + 1
            while position < len(self.tokens):
                current = self.tokens[position]
                if current.token_type in clause_ends | _SET_OPERATORS | {TokenType.WINDOW}:
                    break
                if current.token_type == TokenType.R_PAREN and self.partner[position] == paren:
                    break
                name = current.text.upper()
                if name in GROUP_WINDOWS and self.is_call(position):
                    if block in per_block:
                        raise FlinkSqlError(
                            f"{self.key} {self.where(position)}: one SELECT may group by one window only "
                            f"(also {self.call_text(per_block[block])})"
                        )
                    per_block[block] = position
                    found[position] = self._parse_window(position, name)
                    position = self.partner[position + 1]
                elif current.token_type == TokenType.L_PAREN:
                    position = self.partner[position]
                position += 1
        return found

    def _window_of_block(self, windows: dict[int, _GroupWindow], block: int) -> _GroupWindow | None:
        for index, window in windows.items():
            if self.block[index] == block:
                return window
        return None

    def _parse_window(self, name_index: int, kind: str) -> _GroupWindow:
        call = self.call_text(name_index)
        arguments = self.arguments(name_index)
        expected = 3 if kind == "HOP" else 2
        if len(arguments) != expected:
            shape = {"TUMBLE": "(time, size)", "HOP": "(time, slide, size)", "SESSION": "(time, gap)"}[kind]
            raise FlinkSqlError(
                f"{self.key} {self.where(name_index)}: {call}: {kind} takes {expected} arguments {shape}"
            )
        time_column = " ".join(self.source(*arguments[0]).split())
        sizes = tuple(self._interval_ms(first, last, call) for first, last in arguments[1:])
        if kind == "HOP" and sizes[0] > sizes[1]:
            raise FlinkSqlError(
                f"{self.key} {self.where(name_index)}: {call}: a slide longer than the window size is not "
                "supported (Flink's HOP takes the slide first, then the size)"
            )
        return _GroupWindow(kind, time_column, sizes)

    def _interval_ms(self, first: int, last: int, call: str) -> int:
        where = f"{self.key} {self.where(first)}: {call}"
        literal = _IntervalLiteral.parse(self, first)
        if literal is None or literal.last != last:
            raise FlinkSqlError(f"{where}: expected an INTERVAL literal, got {self.source(first, last)!r}")
        try:
            milliseconds = literal.milliseconds()
        except ValueError as error:
            raise FlinkSqlError(f"{where}: {error}") from None
        if milliseconds <= 0:
            raise FlinkSqlError(f"{where}: a window needs a positive interval")
        return milliseconds

    def _rowtime_alias(self, tree: exp.Expression, index: int, call: str) -> str:
        """The name under which `X_ROWTIME(...)` is selected; it must be a column of its SELECT itself."""
        node = next(
            (
                found
                for found in tree.find_all(exp.Anonymous)
                if found.meta.get("start") == self.tokens[index].start
            ),
            None,
        )
        parent = node.parent if node is not None else None
        if isinstance(parent, exp.Alias) and isinstance(parent.parent, exp.Select):
            return parent.alias
        raise FlinkSqlError(
            f"{self.key} {self.where(index)}: {call} is supported as a named column of its SELECT "
            f"(`{call} AS rowtime`), not inside an expression"
        )

    def _wrap_for_window_time(self, tree: exp.Expression, block: int, rowtimes: list[str]) -> Iterator[_Edit]:
        """Spark computes a window's rowtime (`window_time(window)`) outside the aggregation that made the
        window, so the SELECT becomes `SELECT ..., window_time(x) AS x FROM (<the SELECT>)`."""
        select = self._select_node(tree, block)
        names = [expression.alias_or_name for expression in select.expressions]
        if any(not name for name in names):
            raise FlinkSqlError(
                f"{self.key} {self.where(block)}: a SELECT with a *_ROWTIME column must name all its "
                "columns (add AS <name> to each expression)"
            )
        columns = [
            f"window_time({_quote(name)}) AS {_quote(name)}" if name in rowtimes else _quote(name)
            for name in names
        ]
        last = self._block_end(block)
        yield _Edit(self.tokens[block].start, self.tokens[block].start, f"SELECT {', '.join(columns)} FROM (")
        end = self.tokens[last].end + 1
        yield _Edit(end, end, f") AS __dagger_rowtime_{block}")

    def _select_node(self, tree: exp.Expression, block: int) -> exp.Select:
        """The parsed SELECT that starts at token `block`: the one whose columns begin first after it."""
        following = self.tokens[block + 1].start

        def first_position(select: exp.Select) -> int:
            starts = [
                node.meta["start"]
                for projection in select.expressions
                for node in _own_nodes(projection)
                if node.meta.get("start", -1) >= following
            ]
            return min(starts, default=len(self.text))

        return min(tree.find_all(exp.Select), key=first_position)

    def _block_end(self, block: int) -> int:
        """Index of the last token of the SELECT starting at `block`."""
        paren = self.enclosing[block]
        index = block + 1
        while index < len(self.tokens):
            token = self.tokens[index]
            if token.token_type == TokenType.R_PAREN and self.partner[index] == paren:
                break
            if self.enclosing[index] == paren and (
                token.token_type in _SET_OPERATORS or token.token_type == TokenType.SEMICOLON
            ):
                break
            index += 1
        return index - 1

    # ---- lexical rewrites ------------------------------------------------------------------------

    def lexical_edits(self) -> Iterator[_Edit]:
        """Strings, intervals, type names, UNNEST and LATERAL TABLE, written the way Spark reads them."""
        index = 0
        while index < len(self.tokens):
            token = self.tokens[index]
            name = token.text.upper()
            if token.token_type == TokenType.STRING and ("\\" in token.text or "'" in token.text):
                escaped = token.text.replace("\\", "\\\\").replace("'", "\\'")
                yield _Edit(token.start, token.end + 1, f"'{escaped}'")
            elif token.token_type == TokenType.INTERVAL:
                literal = _IntervalLiteral.parse(self, index)
                if literal is not None and literal.needs_rewrite:
                    yield _Edit(token.start, self.tokens[literal.last].end + 1, literal.spark())
                    index = literal.last
            elif self._in_cast_type(index) and token.token_type != TokenType.IDENTIFIER:
                yield from self._type_edit(index, name)
            elif name in _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK and self.is_call(index):
                yield _Edit(token.start, token.end + 1, _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK[name])
            elif name == "UNNEST" and self.is_call(index):
                yield from self._unnest_edit(index)
            elif name == "COUNT" and self.is_call(index) and self.upper(index + 2) == "DISTINCT":
                if len(self.arguments(index)) == 1:
                    closing = self.tokens[self.partner[index + 1]]
                    yield _Edit(token.start, self.tokens[index + 2].end + 1, "size(collect_set(")
                    yield _Edit(closing.start, closing.end + 1, "))")
            elif name == "EXTRACT" and self.is_call(index) and self.upper(index + 2) == "SECOND":
                closing = self.tokens[self.partner[index + 1]]
                yield _Edit(token.start, token.start, "CAST(FLOOR(")
                yield _Edit(closing.end + 1, closing.end + 1, ") AS BIGINT)")
            elif name == "FLOOR" and self.is_call(index):
                yield from self._floor_to_unit_edit(index)
            elif token.token_type == TokenType.L_BRACKET:
                yield from self._subscript_edit(index)
            elif name == "LATERAL" and self.upper(index + 1) == "TABLE" and self.is_call(index + 1):
                opening = index + 2
                if not self.is_call(opening + 1) or self.partner[opening + 2] + 1 != self.partner[opening]:
                    raise FlinkSqlError(
                        f"{self.key} {self.where(index)}: LATERAL TABLE(...) must hold one function call"
                    )
                yield _Edit(self.tokens[index + 1].start, self.tokens[opening].end + 1, "")
                closing = self.tokens[self.partner[opening]]
                yield _Edit(closing.start, closing.end + 1, "")
            index += 1

    def _floor_to_unit_edit(self, index: int) -> Iterator[_Edit]:
        """`FLOOR(t TO unit)`: the instant truncated to the unit."""
        closing = self.partner[index + 1]
        unit, to = closing - 1, closing - 2
        if to > index + 2 and self.upper(to) == "TO" and self.upper(unit) in _TIME_UNIT_NAMES:
            opening = self.tokens[index + 1]
            yield _Edit(self.tokens[index].start, opening.end + 1, f"date_trunc('{self.upper(unit)}', ")
            yield _Edit(self.tokens[to - 1].end + 1, self.tokens[unit].end + 1, "")

    def _subscript_edit(self, index: int) -> Iterator[_Edit]:
        """`x[i]` (Flink counts array elements from 1, and gives NULL past the end; `m[k]` a map's value)."""
        before = index - 1
        operand_ends = (TokenType.VAR, TokenType.IDENTIFIER, TokenType.R_PAREN)
        if before < 0 or self.tokens[before].token_type not in operand_ends:
            return  # ARRAY[...] builds an array
        first = before
        if self.tokens[before].token_type == TokenType.R_PAREN:
            first = self.partner[before] - (1 if self.is_call(self.partner[before] - 1) else 0)
        while first >= 2 and self.tokens[first - 1].token_type == TokenType.DOT:
            first -= 2
        closing = next(
            (
                position
                for position in range(index + 1, len(self.tokens))
                if self.tokens[position].token_type == TokenType.R_BRACKET
                and self.enclosing[position] == self.enclosing[index]
            ),
            None,
        )
        if closing is None:
            return
        yield _Edit(self.tokens[first].start, self.tokens[first].start, "try_element_at(")
        yield _Edit(self.tokens[index].start, self.tokens[index].end + 1, ", ")
        yield _Edit(self.tokens[closing].start, self.tokens[closing].end + 1, ")")

    def _in_cast_type(self, index: int) -> bool:
        """Whether the token follows `AS` directly inside CAST(...) / TRY_CAST(...)."""
        opening = self.enclosing[index]
        return (
            opening is not None
            and self.tokens[index - 1].token_type == TokenType.ALIAS
            and self.upper(opening - 1) in ("CAST", "TRY_CAST")
        )

    def _type_edit(self, index: int, name: str) -> Iterator[_Edit]:
        token = self.tokens[index]
        if name in _SPARK_TYPES and not (name == "VARCHAR" and self.is_call(index)):
            last = self.partner[index + 1] if self.is_call(index) else index
            yield _Edit(token.start, self.tokens[last].end + 1, _SPARK_TYPES[name])
        elif name == "TIMESTAMP":  # Spark's timestamps have no precision; UTC sessions make them agree
            last = self.partner[index + 1] if self.is_call(index) else index
            for zone in (("WITH", "LOCAL", "TIME", "ZONE"), ("WITHOUT", "TIME", "ZONE")):
                if tuple(self.upper(last + 1 + offset) for offset in range(len(zone))) == zone:
                    last += len(zone)
            if last != index:
                yield _Edit(token.start, self.tokens[last].end + 1, "TIMESTAMP")

    def _unnest_edit(self, index: int) -> Iterator[_Edit]:
        """`UNNEST(x) AS t (a, b)`: rows spread into columns (inline); one column: the elements (explode)."""
        position = self.partner[index + 1] + 1
        if position < len(self.tokens) and self.tokens[position].token_type == TokenType.ALIAS:
            position += 1
        names = 0
        if position + 1 < len(self.tokens) and self.tokens[position + 1].token_type == TokenType.L_PAREN:
            names = len(self.arguments(position))
        if names == 0:
            raise FlinkSqlError(
                f"{self.key} {self.where(index)}: UNNEST(...) needs a table alias with column names "
                "(UNNEST(items) AS item (id, name))"
            )
        function = "inline" if names > 1 else "explode"
        yield _Edit(self.tokens[index].start, self.tokens[index].end + 1, f"LATERAL {function}")


@dataclass(frozen=True)
class _IntervalLiteral:
    """`INTERVAL [-]'value' UNIT[(p)] [TO UNIT[(p)]]`, the forms Flink (Calcite) accepts."""

    value: str
    units: tuple[str, ...]  # none (Spark's `INTERVAL '1 hour'`), one unit, or (from, to)
    last: int  # index of its last token
    needs_rewrite: bool  # a precision or a plural unit, which Spark does not read

    @classmethod
    def parse(cls, scan: _TokenScan, first: int) -> _IntervalLiteral | None:
        tokens = scan.tokens
        if tokens[first].token_type != TokenType.INTERVAL:
            return None
        position = first + 1
        sign = ""
        if position < len(tokens) and tokens[position].text in ("-", "+"):
            sign, position = tokens[position].text.replace("+", ""), position + 1
        if position >= len(tokens) or tokens[position].token_type not in (TokenType.STRING, TokenType.NUMBER):
            return None
        value, last = sign + tokens[position].text.strip(), position
        position += 1
        units: list[str] = []
        rewrite = False
        while position < len(tokens):
            unit = tokens[position].text.upper()
            singular = unit[:-1] if unit.endswith("S") and unit[:-1] in _INTERVAL_UNITS else unit
            if singular not in _INTERVAL_UNITS:
                break
            units.append(singular)
            rewrite = rewrite or singular != unit
            last, position = position, position + 1
            if position < len(tokens) and tokens[position].token_type == TokenType.L_PAREN:
                rewrite = True  # a precision, e.g. HOUR(2)
                last = scan.partner[position]
                position = last + 1
            if len(units) == 1 and position < len(tokens) and tokens[position].text.upper() == "TO":
                position += 1
                continue
            break
        return cls(value, tuple(units), last, rewrite)

    def spark(self) -> str:
        return f"INTERVAL '{self.value}' {' TO '.join(self.units)}"

    def milliseconds(self) -> int:
        """The interval's length; only day-time intervals with millisecond resolution size a window."""
        if not self.units:
            raise ValueError(f"INTERVAL '{self.value}' needs a unit (SECOND, MINUTE, HOUR or DAY)")
        if self.units[0] in ("YEAR", "MONTH"):
            raise ValueError("year-month intervals cannot size a window (months have no fixed length)")
        start = _DAY_TIME_ORDER.index(self.units[0])
        end = _DAY_TIME_ORDER.index(self.units[-1])
        if end < start:
            raise ValueError(f"INTERVAL ... {' TO '.join(self.units)} is not a valid range of units")
        negative = self.value.startswith("-")
        parts = re.split(r"[ :]", self.value.lstrip("-+"))
        units = _DAY_TIME_ORDER[start : end + 1]
        if len(parts) != len(units):
            raise ValueError(f"INTERVAL '{self.value}' does not fit {' TO '.join(self.units)}")
        total = Decimal(0)
        for part, unit in zip(parts, units, strict=True):
            try:
                amount = Decimal(part)
            except InvalidOperation:
                raise ValueError(f"INTERVAL '{self.value}': {part!r} is not a number") from None
            if amount != amount.to_integral_value() and unit != "SECOND":
                raise ValueError(f"INTERVAL '{self.value}': only seconds may have a fraction")
            total += amount * _TIME_UNITS_MS[unit]
        if total != total.to_integral_value():
            raise ValueError(f"INTERVAL '{self.value}': windows have millisecond resolution")
        return int(-total if negative else total)


def _spark_duration(milliseconds: int) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000)):
        if milliseconds % size == 0:
            count = milliseconds // size
            return f"{count} {unit}{'' if count == 1 else 's'}"
    return f"{milliseconds} milliseconds"


def _quote(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


def _apply(text: str, edits: list[_Edit]) -> str:
    ordered = sorted(edits, key=lambda edit: (edit.start, edit.end))
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            raise AssertionError(f"overlapping rewrites at {before.start}..{before.end} and {after.start}")
    for edit in reversed(ordered):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


# --------------------------------------------------------------------------------------------------------
# Structure
# --------------------------------------------------------------------------------------------------------


def _has_unwindowed_aggregation(tree: exp.Expression) -> bool:
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
