"""Runs a sink's writer on every partition of a micro-batch, on the executors, in Arrow batches.

The writer gets the partition's rows as Arrow record batches with the result's column names and returns
how many rows it wrote; a writer that raises fails the task, and with it the micro-batch, which the
checkpoint then replays. Writers are pickled to the executors: keep clients off them (create or cache
them per Python worker inside `write`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa
from pyspark.sql import DataFrame

from jobs.arrow_values import int_array
from jobs.python_workers import freeze_imported_objects

PartitionWriter = Callable[[Iterator[pa.RecordBatch]], int]


def write_partitions(batch: DataFrame, write: PartitionWriter) -> int:
    """Rows written over all partitions of `batch`."""
    names = batch.columns

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        freeze_imported_objects()
        renamed = (arrow_batch.rename_columns(names) for arrow_batch in batches)
        yield pa.RecordBatch.from_arrays([int_array([write(renamed)])], names=["rows"])

    # Dotted result names (`point.x`) would be read as struct fields by mapInArrow: go positional.
    positional = batch.toDF(*(f"_{index}" for index in range(len(names))))
    return sum(row.rows for row in positional.mapInArrow(write_partition, "rows long").collect())
