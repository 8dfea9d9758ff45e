"""Continuous table sink: the dagger's result kept as a table in PostgreSQL, merged by key every micro-batch.

At start (driver, `ContinuousTableSinkWriter(...)`), under an advisory lock so that daggers starting at once
take turns: the schema `continuous_tables` and its ledger are created when missing, then the table, from the
result's columns with `key` as its primary key. An existing table gains the result's new columns (nullable);
a column of another type, or another primary key, stops the start naming it.

Each micro-batch (`write(batch, batch_id)`), without collecting rows on the driver:

1. The ledger row of (table, streaming query id) holds the last batch the query merged. A batch at or below
   it is a replay (a crash came between the merge and the checkpoint's commit): it is computed, so the
   query's state and watermark advance, and nothing is written.
2. The driver creates the batch's staging table, UNLOGGED (a crash replays the batch, so there is nothing
   to recover), named for (table, query id, batch id); one an earlier attempt left is dropped first.
3. Each task COPYs its partition's rows into it, as CSV made by Arrow from the task's record batches (about
   twice as fast as psycopg's binary COPY, which converts every value in Python). The COPY runs in one
   transaction that first deletes the rows an earlier attempt of the same task copied, so a retried task
   adds nothing twice.
4. The driver merges in one transaction: under the table's advisory lock (merges into one table take
   turns, so two queries' upserts cannot deadlock), it reads the ledger again, runs
   `INSERT INTO table SELECT ... FROM staging ON CONFLICT (key) DO UPDATE SET <every other column> =
   EXCLUDED...` (output mode `complete`: `DELETE` every row first), records the batch in the ledger and
   drops the staging table; then commits.

A run of a time partition (`jobs.model.time_partitions`) keeps the partition's key in the column
`dagger_partition`, first in the table and in its primary key. The first merge of a partition's generation
deletes the rows earlier runs of the partition left, in the same transaction: a new run of a partition
replaces its rows at once, and a restarted one continues its generation.

A reader thus sees the table before or after a micro-batch, never between (MVCC: the merge's rows, the
deleted ones included, change at its commit), and a replayed batch changes nothing. Connections last one
micro-batch (driver) or one COPY (task): none idles between batches, and a database restarted between
batches fails none.

Types: STRING text, BIGINT/INT/SMALLINT bigint/integer/smallint (TINYINT smallint), DOUBLE double
precision, FLOAT real, BOOLEAN boolean, DECIMAL(p,s) numeric(p,s), TIMESTAMP timestamptz, TIMESTAMP_NTZ
timestamp, DATE date, BINARY bytea, ARRAY/MAP/STRUCT jsonb (Spark's `to_json`, nulls kept).
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
from psycopg import errors, sql
from pyspark import TaskContext
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from jobs.engine.connect import streaming_query_id
from jobs.sinks.base import SinkContext, Written
from jobs.sinks.continuous_table.config import MAX_NAME_BYTES, ContinuousTableSink, table_name
from jobs.sinks.continuous_table.storage import (
    LEDGER,
    LEDGER_COLUMNS,
    SCHEMA,
    TableShape,
    connect,
    one_line,
    table_identifier,
    table_shape,
)
from jobs.sinks.partitions import write_partitions

PARTITION_COLUMN = "_dagger_partition"
"""Staging tables' own column: the Spark partition that copied the row."""
TIME_PARTITION_COLUMN = "dagger_partition"
"""The time partition a row belongs to, in the tables of partitioned daggers."""

_POSTGRES_TYPES: dict[type[DataType], str] = {
    StringType: "text",
    LongType: "bigint",
    IntegerType: "integer",
    ShortType: "smallint",
    ByteType: "smallint",
    DoubleType: "double precision",
    FloatType: "real",
    BooleanType: "boolean",
    TimestampType: "timestamp with time zone",
    TimestampNTZType: "timestamp without time zone",
    DateType: "date",
    BinaryType: "bytea",
    ArrayType: "jsonb",
    MapType: "jsonb",
    StructType: "jsonb",
}
"""Spelled as PostgreSQL's `format_type` spells them, so an existing table's columns compare as text."""

