"""The `deduplicate` transformer: Dagger's DeDuplicationTransformer on Spark's state store.

Dagger (`DeDuplicationTransformer`) keys the stream by `String.valueOf(key column)` and filters with a
keyed MapState whose TTL is `OnCreateAndWrite` / `NeverReturnExpired`: a key in the state drops the row;
otherwise the key is written and the row passes. The state is written only when a row passes, so a key's
TTL counts from the row that let it through (processing time) and its duplicates do not extend it; once
the TTL has passed, the key's next row passes and starts a new TTL.

Here (`dagger.jobs.processors.ProcessingTimeDeduplicate`, in the project's JVM module `jvm/`): Spark's
`transformWithState` on the JVM, grouped by the key cast to STRING, keeps per key the processing time (the
micro-batch's timestamp) at which its row passed. Within a batch the key's first row in the group passes
if the key is not in the state or its TTL is over; the others are dropped. The state lives in the query's
checkpoint, so a restarted dagger remembers the keys it has seen. Rows whose key is NULL share one key of
their own. No Python runs per row or per key.

Spark's processing-time mode would run a micro-batch after every trigger, data or not (an endless loop of
empty batches with the default trigger). So the operator runs in event time: the TTL is checked on read
against the batch's timestamp, and an event-time timer per key removes the key once the watermark has
moved on by `ttl` and the TTL is over in processing time. As any Spark stateful operator, it drops rows
older than the watermark of the previous micro-batch when the rows carry the event-time column, and the
rows it emits keep that column's watermark for later operators (windows in the SQL after a pre-processor
still close). `transformWithState` needs the RocksDB state store provider (`jobs.engine.spark` makes it the
default).

With `clock: event_time` the work is Spark's own `dropDuplicatesWithinWatermark`, which keeps each key
until the watermark passes the event time of its first row plus the event-time column's delay. That
delay is read from the column's metadata, so the column is given `ttl` as its delay for the operator
(and its own delay back after it): a key is then remembered until the watermark passes its first row's
event time + `ttl`. No Python runs per row or per key.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.processors.config import Deduplicate
from jobs.processors.context import TransformContext

_KEY = "__dagger_deduplicate_key"
_WATERMARK_DELAY = "spark.watermarkDelayMs"  # metadata Spark puts on a column with a watermark
_OPERATOR = "dagger.jobs.processors.ProcessingTimeDeduplicate"


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
    jvm = getattr(frame.sparkSession, "_jvm", None)  # None on a Spark Connect client
    if jvm is None:
        raise context.error(
            "deduplicate: clock 'processing_time' runs a JVM operator of this project, which a Spark Connect "
            "client cannot load; use clock 'event_time', or a classic master"
        )
    keyed = frame.withColumn(_KEY, F.col(f"`{config.key_column}`").cast("string"))
    operator = getattr(jvm, _OPERATOR)
    event_time = next((field.name for field in frame.schema if _WATERMARK_DELAY in field.metadata), "")
    deduplicated = DataFrame(operator.apply(keyed._jdf, _KEY, ttl_ms, event_time), frame.sparkSession)
    return deduplicated.select(
        *[F.col(f"`{field.name}`").alias(field.name, metadata=field.metadata) for field in frame.schema]
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
