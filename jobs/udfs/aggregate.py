"""Dagger's aggregate functions: CollectArray, DistinctCount, Features, FeaturesWithType and
PercentileAggregator.

Spark runs no Python aggregate in a streaming aggregation ("Streaming aggregation doesn't support group
aggregate pandas UDF"), and a SQL function may not contain an aggregate. So a call of a Dagger aggregate
is expanded in the query text, before Spark parses it, into Spark's own aggregates (collect_list,
collect_set, last) plus scalar finishing steps. Every aggregation then runs in the JVM, in batch and in
streaming (windowed or not), with Spark's state store keeping partial results:

| Dagger call                     | expands to                                                            |
|---------------------------------|-----------------------------------------------------------------------|
| CollectArray(x)                 | every x, nulls included: collect_list of a one-field struct, unwrapped |
| CollectArray(DISTINCT x)        | the same over collect_set                                             |
| DistinctCount(x)                | size(collect_set(x)): distinct non-null values                        |
| PercentileAggregator(p, v)      | commons-math's Percentile of collect_list(v) at the last p seen       |
| Features(k, v, ...)             | flatten(collect_list(per-row feature rows))                           |
| FeaturesWithType(k, v, t, ...)  | array_distinct(flatten(collect_list(per-row typed feature rows)))     |

The per-row feature rows come from a vectorized (Arrow) scalar function; the percentile's finishing step
is a SQL function. Positions in the expanded text map back to the original query for error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import pyarrow as pa

from jobs.udfs.feature_rows import FEATURE_ROWS_DDL, VALUE_TYPE_NAMES, feature_rows, unknown_type_message
from jobs.udfs.registration import FunctionSet
from jobs.udfs.sql_text import Call, code_tokens, find_calls

ODD_NUMBER_OF_ARGUMENTS = "Odd number of arguments given to Udf. Requires even."
INVALID_NUMBER_OF_ARGUMENTS = (
    "Invalid number of arguments given to Udf. Requires arguments that is divisible by 3."
)
FEATURE_ROWS_FUNCTION = "dagger_feature_rows"
TYPED_FEATURE_ROWS_FUNCTION = "dagger_typed_feature_rows"
PERCENTILE_FUNCTION = "dagger_legacy_percentile"

# commons-math3 `Percentile(quantile).evaluate(values)` with its default (LEGACY) estimation, quantile in
# (0, 100]: pos = quantile/100 * (n + 1); the smallest value below position 1, the largest from position n,
# else linear interpolation between the values at positions floor(pos) and floor(pos) + 1 (1-based).
_PERCENTILE_AT = """CASE
  WHEN pos < 1 THEN sorted[0]
  WHEN pos >= size(sorted) THEN sorted[size(sorted) - 1]
  ELSE sorted[CAST(floor(pos) AS INT) - 1]
    + (pos - floor(pos)) * (sorted[CAST(floor(pos) AS INT)] - sorted[CAST(floor(pos) AS INT) - 1])
END"""
_PERCENTILE = f"""CASE
  WHEN quantile IS NULL OR quantile <= 0 OR quantile > 100 THEN CAST(raise_error(
    concat('out of bounds quantile value: ', coalesce(CAST(quantile AS STRING), 'null'),
           ', must be in (0, 100]')) AS DOUBLE)
  WHEN size(vals) = 0 THEN double('NaN')
  WHEN size(vals) = 1 THEN vals[0]
  ELSE {PERCENTILE_FUNCTION}_at(sort_array(vals), quantile / 100 * (size(vals) + 1))
END"""


class FunctionCallError(ValueError):
    """A call of a Dagger function that can never run (argument count, type name); `position` is its
    offset in the query text."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(message)
        self.position = position


@dataclass(frozen=True)
class _Argument:
    index: int
    wrap: str = "{}"
    """How the argument's text is placed, `{}` standing for it (in parentheses)."""


_Piece = str | _Argument


@dataclass(frozen=True)
class _Expansion:
    arity: Callable[[int], str | None]
    """The error message for a number of arguments, None when it is valid."""
    pieces: Callable[[int, bool], Sequence[_Piece]]
    """The expanded text for (argument count, DISTINCT)."""
    distinct_allowed: bool = False


def _exactly(count: int, name: str) -> Callable[[int], str | None]:
    return lambda given: None if given == count else f"{name} takes {count} argument(s), got {given}"