_CSV = pa_csv.WriteOptions(include_header=False)  # strings quoted, nulls empty: what COPY's CSV reads


class ContinuousTableError(RuntimeError):
    """A micro-batch that cannot be merged; it fails, and the checkpoint replays it."""


def postgres_type(data_type: DataType) -> str | None:
    """The column type a continuous table gives a Spark type; None: it holds no such column."""
    if isinstance(data_type, DecimalType):
        return f"numeric({data_type.precision},{data_type.scale})"
    return _POSTGRES_TYPES.get(type(data_type))


@dataclass(frozen=True)
class TableLayout:
    """The table a sink keeps: the result's columns with their PostgreSQL types, and the key."""

    table: str
    columns: tuple[tuple[str, str], ...]
    key: tuple[str, ...]

    @classmethod
    def of(cls, sink: ContinuousTableSink, result: StructType, partitioned: bool = False) -> TableLayout:
        columns = tuple((field.name, _column_type(field)) for field in result.fields)
        names = [name for name, _ in columns]
        for column in sink.key or ():
            if column not in names:
                raise ValueError(
                    f"key: the result has no column {column!r} (its columns: {', '.join(names)})"
                )
        key = tuple(sink.key or ())
        if partitioned:
            if TIME_PARTITION_COLUMN in names:
                raise ValueError(
                    f"column {TIME_PARTITION_COLUMN!r}: a partitioned dagger's table keeps each row's "
                    "partition there; rename it"
                )
            columns = ((TIME_PARTITION_COLUMN, "text"), *columns)
            key = (TIME_PARTITION_COLUMN, *key) if key else key
        return cls(table_name(sink.project, sink.name), columns, key)

    @property
    def identifier(self) -> sql.Identifier:
        return table_identifier(self.table)

    def create_table(self) -> sql.Composed:
        key = sql.SQL(", PRIMARY KEY ({})").format(_names(self.key)) if self.key else sql.SQL("")
        return sql.SQL("CREATE TABLE {table} ({columns}{key})").format(
            table=self.identifier, columns=_definitions(self.columns), key=key
        )

    def changes_to(self, shape: TableShape, label: str) -> list[sql.Composed]:
        """What makes an existing table hold the result: columns it lacks added. A column of another type or
        another primary key is a `ValueError` (changing either could lose rows readers rely on)."""
        existing = dict(shape.columns)
        for name, kind in self.columns:
            if name in existing and existing[name] != kind:
                raise ValueError(
                    f"{label}: column {name!r} of table {self.identifier.as_string()} is {existing[name]}, "
                    f"the result's is {kind}; cast it in the SQL, or drop the table to start it afresh"
                )
        if self.key and set(shape.primary_key) != set(self.key):
            raise ValueError(
                f"{label}: table {self.identifier.as_string()} has the primary key "
                f"({', '.join(shape.primary_key) or 'none'}), the sink's key is ({', '.join(self.key)})"
            )
        return [
            sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                self.identifier, sql.Identifier(name), sql.SQL(kind)
            )
            for name, kind in self.columns
            if name not in existing
        ]

    def staging(self, query_id: str, batch_id: int) -> sql.Identifier:
        """The batch's staging table: the same name for every attempt of the batch (so a replay finds what
        an earlier attempt left), hashed to fit PostgreSQL's 63 bytes."""
        digest = hashlib.sha256(f"{self.table}\n{query_id}\n{batch_id}".encode()).hexdigest()[:40]
        return table_identifier(f"_staging_{digest}")

    def create_staging(self, staging: sql.Identifier) -> sql.Composed:
        return sql.SQL("DROP TABLE IF EXISTS {staging}; CREATE UNLOGGED TABLE {staging} ({columns})").format(
            staging=staging,
            columns=_definitions((*self.columns, (PARTITION_COLUMN, "integer NOT NULL"))),
        )

    def merge(self, staging: sql.Identifier) -> sql.Composed:
        names = _names(name for name, _ in self.columns)
        insert = sql.SQL("INSERT INTO {table} ({names}) SELECT {names} FROM {staging}").format(
            table=self.identifier, names=names, staging=staging
        )
        if not self.key:
            return insert
        updated = [name for name, _ in self.columns if name not in self.key]
        if not updated:
            return insert + sql.SQL(" ON CONFLICT ({}) DO NOTHING").format(_names(self.key))
        assignments = sql.SQL(", ").join(
            sql.SQL("{0} = EXCLUDED.{0}").format(sql.Identifier(name)) for name in updated
        )
        return insert + sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}").format(_names(self.key), assignments)


