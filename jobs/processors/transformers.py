"""Transformers: DataFrame -> DataFrame steps usable as pre-processors (per stream) and post-processors.

A custom transformer is any callable `(frame, context, **arguments) -> DataFrame` named by its import
path (`package.module:name`); `context` is a `TransformContext`. It runs on the driver while the query is
planned, so it builds on the DataFrame API (or `mapInArrow` for Python on the rows, in Arrow batches).
"""

from __future__ import annotations

import importlib
import pkgutil

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.metrics.stages import ROWS_IN, ROWS_OUT, counted
from jobs.model import sql as sql_stage
from jobs.processors.config import (
    ClearColumn,
    CustomTransformer,
    InvalidRecordFilter,
    SqlTransformer,
    TransformerConfig,
)
from jobs.processors.context import ProcessorError, TransformContext


def apply_transformer(frame: DataFrame, config: TransformerConfig, context: TransformContext) -> DataFrame:
    """`frame` transformed by one step, its rows in and out counted; each kind names its function
    (`applied_by`) in its config."""
    transformed = pkgutil.resolve_name(config.applied_by)(
        counted(frame, ROWS_IN, context.key, enabled=context.count_rows), config, context
    )
    return counted(transformed, ROWS_OUT, context.key, enabled=context.count_rows)


def keep_decoded_rows(frame: DataFrame, config: InvalidRecordFilter, context: TransformContext) -> DataFrame:
    return frame  # the stream already dropped (and counted) its undecodable records: see its config


def clear_column(frame: DataFrame, config: ClearColumn, context: TransformContext) -> DataFrame:
    if config.column not in frame.columns:
        raise context.error(
            f"clear_column: no column {config.column!r} (columns: {', '.join(frame.columns)})"
        )
    return frame.withColumn(config.column, F.lit(""))


def apply_sql(frame: DataFrame, config: SqlTransformer, context: TransformContext) -> DataFrame:
    table = config.table or context.table
    frame.createOrReplaceTempView(table)
    try:
        return sql_stage.analyse(context.spark, config.sql)
    except sql_stage.SqlError as error:
        raise context.error(f"sql: {error}") from None


def apply_custom(frame: DataFrame, config: CustomTransformer, context: TransformContext) -> DataFrame:
    module_name, _, attribute = config.transformer.partition(":")
    try:
        transformer = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise context.error(f"custom: cannot load {config.transformer!r}: {error}") from None
    try:
        result = transformer(frame, context, **config.arguments)
    except ProcessorError:
        raise
    except Exception as error:  # user code: report whatever it raised, naming it
        raise context.error(f"custom {config.transformer}: {type(error).__name__}: {error}") from error
    if not isinstance(result, DataFrame):
        raise context.error(f"custom {config.transformer} returned {type(result).__name__}, not a DataFrame")
    return result
