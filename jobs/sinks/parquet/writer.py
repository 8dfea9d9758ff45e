"""Parquet lake sink: result rows as Parquet files partitioned by `dt=YYYY-MM-DD/hr=HH` of an event time.

Layout, readable by the Parquet stream source and by any Parquet reader (folders and files starting with
`_` or `.` are hidden by convention):

    <path>/dt=2026-11-21/hr=05/part-b0000000042-t00001.parquet    rows of batch 42 written by task 1
    <path>/_dagger/started/42                                      batch 42 began writing
    <path>/_dagger/committed/42                                    batch 42 is complete (files and rows)

Exactly once: each task writes its rows per partition folder into a hidden temporary file and renames it
into place, so a reader never sees half a file. When every task has finished, the driver writes the
batch's `committed` marker. A micro-batch replayed after a crash (same batch id, same rows) first finds
its `started` marker without a `committed` one and deletes every file of that batch id, then writes the
batch again; a batch already committed is skipped. The lake thus holds every row exactly once after any
crash; while a crashed batch waits for its replay, a reader may see part of it, never a duplicate.
Rows whose time is null go to the epoch partition (`dt=1970-01-01/hr=00`), as Dagger treats events
without a time. With `partition_columns`, the folders are those columns' values instead, laid out as
Flink's filesystem sink lays out a table `PARTITIONED BY` them (`dt=2026-12-01/hm=10%3A00/part-...`, the
columns left out of the files).

A run of a time partition (`jobs.model.time_partitions`) names its files and markers for the partition and its
generation, wherever its rows land:

    <path>/dt=2026-11-20/hr=05/part-p20261120-1a2b3c4d-b0000000000-t00000.parquet
    <path>/_dagger/partitions/20261120/1a2b3c4d/committed/0

and, as it starts, deletes the files and markers of the partition's other generations: a new run of a
partition replaces its output, and a restarted one keeps what its generation wrote.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql.types import (
    BooleanType,
    DataType,
    DateType,
    IntegralType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from jobs.engine.object_store import arrow_filesystem
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.parquet.config import ParquetSink
from jobs.sinks.parquet.flink_csv import csv_lines, writes_as_flink
from jobs.sinks.partitions import write_partitions

_MARKERS = "_dagger"
DEFAULT_PARTITION = "__DEFAULT_PARTITION__"
"""The folder of a NULL or blank partition value (Flink's `partition.default-name`, Hive's rule)."""
_ESCAPED = frozenset([*map(chr, range(1, 0x20)), *"\"#%'*/:=?\\\x7f{}[]^"])
"""Characters of a partition value written as `%XX` in its folder's name (Flink's and Hive's set)."""
_KEPT_MARKERS = 100  # the checkpoint replays at most the latest batch; older markers are pruned


class ParquetSinkError(RuntimeError):
    """Rows that cannot be written to the lake; the micro-batch fails and is replayed."""


