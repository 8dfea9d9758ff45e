"""Writes events to Parquet: one set of files holding the same rows as the Kafka topic.

One table, not one per kind: Nexmark's queries read persons, auctions and bids as views over a single
stream (`ddl_views.sql`), with one event time and one watermark across the three, and a reader of these
files does the same (`WHERE event_type = 2`, `bid.price`, ...). The columns are `layout.ARROW_SCHEMA`:
`event_type`, the nested `person`, `auction`, `bid` (null where not the event's kind) and a top-level
`dateTime`, the event time a Spark reader sets its watermark on. Files are `part-00000.parquet`,
`part-00001.parquet`, ... in event order, each renamed into place whole (a streaming file reader never sees
one half written: names starting with `.` are hidden from Spark's).
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq

from jobs.tools.nexmark.events import GeneratedEvent, Payload
from jobs.tools.nexmark.layout import ARROW_SCHEMA, arrow_table


class ParquetEventWriter:
    def __init__(
        self, directory: Path, events_per_file: int = 1_000_000, row_group_size: int = 100_000
    ) -> None:
        if directory.is_dir() and any(directory.glob("*.parquet")):
            raise FileExistsError(f"{directory} already holds Parquet files; give an empty or new directory")
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.files: list[Path] = []
        self._events_per_file = events_per_file
        self._row_group_size = row_group_size
        self._pending: list[Payload] = []
        self._in_file = 0
        self._writer: pq.ParquetWriter | None = None
        self._in_progress: Path | None = None

    def write(self, event: GeneratedEvent) -> None:
        self._pending.append(event.payload)
        if len(self._pending) >= min(self._row_group_size, self._events_per_file - self._in_file):
            self._write_pending()

    def _write_pending(self) -> None:
        if not self._pending:
            return
        if self._writer is None:
            self._in_progress = self.directory / f".part-{len(self.files):05d}.parquet.in-progress"
            self._writer = pq.ParquetWriter(self._in_progress, ARROW_SCHEMA, compression="zstd")
        self._writer.write_table(arrow_table(self._pending), row_group_size=self._row_group_size)
        self._in_file += len(self._pending)
        self._pending = []
        if self._in_file >= self._events_per_file:
            self._finish_file()

    def _finish_file(self) -> None:
        if self._writer is None or self._in_progress is None:
            return
        self._writer.close()
        final = self.directory / f"part-{len(self.files):05d}.parquet"
        self._in_progress.rename(final)
        self.files.append(final)
        self._writer, self._in_progress, self._in_file = None, None, 0

    def close(self) -> None:
        self._write_pending()
        self._finish_file()
