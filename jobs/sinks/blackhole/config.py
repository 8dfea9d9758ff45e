"""The keys of a blackhole sink in the dagger file."""

from __future__ import annotations

from typing import ClassVar, Literal

from jobs.sinks.config import SinkConfig


class BlackholeSink(SinkConfig):
    """Runs the query to the end of every micro-batch and discards its rows, as Flink's `blackhole`
    connector does: for measuring a query, or a dagger whose work is its side effects."""

    kind: Literal["blackhole"]
    takes_complete_results: ClassVar[bool] = True
    replaces_partitions: ClassVar[bool] = True  # it keeps nothing

    def takes_upserts(self) -> bool:
        return True  # nothing is kept, so no row can be left stale