def _column_type(field: StructField) -> str:
    if len(field.name.encode()) > MAX_NAME_BYTES:
        raise ValueError(f"column {field.name!r}: PostgreSQL's names have at most {MAX_NAME_BYTES} bytes")
    if field.name == PARTITION_COLUMN:
        raise ValueError(f"column {field.name!r}: the sink's staging tables use that name; rename it")
    kind = postgres_type(field.dataType)
    if kind is None:
        raise ValueError(
            f"column {field.name!r} is {field.dataType.simpleString()}, which a continuous table does not "
            "hold; cast it in the SQL"
        )
    return kind


def _names(names: Iterable[str]) -> sql.Composed:
    return sql.SQL(", ").join(map(sql.Identifier, names))


def _definitions(columns: tuple[tuple[str, str], ...]) -> sql.Composed:
    return sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(name), sql.SQL(kind)) for name, kind in columns
    )


def _lock(connection: psycopg.Connection, name: str) -> None:
    """Waits for, then holds until the transaction ends, the advisory lock named `name`."""
    connection.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (name,))


def _last_applied(connection: psycopg.Connection, table: str, query_id: str) -> int:
    row = connection.execute(
        sql.SQL("SELECT batch_id FROM {} WHERE table_name = %s AND query_id = %s").format(LEDGER),
        (table, query_id),
    ).fetchone()
    return -1 if row is None else row[0]


