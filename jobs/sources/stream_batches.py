"""What every stream source emits: the message's columns, source metadata, a validity flag and the rowtime.

Sources build their Spark schema and their Arrow batches here, so every stream looks the same to the SQL
stage: proto fields in declaration order, then the source's metadata columns, then `rowtime` last (as in
Dagger). The validity flag never reaches SQL: the runner counts invalid rows and removes them together with
the flag (see `jobs.runner`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel
from pyspark.sql.datasource import DataSource, DataSourceStreamReader
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from jobs.arrow_values import scalar
from jobs.codec.protobuf import (
    DaggerRowLayout,
    ProtoDecoder,
    column_at_path,
    decoder_for,
    timestamp_field_at_path,
)

VALID_RECORD_COLUMN = "__dagger_valid_record"
ROWTIME_TYPE = pa.timestamp("us", tz="UTC")
_EPOCH = scalar(0, ROWTIME_TYPE)
_VALID = scalar(True, pa.bool_())


class StreamLayout:
    """The column layout of one stream: message fields + metadata + validity flag + rowtime."""

    def __init__(
        self,
        decoder: ProtoDecoder,
        metadata: pa.Schema,
        event_time_field: str,
        rowtime_column: str,
        row_layout: str = "native",
    ) -> None:
        timestamp_field_at_path(decoder.descriptor, event_time_field)  # raises naming the field if unusable
        # Dagger's layout: its type handlers' shapes, and no source metadata (Dagger's rows have none).
        self.dagger_layout = (
            DaggerRowLayout(decoder.descriptor, decoder.schema) if row_layout == "dagger" else None
        )
        if self.dagger_layout is not None:
            metadata = pa.schema([])
        reserved = [*metadata.names, VALID_RECORD_COLUMN, rowtime_column]
        clashes = sorted(set(decoder.schema.names) & set(reserved))
        if clashes:
            raise ValueError(
                f"{decoder.descriptor.full_name} has field(s) {', '.join(clashes)}, "
                "which the stream reserves "
                "for its own columns; choose another rowtime_column or rename the field"
            )
        self.decoder = decoder
        self.metadata = metadata
        self.event_time_field = event_time_field
        self.schema = pa.schema(
            [
                *(self.dagger_layout.schema if self.dagger_layout else decoder.schema),
                *metadata,
                pa.field(VALID_RECORD_COLUMN, pa.bool_(), nullable=False),
                pa.field(rowtime_column, ROWTIME_TYPE),
            ]
        )

    @property
    def spark_schema(self) -> StructType:
        return from_arrow_schema(self.schema)

    def assemble(
        self, decoded: pa.RecordBatch, metadata: Sequence[pa.Array], valid: pa.Array | None = None
    ) -> pa.RecordBatch:
        """Decoded message columns + metadata (the columns of `self.metadata`) -> a batch of `self.schema`.

        The rowtime is the event-time field; a record without one gets the epoch, as Dagger does, so the
        watermark treats it as late rather than the query failing.
        """
        rowtime = pc.fill_null(column_at_path(decoded, self.event_time_field), _EPOCH)
        if valid is None:
            valid = pa.repeat(_VALID, decoded.num_rows)
        columns = decoded.columns
        if self.dagger_layout is not None:
            columns, metadata = self.dagger_layout.convert(columns), []
        return pa.RecordBatch.from_arrays([*columns, *metadata, valid, rowtime], schema=self.schema)


class ProtoStreamReader(DataSourceStreamReader):
    """Base of the stream readers: the stream's settings and how to lay out its batches.

    Only plain values live on the reader: Spark pickles it to the workers, which rebuild (and cache) the
    decoder on first use.
    """

    metadata_schema: pa.Schema  # every metadata column the source can emit

    def __init__(
        self,
        stream: BaseModel,
        descriptor_sets: str,
        rowtime_column: str,
        fields: list[str] | None = None,
        metadata: list[str] | None = None,
    ) -> None:
        self.stream = stream
        self.descriptor_sets = descriptor_sets
        self.rowtime_column = rowtime_column
        self.fields = fields
        self.metadata = metadata

    @property
    def layout(self) -> StreamLayout:
        decoder = decoder_for(self.descriptor_sets, self.stream.proto_message, self.fields)
        emitted = [
            field for field in self.metadata_schema if self.metadata is None or field.name in self.metadata
        ]
        return StreamLayout(
            decoder,
            pa.schema(emitted),
            self.stream.event_time_field,
            self.rowtime_column,
            self.stream.row_layout,
        )


class ProtoStreamDataSource(DataSource):
    """Base of the stream data sources. Options: `stream` (the stream model as JSON), `descriptor_sets`
    (see `encode_descriptor_sets`), `rowtime_column`, `fields` (JSON list of the message fields to
    decode, or `null` for all) and `metadata` (JSON list of the metadata columns to emit, or `null` for
    all): a column nobody reads costs its building in Python and its conversion in the JVM."""

    stream_model: type[BaseModel]
    reader_class: type[ProtoStreamReader]

    def _reader(self) -> ProtoStreamReader:
        stream = self.stream_model.model_validate_json(self.options["stream"])
        fields = json.loads(self.options.get("fields", "null"))
        metadata = json.loads(self.options.get("metadata", "null"))
        return self.reader_class(
            stream, self.options["descriptor_sets"], self.options["rowtime_column"], fields, metadata
        )

    def schema(self) -> StructType:
        return self._reader().layout.spark_schema

    def streamReader(self, schema: StructType) -> ProtoStreamReader:
        return self._reader()
