"""A custom transformer, loaded by import path in the processor tests."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.processors.context import TransformContext


def label_rows(frame: DataFrame, context: TransformContext, label: str) -> DataFrame:
    return frame.withColumn("label", F.lit(f"{label}:{context.table}"))


def not_a_frame(frame: DataFrame, context: TransformContext) -> str:
    return "oops"
