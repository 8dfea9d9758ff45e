"""Blackhole sink: every row of the micro-batch is computed, none is kept.

Spark's `noop` data source runs the whole plan on the executors without writing anything (a `count()`
could be answered without computing the columns), and an observation counts the rows on the way.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from jobs.sinks.base import SinkContext, Written
from jobs.sinks.blackhole.config import BlackholeSink


class BlackholeSinkWriter:
    def __init__(self, sink: BlackholeSink, context: SinkContext) -> None:
        self.sink = sink

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        counted = Observation(f"blackhole_{batch_id}")
        batch.observe(counted, F.count(F.lit(1)).alias("rows")).write.format("noop").mode("overwrite").save()
        return Written(int(counted.get["rows"]))