def _collect_array(count: int, distinct: bool) -> Sequence[_Piece]:
    collect = "collect_set" if distinct else "collect_list"
    # A struct is never null, so collect_list keeps the rows whose value is null, as Dagger's list does.
    return [f"transform({collect}(named_struct('value', ", _Argument(0), ")), item -> item.value)"]


def _distinct_count(count: int, distinct: bool) -> Sequence[_Piece]:
    return ["size(collect_set(", _Argument(0), "))"]


def _percentile(count: int, distinct: bool) -> Sequence[_Piece]:
    # Dagger's arguments are DECIMAL(30, 3): values and percentile are rounded to 3 decimals first.
    return [
        f"{PERCENTILE_FUNCTION}(CAST(last(CAST(",
        _Argument(0),
        " AS DECIMAL(30, 3)), true) AS DOUBLE), collect_list(CAST(CAST(",
        _Argument(1),
        " AS DECIMAL(30, 3)) AS DOUBLE)))",
    ]


_KEY = "coalesce(CAST({} AS STRING), 'null')"  # String.valueOf: a null key is the text "null"


def _features(count: int, distinct: bool) -> Sequence[_Piece]:
    pieces: list[_Piece] = [f"flatten(collect_list({FEATURE_ROWS_FUNCTION}("]
    for index in range(count):
        pieces += [", "] if index else []
        pieces.append(_Argument(index, _KEY if index % 2 == 0 else "{}"))
    return [*pieces, ")))"]


def _features_with_type(count: int, distinct: bool) -> Sequence[_Piece]:
    # Dagger keeps each (key, value, type) once: its accumulator is a map keyed by their hash.
    pieces: list[_Piece] = [f"array_distinct(flatten(collect_list({TYPED_FEATURE_ROWS_FUNCTION}("]
    wraps = (_KEY, "{}", "CAST({} AS STRING)")
    for index in range(count):
        pieces += [", "] if index else []
        pieces.append(_Argument(index, wraps[index % 3]))
    return [*pieces, "))))"]


EXPANSIONS: dict[str, _Expansion] = {
    "collectarray": _Expansion(_exactly(1, "CollectArray"), _collect_array, distinct_allowed=True),
    "distinctcount": _Expansion(_exactly(1, "DistinctCount"), _distinct_count, distinct_allowed=True),
    "percentileaggregator": _Expansion(_exactly(2, "PercentileAggregator"), _percentile),
    "features": _Expansion(lambda given: None if given % 2 == 0 else ODD_NUMBER_OF_ARGUMENTS, _features),
    "featureswithtype": _Expansion(
        lambda given: None if given % 3 == 0 else INVALID_NUMBER_OF_ARGUMENTS, _features_with_type
    ),
}
AGGREGATE_NAMES = ("CollectArray", "DistinctCount", "Features", "FeaturesWithType", "PercentileAggregator")


@dataclass(frozen=True)
class RewrittenSql:
    """A query with Dagger's aggregate calls expanded, and the way back to positions in the original."""

    text: str
    original: str
    segments: tuple[tuple[int, int, int, bool], ...] = ()
    """(start, end) in `text`, its start in the text rewritten, and whether it was copied verbatim."""
    earlier: RewrittenSql | None = None
    """The rewrite whose `text` this one rewrote (its `original` is this one's)."""

    def after(self, earlier: RewrittenSql) -> RewrittenSql:
        """This rewrite of `earlier.text`, mapping positions back to `earlier.original`."""
        return RewrittenSql(self.text, earlier.original, self.segments, earlier)

    def original_index(self, index: int) -> int:
        """The offset in the original query of offset `index` of the expanded one (inserted text maps to
        the start of the call it came from)."""
        rewritten = self.earlier.text if self.earlier is not None else self.original
        own = len(rewritten) if self.segments else index
        for start, end, original_start, verbatim in self.segments:
            if start <= index < end:
                own = original_start + (index - start) if verbatim else original_start
                break
        return self.earlier.original_index(own) if self.earlier is not None else own


