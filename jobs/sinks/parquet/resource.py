"""The deployment's defaults for Parquet sinks."""

from __future__ import annotations

from pydantic import Field

from resources.components import ComponentDefaults


class ParquetSinkResource(ComponentDefaults):
    """Defaults of every Parquet sink (the dagger file's sink keys win; its `path` is always its own)."""

    compression: str | None = Field(default=None, description="`zstd` (default), `snappy`, `gzip` or `none`.")
    partition_by_hour: bool | None = Field(
        default=None, description="`dt=/hr=` folders (default); false: `dt=` only."
    )
