"""Keys shared by sink kinds, and what every sink kind's config offers the rest of the project."""

from __future__ import annotations

from datetime import timedelta
from typing import ClassVar

from pydantic import Field, PositiveInt

from jobs.model.config import ConfigModel, Duration


class SinkConfig(ConfigModel):
    """Base of every sink kind's config; `kind` selects the kind in the dagger file."""

    kind: str
    deployment_keys: ClassVar[tuple[str, ...]] = ()
    """Keys the dagger file may leave to the kind's Dagster resource, but which a run needs."""
    takes_complete_results: ClassVar[bool] = False
    """The sink replaces what it holds with each micro-batch's rows, or only shows them, so output_mode
    `complete` (the whole result every batch) is right for it."""
    replaces_partitions: ClassVar[bool] = False
    """A new run of a time partition replaces what earlier runs of it wrote here
    (`jobs.model.time_partitions`), so a partition may run again; a sink without it takes each partition
    once."""

    def takes_upserts(self) -> bool:
        """The sink writes a row over the earlier one of the same key (an upsert stream's rows, as a
        Flink Top-N gives them), or only shows the rows."""
        return False

    def describe(self) -> str:
        """The sink as error messages name it."""
        return f"{self.kind} sink"

    def asset_metadata(self) -> dict[str, str | int]:
        """Where the sink writes, shown on its Dagster asset; never credentials."""
        return {}

    def output(self) -> str | None:
        """What the sink writes, as an address a stream of another dagger may read (`<kind>:<topic or
        path>`); None: nothing a stream reads."""
        return None


class BatchedSinkConfig(SinkConfig):
    """Settings shared by the sinks that write over HTTP in batches."""

    batch_size: PositiveInt = 5000
    """Rows per request."""
    max_retries: int = Field(default=3, ge=0)
    """Retries of a failed request (with exponential back-off) before the micro-batch fails."""
    retry_backoff: Duration = timedelta(seconds=1)
    """Wait before the first retry; doubled for each further one."""
    timeout: Duration = timedelta(seconds=30)
    """Timeout of one request."""
