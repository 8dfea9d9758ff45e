"""Checkpoint generations: a rewind starts a new checkpoint and keeps the old ones, to be restored.

A dagger's checkpoint is its position in every stream and its state. Rewinding (to an instant, or to
offsets) cannot edit it, so a rewind makes a new *generation*: an empty checkpoint next to the old one
(`<checkpoint_location>@<name>`), whose Kafka streams start at the rewind's point. The old generations
stay as they were; `restore` makes one current again. Which generation is current, and every rewind's
point, are kept in `<checkpoint_location>.generations.json`; a dagger never rewound has none, and runs on
`checkpoint_location` itself (the generation `initial`).

What a rewind does to the output: the records from the rewind's point on are processed again, so sinks
that append (Kafka at-least-once, Parquet, log) get them twice; a Kafka exactly-once sink writes them
again too (the new generation is a new query, with new transactions); sinks idempotent by id (InfluxDB
points, Elasticsearch with `id_column`) overwrite what they had.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

from pydantic import Field, ValidationError, model_validator

from jobs.model.config import ConfigModel
from jobs.model.spec import DaggerConfigError, DaggerSpec
from jobs.running.checkpoint_lock import CheckpointInUseError, CheckpointLock

INITIAL = "initial"


class Rewind(ConfigModel):
    """Where a rewound dagger's Kafka streams start: exactly one of the two."""

    to_timestamp: datetime | None = None
    """Every partition starts at its first record at or after this instant (UTC unless it says)."""
    to_offsets: dict[str, dict[int, Annotated[int, Field(ge=0)]]] | None = None
    """`{topic: {partition: offset}}`; the partitions not named start as a new checkpoint would."""

    @model_validator(mode="after")
    def _one_point(self) -> Rewind:
        if (self.to_timestamp is None) == (self.to_offsets is None):
            raise ValueError("set exactly one of 'to_timestamp' and 'to_offsets'")
        if self.to_timestamp is not None and self.to_timestamp.tzinfo is None:
            object.__setattr__(self, "to_timestamp", self.to_timestamp.replace(tzinfo=UTC))
        return self


class Generation(ConfigModel):
    name: str
    path: str
    created: datetime | None = None
    rewind: Rewind | None = None


class _Record(ConfigModel):
    current: str
    generations: list[Generation]


class CheckpointGenerations:
    """The generations of one checkpoint location (local folders only)."""

    def __init__(self, spec: DaggerSpec) -> None:
        self.spec = spec
        self.base = spec.resolved_checkpoint_location
        if "://" in self.base and not self.base.startswith("file://"):
            self.file = None
        else:
            self.file = Path(f"{self.base.removeprefix('file://')}.generations.json")

    def list(self) -> list[Generation]:
        return self._read().generations

    def current(self) -> Generation:
        record = self._read()
        return next(generation for generation in record.generations if generation.name == record.current)

    def rewind(self, rewind: Rewind) -> Generation:
        """A new, current generation that starts at `rewind`; refused while a run uses the current one."""
        record = self._record_for_change("rewind")
        now = datetime.now(UTC)
        name = f"rewind-{now:%Y%m%dT%H%M%S%fZ}"
        generation = Generation(name=name, path=f"{self.base}@{name}", created=now, rewind=rewind)
        self._write(_Record(current=name, generations=[*record.generations, generation]))
        return generation

    def restore(self, name: str) -> Generation:
        """Make generation `name` current again; refused while a run uses the current one."""
        record = self._record_for_change("restore")
        known = {generation.name: generation for generation in record.generations}
        if name not in known:
            raise DaggerConfigError(
                f"dagger {self.spec.name}: no checkpoint generation {name!r} (there are: {', '.join(known)})"
            )
        self._write(_Record(current=name, generations=record.generations))
        return known[name]

    def apply(self) -> DaggerSpec:
        """The dagger as its current generation runs: that checkpoint, and the rewind's starting point."""
        generation = self.current()
        streams = self.spec.streams
        if generation.rewind is not None:
            point = generation.rewind
            streams = [stream.starting_at(point.to_timestamp, point.to_offsets) for stream in streams]
        return self.spec.model_copy(update={"checkpoint_location": generation.path, "streams": streams})

    def _record_for_change(self, action: str) -> _Record:
        if self.file is None:
            raise DaggerConfigError(
                f"dagger {self.spec.name}: {action} needs a local checkpoint_location, not {self.base}"
            )
        record = self._read()
        current = next(g for g in record.generations if g.name == record.current)
        lock = CheckpointLock(current.path, self.spec.name)
        try:
            lock.acquire()
        except CheckpointInUseError as error:
            raise DaggerConfigError(f"cannot {action}: {error}") from None
        lock.release()
        return record

    def _read(self) -> _Record:
        if self.file is None or not self.file.exists():
            return _Record(current=INITIAL, generations=[Generation(name=INITIAL, path=self.base)])
        try:
            return _Record.model_validate_json(self.file.read_text(encoding="utf-8"))
        except ValueError as error:
            raise DaggerConfigError(f"{self.file}: not a checkpoint generations file: {error}") from None

    def _write(self, record: _Record) -> None:
        assert self.file is not None
        self.file.parent.mkdir(parents=True, exist_ok=True)
        partial = self.file.with_name(f"{self.file.name}.partial")
        partial.write_text(record.model_dump_json(indent=2), encoding="utf-8")
        partial.replace(self.file)  # a crash leaves the old record or the new one, never half of one


def parse_rewind(point: dict) -> Rewind:
    """A rewind from run config or the command line, or a `DaggerConfigError` naming what is wrong."""
    try:
        return Rewind.model_validate({key: value for key, value in point.items() if value is not None})
    except ValidationError as error:
        problems = "; ".join(
            f"{'.'.join(map(str, item['loc'])) or 'rewind'}: {item['msg'].removeprefix('Value error, ')}"
            for item in error.errors()
        )
        raise DaggerConfigError(f"rewind: {problems}") from None
