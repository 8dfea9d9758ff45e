"""Dagger's aggregate functions: CollectArray, DistinctCount, Features, FeaturesWithType and
PercentileAggregator.

Spark runs no Python aggregate in a streaming aggregation ("Streaming aggregation doesn't support group
aggregate pandas UDF"), and a SQL function may not contain an aggregate. So a call of a Dagger aggregate
is expanded in the query's tree (`jobs.model.sql`), before Spark reads the query, into Spark's own
aggregates (collect_list, collect_set, last) plus scalar finishing steps. Every aggregation then runs in
the JVM, in batch and in streaming (windowed or not), with Spark's state store keeping partial results:

| Dagger call                     | expands to                                                            |
|---------------------------------|-----------------------------------------------------------------------|
| CollectArray(x)                 | every x, nulls included: collect_list of a one-field struct, unwrapped |
| CollectArray(DISTINCT x)        | the same over collect_set                                             |
| DistinctCount(x)                | size(collect_set(x)): distinct non-null values                        |
| PercentileAggregator(p, v)      | commons-math's Percentile of collect_list(v) at the last p seen       |
| Features(k, v, ...)             | flatten(collect_list(per-row feature rows))                           |
| FeaturesWithType(k, v, t, ...)  | array_distinct(flatten(collect_list(per-row typed feature rows)))     |

The per-row feature rows come from a vectorized (Arrow) scalar function; the percentile's finishing step
is a SQL function. A call that can never run is refused with its place in the query as written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from sqlglot import exp

from jobs.model.sql_tree import call, cast
from jobs.udfs.feature_rows import FEATURE_ROWS_DDL, VALUE_TYPE_NAMES, feature_rows, unknown_type_message
from jobs.udfs.registration import FunctionSet

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
    """A call of a Dagger function that can never run (argument count, type name); `node` is the call, whose
    `meta` places it in the query as written."""

    def __init__(self, message: str, node: exp.Expr) -> None:
        super().__init__(message)
        self.node = node


def _decimal_as_double(node: exp.Expr) -> exp.Expr:
    # Dagger's arguments are DECIMAL(30, 3): values and percentile are rounded to 3 decimals first.
    return cast(cast(node, "DECIMAL", 30, 3), "DOUBLE")


def _key(node: exp.Expr) -> exp.Expr:
    """String.valueOf: a null key is the text "null"."""
    return call("coalesce", cast(node, "TEXT"), exp.Literal.string("null"))


def _collect_array(arguments: list[exp.Expr], distinct: bool) -> exp.Expr:
    # A struct is never null, so collect_list keeps the rows whose value is null, as Dagger's list does.
    collected = call(
        "collect_set" if distinct else "collect_list",
        call("named_struct", exp.Literal.string("value"), arguments[0]),
    )
    element = exp.Lambda(this=exp.column("value", table="item"), expressions=[exp.to_identifier("item")])
    return call("transform", collected, element)


def _distinct_count(arguments: list[exp.Expr], distinct: bool) -> exp.Expr:
    return call("size", call("collect_set", arguments[0]))


def _percentile(arguments: list[exp.Expr], distinct: bool) -> exp.Expr:
    quantile = cast(call("last", cast(arguments[0], "DECIMAL", 30, 3), exp.true()), "DOUBLE")
    return call(PERCENTILE_FUNCTION, quantile, call("collect_list", _decimal_as_double(arguments[1])))


def _features(arguments: list[exp.Expr], distinct: bool) -> exp.Expr:
    rows = [_key(argument) if index % 2 == 0 else argument for index, argument in enumerate(arguments)]
    return call("flatten", call("collect_list", call(FEATURE_ROWS_FUNCTION, *rows)))


def _features_with_type(arguments: list[exp.Expr], distinct: bool) -> exp.Expr:
    # Dagger keeps each (key, value, type) once: its accumulator is a map keyed by their hash.
    wraps: tuple[Callable[[exp.Expr], exp.Expr], ...] = (
        _key,
        lambda node: node,
        lambda node: cast(node, "TEXT"),
    )
    rows = [wraps[index % 3](argument) for index, argument in enumerate(arguments)]
    return call(
        "array_distinct", call("flatten", call("collect_list", call(TYPED_FEATURE_ROWS_FUNCTION, *rows)))
    )


@dataclass(frozen=True)
class _Expansion:
    arity: Callable[[int], str | None]
    """The error message for a number of arguments, None when it is valid."""
    expand: Callable[[list[exp.Expr], bool], exp.Expr]
    """The expanded call of (arguments, DISTINCT)."""
    distinct_allowed: bool = False


def _exactly(count: int, name: str) -> Callable[[int], str | None]:
    return lambda given: None if given == count else f"{name} takes {count} argument(s), got {given}"


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


def expand_aggregate_calls(tree: exp.Expr) -> None:
    """Every call of a Dagger aggregate in `tree` expanded, in place, into Spark aggregates (see the module
    doc); `FunctionCallError` for a call that can never run."""
    for node in list(tree.find_all(exp.Anonymous)):
        expansion = EXPANSIONS.get(node.name.lower())
        if expansion is not None and not isinstance(node.parent, exp.Dot):  # `db.name(...)` is another
            node.replace(_expand(node, expansion))


def _expand(node: exp.Anonymous, expansion: _Expansion) -> exp.Expr:
    arguments = list(node.expressions)
    distinct = bool(arguments) and isinstance(arguments[0], exp.Distinct)
    if distinct:
        arguments[:1] = arguments[0].expressions
    if distinct and not expansion.distinct_allowed:
        raise FunctionCallError(f"{node.name}: DISTINCT is not supported here", node)
    if (message := expansion.arity(len(arguments))) is not None:
        raise FunctionCallError(message, node)
    if isinstance(node.parent, exp.Window) and node.arg_key == "this":
        raise FunctionCallError(
            f"{node.name} is an aggregate and cannot be used with OVER (a window function)", node
        )
    if node.name.lower() == "featureswithtype":
        _check_type_literals(arguments)
    return expansion.expand(arguments, distinct)


def _check_type_literals(arguments: list[exp.Expr]) -> None:
    """A type name written as a literal is checked now, not when the first row arrives."""
    for argument in arguments[2::3]:
        if isinstance(argument, exp.Literal) and argument.is_string and argument.name not in VALUE_TYPE_NAMES:
            raise FunctionCallError(
                f"{unknown_type_message(argument.name)} (type names: {', '.join(VALUE_TYPE_NAMES)})", argument
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
