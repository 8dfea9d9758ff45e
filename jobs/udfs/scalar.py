"""Dagger's scalar functions, registered in Spark SQL under their Dagger names.

Where a Spark built-in matches Dagger's semantics exactly the function is a SQL function (inlined into
the plan as built-in expressions); otherwise it is a vectorized Arrow UDF. Each module's docstring says
where its functions differ from Dagger's Java and why.
"""

from __future__ import annotations

from jobs.model.schema_registry import SchemaRegistry
from jobs.udfs import arrays, dates, features, geo, json_path, longbow, strings, trends
from jobs.udfs.registration import FunctionSet


def declare(functions: FunctionSet, registry: SchemaRegistry | None = None) -> None:
    """Every scalar function (the proto-reading ones decode with `registry`'s descriptor sets)."""
    for module in (arrays, dates, features, geo, json_path, trends, strings):
        module.declare(functions)
    longbow.declare(functions, registry)
