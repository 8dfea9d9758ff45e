"""Time partitions of a bounded dagger: each daily or hourly partition runs the dagger over its own range of
the Parquet streams' `dt=YYYY-MM-DD[/hr=HH]` files, and replaces that partition's output in its sinks.

A partition's run is one *generation* of it: a new run of the partition (a backfill, a "Materialize" in the
UI) starts a new generation, with a checkpoint of its own, and the sinks drop what earlier generations of
the partition wrote; a restart of a crashed run continues its generation from the checkpoint, exactly once
as any run. Only sinks that can replace a partition's output take a partition that ran before
(`SinkConfig.replaces_partitions`); Dagster refuses a second run of a partition into any other
(`dagger_assets.time_partitions`).

Partition keys are Dagster's: `2026-11-20` (daily) and `2026-11-20-05:00` (hourly), in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from pydantic import model_validator

from jobs.model.config import ConfigModel

DAILY_KEY_FORMAT = "%Y-%m-%d"
HOURLY_KEY_FORMAT = "%Y-%m-%d-%H:%M"
_CADENCES = {
    "daily": (DAILY_KEY_FORMAT, timedelta(days=1)),
    "hourly": (HOURLY_KEY_FORMAT, timedelta(hours=1)),
}


class TimePartitioning(ConfigModel):
    """Daily or hourly partitions of a dagger whose streams are all Parquet, from `start` (UTC)."""

    cadence: Literal["daily", "hourly"]
    start: datetime
    """The first partition's start: a midnight (daily) or a full hour (hourly); UTC unless it says."""
    end: datetime | None = None
    """Where the last partition ends (exclusive, aligned as `start`); default: the last complete one."""

    @model_validator(mode="after")
    def _aligned(self) -> TimePartitioning:
        for name in ("start", "end"):
            value: datetime | None = getattr(self, name)
            if value is None:
                continue
            value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
            object.__setattr__(self, name, value)
            if value != self._floor(value):
                unit = "a midnight" if self.cadence == "daily" else "a full hour"
                raise ValueError(f"{name} {value.isoformat()} is not {unit} (UTC)")
        if self.end is not None and self.end <= self.start:
            raise ValueError(f"end {self.end.isoformat()} is not after start {self.start.isoformat()}")
        return self

    @property
    def key_format(self) -> str:
        return _CADENCES[self.cadence][0]

    @property
    def length(self) -> timedelta:
        return _CADENCES[self.cadence][1]

    def _floor(self, instant: datetime) -> datetime:
        hour = 0 if self.cadence == "daily" else instant.hour
        return instant.replace(hour=hour, minute=0, second=0, microsecond=0)

    def window(self, key: str) -> tuple[datetime, datetime]:
        """The partition's range, start included, end excluded; a `ValueError` for a key that is not one
        of these partitions."""
        try:
            start = datetime.strptime(key, self.key_format).replace(tzinfo=UTC)
        except ValueError:
            example = self.start.strftime(self.key_format)
            raise ValueError(
                f"partition {key!r} is not a {self.cadence} partition key like {example!r}"
            ) from None
        end = start + self.length
        if start < self.start or (self.end is not None and end > self.end):
            last = "" if self.end is None else f" to {self.end.isoformat()}"
            raise ValueError(f"partition {key!r} is outside the partitions ({self.start.isoformat()}{last})")
        return start, end


@dataclass(frozen=True)
class PartitionRun:
    """The partition a run of a dagger computes, and which generation of it."""

    key: str
    start: datetime
    end: datetime
    """Exclusive."""
    generation: str
    """The first run of the generation (its restarts continue it): a name safe in paths and files."""

    @property
    def slug(self) -> str:
        """The key with only letters and digits (`20261120`, `202611200500`), for file and folder names."""
        return "".join(character for character in self.key if character.isalnum())

    @property
    def last_microsecond(self) -> datetime:
        """The window's inclusive end, as the Parquet streams' `date_ranges` take it."""
        return self.end - timedelta(microseconds=1)
