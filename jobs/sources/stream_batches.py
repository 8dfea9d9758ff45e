"""What every stream source emits: the records' columns, source metadata, two flags and the rowtime.

Sources build their Spark schema and their Arrow batches here, so every stream looks the same to the SQL
stage: the records' fields in declaration order, then the source's metadata columns, then `rowtime` last
(as in Dagger). The flags (valid, late) never reach SQL: the runner counts invalid and late rows and removes
them together with the flags (see `jobs.running.runner`).

A record is late when its event time is before the watermark its micro-batch runs with. Spark writes that
watermark into the checkpoint's offset log (`offsets/<batch>`, `batchWatermarkMs`) before it asks the
source for the batch's partitions, so the driver side of a source reads it there and hands it to its
tasks with each partition: a task run again, or the batch run again after a crash, marks the same rows.

A bounded run of a dagger whose bounded runs end as Flink's (`DaggerSpec.bounded_end` `flush`, the
`bounded_end` option here) takes `Trigger.AvailableNow` (`FlushingReader`), reads what there was when it
started, and ends its input as Flink's bounded sources do, with a watermark at the end of time: once a
source has read everything that was there when the run started, its offset is marked `FINAL_MARK` and the
batch that reaches it carries one more row, at `FINAL_ROWTIME`, after every record. That row moves the
stream's watermark past every window, OVER row and Top-N still waiting, so the no-data batch Spark runs
next emits them all; the stream's table drops the row just after its watermark
(`jobs.running.stream_tables`), so no query or sink sees it. The mark, in the checkpoint's offsets, makes
a batch replayed after a crash carry the same row. Streams on Spark's Kafka connector end their input the
same way, through the JVM module's wrapper of the connector's source (`jobs.sources.kafka.spark_connector`).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
from pydantic import BaseModel
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from jobs.codec.formats import (
    RecordDecoder,
    RecordFormat,
    check_event_time_field,
    record_decoder,
    record_format,
)
from jobs.codec.protobuf import ProtoDecoder, column_at_path
from jobs.codec.protobuf_dagger_layout import DaggerRowLayout
from jobs.engine.arrow_values import scalar
from jobs.engine.object_store import arrow_filesystem, is_s3a

VALID_RECORD_COLUMN = "__dagger_valid_record"
LATE_RECORD_COLUMN = "__dagger_late_record"
ROWTIME_TYPE = pa.timestamp("us", tz="UTC")
_EPOCH = scalar(0, ROWTIME_TYPE)
_VALID = scalar(True, pa.bool_())
_ON_TIME = scalar(False, pa.bool_())

FINAL_ROWTIME = datetime(9999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
"""The event time of the row that ends a bounded run's input: the last instant Python and Arrow share,
later than any record's, and far enough from Spark's limits that no watermark or timer arithmetic on it
overflows (Flink's final watermark is Long.MAX_VALUE milliseconds)."""
FINAL_ROWTIME_US = (FINAL_ROWTIME - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
FINAL_MARK = "final watermark"
"""The key of a source's offset once it has emitted the row at `FINAL_ROWTIME` (no topic is named so)."""


@dataclass(frozen=True)
class FinalWatermarkPartition(InputPartition):
    """The task that emits the row at `FINAL_ROWTIME`."""


class StreamLayout:
    """The column layout of one stream: record fields + metadata + validity flag + rowtime."""

    def __init__(
        self,
        decoder: RecordDecoder,
        metadata: pa.Schema,
        event_time_field: str | None,
        rowtime_column: str | None,
        row_layout: str = "native",
    ) -> None:
        """`event_time_field` None: the event time is computed after the source (no record is judged late
        here); `rowtime_column` None: no rowtime column is appended, a column of the records is the
        event-time column or one is computed later (`StreamConfig.source_rowtime_column`)."""
        if event_time_field is not None:
            check_event_time_field(decoder, event_time_field)  # raises naming the field if unusable
        # Dagger's layout (protobuf records only): its type handlers' shapes, and no source metadata.
        self.dagger_layout = (
            DaggerRowLayout(decoder.descriptor, decoder.schema)
            if row_layout == "dagger" and isinstance(decoder, ProtoDecoder)
            else None
        )
        if self.dagger_layout is not None:
            metadata = pa.schema([])
        reserved = [*metadata.names, VALID_RECORD_COLUMN, LATE_RECORD_COLUMN, *filter(None, [rowtime_column])]
        clashes = sorted(set(decoder.schema.names) & set(reserved))
        if clashes:
            raise ValueError(
                f"the records have field(s) {', '.join(clashes)}, which the stream reserves "
                "for its own columns; choose another rowtime_column or rename the field"
            )
        self.decoder = decoder
        self.metadata = metadata
        self.event_time_field = event_time_field
        self.rowtime_column = rowtime_column
        self.schema = pa.schema(
            [
                *(self.dagger_layout.schema if self.dagger_layout else decoder.schema),
                *metadata,
                pa.field(VALID_RECORD_COLUMN, pa.bool_(), nullable=False),
                pa.field(LATE_RECORD_COLUMN, pa.bool_(), nullable=False),
                *([pa.field(rowtime_column, ROWTIME_TYPE)] if rowtime_column else []),
            ]
        )

    @property
    def spark_schema(self) -> StructType:
        return from_arrow_schema(self.schema)

    def rowtime(self, decoded: pa.RecordBatch) -> pa.Array:
        """The event-time field; a record without one gets the epoch, as Dagger does, so the watermark
        treats it as late rather than the query failing."""
        return pc.fill_null(column_at_path(decoded, self.event_time_field), _EPOCH)

    def late(
        self, decoded: pa.RecordBatch, watermark_us: int, valid: pa.Array | None = None
    ) -> pa.Array | None:
        """Which valid records have an event time before `watermark_us` (None: none of them)."""
        if watermark_us <= 0 or decoded.num_rows == 0 or self.event_time_field is None:
            return None
        late = pc.less(self.rowtime(decoded), scalar(watermark_us, ROWTIME_TYPE))
        if valid is not None:
            late = pc.and_(late, valid)
        return late if pc.any(late).as_py() else None

    def final_watermark_row(self) -> pa.RecordBatch:
        """The row after a bounded run's last record: nothing but the flags and `FINAL_ROWTIME`."""
        # The rowtime column the source appends, or the record's own event-time column.
        event_time = self.rowtime_column or self.event_time_field
        columns = {
            VALID_RECORD_COLUMN: pa.array([True]),
            LATE_RECORD_COLUMN: pa.array([False]),
            event_time: pa.array([FINAL_ROWTIME], ROWTIME_TYPE),
        }
        return pa.RecordBatch.from_arrays(
            [
                columns[field.name].cast(field.type, safe=False)
                if field.name in columns
                else pa.nulls(1, field.type)
                for field in self.schema
            ],
            schema=self.schema,
        )

    def assemble(
        self,
        decoded: pa.RecordBatch,
        metadata: Sequence[pa.Array],
        valid: pa.Array | None = None,
        late: pa.Array | None = None,
    ) -> pa.RecordBatch:
        """Decoded record columns + metadata (the columns of `self.metadata`) + flags -> a batch of
        `self.schema`."""
        rowtime = []
        if self.rowtime_column:  # NULL where the event time is computed after the source
            computed = self.event_time_field is None
            rowtime = [pa.nulls(decoded.num_rows, ROWTIME_TYPE) if computed else self.rowtime(decoded)]
        if valid is None:
            valid = pa.repeat(_VALID, decoded.num_rows)
        if late is None:
            late = pa.repeat(_ON_TIME, decoded.num_rows)
        columns = decoded.columns
        if self.dagger_layout is not None:
            columns, metadata = self.dagger_layout.convert(columns), []
        return pa.RecordBatch.from_arrays([*columns, *metadata, valid, late, *rowtime], schema=self.schema)


class StreamReader(DataSourceStreamReader):
    """Base of the stream readers: the stream's settings and how to lay out its batches, and the end of a
    bounded run's input (see the module's docstring).

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
        checkpoint: str | None = None,
        object_store: dict[str, str] | None = None,
        records: RecordFormat | None = None,
    ) -> None:
        self.stream = stream
        self.descriptor_sets = descriptor_sets
        self.rowtime_column = rowtime_column
        self.fields = fields
        self.metadata = metadata
        self.checkpoint = checkpoint
        self.object_store = object_store or {}
        """The session's `fs.s3a.*` settings, for `s3a://` files and checkpoints
        (`jobs.engine.object_store`)."""
        self.records = records
        """How the records decode, as the dagger's plan resolved it (None: resolved from `stream` when
        the layout is first asked for, by a reader built without a plan)."""
        self.input_end: dict | None = None
        """In a bounded run that flushes, the offset of everything there was when it started (None:
        another run, see `FlushingReader`)."""

    def available_end(self) -> dict:
        """The offset after every record there is now."""
        raise NotImplementedError

    def prepareForTriggerAvailableNow(self) -> None:
        self.input_end = self.available_end()

    def closing(self, end: dict, reached: bool) -> dict:
        """`end`, marked `FINAL_MARK` when it `reached` a flushing bounded run's `input_end`: the batch up
        to it ends the input. An offset keeps its mark in later runs, so a replay or a later run of a
        checkpoint closed once adds no second row."""
        if self.input_end is None or not reached:
            return end
        return {**end, FINAL_MARK: {}}

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        closes = FINAL_MARK in end and FINAL_MARK not in start
        return [*self.record_partitions(start, end), *([FinalWatermarkPartition()] if closes else [])]

    def record_partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        """The tasks that read the records between `start` and `end`."""
        raise NotImplementedError

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, FinalWatermarkPartition):
            yield self.layout.final_watermark_row()
        else:
            yield from self.read_records(partition)

    def read_records(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        """The records of one task of `record_partitions`."""
        raise NotImplementedError

    def late_before_us(self) -> int:
        """Records of the micro-batch being planned with an event time before this (epoch microseconds) are
        late: the batch's watermark; 0 (none late) before any event time was seen, for a checkpoint on a
        store other than local files and `s3a://` (see the docs' known limits), and for a stream keeping
        late records."""
        if self.stream.late_records.action == "keep":
            return 0
        offsets = latest_log_entry(self.checkpoint, self.object_store, "offsets")
        return int(offsets.get("batchWatermarkMs", 0)) * 1000

    @property
    def layout(self) -> StreamLayout:
        records = self.records or record_format(self.stream)
        decoder = record_decoder(records, self.descriptor_sets, self.fields)
        emitted = [
            field
            for field in self.metadata_schema
            if self.stream.metadata_columns and (self.metadata is None or field.name in self.metadata)
        ]
        return StreamLayout(
            decoder,
            pa.schema(emitted),
            None if self.stream.computes_event_time else self.stream.event_time_field,
            self.stream.source_rowtime_column(self.rowtime_column),
            self.stream.row_layout,
        )


class FlushingReader(SupportsTriggerAvailableNow):
    """Mixed into a stream reader of a dagger whose bounded runs flush (`bounded_end` `flush`): Spark then
    runs a bounded run as `Trigger.AvailableNow`, calling `prepareForTriggerAvailableNow`, and the run
    ends with the row at `FINAL_ROWTIME`. Without it (`open`, as Spark SQL daggers by default), Spark runs
    a bounded run as one micro-batch of everything there is, and runs no batch after it: the watermark
    the checkpoint goes on with judges no record of the next run late that the run before let in."""


def latest_log_entry(checkpoint: str | None, object_store: Mapping[str, str], log_name: str) -> dict:
    """The metadata of the latest micro-batch in the checkpoint's `offsets` or `commits` log: {} before
    any, and for a checkpoint on a store other than local files and `s3a://`."""
    if is_s3a(checkpoint):
        filesystem, folder = arrow_filesystem(f"{checkpoint}/{log_name}", object_store)
    else:
        filesystem, folder = pafs.LocalFileSystem(), _local_folder(checkpoint, log_name)
    if folder is None:
        return {}
    listed = filesystem.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    batches = [int(info.base_name) for info in listed if info.base_name.isdigit()]
    if not batches:
        return {}
    with filesystem.open_input_stream(f"{folder}/{max(batches)}") as log:  # "v1", then batch metadata
        return json.loads(log.read().decode().splitlines()[1])


def _local_folder(location: str | None, name: str) -> str | None:
    if not location:
        return None
    url = urlparse(location)
    if url.scheme not in ("", "file"):
        return None
    folder = os.path.join(url.path if url.scheme else location, name)
    return folder if os.path.isdir(folder) else None


class StreamDataSource(DataSource):
    """Base of the stream data sources. Options: `stream` (the stream model as JSON), `descriptor_sets`
    (see `encode_descriptor_sets`), `rowtime_column`, `fields` (JSON list of the record fields to
    decode, or `null` for all), `metadata` (JSON list of the metadata columns to emit, or `null` for
    all: a column nobody reads costs its building in Python and its conversion in the JVM) and
    `checkpoint` (the query's checkpoint, where the batch's watermark is read) and `object_store` (JSON of
    the session's `fs.s3a.*` settings, for `s3a://` files and checkpoints) and `bounded_end` (`flush`: a
    bounded run ends its input with the row at `FINAL_ROWTIME`; `open`, the default: it ends as Spark's,
    without `Trigger.AvailableNow`'s support, so Spark runs it as one micro-batch) and `records` (the
    `RecordFormat` of the dagger's plan as JSON, so no task reads a schema again)."""

    stream_model: type[BaseModel]
    reader_class: type[StreamReader]
    flushing_reader_class: type[StreamReader]
    """`reader_class` with `FlushingReader`, for `bounded_end` `flush`."""

    def _reader(self) -> StreamReader:
        stream = self.stream_model.model_validate_json(self.options["stream"])
        fields = json.loads(self.options.get("fields", "null"))
        metadata = json.loads(self.options.get("metadata", "null"))
        flushes = self.options.get("bounded_end", "open") == "flush"
        return (self.flushing_reader_class if flushes else self.reader_class)(
            stream,
            self.options["descriptor_sets"],
            self.options["rowtime_column"],
            fields,
            metadata,
            self.options.get("checkpoint"),
            json.loads(self.options.get("object_store", "{}")),
            RecordFormat.from_json(self.options["records"]) if "records" in self.options else None,
        )

    def schema(self) -> StructType:
        return self._reader().layout.spark_schema

    def streamReader(self, schema: StructType) -> StreamReader:
        return self._reader()