class ContinuousTableSinkWriter:
    """Driver side: prepares the table at start, then stages and merges each micro-batch."""

    def __init__(self, sink: ContinuousTableSink, context: SinkContext) -> None:
        if context.result_schema is None:
            raise ValueError(
                "the sink makes its table from the result's columns, which this context does not have"
            )
        if sink.database is None:
            raise ValueError("database is not set")
        self._replaces = context.spec.output_mode == "complete"
        if sink.key is None and not self._replaces:
            raise ValueError(
                f"key is required: output mode {context.spec.output_mode!r} updates rows, and the key says "
                "which row a result row updates"
            )
        self._label = sink.describe()
        self._database = sink.database
        self._partition = context.spec.time_partition
        self._layout = TableLayout.of(sink, context.result_schema, partitioned=self._partition is not None)
        self._application_name = f"dagger {context.spec.name} {self._label}"[:63]
        self._checkpoint = context.spec.resolved_checkpoint_location
        try:
            with self._connect() as connection:
                self._prepare(connection)
        except LookupError as error:
            raise LookupError(f"{self._label}: {error}") from None
        except psycopg.Error as error:
            raise ValueError(f"{self._label}: cannot prepare its table: {one_line(error)}") from None

    @property
    def reads_whole_batch(self) -> bool:
        return True

    def write(self, batch: DataFrame, batch_id: int) -> Written:
        query_id = self._query_id(batch)
        with self._connect() as connection:
            if batch_id <= _last_applied(connection, self._layout.table, query_id):
                # Merged before a crash that came ahead of the checkpoint's commit. The batch still runs,
                # so the query's state and watermark advance as for any batch; nothing is written.
                batch.count()
                return Written(0)
            staging = self._layout.staging(query_id, batch_id)
            connection.execute(self._layout.create_staging(staging))
            try:
                write_partitions(
                    _copyable(self._with_partition(batch)), self._staging_copy(connection, staging).write
                )
                merged = self._merge(connection, staging, query_id, batch_id)
            except Exception:
                with contextlib.suppress(psycopg.Error):  # a replay would drop it too; a new query would not
                    connection.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(staging))
                raise
        return Written(merged)

    def _with_partition(self, batch: DataFrame) -> DataFrame:
        if self._partition is None:
            return batch
        return batch.select(F.lit(self._partition.key).alias(TIME_PARTITION_COLUMN), "*")

    def _connect(self) -> psycopg.Connection:
        # One per micro-batch (about 10 ms): the writer has no close to end a longer-lived one.
        return connect(self._database, self._application_name)

    def _prepare(self, connection: psycopg.Connection) -> None:
        layout = self._layout
        with connection.transaction():
            # `CREATE ... IF NOT EXISTS` is not safe against itself: starts take turns.
            _lock(connection, SCHEMA)
            connection.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))
            connection.execute(
                sql.SQL("CREATE TABLE IF NOT EXISTS {} ({})").format(LEDGER, sql.SQL(LEDGER_COLUMNS))
            )
            shape = table_shape(connection, layout.table)
            changes = [layout.create_table()] if shape is None else layout.changes_to(shape, self._label)
            for change in changes:
                connection.execute(change)

    def _query_id(self, batch: DataFrame) -> str:
        query_id = streaming_query_id(batch, self._checkpoint)
        if not query_id:
            raise ContinuousTableError(
                f"{self._label}: writes only inside a streaming query (the ledger keeps batches by its id)"
            )
        return query_id

    def _staging_copy(self, connection: psycopg.Connection, staging: sql.Identifier) -> StagingCopy:
        names = [name for name, _ in self._layout.columns]
        return StagingCopy(
            label=self._label,
            conninfo=self._database,
            application_name=self._application_name,
            lock=staging.as_string(connection),
            clear=sql.SQL("DELETE FROM {} WHERE {} = %s")
            .format(staging, sql.Identifier(PARTITION_COLUMN))
            .as_string(connection),
            copy=sql.SQL("COPY {} ({}) FROM STDIN (FORMAT csv)")
            .format(staging, _names((*names, PARTITION_COLUMN)))
            .as_string(connection),
        )

    def _merge(
        self, connection: psycopg.Connection, staging: sql.Identifier, query_id: str, batch_id: int
    ) -> int:
        layout = self._layout
        try:
            with connection.transaction():
                _lock(connection, layout.identifier.as_string(connection))
                merged = 0
                # Checked again under the lock: another run of the checkpoint may have merged it since.
                last_applied = _last_applied(connection, layout.table, query_id)
                if batch_id > last_applied:
                    if self._partition is not None and (self._replaces or last_applied < 0):
                        # The generation's first merge (or any, in output mode `complete`): the partition's
                        # rows are this run's from now on.
                        connection.execute(
                            sql.SQL("DELETE FROM {} WHERE {} = %s").format(
                                layout.identifier, sql.Identifier(TIME_PARTITION_COLUMN)
                            ),
                            (self._partition.key,),
                        )
                    elif self._replaces:
                        connection.execute(sql.SQL("DELETE FROM {}").format(layout.identifier))
                    merged = connection.execute(layout.merge(staging)).rowcount
                    connection.execute(
                        sql.SQL(
                            "INSERT INTO {} (table_name, query_id, batch_id) VALUES (%s, %s, %s) "
                            "ON CONFLICT (table_name, query_id) DO UPDATE SET batch_id = EXCLUDED.batch_id, "
                            "applied = now()"
                        ).format(LEDGER),
                        (layout.table, query_id, batch_id),
                    )
                connection.execute(sql.SQL("DROP TABLE {}").format(staging))
        except errors.CardinalityViolation:  # "ON CONFLICT DO UPDATE command cannot affect row a second time"
            raise ContinuousTableError(self._repeated_key(connection, staging, batch_id)) from None
        except errors.NotNullViolation as error:
            raise ContinuousTableError(
                f"{self._label}: batch {batch_id} has a row whose column {error.diag.column_name!r} is null, "
                "which the table does not allow (key columns never do); leave such rows out or coalesce "
                "them in the SQL"
            ) from None
        return merged

    def _repeated_key(self, connection: psycopg.Connection, staging: sql.Identifier, batch_id: int) -> str:
        key = self._layout.key
        example = connection.execute(
            sql.SQL("SELECT {key} FROM {staging} GROUP BY {key} HAVING count(*) > 1 LIMIT 1").format(
                key=_names(key), staging=staging
            )
        ).fetchone()
        return (
            f"{self._label}: batch {batch_id} has more than one row for a key ({', '.join(key)}), e.g. "
            f"{tuple(example or ())}; the table keeps one row per key, so the SQL must give one (group by "
            "every key column)"
        )


