"""Planning (driver): the plugin's schemas, its `initialize` params, a check that the program starts and
accepts them, and the `mapInArrow` step that runs it on the executors."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    MapType,
    StructField,
    StructType,
    _parse_datatype_string,
)

from jobs.processors.config import PluginTransformer
from jobs.processors.context import TransformContext
from jobs.processors.plugin.process import PluginPlan, PluginProcess, partition_function
from jobs.processors.plugin.protocol import PROTOCOL_VERSION, PluginError
from jobs.processors.plugin.values import Unsupported, decoder, encoder

log = logging.getLogger("dagger.plugin")

_WATERMARK_DELAY = "spark.watermarkDelayMs"


def plugin_name(config: PluginTransformer) -> str:
    """`name`, else the program's file name (the script's, when an interpreter runs a script file)."""
    if config.name:
        return config.name
    if len(config.command) > 1 and os.path.isfile(config.command[1]):
        return Path(config.command[1]).name
    return Path(config.command[0]).name


def apply_plugin(frame: DataFrame, config: PluginTransformer, context: TransformContext) -> DataFrame:
    """The rows the plugin returns for `frame`'s rows, with the output schema."""
    name = plugin_name(config)
    input_schema = frame.schema
    try:
        output_schema = _nullable(_parse_output_schema(config.output_schema, input_schema))
    except ValueError as error:
        raise context.error(f"plugin {name}: output_schema: {error}") from None
    for role, schema in (("input", input_schema), ("output", output_schema)):
        for field in schema.fields:
            try:
                encoder(field.dataType, field.name)
                decoder(field.dataType, field.name)
            except Unsupported as error:
                raise context.error(
                    f"plugin {name}: {role} column {field.name!r}: type {field.dataType.simpleString()} "
                    f"cannot cross the JSON-RPC protocol ({error}); cast it in SQL first"
                ) from None
    params = {
        "protocol_version": PROTOCOL_VERSION,
        "name": name,
        "dagger": context.dagger,
        "key": context.key,
        "table": context.table,
        "input_schema": _schema_json(input_schema),
        "output_schema": _schema_json(output_schema),
        "arguments": config.arguments,
        "batch_size": config.batch_size,
    }
    try:
        initialize = json.dumps(params, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:  # a YAML date, NaN...
        raise context.error(f"plugin {name}: arguments: {error}") from None
    plan = PluginPlan(
        name=name,
        key=context.key,
        command=tuple(config.command),
        environment=tuple(sorted(config.environment.items())),
        timeout_s=config.timeout.total_seconds(),
        batch_size=config.batch_size,
        initialize=initialize,
        input_schema=input_schema,
        output_schema=output_schema,
    )
    _handshake(plan, context)
    result = frame.mapInArrow(partition_function(plan), output_schema)
    return _keep_watermark(result, input_schema, output_schema, context)


def _handshake(plan: PluginPlan, context: TransformContext) -> None:
    """Start the program once on the driver: it starts, and accepts its schemas and arguments."""
    process: PluginProcess | None = None
    try:
        process = PluginProcess(plan, f"plugin {plan.name}", forward=_log_driver(plan.name))
        info = process.initialize()
    except PluginError as error:
        raise context.error(str(error)) from None
    finally:
        if process is not None:
            process.close()
    about = " ".join(str(info[key]) for key in ("name", "version") if isinstance(info.get(key), str | int))
    log.info("plugin %s (%s) answers initialize%s", plan.name, plan.key, f": {about}" if about else "")


def _log_driver(name: str) -> Callable[[str], None]:
    logger = logging.getLogger(f"dagger.plugin.{name}")
    return logger.info


def _parse_output_schema(text: str | None, input_schema: StructType) -> StructType:
    """Spark DDL; a leading `*` stands for the input's columns (`*, extra BIGINT` appends one)."""
    if text is None or not text.strip():
        return input_schema
    fields: list[StructField] = []
    match = re.fullmatch(r"\s*\*\s*(?:,(.*))?", text, flags=re.DOTALL)
    if match:
        fields.extend(input_schema.fields)
        text = match.group(1) or ""
    if text.strip():
        try:
            parsed = _parse_datatype_string(text)
        except Exception as error:  # Spark raises several kinds for a bad schema string
            raise ValueError(f"not a Spark DDL schema ({_first_line(str(error))})") from None
        if not isinstance(parsed, StructType):
            raise ValueError(f"expected column definitions ('a STRING, b DOUBLE'), got {text.strip()!r}")
        fields.extend(parsed.fields)
    seen: set[str] = set()
    for field in fields:
        if field.name in seen:
            raise ValueError(f"column {field.name!r} appears twice")
        seen.add(field.name)
    if not fields:
        raise ValueError("no columns")
    return StructType(fields)


def _nullable(data_type: DataType) -> Any:
    """The type with every field, element and value nullable: a plugin may leave anything out."""
    if isinstance(data_type, StructType):
        return StructType(
            [StructField(field.name, _nullable(field.dataType), True, field.metadata) for field in data_type]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_nullable(data_type.elementType), True)
    if isinstance(data_type, MapType):
        return MapType(data_type.keyType, _nullable(data_type.valueType), True)
    return data_type


def _schema_json(schema: StructType) -> list[dict[str, str]]:
    return [{"name": field.name, "type": field.dataType.simpleString()} for field in schema.fields]


def _keep_watermark(
    result: DataFrame, input_schema: StructType, output_schema: StructType, context: TransformContext
) -> DataFrame:
    """mapInArrow's output columns are new ones, without the mark of the stream's event-time column: put it
    back on the rowtime column, so windows and joins downstream see the stream's watermark (computed, as
    before, from the rows that entered the plugin; Spark forbids declaring a second one)."""
    rowtime = context.rowtime_column
    if rowtime not in input_schema.names or rowtime not in output_schema.names:
        return result
    delay_ms = input_schema[rowtime].metadata.get(_WATERMARK_DELAY)
    if delay_ms is None or input_schema[rowtime].dataType != output_schema[rowtime].dataType:
        return result
    metadata = {**output_schema[rowtime].metadata, _WATERMARK_DELAY: delay_ms}
    columns = [
        F.col(f"`{name}`").alias(name, metadata=metadata) if name == rowtime else F.col(f"`{name}`")
        for name in output_schema.names
    ]
    return result.select(*columns)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text