class SqlBuilder:
    """Builds a rewritten query from copied spans of the original and inserted text."""

    def __init__(self, original: str) -> None:
        self.original = original
        self.parts: list[str] = []
        self.segments: list[tuple[int, int, int, bool]] = []
        self.length = 0

    def copy(self, start: int, end: int) -> None:
        self._add(self.original[start:end], start, verbatim=True)

    def insert(self, text: str, anchor: int) -> None:
        self._add(text, anchor, verbatim=False)

    def _add(self, text: str, original_start: int, verbatim: bool) -> None:
        if text:
            self.parts.append(text)
            self.segments.append((self.length, self.length + len(text), original_start, verbatim))
            self.length += len(text)

    def result(self) -> RewrittenSql:
        return RewrittenSql("".join(self.parts), self.original, tuple(self.segments))


def rewrite_aggregate_calls(sql: str) -> RewrittenSql:
    """`sql` with every call of a Dagger aggregate expanded into Spark aggregates (see the module doc)."""
    calls = find_calls(sql, set(EXPANSIONS))
    if not calls:
        return RewrittenSql(sql, sql)
    builder = SqlBuilder(sql)
    copied_to = 0
    for call in calls:
        builder.copy(copied_to, call.start)
        _expand(sql, call, builder)
        copied_to = call.close_paren + 1
    builder.copy(copied_to, len(sql))
    return builder.result()


def _expand(sql: str, call: Call, builder: SqlBuilder) -> None:
    expansion = EXPANSIONS[call.name.lower()]
    arguments = list(call.arguments)
    distinct = False
    first = code_tokens(sql[arguments[0][0] : arguments[0][1]]) if arguments else []
    if len(first) > 1:
        keyword = sql[arguments[0][0] + first[0].start : arguments[0][0] + first[0].end].lower()
        if keyword == "distinct":
            distinct = True
            arguments[0] = (arguments[0][0] + first[1].start, arguments[0][1])
    if distinct and not expansion.distinct_allowed:
        raise FunctionCallError(f"{call.name}: DISTINCT is not supported here", call.start)
    if (message := expansion.arity(len(arguments))) is not None:
        raise FunctionCallError(message, call.start)
    if call.after is not None and sql[call.after.start : call.after.end].lower() == "over":
        raise FunctionCallError(
            f"{call.name} is an aggregate and cannot be used with OVER (a window function)", call.start
        )
    if call.name.lower() == "featureswithtype":
        _check_type_literals(sql, arguments)
    for piece in expansion.pieces(len(arguments), distinct):
        if isinstance(piece, str):
            builder.insert(piece, call.start)
            continue
        start, end = arguments[piece.index]
        before, after = piece.wrap.split("{}")
        builder.insert(before + "(", start)
        builder.copy(start, end)
        builder.insert(")" + after, start)


def _check_type_literals(sql: str, arguments: list[tuple[int, int]]) -> None:
    """A type name written as a literal is checked now, not when the first row arrives."""
    for start, end in arguments[2::3]:
        tokens = code_tokens(sql[start:end])
        if len(tokens) == 1 and tokens[0].kind == "string" and sql[start] in "'\"":
            type_name = sql[start + 1 : end - 1]
            if type_name not in VALUE_TYPE_NAMES:
                raise FunctionCallError(
                    f"{unknown_type_message(type_name)} (type names: {', '.join(VALUE_TYPE_NAMES)})", start
                )


def _feature_rows_function(function: str, typed: bool) -> Callable[..., pa.Array]:
    step = 3 if typed else 2

    def rows(*columns: pa.Array) -> pa.Array:
        if len(columns) % step:
            raise ValueError(INVALID_NUMBER_OF_ARGUMENTS if typed else ODD_NUMBER_OF_ARGUMENTS)
        names, values = list(columns[0::step]), list(columns[1::step])
        return feature_rows(function, names, values, list(columns[2::3]) if typed else None)

    return rows


def declare(functions: FunctionSet) -> None:
    """The helpers the expanded calls use (an expanded query names the ones it needs)."""
    at = f"{PERCENTILE_FUNCTION}_at"
    functions.sql(at, "sorted ARRAY<DOUBLE>, pos DOUBLE", "DOUBLE", _PERCENTILE_AT)
    functions.sql(PERCENTILE_FUNCTION, "quantile DOUBLE, vals ARRAY<DOUBLE>", "DOUBLE", _PERCENTILE)
    for name, function, typed in (
        (FEATURE_ROWS_FUNCTION, "Features", False),
        (TYPED_FEATURE_ROWS_FUNCTION, "FeaturesWithType", True),
    ):
        functions.arrow(name, _feature_rows_function(function, typed), FEATURE_ROWS_DDL)
