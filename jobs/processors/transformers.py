"""Transformers: DataFrame -> DataFrame steps usable as pre-processors (per stream) and post-processors.

A custom transformer is any callable `(frame, context, **arguments) -> DataFrame` named by its import
path (`package.module:name`); `context` is a `TransformContext`. It runs on the driver while the query is
planned, so it builds on the DataFrame API (or `mapInArrow` for Python on the rows, in Arrow batches).
"""

from __future__ import annotations

import importlib

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs import sql as sql_stage
from jobs.processors.config import (
    ClearColumn,
    CustomTransformer,
    Deduplicate,
    Hash,
    InvalidRecordFilter,
    PluginTransformer,
    SqlTransformer,
    Transformer,
)
from jobs.processors.context import ProcessorError, TransformContext


def apply_transformer(frame: DataFrame, config: Transformer, context: TransformContext) -> DataFrame:
    if isinstance(config, InvalidRecordFilter):
        return frame  # the stream already dropped (and counted) its undecodable records: see spec
    if isinstance(config, ClearColumn):
        if config.column not in frame.columns:
            raise context.error(
                f"clear_column: no column {config.column!r} (columns: {', '.join(frame.columns)})"
            )
        return frame.withColumn(config.column, F.lit(""))
    if isinstance(config, SqlTransformer):
        return _sql(frame, config, context)
    if isinstance(config, CustomTransformer):
        return _custom(frame, config, context)
    if isinstance(config, Deduplicate):
        from jobs.processors.deduplicate import deduplicate

        return deduplicate(frame, config, context)
    if isinstance(config, Hash):
        from jobs.processors.hashing import hash_columns

        return hash_columns(frame, config, context)
    if isinstance(config, PluginTransformer):
        from jobs.processors.plugin import apply_plugin

        return apply_plugin(frame, config, context)
    raise context.error(f"unknown transformer kind {config.kind!r}")


def _sql(frame: DataFrame, config: SqlTransformer, context: TransformContext) -> DataFrame:
    table = config.table or context.table
    frame.createOrReplaceTempView(table)
    try:
        return sql_stage.analyse(context.spark, config.sql)
    except sql_stage.SqlError as error:
        raise context.error(f"sql: {error}") from None


def _custom(frame: DataFrame, config: CustomTransformer, context: TransformContext) -> DataFrame:
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
