"""Dagger's function library in Spark SQL: scalar functions, aggregates and table functions under
Dagger's names, plus users' own Python and Java functions.

`register_functions` puts them on a session before a dagger's SQL is analysed: Dagger's functions the
SQL names (registering one costs up to a second, and most queries call none), the user's Python and
Java functions always. Dagger's aggregates are not registered functions: `expand_aggregate_calls` expands
their calls in a query's tree (see `jobs.udfs.aggregate`), which the SQL stage applies; the expanded query
names the helpers they need.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING

from pyspark.sql import SparkSession

from jobs.model.schema_registry import SchemaRegistry
from jobs.udfs.config import FunctionsConfig

if TYPE_CHECKING:  # the package is imported by every Python worker (for its config): keep it light
    from jobs.udfs.registration import FunctionSet


class FunctionsError(ValueError):
    """A function of the dagger's `functions:` section that cannot be registered."""


def declared_functions(
    registry: SchemaRegistry | None = None, config: FunctionsConfig | None = None
) -> FunctionSet:
    """Every Dagger function, declared (nothing registered yet); the proto-reading ones decode with
    `registry`'s descriptor sets, the darts read the store of `config`."""
    from jobs.udfs import aggregate, darts, scalar, table
    from jobs.udfs.registration import FunctionSet

    functions = FunctionSet()
    scalar.declare(functions, registry)
    aggregate.declare(functions)
    table.declare(functions)
    darts.declare(functions, (config or FunctionsConfig()).darts)
    return functions


def register_functions(
    spark: SparkSession,
    registry: SchemaRegistry | None = None,
    config: FunctionsConfig | None = None,
    names: Collection[str] | None = None,
) -> list[str]:
    """Register the Dagger functions among `names` (any case; words that are no Dagger function are
    ignored, so the words of the SQL will do: see `jobs.model.sql.named_words`), or every one when `names` is
    None, then every Python and Java function of `config`. Returns the Dagger functions registered now: a
    function the session already has is kept, except those carrying the dagger's descriptor sets or dart
    store.
    """
    from jobs.udfs import java_udfs, python_udfs

    config = config or FunctionsConfig()
    registered = declared_functions(registry, config).register(spark, names)
    try:  # every one, called or not: loading them checks the files, imports and return types
        python_udfs.register(spark, config.python_udfs)
    except python_udfs.PythonUdfError as error:
        raise FunctionsError(f"functions.python_udfs: {error}") from None
    try:  # every one too: loading a class checks that it and what it needs are there
        java_udfs.register(spark, config.java_udfs)
    except java_udfs.JavaUdfError as error:
        raise FunctionsError(f"functions.java_udfs: {error}") from None
    return registered
