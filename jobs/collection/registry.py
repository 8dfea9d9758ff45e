"""The metadata database of event collection, in PostgreSQL: projects, their write keys (to send events)
and read keys (to query them through the Analysis API), and every version of every collection's schema.

A schema version's row id is its schema id, the number the Confluent wire format puts before each Avro
record; versions count from 1 per (project, collection). Growing a schema is serialised per collection by
a transaction-scoped advisory lock: the second of two collectors adding the same field at once finds the
first's version under the lock, grows that, finds nothing new and adds no version.

Keys are random and long, so they are stored as their SHA-256 (a slow password hash buys nothing for a key
nobody chose); only the call that creates a key ever sees it in clear.
"""

from __future__ import annotations

import hashlib
import json
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from psycopg import sql
from psycopg_pool import ConnectionPool

from jobs.collection.schema import CollectionSchema

_TABLES = """
CREATE TABLE IF NOT EXISTS collection_projects (
    name text PRIMARY KEY,
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS collection_write_keys (
    key_sha256 bytea PRIMARY KEY,
    project text NOT NULL REFERENCES collection_projects (name),
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS project_read_keys (
    key_sha256 bytea PRIMARY KEY,
    project text NOT NULL REFERENCES collection_projects (name),
    created timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS collection_schemas (
    id bigserial PRIMARY KEY,
    project text NOT NULL REFERENCES collection_projects (name),
    collection text NOT NULL,
    version integer NOT NULL,
    schema jsonb NOT NULL,
    created timestamptz NOT NULL DEFAULT now(),
    UNIQUE (project, collection, version)
);
"""


class UnknownProjectError(LookupError):
    """No project of that name."""


@dataclass(frozen=True)
class SchemaVersion:
    id: int
    """The schema id of the Confluent wire format."""
    version: int
    schema: CollectionSchema