@dataclass(frozen=True)
class ParquetPartitionWriter:
    """Executor side: writes one task's rows, one file per partition folder it has rows for."""

    path: str
    time_column: str
    by_hour: bool
    compression: str
    file_prefix: str
    """Of every file the task writes: the generation's and the batch's."""
    object_store: dict[str, str]
    """The session's `fs.s3a.*` settings, for a lake on `s3a://` (`jobs.engine.object_store`)."""
    partition_columns: tuple[str, ...] = ()
    """Columns whose values name the folders (instead of `time_column`), left out of the files."""
    file_format: str = "parquet"

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        filesystem, root = arrow_filesystem(self.path, self.object_store)
        task = TaskContext.get()
        file_name = f"{self.file_prefix}t{task.partitionId() if task else 0:05d}.{self.file_format}"
        writers: dict[str, pq.ParquetWriter | _CsvWriter] = {}
        rows = 0
        try:
            for batch in batches:
                for folder, part in self._split_by_folder(batch):
                    writer = writers.get(folder)
                    if writer is None:
                        filesystem.create_dir(f"{root}/{folder}", recursive=True)
                        writer = writers[folder] = self._open(
                            filesystem, f"{root}/{folder}/.{file_name}.tmp", part.schema
                        )
                    writer.write_batch(part)
                    rows += part.num_rows
        finally:
            for writer in writers.values():
                writer.close()
        for folder in writers:  # only complete files become visible
            filesystem.move(f"{root}/{folder}/.{file_name}.tmp", f"{root}/{folder}/{file_name}")
        return rows

    def _open(
        self, filesystem: pafs.FileSystem, path: str, schema: pa.Schema
    ) -> pq.ParquetWriter | _CsvWriter:
        if self.file_format == "csv":
            return _CsvWriter(filesystem.open_output_stream(path))
        return pq.ParquetWriter(path, schema, filesystem=filesystem, compression=self.compression)

    def _split_by_folder(self, batch: pa.RecordBatch) -> Iterator[tuple[str, pa.RecordBatch]]:
        if self.partition_columns:
            folders = self._value_folders(batch)
            batch = batch.drop_columns(list(self.partition_columns))
        else:
            folders = self._time_folders(batch)
        for folder in pc.unique(folders).to_pylist():
            yield folder, batch.filter(pc.equal(folders, folder))

    def _value_folders(self, batch: pa.RecordBatch) -> pa.Array:
        """Each row's `c1=v1/c2=v2` of the partition columns' values (escaped once per distinct value)."""
        parts = []
        for name in self.partition_columns:
            encoded = pc.dictionary_encode(batch.column(name).cast(pa.string()))
            values = [*encoded.dictionary.to_pylist(), None]  # the last for NULL
            names = pa.array([f"{name}={partition_value(value)}" for value in values])
            parts.append(pc.take(names, pc.fill_null(encoded.indices, len(values) - 1)))
        return pc.binary_join_element_wise(*parts, "/")

    def _time_folders(self, batch: pa.RecordBatch) -> pa.Array:
        times = batch.column(self.time_column)
        if pa.types.is_timestamp(times.type) and times.type.tz is not None:
            times = times.cast(pa.timestamp(times.type.unit))  # wall-clock UTC
        times = pc.fill_null(times.cast(pa.timestamp("us")), pa.scalar(0, pa.timestamp("us")))
        form = "dt=%Y-%m-%d/hr=%H" if self.by_hour else "dt=%Y-%m-%d"
        return pc.strftime(times, format=form)


def partition_value(value: str | None) -> str:
    """A partition column's value as its folder names it: escaped, or the default for NULL or blank."""
    if value is None or not value.strip():
        return DEFAULT_PARTITION
    return "".join(f"%{ord(char):02X}" if char in _ESCAPED else char for char in value)


class _CsvWriter:
    """A file of Flink's CSV lines, written batch by batch."""

    def __init__(self, stream: pa.NativeFile) -> None:
        self.stream = stream

    def write_batch(self, batch: pa.RecordBatch) -> None:
        self.stream.write(csv_lines(batch))

    def close(self) -> None:
        self.stream.close()


