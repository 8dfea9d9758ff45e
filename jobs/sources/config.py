"""Keys every stream kind has: the SQL table, the protobuf message, the event time, the pre-processors."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar, Literal, Self

from pydantic import Field, model_validator

from jobs.config import ConfigModel, SqlIdentifier
from jobs.processors.config import Transformer


class DeadLetterPolicy(ConfigModel):
    """Base of the policies that may copy a skipped record to a dead-letter topic."""

    action: str
    dead_letter_topic: str | None = None
    """The topic, on the stream's own cluster, that `dead_letter` copies the raw records to."""

    @model_validator(mode="after")
    def _dead_letter_needs_topic(self) -> Self:
        if self.action == "dead_letter" and not self.dead_letter_topic:
            raise ValueError("action 'dead_letter' needs 'dead_letter_topic'")
        return self


class LateRecordPolicy(DeadLetterPolicy):
    """What a stream does, before the SQL, with a record whose event time is behind the watermark the
    micro-batch runs with."""

    action: Literal["keep", "drop", "dead_letter"] = "keep"
    """`keep` hands it to the SQL: a stateless query keeps it, and a window, join or deduplicate drops it
    once its window has closed (counted as `rows_late_dropped`), much as Flink does; `drop` skips and
    counts it; `dead_letter` copies the raw record to `dead_letter_topic` (reason and watermark in
    headers), then skips it (Kafka streams only: a Parquet row has no raw record)."""


class StreamConfig(ConfigModel):
    """Base of every stream kind's config; `kind` selects the kind in the dagger file."""

    kind: str
    deployment_keys: ClassVar[tuple[str, ...]] = ()
    """Keys the dagger file may leave to the kind's Dagster resource, but which a run needs."""

    def describe(self) -> str:
        """The stream as error messages name it."""
        return f"stream {self.table!r}"

    def asset_metadata(self) -> dict[str, str | int]:
        """Where the stream reads, shown on its Dagster asset; never credentials."""
        return {}

    def starting_at(self, timestamp: datetime | None, offsets: dict[str, dict[int, int]] | None) -> Self:
        """The stream as a rewind to `timestamp` or `offsets` starts it in a new checkpoint; kinds without
        positions re-read everything."""
        return self

    def inputs(self) -> list[str]:
        """What the stream reads, as addresses (`<kind>:<topic or path>`): the lineage between daggers
        matches them with the sinks' `output()`."""
        return []

    def reads(self, address: str) -> bool:
        """Whether the stream reads what a sink writes at `address`."""
        return address in self.inputs()

    table: SqlIdentifier
    """Name of the SQL view the stream is registered under."""
    proto_message: str = Field(min_length=1)
    """Full name of the protobuf message of each record, e.g. `dagger.examples.BookingLogMessage`."""
    event_time_field: str = Field(min_length=1)
    """A `google.protobuf.Timestamp` field (dotted path for nested fields) copied into the rowtime column."""
    pre_processors: list[Transformer] = Field(default_factory=list)
    """Transformers run, in order, on the stream's rows before its table is registered for the SQL."""
    late_records: LateRecordPolicy = Field(default_factory=LateRecordPolicy)
    row_layout: Literal["native", "dagger"] = "native"
    """`dagger`: the columns as Dagger lays them out (for jobs converted from Dagger): Timestamp and
    Duration fields as STRUCT<seconds, nanos>, wrappers as STRUCT<value>, maps as ARRAY<STRUCT<key,
    value>>, no source metadata columns, and `__internal_validation_field__` before the rowtime."""
