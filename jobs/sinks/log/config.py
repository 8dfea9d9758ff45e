"""The keys of a log sink in the dagger file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import PositiveInt

from jobs.sinks.config import SinkConfig


class LogSink(SinkConfig):
    """Prints result rows on the driver's log, a bounded number per micro-batch."""

    kind: Literal["log"]
    takes_complete_results: ClassVar[bool] = True
    replaces_partitions: ClassVar[bool] = True  # it keeps nothing: a partition's new run only shows its rows
    max_rows_per_batch: PositiveInt = 20

    def takes_upserts(self) -> bool:
        return True  # it shows each row as it comes

    def asset_metadata(self) -> dict[str, str | int]:
        return {"max_rows_per_batch": self.max_rows_per_batch}
