"""Keys every stream kind has: the SQL table, the record format, the event time, the pre-processors."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar, Literal, Self

from pydantic import Field, PositiveInt, ValidationInfo, field_validator, model_validator

from jobs.expectations.config import Expectation, unique_names
from jobs.model.config import ConfigModel, DeadLetterPolicy, SqlIdentifier, resolve_path
from jobs.processors.config import Transformer


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
    format: Literal["protobuf", "avro", "json"] = "protobuf"
    """How each record is encoded: `protobuf` (`proto_message`), `avro` in the Confluent wire format
    (`schema_registry_url`), or `json`, one object per record (`schema_file` or `record_schema`)."""
    proto_message: str | None = Field(default=None, min_length=1)
    """`protobuf`: full name of the message of each record, e.g. `dagger.examples.BookingLogMessage`."""
    schema_registry_url: str | None = Field(default=None, min_length=1)
    """`avro`: where writer schemas are looked up by the id each record carries: a Confluent-compatible
    schema registry (`http://...`; `dagger collect` serves one) or the collections' metadata database
    (`postgresql://...`)."""
    schema_subject: str | None = Field(default=None, min_length=1)
    """`avro`: the subject whose schema is the stream's columns (the reader schema); by default
    `<topic>-value` of the stream's one topic."""
    schema_version: PositiveInt | None = None
    """`avro`: the subject's version that gives the columns; by default its latest when the dagger starts
    (a restart picks up fields added since, which older records read as NULL)."""
    schema_file: str | None = Field(default=None, min_length=1)
    """`json`: the columns, as an Avro record schema (`.avsc`) or a JSON Schema (`.json`) file."""
    record_schema: dict[str, Any] | None = None
    """`json`: the columns written in the dagger file instead of a `schema_file`: an Avro record schema or
    a JSON Schema, as a mapping (a Flink SQL script's table gives its columns this way)."""
    computed_columns: dict[SqlIdentifier, str] = Field(default_factory=dict)
    """Columns computed from each record's, after it is decoded and before the pre-processors, in order
    (a Flink table's `name AS expression`): name -> Spark SQL expression over the record's columns and
    the computed columns before it. One of them may be the event time (`event_time_field`)."""
    event_time_field: str = Field(min_length=1)
    """A timestamp field (dotted path for nested fields: a `google.protobuf.Timestamp`, an Avro
    `timestamp-micros`/`-millis`, a JSON `date-time` string) copied into the rowtime column, or one of
    `computed_columns`. A top-level field or computed column named as the dagger's `rowtime_column` is
    itself the event-time column, where the stream has it (as in a Flink table's `WATERMARK FOR`)."""
    pre_processors: list[Transformer] = Field(default_factory=list)
    """Transformers run, in order, on the stream's rows before its table is registered for the SQL."""
    late_records: LateRecordPolicy = Field(default_factory=LateRecordPolicy)
    expectations: list[Expectation] = Field(default_factory=list)
    """Conditions every row of the stream should meet, checked after its pre-processors
    (`jobs.expectations`)."""
    row_layout: Literal["native", "dagger"] = "native"
    """`dagger`: the columns as Dagger lays them out (for jobs converted from Dagger): Timestamp and
    Duration fields as STRUCT<seconds, nanos>, wrappers as STRUCT<value>, maps as ARRAY<STRUCT<key,
    value>>, no source metadata columns, and `__internal_validation_field__` before the rowtime."""

    metadata_columns: bool = True
    """false: the table has no source metadata columns (`kafka_topic`...), only its records' fields and
    computed columns, as a Flink SQL script's table has exactly the columns it declares (`SELECT *`)."""

    _unique_expectations = field_validator("expectations")(unique_names)

    @field_validator("schema_file")
    @classmethod
    def _resolve_schema_file(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else resolve_path(value, info)

    @model_validator(mode="after")
    def _format_keys(self) -> Self:
        needed = {"protobuf": "proto_message", "avro": "schema_registry_url", "json": "schema_file"}
        if self.format == "json" and (self.schema_file is None) == (self.record_schema is None):
            raise ValueError("format 'json' needs one of 'schema_file' and 'record_schema'")
        key = needed[self.format]
        if getattr(self, key) is None and self.format != "json":
            raise ValueError(f"format {self.format!r} needs {key!r}")
        if self.record_schema is not None and self.format != "json":
            raise ValueError(f"'record_schema' is a key of format 'json', not {self.format!r}")
        for other_format, other_key in needed.items():
            if other_format != self.format and getattr(self, other_key) is not None:
                raise ValueError(f"{other_key!r} is a key of format {other_format!r}, not {self.format!r}")
        avro_only = [key for key in ("schema_subject", "schema_version") if getattr(self, key) is not None]
        if avro_only and self.format != "avro":
            raise ValueError(f"{', '.join(map(repr, avro_only))}: keys of format 'avro'")
        if self.row_layout == "dagger" and self.format != "protobuf":
            raise ValueError(
                "row_layout 'dagger' is Dagger's layout of protobuf records; it needs format 'protobuf'"
            )
        return self

    @model_validator(mode="after")
    def _computed_event_time_keeps_late_records(self) -> Self:
        if self.computes_event_time and self.late_records.action != "keep":
            # The source judges lateness as it reads, before any column is computed.
            raise ValueError(
                f"late_records.action {self.late_records.action!r} needs the event time in a record field; "
                f"event_time_field {self.event_time_field!r} is a computed column"
            )
        return self

    @property
    def computes_event_time(self) -> bool:
        """The event time is one of `computed_columns`, filled after the source has read the record."""
        return self.event_time_field in self.computed_columns

    def source_rowtime_column(self, rowtime_column: str) -> str | None:
        """The column the source appends with the event time; None when the stream's own column is its
        event-time column. A computed event time (filled later, and copied into `rowtime_column` then)
        has it too: NULL for every record, the end of time for the row that ends a bounded run's input
        (`jobs.sources.stream_batches`), which the computed column keeps."""
        if self.event_time_field == rowtime_column and not self.computes_event_time:
            return None
        return rowtime_column

    def records(self) -> str:
        """What each record is, as error messages and the asset graph name it."""
        if self.format == "protobuf":
            return str(self.proto_message)
        if self.format == "avro":
            return f"Avro {self.schema_subject} version {self.schema_version or 'latest'}"
        return f"JSON of {self.schema_file or 'the columns of record_schema'}"
