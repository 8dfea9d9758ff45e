"""BigQuery sink, driver: result rows appended through the Storage Write API, each micro-batch committed once.

**Table.** On the first write the table is looked up; when it is missing and `create_table` is set (the
default) the dataset and table are created from the result's columns (`schema`), with `partition_field` /
`partition_type` time partitioning and `clustering_fields`. An existing table must be able to take every
result column, or the first micro-batch fails naming the column, before a row is sent.

**Writing a micro-batch** (driver D, Spark tasks T):

1. D looks the batch up in the commit log, the table `<table>__dagger_commits` next to the target (one
   row per written batch: the streaming query's id, the batch id, the write streams).
2. T: every task opens its own PENDING write stream, appends its partition's rows as protobuf (the
   table's row message, `schema`; encoded a whole Arrow batch at a time by the project's codec, `rows`)
   in requests of at most `batch_size` rows and 9 MB, each with an explicit offset, through the client
   library's `AppendRowsStream` (`write_stream`), finalizes the stream and returns its name. Pending rows
   are invisible. A retried or speculative task attempt writes a stream of its own; only the streams of
   the attempts Spark keeps reach the driver, the others are never committed.
3. D records the batch and its stream names in the commit log: one row appended to the log's default
   stream, durable and visible to queries once acknowledged (no DML job per micro-batch).
4. D commits all the streams with one `BatchCommitWriteStreams`: the whole micro-batch becomes visible at
   once, or none of it.

**No duplicates on replay.** When step 1 finds the batch (a replay after a crash or a failed batch), no
row is written again: D commits the recorded streams instead. If they were committed already (the crash
came after step 4), BigQuery answers "already committed" and nothing changes; if the crash came between
steps 3 and 4, the commit happens now. A crash before step 3 leaves only uncommitted streams, which
BigQuery discards, and the replay writes the batch afresh. So a replayed batch's rows appear exactly once.
What it relies on:
- The batch id means the same rows: Spark replays a batch with the offsets it logged for it (the dagger's
  sources are replayable). Rewinding a checkpoint by hand to before a batch was *planned* and reading
  different data under the same batch id would be skipped as already written.
- The commit log is keyed by the streaming query's id, which lives in the checkpoint: a new checkpoint
  is a new query and starts afresh. Without a query id (a batch written outside a streaming query) the
  key is the dagger's name and checkpoint location.
- The window left open: the recorded streams must still exist when the replay comes. If BigQuery no
  longer knows them (it garbage-collects write streams some time after they are used), the batch is
  written again with a warning in the log; had the earlier attempt committed (a crash between steps 4
  and the end of the micro-batch, then a replay only after the streams were gone), its rows would then
  appear twice. Commit-log rows expire after 30 days (partition expiration).

**Rejected rows** (a value the table cannot take) make BigQuery answer the append with an error and row
errors; the task fails with the service's messages (the first five rows), so the micro-batch fails,
nothing of it is committed, and the restarted query replays it (and fails again until the data or the
table is fixed). Rows are never dropped.

**Quotas.** Each micro-batch creates one write stream per non-empty partition of the result: keep
partitions x micro-batches per hour within BigQuery's CreateWriteStream quota (coalesce the result, or
a longer `trigger_interval`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.auth.exceptions import DefaultCredentialsError
from google.cloud import bigquery
from pyspark.sql import DataFrame
from pyspark.sql import types as T

from jobs.engine.connect import streaming_query_id
from jobs.engine.retry import tallying_retries
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.bigquery.clients import (
    BigQuerySinkError,
    ClientSettings,
    call_with_retries,
    no_credentials,
)
from jobs.sinks.bigquery.config import BigQuerySink
from jobs.sinks.bigquery.rows import table_rows
from jobs.sinks.bigquery.schema import (
    WireColumn,
    bigquery_field,
    row_descriptor,
    time_partitioning_type,
    unique,
    wire_columns,
)
from jobs.sinks.bigquery.write_stream import (
    Appender,
    BigQueryPartitionWriter,
    already_committed,
    batch_commit,
    describe_errors,
    storage_error,
)
from jobs.sinks.partitions import TALLY_SCHEMA, sum_written

log = logging.getLogger("dagger.sink.bigquery")

COMMIT_LOG_SUFFIX = "__dagger_commits"
COMMIT_LOG_RETENTION_DAYS = 30
_COMMIT_LOG_COLUMNS = [
    WireColumn("query_id", "STRING", False),
    WireColumn("batch_id", "INT64", False),
    WireColumn("streams", "STRING", True),
    WireColumn("row_count", "INT64", False),
    WireColumn("dagger", "STRING", False),
    WireColumn("recorded_at", "TIMESTAMP", False),
]


@dataclass(frozen=True)
class _Prepared:
    columns: list[WireColumn]
    descriptor: bytes


def write_streams(batch: DataFrame, writer: BigQueryPartitionWriter) -> tuple[list[str], Written]:
    """The non-empty partitions' finalized streams, and what writing them took, from the task attempts
    Spark kept.

    `jobs.sinks.partitions.write_partitions` with the stream of each partition besides its tally: the
    commit needs the names of the streams that successful attempts wrote.
    """
    names = batch.columns

    def write_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with tallying_retries() as tally:
            written = writer.write(arrow_batch.rename_columns(names) for arrow_batch in batches)
        if written is not None:
            counts = {"rows": [written[1]], "requests": [tally.attempts], "retries": [tally.retries]}
            yield pa.RecordBatch.from_pydict({"stream": [written[0]], **counts})

    positional = batch.toDF(*(f"_{index}" for index in range(len(names))))
    results = positional.mapInArrow(write_partition, f"stream string, {TALLY_SCHEMA}").collect()
    return [row.stream for row in results], sum_written(results)


class BigQuerySinkWriter:
    """Driver side: table set-up on the first write, then one atomic commit per micro-batch."""

    def __init__(self, sink: BigQuerySink, context: SinkContext) -> None:
        spec = context.spec
        self.sink = sink
        self.spec = spec
        self.settings = ClientSettings.of(sink)
        self.table_id = f"{sink.project}.{sink.dataset}.{sink.table}"
        self.table_path = f"projects/{sink.project}/datasets/{sink.dataset}/tables/{sink.table}"
        self.commit_log_id = f"{self.table_id}{COMMIT_LOG_SUFFIX}"
        self.commit_log_path = f"{self.table_path}{COMMIT_LOG_SUFFIX}"
        self._where = f"bigquery sink {self.table_id}"
        self._client: bigquery.Client | None = None
        self._prepared: dict[str, _Prepared] = {}
        self._known: dict[tuple[str, int], list[str]] = {}
        self._looked_up: tuple[str, int] | None = None  # (query key, first batch id looked up)
        self._last_batch: tuple[str, int] | None = None

    @property
    def reads_whole_batch(self) -> bool:
        return True

    @property
    def client(self) -> bigquery.Client:
        if self._client is None:
            options = ClientOptions(api_endpoint=self.sink.endpoint) if self.sink.endpoint else None
            try:
                self._client = bigquery.Client(
                    project=self.sink.project,
                    credentials=self.settings.credentials(),
                    location=self.sink.location,
                    client_options=options,
                )
            except DefaultCredentialsError as error:
                raise no_credentials(error) from None
        return self._client

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        prepared = self._prepare(batch.schema)
        key = self._query_key(batch)
        recorded = self._recorded_streams(key, batch_id)
        if recorded is not None and self._commit_recorded(batch_id, recorded):
            # Not written again, but still computed once, as a write would: the query's state, watermark
            # and metrics advance as they do for any batch.
            batch.count()
            self._last_batch = (key, batch_id)
            return Written(0)
        writer = BigQueryPartitionWriter(
            self.settings,
            self.table_path,
            prepared.columns,
            prepared.descriptor,
            self.sink.batch_size,
            batch_id,
        )
        streams, written = write_streams(batch, writer)
        self._last_batch = (key, batch_id)
        if not streams:
            return written
        self._record(key, batch_id, streams, written.rows)
        self._commit(batch_id, streams)
        log.info(
            "%s: batch %s: %s rows committed from %s stream(s)",
            self._where, batch_id, written.rows, len(streams),
        )  # fmt: skip
        return written

    # -- the table ----------------------------------------------------------------------------------------

    def _prepare(self, schema: T.StructType) -> _Prepared:
        cache_key = schema.json()
        prepared = self._prepared.get(cache_key)
        if prepared is None:
            try:
                table = self._table(schema)
                columns = wire_columns(schema, list(table.schema), self.table_id)
            except ValueError as error:
                raise BigQuerySinkError(f"{self._where}: {error}") from None
            self._ensure_commit_log()
            descriptor = row_descriptor(columns).SerializeToString()
            prepared = self._prepared[cache_key] = _Prepared(columns, descriptor)
        return prepared

    def _table(self, schema: T.StructType) -> bigquery.Table:
        existing = self._get_table(self.table_id)
        if existing is not None:
            self._warn_if_layout_differs(existing)
            return existing
        if not self.sink.create_table:
            raise BigQuerySinkError(
                f"{self._where}: the table does not exist and create_table is false; create it, or set "
                "create_table: true to create it from the result's columns"
            )
        unique(schema.names, "result")
        fields = [bigquery_field(field.name, field.dataType) for field in schema.fields]
        table = bigquery.Table(self.table_id, schema=fields)
        by_name = {field.name.lower(): field for field in fields}
        if self.sink.partition_field:
            column = by_name.get(self.sink.partition_field.lower())
            if (
                column is None
                or column.mode == "REPEATED"
                or column.field_type not in ("TIMESTAMP", "DATE", "DATETIME")
            ):
                raise BigQuerySinkError(
                    f"{self._where}: partition_field {self.sink.partition_field!r} must name a TIMESTAMP, "
                    f"DATE or DATETIME column of the result (columns: {', '.join(schema.names)})"
                )
            table.time_partitioning = bigquery.TimePartitioning(
                type_=time_partitioning_type(self.sink.partition_type), field=column.name
            )
        for name in self.sink.clustering_fields:
            column = by_name.get(name.lower())
            if column is None or column.mode == "REPEATED" or column.field_type == "RECORD":
                raise BigQuerySinkError(
                    f"{self._where}: clustering_fields: {name!r} must name a top-level, non-repeated column "
                    f"of the result (columns: {', '.join(schema.names)})"
                )
        if self.sink.clustering_fields:
            table.clustering_fields = [by_name[name.lower()].name for name in self.sink.clustering_fields]
        self._create_dataset()
        created = self._create_table(table)
        log.info("%s: created the table (%s columns)", self._where, len(fields))
        return created

    def _warn_if_layout_differs(self, table: bigquery.Table) -> None:
        partitioning = table.time_partitioning
        wanted = self.sink.partition_field
        if wanted and (partitioning is None or (partitioning.field or "").lower() != wanted.lower()):
            log.warning(
                "%s: the existing table is not partitioned by %s; written as it is", self._where, wanted
            )

    def _get_table(self, table_id: str) -> bigquery.Table | None:
        def get() -> bigquery.Table | None:
            try:
                return self.client.get_table(table_id, retry=None, timeout=self.settings.timeout_s)
            except api_exceptions.NotFound:
                return None

        return call_with_retries(self.settings, f"{self._where}: reading table {table_id}", get)

    def _create_dataset(self) -> None:
        dataset = bigquery.Dataset(f"{self.sink.project}.{self.sink.dataset}")
        if self.sink.location:
            dataset.location = self.sink.location
        call_with_retries(
            self.settings,
            f"{self._where}: creating dataset {dataset.dataset_id}",
            lambda: self.client.create_dataset(
                dataset, exists_ok=True, retry=None, timeout=self.settings.timeout_s
            ),
        )

    def _create_table(self, table: bigquery.Table) -> bigquery.Table:
        def create() -> bigquery.Table:
            try:
                return self.client.create_table(table, retry=None, timeout=self.settings.timeout_s)
            except api_exceptions.Conflict:  # created meanwhile by another writer
                return self.client.get_table(table.reference, retry=None, timeout=self.settings.timeout_s)

        return call_with_retries(self.settings, f"{self._where}: creating the table", create)

    # -- the commit log -----------------------------------------------------------------------------------

    def _ensure_commit_log(self) -> None:
        if self._get_table(self.commit_log_id) is not None:
            return
        schema = [
            bigquery.SchemaField(
                column.name, column.bq_type, mode="REPEATED" if column.repeated else "NULLABLE"
            )
            for column in _COMMIT_LOG_COLUMNS
        ]
        table = bigquery.Table(self.commit_log_id, schema=schema)
        table.description = f"Micro-batches the dagger sink wrote to {self.sink.table}: do not edit."
        table.time_partitioning = bigquery.TimePartitioning(
            type_=bigquery.TimePartitioningType.DAY,
            field="recorded_at",
            expiration_ms=COMMIT_LOG_RETENTION_DAYS * 86_400_000,
        )
        table.clustering_fields = ["query_id", "batch_id"]
        self._create_table(table)

    def _query_key(self, batch: DataFrame) -> str:
        """The streaming query's id (kept in the checkpoint), else the dagger and its checkpoint."""
        query_id = streaming_query_id(batch, self.spec.resolved_checkpoint_location)
        return query_id or f"{self.spec.name}@{self.spec.resolved_checkpoint_location}"

    def _recorded_streams(self, key: str, batch_id: int) -> list[str] | None:
        """The streams recorded for this batch by an earlier attempt, if any.

        The commit log is read at the first batch and whenever batch ids do not follow each other; a
        running query's next batch cannot have been recorded by anyone else.
        """
        follows = self._last_batch == (key, batch_id - 1)
        if not follows:
            self._known = self._lookup(key, batch_id)
        return self._known.get((key, batch_id))

    def _lookup(self, key: str, from_batch: int) -> dict[tuple[str, int], list[str]]:
        sql = (
            f"SELECT batch_id, streams FROM `{self.commit_log_id}` "
            "WHERE query_id = @query_id AND batch_id >= @batch_id ORDER BY recorded_at"
        )
        parameters = [
            bigquery.ScalarQueryParameter("query_id", "STRING", key),
            bigquery.ScalarQueryParameter("batch_id", "INT64", from_batch),
        ]
        rows = self._query(sql, parameters, "reading the commit log")
        return {(key, row["batch_id"]): list(row["streams"]) for row in rows}

    def _record(self, key: str, batch_id: int, streams: list[str], rows: int) -> None:
        """One commit-log row, appended to the log's default stream: durable and visible to queries once
        acknowledged, without a DML job per micro-batch."""
        row = pa.RecordBatch.from_pydict(
            {
                "query_id": [key],
                "batch_id": [batch_id],
                "streams": [streams],
                "row_count": [rows],
                "dagger": [self.spec.name],
                "recorded_at": pa.array([time.time_ns() // 1000], pa.timestamp("us", "UTC")),
            }
        )
        descriptor = row_descriptor(_COMMIT_LOG_COLUMNS).SerializeToString()
        encoded = table_rows(_COMMIT_LOG_COLUMNS, descriptor).encode(row).to_pylist()
        stream = f"{self.commit_log_path}/streams/_default"
        where = f"{self._where}: recording batch {batch_id} in the commit log"
        Appender(self.settings, stream, descriptor, where, offsets=False).write([encoded])
        self._known[(key, batch_id)] = streams

    def _query(self, sql: str, parameters: list[Any], what: str) -> list[Any]:
        config = bigquery.QueryJobConfig(query_parameters=parameters)
        timeout = self.settings.timeout_s

        def run() -> list[Any]:
            job = self.client.query(sql, job_config=config, retry=None, job_retry=None, timeout=timeout)
            return list(job.result(retry=None, timeout=timeout))

        return call_with_retries(self.settings, f"{self._where}: {what}", run)

    # -- commits ------------------------------------------------------------------------------------------

    def _commit_recorded(self, batch_id: int, streams: list[str]) -> bool:
        """Commit the streams an earlier attempt recorded; False when they are gone (write afresh)."""
        errors = self._batch_commit(batch_id, streams)
        if not errors:
            log.warning(
                "%s: batch %s was recorded but not committed by an earlier attempt: committed its %s "
                "stream(s) now",
                self._where,
                batch_id,
                len(streams),
            )
            return True
        if all(already_committed(error) for error in errors):
            log.info("%s: batch %s was committed by an earlier attempt: skipped", self._where, batch_id)
            return True
        if any(storage_error(error, "STREAM_NOT_FOUND") for error in errors):
            log.warning(
                "%s: batch %s was recorded by an earlier attempt, but BigQuery no longer knows its streams: "
                "writing it again (if that attempt had committed, its rows are now there twice)",
                self._where,
                batch_id,
            )
            return False
        raise BigQuerySinkError(f"{self._where}: batch {batch_id}: commit failed: {describe_errors(errors)}")

    def _commit(self, batch_id: int, streams: list[str]) -> None:
        errors = self._batch_commit(batch_id, streams)
        if errors and not all(already_committed(error) for error in errors):
            raise BigQuerySinkError(
                f"{self._where}: batch {batch_id}: commit failed: {describe_errors(errors)}"
            )

    def _batch_commit(self, batch_id: int, streams: list[str]) -> list[Any]:
        what = f"{self._where}: committing batch {batch_id}"
        return batch_commit(self.settings, self.table_path, streams, what)