def _copyable(batch: DataFrame) -> DataFrame:
    """The batch as Arrow's CSV writer can write it for PostgreSQL: nested values made JSON text (for
    jsonb) and bytes bytea's hex text (`\\x0a1b`), by Spark; other columns as they are."""
    columns = [_as_copy_text(field) for field in batch.schema.fields]
    if all(column is None for column in columns):
        return batch
    return batch.select(
        *(
            _quoted(field.name) if column is None else column.alias(field.name)
            for field, column in zip(batch.schema.fields, columns, strict=True)
        )
    )


def _as_copy_text(field: StructField) -> Column | None:
    column = _quoted(field.name)
    if isinstance(field.dataType, ArrayType | MapType | StructType):
        return F.to_json(column, {"ignoreNullFields": "false"})
    if isinstance(field.dataType, BinaryType):
        return F.concat(F.lit("\\x"), F.hex(column))
    return None


def _quoted(name: str) -> Column:
    return F.col("`" + name.replace("`", "``") + "`")


@dataclass(frozen=True)
class StagingCopy:
    """Executor side: one task's rows into the batch's staging table. Attempts of one task take turns on
    an advisory lock, and each first deletes what an earlier one copied, so a retried task (its executor
    lost after the COPY committed) leaves its rows once.

    A task connects for its COPY alone (about 10 ms, against a local server with SCRAM): executors hold
    no idle connections, which the database's `max_connections` would have to make room for."""

    label: str
    conninfo: str
    application_name: str
    lock: str
    clear: str
    copy: str

    def write(self, batches: Iterator[pa.RecordBatch]) -> int:
        rows = (batch for batch in batches if batch.num_rows)
        first = next(rows, None)
        if first is None:
            return 0  # no connection for an empty partition
        task = TaskContext.get()
        partition = task.partitionId() if task else 0
        copied = 0
        try:
            with connect(self.conninfo, self.application_name) as connection, connection.transaction():
                _lock(connection, f"{self.lock}/{partition}")
                connection.execute(self.clear, (partition,))
                with connection.cursor().copy(self.copy) as copy:
                    for batch in itertools.chain([first], rows):
                        copy.write(_csv(batch, partition))
                        copied += batch.num_rows
        except (psycopg.Error, LookupError) as error:
            raise ContinuousTableError(
                f"{self.label}: copying partition {partition}: {one_line(error)}"
            ) from None
        return copied


def _csv(batch: pa.RecordBatch, partition: int) -> pa.Buffer:
    partitions = pa.repeat(pa.scalar(partition, pa.int32()), batch.num_rows)
    sink = pa.BufferOutputStream()
    pa_csv.write_csv(batch.append_column(PARTITION_COLUMN, partitions), sink, _CSV)
    return sink.getvalue()
