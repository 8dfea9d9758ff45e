"""The collection registry on a real PostgreSQL: write keys, schema versions, and concurrent growth."""

from __future__ import annotations

import threading
import uuid

import pytest

from jobs.collection.registry import CollectionRegistry, UnknownProjectError
from jobs.collection.schema import LONG, STRING, Field, SchemaConflictError


@pytest.fixture(scope="module")
def conninfo(postgres) -> str:
    return (
        f"host={postgres.host} port={postgres.port} dbname={postgres.database} "
        f"user={postgres.user} password={postgres.password}"
    )


@pytest.fixture
def registry(conninfo):
    registry = CollectionRegistry(conninfo)
    yield registry
    registry.close()


@pytest.fixture
def project(registry) -> str:
    name = f"shop-{uuid.uuid4().hex[:8]}"
    registry.create_project(name)
    return name


def test_a_write_key_names_its_project_and_is_stored_only_as_a_digest(registry, postgres):
    name = f"p-{uuid.uuid4().hex[:8]}"
    key = registry.create_project(name)
    assert registry.project_of(key) == name
    assert registry.project_of(key + "x") is None
    with postgres.connect() as connection:
        stored = connection.execute("SELECT key_sha256::text FROM collection_write_keys").fetchall()
    assert stored and not any(key in row[0] for row in stored)


def test_new_properties_make_a_new_version_and_known_ones_do_not(registry, project):
    first = registry.evolve(project, "pageview", [{"url": "/"}])
    assert (first.version, first.schema.fields) == (1, (Field("url", STRING),))
    assert registry.evolve(project, "pageview", [{"url": "/a"}]) == first
    second = registry.evolve(project, "pageview", [{"url": "/b", "ms": 3}])
    assert (second.version, second.schema.fields) == (2, (Field("url", STRING), Field("ms", LONG)))
    assert second.id != first.id
    assert registry.by_id(first.id) == first
    assert registry.versions(project, "pageview") == [first, second]
    assert (project, "pageview") in registry.collections()


def test_a_conflicting_event_adds_no_version(registry, project):
    registry.evolve(project, "pageview", [{"ms": 1}])
    with pytest.raises(SchemaConflictError, match="field 'ms' is long"):
        registry.evolve(project, "pageview", [{"new": True}, {"ms": "slow"}])
    assert [version.version for version in registry.versions(project, "pageview")] == [1]


def test_an_unknown_project_gets_no_schema(registry):
    with pytest.raises(UnknownProjectError, match="project 'nobody' does not exist"):
        registry.evolve("nobody", "pageview", [{"url": "/"}])


def test_collectors_adding_the_same_field_at_once_make_exactly_one_version(conninfo, registry, project):
    registry.evolve(project, "heartbeat", [{"user_id": "u1"}])
    # Two collectors (registries with pools of their own), eight requests each, all released together.
    collectors = [registry, CollectionRegistry(conninfo)]
    start = threading.Barrier(16)
    results, errors = [], []

    def request(collector: CollectionRegistry, index: int) -> None:
        try:
            start.wait()
            results.append(
                collector.evolve(project, "heartbeat", [{"user_id": f"u{index}", "state": "playing"}])
            )
        except Exception as error:  # reported below with the others
            errors.append(error)

    threads = [threading.Thread(target=request, args=(collectors[index % 2], index)) for index in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    collectors[1].close()
    assert errors == []
    versions = registry.versions(project, "heartbeat")
    assert [version.version for version in versions] == [1, 2]
    assert {result.id for result in results} == {versions[1].id}
