"""The deployment's defaults for log sinks."""

from __future__ import annotations

from pydantic import Field, PositiveInt

from resources.components import ComponentDefaults


class LogSinkResource(ComponentDefaults):
    """Defaults of every log sink (the dagger file's sink keys win)."""

    max_rows_per_batch: PositiveInt | None = Field(
        default=None, description="Rows printed per micro-batch; default 20."
    )
