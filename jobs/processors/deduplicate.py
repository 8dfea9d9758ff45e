"""The `deduplicate` transformer: Dagger's DeDuplicationTransformer on Spark's state store.

Dagger (`DeDuplicationTransformer`) keys the stream by `String.valueOf(key column)` and filters with a
keyed MapState whose TTL is `OnCreateAndWrite` / `NeverReturnExpired`: a key in the state drops the row;
otherwise the key is written and the row passes. The state is written only when a row passes, so a key's
TTL counts from the row that let it through (processing time) and its duplicates do not extend it; once
the TTL has passed, the key's next row passes and starts a new TTL.

Here: a `transformWithStateInPandas` operator grouped by the key cast to STRING keeps, per key, the
processing time (the micro-batch's timestamp) at which its row passed. Within a batch the key's first
row in stream order passes if the key is not in the state (or its TTL is over), the others are dropped.
The state lives in the query's checkpoint, so a restarted dagger remembers the keys it has seen. Rows
whose key is NULL share one key of their own.

Spark's own state TTL needs `timeMode="ProcessingTime"`, which runs a micro-batch after every trigger
whether data came or not (an endless loop of empty batches with the default trigger) and stops the event
time watermark at the operator (a windowed aggregation after it would never emit). So the operator runs
in event time: the TTL is checked on read against the batch's timestamp, and an event-time timer per key
deletes the key once the watermark has moved on by `ttl` and the TTL is over (a key is kept at most until
the watermark has advanced `ttl` past it and the TTL has passed in processing time). As any Spark
stateful operator, it drops rows older than the watermark of the previous micro-batch when the rows
carry the event-time column, and the rows it emits keep that column's watermark for later operators.
`transformWithState` needs the RocksDB state store provider (`jobs.spark` makes it the default).

With `clock: event_time` the work is Spark's own `dropDuplicatesWithinWatermark`, which keeps each key
until the watermark passes the event time of its first row plus the event-time column's delay. That
delay is read from the column's metadata, so the column is given `ttl` as its delay for the operator
(and its own delay back after it): a key is then remembered until the watermark passes its first row's
event time + `ttl`. No Python runs per row or per key.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.stateful_processor import (
    ExpiredTimerInfo,
    StatefulProcessor,
    StatefulProcessorHandle,
    TimerValues,
)
from pyspark.sql.types import LongType, StructField, StructType

from jobs.processors.config import Deduplicate
from jobs.processors.context import TransformContext

_KEY = "__dagger_deduplicate_key"
_POSITIONAL = "__dagger_column_{}"
_PASSED_AT = StructType([StructField("passed_at_ms", LongType(), nullable=False)])
_WATERMARK_DELAY = "spark.watermarkDelayMs"  # metadata Spark puts on a column with a watermark


class _FirstRowPerKey(StatefulProcessor):
    """Emits a key's first row when the key is not in the state or its TTL is over; records when."""

    def __init__(self, columns: list[str], ttl_ms: int) -> None:
        self.columns = columns
        self.ttl_ms = ttl_ms

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.passed_at = handle.getValueState("passed_at", _PASSED_AT)

    def handleInputRows(
        self, key: Any, rows: Iterator[pd.DataFrame], timerValues: TimerValues
    ) -> Iterator[pd.DataFrame]:
        now = timerValues.getCurrentProcessingTimeInMs()
        seen = self.passed_at.get() if self.passed_at.exists() else None  # get() logs a warning if not
        if seen is not None and now < seen[0] + self.ttl_ms:
            return  # a duplicate: the state is not written, so the TTL still counts from the first row
        for frame in rows:
            if len(frame):
                self.passed_at.update((now,))
                if seen is None:  # one cleanup timer per key in the state
                    self.handle.registerTimer(_timer(timerValues) + self.ttl_ms)
                # The input's columns (then the key), named by position: give them the output's names.
                yield frame.iloc[:1, : len(self.columns)].set_axis(self.columns, axis=1)
                return

    def handleExpiredTimer(
        self, key: Any, timerValues: TimerValues, expiredTimerInfo: ExpiredTimerInfo
    ) -> Iterator[pd.DataFrame]:
        if not self.passed_at.exists():
            return
        seen = self.passed_at.get()
        left_ms = seen[0] + self.ttl_ms - timerValues.getCurrentProcessingTimeInMs()
        if left_ms <= 0:
            self.passed_at.clear()
        else:
            self.handle.registerTimer(_timer(timerValues) + left_ms)
        yield from ()

    def close(self) -> None:
        pass


def _timer(timer_values: TimerValues) -> int:
    return max(timer_values.getCurrentWatermarkInMs(), 0)


def deduplicate(frame: DataFrame, config: Deduplicate, context: TransformContext) -> DataFrame:
    """Lets the first row of each `key_column` value (as a string) through and drops the key's later rows
    until `ttl` (processing time) has passed since that first row; output columns = input columns."""
    if config.key_column not in frame.columns:
        raise context.error(
            f"deduplicate: no key column {config.key_column!r} (columns: {', '.join(frame.columns)})"
        )
    ttl_ms = int(config.ttl.total_seconds() * 1000)
    if ttl_ms <= 0:
        raise context.error(f"deduplicate: ttl must be positive, not {config.ttl}")
    if config.clock == "event_time":
        return _deduplicate_in_event_time(frame, config.key_column, ttl_ms, context)
    # PySpark's transformWithStateInPandas cannot name columns with dots: run it on positional names.
    names = [_POSITIONAL.format(index) for index in range(len(frame.columns))]
    positional = frame.toDF(*names)
    event_time = next(
        (name for name, field in zip(names, frame.schema, strict=True) if _WATERMARK_DELAY in field.metadata),
        "",
    )
    key = names[frame.columns.index(config.key_column)]
    deduplicated = (
        positional.withColumn(_KEY, F.col(key).cast("string"))
        .groupBy(_KEY)
        .transformWithStateInPandas(
            statefulProcessor=_FirstRowPerKey(names, ttl_ms),
            outputStructType=positional.schema,
            outputMode="Append",
            timeMode="EventTime",
            eventTimeColumnName=event_time,
        )
    )
    return deduplicated.select(
        *[
            F.col(name).alias(field.name, metadata=field.metadata)
            for name, field in zip(names, frame.schema, strict=True)
        ]
    )


def _deduplicate_in_event_time(
    frame: DataFrame, key_column: str, ttl_ms: int, context: TransformContext
) -> DataFrame:
    event_time = next((field for field in frame.schema if _WATERMARK_DELAY in field.metadata), None)
    if event_time is None:
        raise context.error(
            "deduplicate: clock 'event_time' needs the stream's event-time column among the columns "
            f"(columns: {', '.join(frame.columns)}); select it, or use clock 'processing_time'"
        )

    def with_delay(metadata: dict[str, Any]) -> list[Column]:
        columns = [F.col(f"`{name}`") for name in frame.columns]
        return [
            column.alias(name, metadata=metadata) if name == event_time.name else column
            for name, column in zip(frame.columns, columns, strict=True)
        ]

    remembered_for_ttl = frame.select(*with_delay({**event_time.metadata, _WATERMARK_DELAY: ttl_ms}))
    deduplicated = remembered_for_ttl.dropDuplicatesWithinWatermark([key_column])
    return deduplicated.select(*with_delay(event_time.metadata))
