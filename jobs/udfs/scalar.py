"""Dagger's scalar functions, registered in Spark SQL under their Dagger names."""

from __future__ import annotations

from pyspark.sql import SparkSession

from jobs.schema_registry import SchemaRegistry


def register(spark: SparkSession, registry: SchemaRegistry | None = None) -> None:
    """Register every scalar function on `spark` (the proto-reading ones need `registry`)."""
