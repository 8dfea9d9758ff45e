"""Parquet stream source: bounded files whose columns follow the stream's protobuf message.

Files are read in order of their `dt=YYYY-MM-DD[/hr=HH]` partition time (then path), one Spark task per
file, and the offset is the last file read, so a restarted query continues with the next file. Columns are
matched to the message's fields by name: extra columns are ignored, missing ones are null, and a column
whose type cannot be cast to the field's is an error naming file and column. A Timestamp field may be
stored as a timestamp, as epoch milliseconds (int64, as Dagger reads it) or as a {seconds, nanos} struct.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.datasource import InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxFiles

from jobs.engine.arrow_values import scalar
from jobs.engine.object_store import arrow_filesystem
from jobs.engine.python_workers import freeze_imported_objects
from jobs.sources.parquet.config import ParquetStream
from jobs.sources.stream_batches import ROWTIME_TYPE, FlushingReader, StreamDataSource, StreamReader

SOURCE_NAME = "dagger_parquet"
METADATA_SCHEMA = pa.schema([pa.field("source_file", pa.string())])
_PARTITION_TIME = re.compile(r"(?:^|/)dt=(\d{4}-\d{2}-\d{2})(?:/hr=(\d{2}))?(?:/|$)")
_READ_BATCH_ROWS = 65_536


class ParquetSourceError(RuntimeError):
    """A Parquet file that cannot be listed, read or matched to the stream's message."""


@dataclass(frozen=True, order=True)
class ParquetFileEntry:
    """A file and where it sorts: by partition time, then path."""

    sort_key: str
    path: str


def partition_time(path: str) -> datetime | None:
    match = _PARTITION_TIME.search(Path(path).as_posix())
    if match is None:
        return None
    day, hour = match.group(1), match.group(2) or "00"
    return datetime.fromisoformat(f"{day}T{hour}:00:00").replace(tzinfo=UTC)


def list_stream_files(
    stream: ParquetStream, object_store: Mapping[str, str] | None = None
) -> list[ParquetFileEntry]:
    """The stream's files in reading order; `object_store`: the session's `fs.s3a.*` settings, for
    `s3a://` paths (listed with pyarrow's S3 client)."""
    files: list[str] = []
    for location in stream.paths:
        filesystem, root = arrow_filesystem(location, object_store or {})
        root = root.rstrip("/") or "/"
        found = filesystem.get_file_info(root)
        if found.type == pafs.FileType.File:
            files.append(location)
        elif found.type == pafs.FileType.Directory:
            # Listed paths are relative to the file system's root; the stream names files as it was given.
            prefix = location.rstrip("/")
            for info in filesystem.get_file_info(pafs.FileSelector(root, recursive=True)):
                relative = info.path[len(root) :].lstrip("/")
                hidden = any(part.startswith(("_", ".")) for part in relative.split("/"))
                if info.type == pafs.FileType.File and relative.endswith(".parquet") and not hidden:
                    files.append(f"{prefix}/{relative}")
        else:
            raise ParquetSourceError(f"stream {stream.table!r}: path {location} does not exist")
    entries = []
    for file in sorted(set(files)):
        when = partition_time(file)
        if stream.date_ranges:
            if when is None:
                raise ParquetSourceError(
                    f"stream {stream.table!r}: {file} has no dt=YYYY-MM-DD[/hr=HH] folder, so it cannot be "
                    "matched to date_ranges"
                )
            if not any(window.start <= when <= window.end for window in stream.date_ranges):
                continue
        entries.append(ParquetFileEntry(f"{when.isoformat() if when else ''}|{file}", file))
    return sorted(entries)


@dataclass(frozen=True)
class ParquetFilePartition(InputPartition):
    path: str
    late_before_us: int = 0
    """The watermark the batch runs with: rows with an earlier event time are late (0: none)."""


