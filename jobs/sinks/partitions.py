"""Runs a sink's writer on every partition of a micro-batch, on the executors, in Arrow batches.

The writer gets the partition's rows as Arrow record batches with the result's column names and returns
how many rows it wrote; a writer that raises fails the task, and with it the micro-batch, which the
checkpoint then replays. Writers are pickled to the executors: keep clients off them (create or cache
them per Python worker inside `write`). The requests a writer makes through
`jobs.engine.retry.RetryPolicy` are counted, with their retries, and come back with the rows of the task
attempts Spark kept.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame, Row

from jobs.engine.arrow_values import int_array
from jobs.engine.python_workers import freeze_imported_objects
from jobs.engine.retry import tallying_retries
from jobs.sinks.base import Written

PartitionWriter = Callable[[Iterator[pa.RecordBatch]], int]


def write_partitions(batch: DataFrame, write: PartitionWriter) -> Written:
    """Rows written, requests made and retried, over all partitions of `batch`."""
    names = batch.columns

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_imported_objects()
        renamed = (arrow_batch.rename_columns(names) for arrow_batch in batches)
        with tallying_retries() as tally:
            rows = write(renamed)
        counts = [rows, tally.attempts, tally.retries]
        yield pa.RecordBatch.from_arrays([int_array([count]) for count in counts], names=TALLY_COLUMNS)

    # Dotted result names (`point.x`) would be read as struct fields by mapInArrow: go positional.
    positional = batch.toDF(*(f"_{index}" for index in range(len(names))))
    return sum_written(positional.mapInArrow(write_partition, TALLY_SCHEMA).collect())


TALLY_COLUMNS = ["rows", "requests", "retries"]
TALLY_SCHEMA = "rows long, requests long, retries long"


def sum_written(rows: list[Row]) -> Written:
    """The `TALLY_COLUMNS` of the partitions' results, summed."""
    return Written(*(sum(row[column] for row in rows) for column in TALLY_COLUMNS))
