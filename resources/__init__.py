"""Dagster resources, one module per component kind (Spark now; streams, processors and sinks follow)."""

from resources.spark import SparkResource

__all__ = ["SparkResource"]
