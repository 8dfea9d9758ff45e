"""How the scalar functions get into a Spark session: SQL functions over built-in expressions, or
vectorized Arrow UDFs when no built-in matches Dagger's semantics."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf


class UdfError(ValueError):
    """A function called with an argument it cannot work with; the message names function and argument."""


def create_sql_function(spark: SparkSession, name: str, parameters: str, returns: str, body: str) -> None:
    """`name(parameters)` as a SQL function: Spark inlines `body` into the plan, so it runs as built-in
    expressions (whole-stage code generation, no Python)."""
    spark.sql(f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({parameters}) RETURNS {returns} RETURN {body}")


def register_arrow(
    spark: SparkSession,
    name: str,
    function: Callable[..., pa.Array],
    returns: str,
    arities: tuple[int, ...] | None = None,
) -> None:
    """`function` (pyarrow arrays in, one array out, a whole Arrow batch per call) under `name`.

    Spark passes as many columns as the call has, so one Python function can serve all of a Dagger
    function's overloads: `arities` lists the argument counts it takes (default: its parameters; a
    function with `*arguments` and no `arities` checks the count itself).
    """
    parameters = inspect.signature(function).parameters.values()
    variadic = any(parameter.kind is inspect.Parameter.VAR_POSITIONAL for parameter in parameters)
    accepted = arities or (() if variadic else (len(parameters),))

    def checked(*arguments: pa.Array) -> pa.Array:
        if accepted:
            expect_arguments(name, len(arguments), *accepted)
        return function(*arguments)

    spark.udf.register(name, arrow_udf(checked, returns))


def expect_arguments(function: str, given: int, *allowed: int) -> None:
    if given not in allowed:
        counts = " or ".join(str(count) for count in allowed)
        raise UdfError(f"{function} takes {counts} arguments, got {given}")


def distinct_values(array: pa.Array) -> Iterator[tuple[object, pa.Array]]:
    """(value, row mask) for each distinct non-null value of an argument that is usually a literal
    (a time zone, a pattern, a JSONPath): the work that depends on it is then done once per value."""
    if array.null_count == len(array):
        return
    for value in pc.unique(array.drop_null()).to_pylist():
        yield value, pc.fill_null(pc.equal(array, pa.scalar(value, array.type)), False)


def floats(array: pa.Array) -> list[float | None]:
    """An argument's values as Python floats (SQL literals such as `-6.17` arrive as DECIMAL)."""
    return pc.cast(array, pa.float64()).to_pylist()


def ints(array: pa.Array) -> list[int | None]:
    return pc.cast(array, pa.int64()).to_pylist()


def epoch_millis(function: str, timestamps: pa.Array) -> pa.Array:
    """A TIMESTAMP (or TIMESTAMP_NTZ, read as UTC, or Dagger's ROW<seconds, nanos>) as epoch millis."""
    if pa.types.is_null(timestamps.type):  # an empty `array()` literal
        return pa.nulls(len(timestamps), pa.int64())
    if pa.types.is_struct(timestamps.type):
        seconds = pc.cast(pc.struct_field(timestamps, "seconds"), pa.int64())
        nanos = pc.cast(pc.struct_field(timestamps, "nanos"), pa.int64())
        return pc.add(pc.multiply(seconds, 1000), pc.divide(nanos, 1_000_000))
    if not pa.types.is_timestamp(timestamps.type):
        raise UdfError(f"{function}: expected a TIMESTAMP, got {timestamps.type}")
    millis = pc.floor_temporal(timestamps, unit="millisecond")
    return pc.cast(millis, pa.timestamp("ms", tz=timestamps.type.tz)).cast(pa.int64())
