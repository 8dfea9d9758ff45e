"""Log sink: prints a bounded number of result rows per micro-batch, for development and demos.

Rows are taken on the driver (`DataFrame.take`), so only the printed rows travel there. Delivery is
at-least-once: a replayed micro-batch prints its rows again.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import numpy
from pyspark.sql import DataFrame, Row
from pyspark.sql.types import ArrayType, DataType, FloatType, MapType, StructType, TimestampType

from jobs.sinks.base import SinkContext, Written
from jobs.sinks.log.config import LogSink

log = logging.getLogger("dagger.sink.log")


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return value.hex()
    if isinstance(value, Row):
        return value.asDict(recursive=True)
    return str(value)


def _shortest(value: Any, data_type: DataType) -> Any:
    """`value` ready for JSON: 32-bit floats as the shortest decimal that reads back as the same float32
    (`8789.7`, as protobuf's text format prints it), not the digits of the widened double
    (`8789.7001953125`); instants (TIMESTAMP) with their zone, in UTC; nested structs, arrays and maps too.
    A TIMESTAMP_NTZ has no zone and is printed without one."""
    if value is None:
        return None
    if isinstance(data_type, FloatType):
        return float(str(numpy.float32(value)))
    if isinstance(data_type, TimestampType):
        # An instant: PySpark hands it over as a naive local time; printed in UTC with its zone.
        return value.astimezone(UTC).isoformat()
    if isinstance(data_type, StructType):
        fields = zip(data_type.fields, value, strict=True)
        return {field.name: _shortest(item, field.dataType) for field, item in fields}
    if isinstance(data_type, ArrayType):
        return [_shortest(item, data_type.elementType) for item in value]
    if isinstance(data_type, MapType):
        return {key: _shortest(item, data_type.valueType) for key, item in value.items()}
    return value.asDict(recursive=True) if isinstance(value, Row) else value


def format_row(row: Row, schema: StructType) -> str:
    """One result row as a line of JSON."""
    return json.dumps(_shortest(row, schema), default=_json_default, ensure_ascii=False)


class LogSinkWriter:
    def __init__(self, sink: LogSink, context: SinkContext) -> None:
        self.sink = sink
        self._emit = context.log_emit or log.info

    def __getstate__(self) -> dict[str, Any]:
        # Pickled only for Spark Connect, whose server runs `write` in a foreachBatch worker of its own: the
        # caller's log (a Dagster run's) is out of reach there, and Python logging is not set up. The lines
        # go to the worker's standard output, which the server writes to its log.
        return {**self.__dict__, "_emit": _print_line}

    @property
    def reads_whole_batch(self) -> bool:
        return False

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        rows = batch.take(self.sink.max_rows_per_batch)
        for row in rows:
            self._emit(f"batch {batch_id} | {format_row(row, batch.schema)}")
        return Written(len(rows))


def _print_line(line: str) -> None:
    print(f"dagger log sink: {line}", flush=True)
