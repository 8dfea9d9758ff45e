"""Event collections (`dagger collect`) as assets: each collection's topic, with its schema as columns.

With `$DAGGER_COLLECTOR_DATABASE` set (the collector's metadata database), every collection that has a
schema becomes an asset `collections/<project>/<collection>` of group `collections`. Its column metadata is
the latest version of the schema, and it writes the address `kafka:<project>.<collection>`, so the daggers
that read the collection's topic are downstream of it. Collections are read when the code location loads:
a new collection shows after a reload. A database that cannot be reached is logged and leaves the graph
without collections, rather than failing the code location.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass

from dagster import AssetKey, AssetSpec, TableColumn, TableSchema

from jobs.collection.confluent import subject_of
from jobs.collection.delivery import topic_of
from jobs.collection.schema import type_name
from jobs.model.config import without_credentials

log = logging.getLogger(__name__)

DATABASE_ENV = "DAGGER_COLLECTOR_DATABASE"
COLLECTIONS_GROUP = "collections"


@dataclass(frozen=True)
class CollectionAsset:
    spec: AssetSpec
    address: str
    """What the collection's records are, as streams name what they read (`kafka:<topic>`)."""


def collection_assets(database_url: str | None = None) -> list[CollectionAsset]:
    """The collections of the metadata database at `database_url` (default: $DAGGER_COLLECTOR_DATABASE)."""
    database_url = database_url or os.environ.get(DATABASE_ENV)
    if not database_url:
        return []
    from jobs.collection.registry import CollectionRegistry

    try:
        registry = CollectionRegistry(database_url, max_connections=1, timeout_s=5)
    except Exception as error:  # the code location must load without the collections
        log.warning("collections unknown: %s: %s", without_credentials(database_url), error)
        return []
    try:
        return [
            _collection_asset(project, collection, registry.versions(project, collection))
            for project, collection in registry.collections()
        ]
    finally:
        registry.close()


def collection_key(project: str, collection: str) -> AssetKey:
    return AssetKey([COLLECTIONS_GROUP, project, collection])


def _collection_asset(project: str, collection: str, versions: list) -> CollectionAsset:
    latest = versions[-1]
    topic = topic_of(project, collection)
    columns = [TableColumn(field.name, type_name(field.type)) for field in latest.schema.fields]
    spec = AssetSpec(
        key=collection_key(project, collection),
        group_name=COLLECTIONS_GROUP,
        kinds={"kafka", "avro"},
        description=(
            f"Events of collection `{collection}` of project `{project}`, collected by `dagger collect` into "
            f"the topic `{topic}` as Avro records; schema version {latest.version} of {len(versions)}."
        ),
        metadata={
            "topic": topic,
            "subject": subject_of(project, collection),
            "schema_version": latest.version,
            "schema_id": latest.id,
            "dagster/column_schema": TableSchema(columns=columns),
        },
    )
    return CollectionAsset(spec, f"kafka:{topic}")
