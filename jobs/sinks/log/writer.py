"""Log sink: prints a bounded number of result rows per micro-batch, for development and demos.

Rows are taken on the driver (`DataFrame.take`), so only the printed rows travel there. Delivery is
at-least-once: a replayed micro-batch prints its rows again.
"""

from __future__ import annotations

import json
import logging
from datetime import date, datetime
from decimal import Decimal
from typing import Any

from pyspark.sql import DataFrame, Row

from jobs.sinks.base import SinkContext
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


def format_row(row: Row) -> str:
    return json.dumps(row.asDict(recursive=True), default=_json_default, ensure_ascii=False)


class LogSinkWriter:
    def __init__(self, sink: LogSink, context: SinkContext) -> None:
        self.sink = sink
        self._emit = context.log_emit or log.info

    @property
    def reads_whole_batch(self) -> bool:
        return False

    def write(self, batch: DataFrame, batch_id: int) -> int:
        rows = batch.take(self.sink.max_rows_per_batch)
        for row in rows:
            self._emit(f"batch {batch_id} | {format_row(row)}")
        return len(rows)
