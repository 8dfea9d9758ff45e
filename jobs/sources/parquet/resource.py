"""Parquet streams: house defaults for reading bounded files."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from resources.components import ComponentDefaults


class ParquetStreamResource(ComponentDefaults):
    """Defaults of every Parquet stream (the dagger file's stream keys win)."""

    max_files_per_batch: PositiveInt | None = Field(
        default=None, description="Files per micro-batch; default: all available files in one batch."
    )