class ParquetSinkWriter:
    """Driver side: one `write` per micro-batch, bracketed by the batch's markers."""

    def __init__(self, sink: ParquetSink, context: SinkContext) -> None:
        spec = context.spec
        self.sink = sink
        self.time_column = sink.time_column or spec.rowtime_column
        self._object_store = dict(context.object_store)
        self._filesystem, self._root = arrow_filesystem(sink.path, self._object_store)
        partition = spec.time_partition
        self._markers = f"{self._root}/{_MARKERS}"
        self._file_prefix = "part-"
        if partition is not None:
            self._markers = f"{self._root}/{_MARKERS}/partitions/{partition.slug}/{partition.generation}"
            self._file_prefix = f"part-p{partition.slug}-{partition.generation}-"
        if context.result_schema is not None:  # known as the dagger is built: checked before it runs
            try:
                self._check_columns(context.result_schema)
            except ParquetSinkError as error:
                raise ValueError(str(error)) from None
        try:
            for kind in ("started", "committed"):
                self._filesystem.create_dir(f"{self._markers}/{kind}", recursive=True)
            if partition is not None:
                self._delete_other_generations(partition.slug, partition.generation)
        except OSError as error:
            raise ValueError(f"cannot create the lake at {sink.path}: {error}") from None

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        self._check_columns(batch.schema)
        started = f"{self._markers}/started/{batch_id}"
        committed = f"{self._markers}/committed/{batch_id}"
        if self._exists(committed):
            # Written in full before a crash that came ahead of the checkpoint's commit. The batch still
            # runs, so state, metrics and the watermark advance as for any batch; nothing is written.
            batch.count()
            return Written(0)
        if self._exists(started):
            self._delete_batch_files(batch_id)
        self._write_marker(started, {})
        writer = ParquetPartitionWriter(
            self.sink.path,
            self.time_column,
            self.sink.partition_by_hour,
            self.sink.compression,
            self._batch_prefix(batch_id),
            self._object_store,
            tuple(self.sink.partition_columns),
            self.sink.file_format,
        )
        written = write_partitions(batch, writer.write)
        self._write_marker(committed, {"rows": written.rows})
        self._prune_markers(batch_id)
        return written

    def _check_columns(self, schema: StructType) -> None:
        """The result has the columns that pick each row's folder, of types that can."""
        fields = {field.name: field.dataType for field in schema.fields}
        if self.sink.file_format == "csv":
            written = [name for name in fields if name not in self.sink.partition_columns]
            other = [
                f"{name} ({fields[name].simpleString()})"
                for name in written
                if not writes_as_flink(fields[name])
            ]
            if other:
                raise ParquetSinkError(
                    f"parquet sink {self.sink.path}: column(s) {', '.join(other)} cannot be written as "
                    "Flink's CSV here (integer, string, boolean and timestamp columns can)"
                )
        if self.sink.partition_columns:
            self._check_partition_columns(fields)
            return
        if self.time_column not in fields:
            raise ParquetSinkError(
                f"parquet sink {self.sink.path}: the result has no column {self.time_column!r} to partition "
                f"by (columns: {', '.join(fields)}); set the sink's time_column"
            )
        if not isinstance(fields[self.time_column], TimestampType | TimestampNTZType | DateType):
            raise ParquetSinkError(
                f"parquet sink {self.sink.path}: column {self.time_column!r} is "
                f"{fields[self.time_column].simpleString()}, not a timestamp or date"
            )

    def _check_partition_columns(self, fields: dict[str, DataType]) -> None:
        for name in self.sink.partition_columns:
            if name not in fields:
                raise ParquetSinkError(
                    f"parquet sink {self.sink.path}: the result has no partition column {name!r} "
                    f"(columns: {', '.join(fields)})"
                )
            if not isinstance(fields[name], StringType | IntegralType | BooleanType):
                raise ParquetSinkError(
                    f"parquet sink {self.sink.path}: partition column {name!r} is "
                    f"{fields[name].simpleString()}, not a string, integer or boolean"
                )

    def _exists(self, path: str) -> bool:
        return self._filesystem.get_file_info(path).type != pafs.FileType.NotFound

    def _write_marker(self, path: str, content: dict) -> None:
        with self._filesystem.open_output_stream(path) as stream:
            stream.write(json.dumps(content).encode())

    def _batch_prefix(self, batch_id: int) -> str:
        return f"{self._file_prefix}b{batch_id:010d}-"

    def _delete_batch_files(self, batch_id: int) -> None:
        prefix = self._batch_prefix(batch_id)
        self._delete_data_files(lambda name: name.startswith(prefix))

    def _delete_data_files(self, doomed: Callable[[str], bool]) -> None:
        """Deletes the lake's data files, finished or not (`.<name>.tmp`), whose name `doomed` picks."""
        for info in self._filesystem.get_file_info(pafs.FileSelector(self._root, recursive=True)):
            marker = info.path[len(self._root) :].lstrip("/").startswith(_MARKERS)
            if info.type == pafs.FileType.File and not marker and doomed(info.base_name.lstrip(".")):
                self._filesystem.delete_file(info.path)

    def _delete_other_generations(self, slug: str, generation: str) -> None:
        partition_files = f"part-p{slug}-"
        self._delete_data_files(
            lambda name: name.startswith(partition_files) and not name.startswith(self._file_prefix)
        )
        generations = f"{self._root}/{_MARKERS}/partitions/{slug}"
        for info in self._filesystem.get_file_info(pafs.FileSelector(generations)):
            if info.type == pafs.FileType.Directory and info.base_name != generation:
                self._filesystem.delete_dir(info.path)

    def _prune_markers(self, batch_id: int) -> None:
        for kind in ("started", "committed"):
            old = f"{self._markers}/{kind}/{batch_id - _KEPT_MARKERS}"
            if self._exists(old):
                self._filesystem.delete_file(old)
