"""What every processor is handed besides the rows, and the error it raises when it cannot apply."""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql import SparkSession

from jobs.model.schema_registry import SchemaRegistry


class ProcessorError(ValueError):
    """A processor that cannot be applied; the message names the dagger and the processor's key."""


@dataclass(frozen=True)
class TransformContext:
    """What a transformer may need besides the rows."""

    spark: SparkSession
    dagger: str
    key: str
    """Where the transformer is configured, e.g. `streams[0].pre_processors[1]`, for errors."""
    table: str
    """The stream's table (pre-processors) or `data_stream` (post-processors)."""
    rowtime_column: str
    registry: SchemaRegistry
    count_rows: bool = True
    """Whether the step's rows in and out are counted (the dagger's `metrics.stage_rows`)."""

    def error(self, message: str) -> ProcessorError:
        return ProcessorError(f"dagger {self.dagger}: {self.key}: {message}")