class ParquetStreamReader(StreamReader):
    """Offsets are `{"after": sort key of the last file read}` (and, once a bounded run that flushes has
    read every file, `FINAL_MARK`)."""

    metadata_schema = METADATA_SCHEMA
    stream: ParquetStream

    def initialOffset(self) -> dict:
        return {"after": ""}

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.stream.max_files_per_batch:
            return ReadMaxFiles(self.stream.max_files_per_batch)
        return ReadAllAvailable()

    def available_end(self) -> dict:
        files = self._files()
        return {"after": files[-1].sort_key if files else ""}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        unread = [entry for entry in self._files() if entry.sort_key > start["after"]]
        if self.input_end is not None:  # a bounded run reads no file that came after its start
            unread = [entry for entry in unread if entry.sort_key <= self.input_end["after"]]
        whole = len(unread)
        if isinstance(limit, ReadMaxFiles):
            unread = unread[: limit.max_files]
        end = {**start, "after": unread[-1].sort_key} if unread else start
        return self.closing(end, reached=len(unread) == whole)

    def record_partitions(self, start: dict, end: dict) -> list[ParquetFilePartition]:
        late_before_us = self.late_before_us()
        return [
            ParquetFilePartition(entry.path, late_before_us)
            for entry in self._files()
            if start["after"] < entry.sort_key <= end["after"]
        ]

    def _files(self) -> list[ParquetFileEntry]:
        return list_stream_files(self.stream, self.object_store)

    def read_records(self, partition: ParquetFilePartition) -> Iterator[pa.RecordBatch]:
        freeze_imported_objects()
        try:
            filesystem, path = arrow_filesystem(partition.path, self.object_store)
            parquet_file = pq.ParquetFile(filesystem.open_input_file(path))
        except (OSError, pa.ArrowInvalid) as error:
            raise ParquetSourceError(
                f"stream {self.stream.table!r}: cannot read {partition.path}: {error}"
            ) from None
        layout = self.layout
        path = scalar(partition.path, pa.string())
        for batch in parquet_file.iter_batches(batch_size=_READ_BATCH_ROWS):
            decoded = self._conform(batch, layout.decoder.schema, partition.path)
            source_file = [pa.repeat(path, batch.num_rows)] if layout.metadata.names else []
            yield layout.assemble(decoded, source_file, late=layout.late(decoded, partition.late_before_us))

    def _conform(self, batch: pa.RecordBatch, target: pa.Schema, path: str) -> pa.RecordBatch:
        columns = []
        for field in target:
            if field.name not in batch.schema.names:
                columns.append(pa.nulls(batch.num_rows, field.type))
                continue
            column = batch.column(field.name)
            try:
                columns.append(_cast_column(column, field.type))
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
                raise ParquetSourceError(
                    f"stream {self.stream.table!r}: {path}: column {field.name!r} of type {column.type} "
                    f"does not fit field type {field.type}: {error}"
                ) from None
        return pa.RecordBatch.from_arrays(columns, schema=target)


def _cast_column(column: pa.Array, target: pa.DataType) -> pa.Array:
    if column.type == target:
        return column
    if target == ROWTIME_TYPE:
        if pa.types.is_integer(column.type):  # epoch milliseconds
            return pc.cast(pc.multiply(pc.cast(column, pa.int64()), 1000), pa.int64()).cast(ROWTIME_TYPE)
        if pa.types.is_struct(column.type) and {"seconds", "nanos"} <= {f.name for f in column.type}:
            seconds = pc.cast(pc.struct_field(column, "seconds"), pa.int64())
            nanos = pc.cast(pc.struct_field(column, "nanos"), pa.int64())
            micros = pc.add(pc.multiply(seconds, 1_000_000), pc.divide(nanos, 1000))
            return pc.if_else(
                column.is_null(), pa.nulls(len(column), ROWTIME_TYPE), micros.cast(ROWTIME_TYPE)
            )
    if _kind(column.type) != _kind(target):
        raise pa.ArrowTypeError(f"a {_kind(column.type)} column cannot hold a {_kind(target)} field")
    return pc.cast(column, target)


def _kind(arrow_type: pa.DataType) -> str:
    """Families within which a cast keeps meaning (a number never silently becomes text)."""
    for kind, test in (
        ("numeric", lambda t: pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)),
        ("text", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
        ("binary", lambda t: pa.types.is_binary(t) or pa.types.is_large_binary(t)),
        ("boolean", pa.types.is_boolean),
        ("timestamp", pa.types.is_timestamp),
        ("duration", pa.types.is_duration),
        ("struct", pa.types.is_struct),
        ("list", lambda t: pa.types.is_list(t) or pa.types.is_large_list(t)),
        ("map", pa.types.is_map),
    ):
        if test(arrow_type):
            return kind
    return str(arrow_type)


class FlushingParquetStreamReader(ParquetStreamReader, FlushingReader):
    """A Parquet stream's reader whose bounded runs flush (`jobs.sources.stream_batches.FlushingReader`)."""


class ParquetStreamDataSource(StreamDataSource):
    stream_model = ParquetStream
    reader_class = ParquetStreamReader
    flushing_reader_class = FlushingParquetStreamReader

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME
