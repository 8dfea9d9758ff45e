"""Continuous tables in PostgreSQL: where they are, how to reach them, and how to read them.

A `continuous_table` sink keeps a dagger's result as the table `continuous_tables."<project>.<name>"` (one
quoted identifier) and records in the ledger `continuous_tables.applied_batches` the last micro-batch each
streaming query merged into it. Every merge is one transaction (`writer.py`), so a reader, whatever its
isolation level, sees a table as it was after some micro-batch, never in the middle of one.

`ContinuousTables` is the read side, for the Analysis API and Dagster: a project's tables, one table as
Arrow, a table's columns and row count. Each call opens one short read-only connection of its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import psycopg
import pyarrow as pa
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from jobs.sinks.continuous_table.config import check_name, database_display, table_name

SCHEMA = "continuous_tables"
LEDGER = sql.Identifier(SCHEMA, "applied_batches")
LEDGER_COLUMNS = """
    table_name text NOT NULL,
    query_id text NOT NULL,
    batch_id bigint NOT NULL,
    applied timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_name, query_id)
"""
"""One row per table and streaming query (a checkpoint): the last micro-batch the query merged into it."""

_CONNECT_TIMEOUT_S = 10

_ARROW_TYPES = {
    "text": pa.string(),
    "bigint": pa.int64(),
    "integer": pa.int32(),
    "smallint": pa.int16(),
    "double precision": pa.float64(),
    "real": pa.float32(),
    "boolean": pa.bool_(),
    "timestamp with time zone": pa.timestamp("us", tz="UTC"),
    "timestamp without time zone": pa.timestamp("us"),
    "date": pa.date32(),
    "bytea": pa.binary(),
}
"""How `read` gives each column type a continuous table holds; `numeric(p,s)` is a decimal, and every other
type (`jsonb`) its text."""
_NUMERIC = re.compile(r"numeric\((\d+),(\d+)\)")


def table_identifier(table: str) -> sql.Identifier:
    return sql.Identifier(SCHEMA, table)


def connect(conninfo: str, application_name: str) -> psycopg.Connection:
    """An autocommit connection. A database that cannot be reached is a `LookupError` naming it (never
    its password) with libpq's reason, after at most `connect_timeout` (10 s unless the string sets one)."""
    defaults = {"connect_timeout": _CONNECT_TIMEOUT_S, "application_name": application_name}
    given = conninfo_to_dict(conninfo)
    try:
        return psycopg.connect(
            conninfo, autocommit=True, **{key: value for key, value in defaults.items() if key not in given}
        )
    except psycopg.OperationalError as error:
        raise LookupError(
            f"cannot connect to PostgreSQL ({database_display(conninfo)}): {one_line(error)}"
        ) from None


def one_line(error: Exception) -> str:
    return " ".join(str(error).split())


@dataclass(frozen=True)
class TableShape:
    """What PostgreSQL's catalog says of a table."""

    columns: list[tuple[str, str]]
    """Name and type (as `format_type` spells it: `bigint`, `numeric(10,2)`, `timestamp with time zone`)."""
    primary_key: list[str]


def table_shape(connection: psycopg.Connection, table: str) -> TableShape | None:
    """The table's columns and primary key; None if there is no such table."""
    name = table_identifier(table).as_string(connection)
    columns = connection.execute(
        """
        SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
        WHERE attrelid = to_regclass(%s) AND attnum > 0 AND NOT attisdropped ORDER BY attnum
        """,
        (name,),
    ).fetchall()
    if not columns:
        return None
    key = connection.execute(
        """
        SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid
        WHERE i.indrelid = to_regclass(%s) AND i.indisprimary AND a.attnum = ANY (i.indkey)
        ORDER BY array_position(i.indkey::int2[], a.attnum)
        """,
        (name,),
    ).fetchall()
    return TableShape([(column, kind) for column, kind in columns], [column for (column,) in key])


class ContinuousTables:
    """The continuous tables of one PostgreSQL database (`conninfo`: a libpq string or postgresql:// URL)."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo

    @staticmethod
    def physical_name(project: str, name: str) -> str:
        """The table in SQL, qualified and quoted: `"continuous_tables"."<project>.<name>"`; a project or
        name that no sink accepts is a `ValueError`."""
        return table_identifier(table_name(project, name)).as_string()

    def names(self, project: str) -> list[str]:
        """The names of the project's tables, sorted."""
        check_name("project", project)
        with self._connect() as connection:
            rows = connection.execute(
                """
                SELECT substr(c.relname, length(%(prefix)s) + 1) FROM pg_class c
                JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = %(schema)s AND c.relkind IN ('r', 'p')
                    AND starts_with(c.relname, %(prefix)s)
                ORDER BY 1
                """,
                {"schema": SCHEMA, "prefix": f"{project}."},
            ).fetchall()
        return [name for (name,) in rows]

    def read(self, project: str, name: str) -> pa.Table:
        """The whole table, in one snapshot, ordered by its key: `timestamp with time zone` columns as UTC
        timestamps, `numeric(p,s)` as decimals, `jsonb` (nested values) as JSON text."""
        table = table_name(project, name)
        with self._connect() as connection, _snapshot(connection):
            shape = _existing(connection, table)
            types = [_arrow_type(kind) for _, kind in shape.columns]
            selected = [
                sql.Identifier(column)
                if arrow_type is not None
                else sql.SQL("{}::text").format(sql.Identifier(column))
                for (column, _), arrow_type in zip(shape.columns, types, strict=True)
            ]
            query = sql.SQL("SELECT {columns} FROM {table}").format(
                columns=sql.SQL(", ").join(selected), table=table_identifier(table)
            )
            if shape.primary_key:
                query += sql.SQL(" ORDER BY {}").format(
                    sql.SQL(", ").join(map(sql.Identifier, shape.primary_key))
                )
            rows = connection.execute(query).fetchall()
        values = list(zip(*rows, strict=True)) if rows else [() for _ in shape.columns]
        fields = [
            pa.field(column, arrow_type or pa.string())
            for (column, _), arrow_type in zip(shape.columns, types, strict=True)
        ]
        return pa.Table.from_arrays(
            [pa.array(column, field.type) for column, field in zip(values, fields, strict=True)],
            schema=pa.schema(fields),
        )

    def describe(self, project: str, name: str) -> tuple[list[tuple[str, str]], int]:
        """The table's columns (name, PostgreSQL type) and its number of rows, in one snapshot."""
        table = table_name(project, name)
        with self._connect() as connection, _snapshot(connection):
            shape = _existing(connection, table)
            query = sql.SQL("SELECT count(*) FROM {}").format(table_identifier(table))
            (rows,) = connection.execute(query).fetchone() or (0,)
        return shape.columns, rows

    def _connect(self) -> psycopg.Connection:
        connection = connect(self.conninfo, "dagger continuous tables")
        connection.read_only = True
        return connection


def _snapshot(connection: psycopg.Connection) -> psycopg.Transaction:
    """A transaction whose statements all see the database as it was at its first."""
    connection.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    return connection.transaction()


def _existing(connection: psycopg.Connection, table: str) -> TableShape:
    shape = table_shape(connection, table)
    if shape is None:
        raise LookupError(f"no continuous table {table!r} in schema {SCHEMA}")
    return shape


def _arrow_type(postgres_type: str) -> pa.DataType | None:
    """The Arrow type `read` gives a column; None: read as text."""
    if match := _NUMERIC.fullmatch(postgres_type):
        precision, scale = int(match.group(1)), int(match.group(2))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    return _ARROW_TYPES.get(postgres_type)
