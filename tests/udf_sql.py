"""The `sql` fixture of the function tests: one `SELECT` with every Dagger function registered."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import SparkSession

from jobs.model import sql as sql_stage
from jobs.model.schema_registry import SchemaRegistry
from jobs.udfs import register_functions


@pytest.fixture(scope="session")
def sql(spark: SparkSession, registry: SchemaRegistry) -> Callable[..., list[Any]]:
    """Runs `SELECT <expressions>` through the SQL stage, as a dagger or the SQL console would, with the
    functions registered, and returns the one row's values."""
    register_functions(spark, registry)

    def select(*expressions: str) -> list[Any]:
        return list(sql_stage.analyse(spark, "SELECT " + ", ".join(expressions)).collect()[0])

    return select
