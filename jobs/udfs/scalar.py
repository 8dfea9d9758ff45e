"""Dagger's scalar functions, registered in Spark SQL under their Dagger names.

Where a Spark built-in matches Dagger's semantics exactly the function is a SQL function (inlined into
the plan as built-in expressions); otherwise it is a vectorized Arrow UDF. Each module's docstring says
where its functions differ from Dagger's Java and why.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.schema_registry import SchemaRegistry
from jobs.udfs import arrays, dates, features, geo, json_path, longbow, strings, trends


def register(spark: SparkSession, registry: SchemaRegistry | None = None) -> None:
    """Register every scalar function on `spark` (the proto-reading ones need `registry`).

    Registering takes seconds (Spark analyses each SQL function's body), so a session that has them
    keeps them; only the proto-reading functions are replaced, as they carry the dagger's descriptors.
    """
    if not spark.catalog.functionExists("DaggerSplit"):
        for module in (arrays, dates, features, geo, json_path, trends, strings):
            module.register(spark)
    longbow.register(spark, registry)
