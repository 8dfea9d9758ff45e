"""The keys of a Parquet stream in the dagger file."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import PurePosixPath
from typing import Literal

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from jobs.expectations.config import without_dead_letters
from jobs.model.config import ConfigModel, resolve_path, without_credentials
from jobs.sources.config import StreamConfig


class DateRange(ConfigModel):
    """An inclusive range of partition times, read from `dt=YYYY-MM-DD[/hr=HH]` path segments (UTC)."""

    start: datetime
    end: datetime

    @model_validator(mode="after")
    def _ordered(self) -> DateRange:
        if self.start.tzinfo is None:
            object.__setattr__(self, "start", self.start.replace(tzinfo=UTC))
        if self.end.tzinfo is None:
            object.__setattr__(self, "end", self.end.replace(tzinfo=UTC))
        if self.start > self.end:
            raise ValueError(f"start {self.start.isoformat()} is after end {self.end.isoformat()}")
        return self


class ParquetStream(StreamConfig):
    """A bounded stream read from Parquet files whose columns follow the stream's protobuf message."""

    kind: Literal["parquet"]
    paths: list[str] = Field(min_length=1)
    """Files or folders (searched recursively for `*.parquet`)."""
    date_ranges: list[DateRange] = Field(default_factory=list)
    """Only files whose `dt=`/`hr=` partition time falls in one of these ranges; empty means all."""
    max_files_per_batch: PositiveInt | None = None

    @model_validator(mode="after")
    def _columns_of_a_protobuf_message(self) -> ParquetStream:
        if self.format != "protobuf":
            raise ValueError("a Parquet stream's columns follow 'proto_message'; 'format' must be 'protobuf'")
        return self

    _expectations = field_validator("expectations")(without_dead_letters)

    @model_validator(mode="after")
    def _late_records_have_no_dead_letter(self) -> ParquetStream:
        if self.late_records.action == "dead_letter":
            raise ValueError(
                "late_records.action 'dead_letter' needs a Kafka stream: a Parquet row has no raw record "
                "to copy; use 'drop'"
            )
        return self

    def asset_metadata(self) -> dict[str, str | int]:
        return {"paths": ", ".join(without_credentials(path) for path in self.paths)}

    def inputs(self) -> list[str]:
        return [f"parquet:{path}" for path in self.paths]

    def reads(self, address: str) -> bool:
        """A lake's folder, or a folder of it (`.../dt=2026-11-25`), or a folder that holds the lake."""
        kind, _, path = address.partition(":")
        if kind != "parquet":
            return False
        written = PurePosixPath(path)
        return any(
            written.is_relative_to(read) or PurePosixPath(read).is_relative_to(written) for read in self.paths
        )

    @field_validator("paths")
    @classmethod
    def _resolve(cls, value: list[str], info: ValidationInfo) -> list[str]:
        return [resolve_path(path, info) for path in value]
