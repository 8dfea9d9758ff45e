"""Dagger's function library in Spark SQL: scalar functions, aggregates and table functions under
Dagger's names, plus users' own Python functions.

`register_functions` puts all of them on a session; it runs for every dagger build and is cheap when the
session already has them. Dagger's aggregates are not registered functions: `rewrite_aggregate_calls`
expands their calls in a query's text (see `jobs.udfs.aggregate`), which the SQL stage applies.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.schema_registry import SchemaRegistry
from jobs.udfs.config import FunctionsConfig


class FunctionsError(ValueError):
    """A function of the dagger's `functions:` section that cannot be registered."""


def register_functions(
    spark: SparkSession, registry: SchemaRegistry | None = None, config: FunctionsConfig | None = None
) -> None:
    """Register every Dagger function, the darts' store and the user's Python functions on `spark`."""
    from jobs.udfs import aggregate, darts, python_udfs, scalar, table

    config = config or FunctionsConfig()
    scalar.register(spark, registry)
    aggregate.register(spark)
    table.register(spark)
    darts.register(spark, config.darts)
    try:
        python_udfs.register(spark, config.python_udfs)
    except python_udfs.PythonUdfError as error:
        raise FunctionsError(f"functions.python_udfs: {error}") from None