class CollectionRegistry:
    """Projects, write keys and schema versions in one PostgreSQL database (`conninfo`)."""

    def __init__(self, conninfo: str, max_connections: int = 8, timeout_s: float = 30.0) -> None:
        """`timeout_s`: how long a request waits for a connection (a database that cannot be reached
        fails the first one, here, after that long)."""
        self._pool = ConnectionPool(
            conninfo,
            min_size=1,
            max_size=max_connections,
            kwargs={"autocommit": True},
            open=True,
            timeout=timeout_s,
        )
        try:
            # Two first starts at once: CREATE TABLE IF NOT EXISTS is not safe against itself.
            with self._pool.connection() as connection, connection.transaction():
                connection.execute("SELECT pg_advisory_xact_lock(hashtext('collection_registry_tables'))")
                connection.execute(_TABLES)
        except Exception:
            self._pool.close()  # or its workers would go on trying to connect
            raise

    def close(self) -> None:
        self._pool.close()

    # ---- projects and keys ------------------------------------------------------------------------

    def create_project(self, name: str) -> str:
        """Creates the project if new and a write key for it; returns the key (shown this once)."""
        return self._create_key(name, "collection_write_keys")

    def create_read_key(self, project: str) -> str:
        """Creates the project if new and a read key for it; returns the key (shown this once)."""
        return self._create_key(project, "project_read_keys")

    def project_of(self, write_key: str) -> str | None:
        """The project a write key belongs to; None for a key it does not know."""
        return self._project_of_key(write_key, "collection_write_keys")

    def project_of_read_key(self, read_key: str) -> str | None:
        """The project a read key belongs to; None for a key it does not know (or a write key)."""
        return self._project_of_key(read_key, "project_read_keys")

    def _create_key(self, project: str, table: str) -> str:
        key = secrets.token_urlsafe(32)
        with self._pool.connection() as connection, connection.transaction():
            connection.execute(
                "INSERT INTO collection_projects (name) VALUES (%s) ON CONFLICT DO NOTHING", (project,)
            )
            connection.execute(
                sql.SQL("INSERT INTO {} (key_sha256, project) VALUES (%s, %s)").format(sql.Identifier(table)),
                (_digest(key), project),
            )
        return key

    def _project_of_key(self, key: str, table: str) -> str | None:
        with self._pool.connection() as connection:
            row = connection.execute(
                sql.SQL("SELECT project FROM {} WHERE key_sha256 = %s").format(sql.Identifier(table)),
                (_digest(key),),
            ).fetchone()
        return None if row is None else row[0]

    # ---- schemas ----------------------------------------------------------------------------------

    def latest(self, project: str, collection: str) -> SchemaVersion | None:
        with self._pool.connection() as connection:
            return _latest(connection, project, collection)

    def evolve(self, project: str, collection: str, events: Iterable[Mapping[str, Any]]) -> SchemaVersion:
        """The collection's schema version that takes every event, added when the events bring new
        properties; raises `CollectionSchemaError` (adding nothing) for events it cannot take."""
        events = list(events)
        current = self.latest(project, collection)
        base = current.schema if current is not None else CollectionSchema(project, collection)
        if current is not None and base.evolved(events) is base:
            return current  # the common case: nothing new, no lock taken
        with self._pool.connection() as connection, connection.transaction():
            connection.execute(
                "SELECT pg_advisory_xact_lock(hashtext(%s), hashtext(%s))", (project, collection)
            )
            current = _latest(connection, project, collection)
            base = current.schema if current is not None else CollectionSchema(project, collection)
            grown = base.evolved(events)
            if current is not None and grown is base:
                return current  # another collector added the same fields meanwhile
            version = 1 if current is None else current.version + 1
            if not _project_exists(connection, project):
                raise UnknownProjectError(f"project {project!r} does not exist")
            row = connection.execute(
                "INSERT INTO collection_schemas (project, collection, version, schema) "
                "VALUES (%s, %s, %s, %s) RETURNING id",
                (project, collection, version, json.dumps(grown.to_avro())),
            ).fetchone()
        assert row is not None
        return SchemaVersion(row[0], version, grown)

    def by_id(self, schema_id: int) -> SchemaVersion | None:
        with self._pool.connection() as connection:
            row = connection.execute(
                "SELECT id, version, project, collection, schema FROM collection_schemas WHERE id = %s",
                (schema_id,),
            ).fetchone()
        return None if row is None else _version(row)

    def versions(self, project: str, collection: str) -> list[SchemaVersion]:
        """Every version of a collection's schema, oldest first."""
        with self._pool.connection() as connection:
            rows = connection.execute(
                "SELECT id, version, project, collection, schema FROM collection_schemas "
                "WHERE project = %s AND collection = %s ORDER BY version",
                (project, collection),
            ).fetchall()
        return [_version(row) for row in rows]

    def collections(self) -> list[tuple[str, str]]:
        """(project, collection) of every collection that has a schema."""
        with self._pool.connection() as connection:
            rows = connection.execute(
                "SELECT DISTINCT project, collection FROM collection_schemas ORDER BY project, collection"
            ).fetchall()
        return [(project, collection) for project, collection in rows]


def _digest(write_key: str) -> bytes:
    return hashlib.sha256(write_key.encode()).digest()


def _latest(connection: Any, project: str, collection: str) -> SchemaVersion | None:
    row = connection.execute(
        "SELECT id, version, project, collection, schema FROM collection_schemas "
        "WHERE project = %s AND collection = %s ORDER BY version DESC LIMIT 1",
        (project, collection),
    ).fetchone()
    return None if row is None else _version(row)


def _project_exists(connection: Any, project: str) -> bool:
    found = connection.execute("SELECT 1 FROM collection_projects WHERE name = %s", (project,)).fetchone()
    return found is not None


def _version(row: tuple[Any, ...]) -> SchemaVersion:
    schema_id, version, project, collection, record = row
    return SchemaVersion(schema_id, version, CollectionSchema.from_avro(project, collection, record))
