"""The Collection API on a real PostgreSQL and Apache Kafka: events in, Confluent wire-format Avro records
out (read back with the registry's schemas), and every kind of bad request refused with nothing written."""

from __future__ import annotations

import io
import json
import struct
import uuid
from datetime import UTC, datetime

import fastavro
import pytest
from confluent_kafka.admin import AdminClient
from starlette.testclient import TestClient

from jobs.collection.api import Collector, CollectorLimits, create_app
from jobs.collection.delivery import KafkaDelivery, topic_of
from jobs.collection.registry import CollectionRegistry
from jobs.tools.broker import free_port


@pytest.fixture(scope="module")
def registry(postgres):
    registry = CollectionRegistry(
        f"host={postgres.host} port={postgres.port} dbname={postgres.database} "
        f"user={postgres.user} password={postgres.password}"
    )
    yield registry
    registry.close()


@pytest.fixture(scope="module")
def delivery(kafka):
    delivery = KafkaDelivery(kafka.bootstrap_servers, **kafka.settings)
    yield delivery
    delivery.close()


@pytest.fixture
def project(registry) -> tuple[str, str]:
    name = f"shop{uuid.uuid4().hex[:8]}"
    return name, registry.create_project(name)


@pytest.fixture
def client(registry, delivery) -> TestClient:
    limits = CollectorLimits(max_body_bytes=64 * 1024, max_batch_events=50)
    return TestClient(create_app(Collector(registry, delivery, limits)))


def decoded(kafka, registry, topic: str) -> list[tuple[bytes | None, dict]]:
    """Every record of `topic` as (key, event), each read with its writer schema and the latest one."""
    records = []
    for message in kafka.read_all(topic):
        magic, schema_id = struct.unpack(">bI", message.value()[:5])
        assert magic == 0
        writer = registry.by_id(schema_id)
        latest = registry.latest(writer.schema.project, writer.schema.collection)
        event = fastavro.schemaless_reader(
            io.BytesIO(message.value()[5:]),
            fastavro.parse_schema(writer.schema.to_avro()),
            fastavro.parse_schema(latest.schema.to_avro()),
        )
        records.append((message.key(), event))
    return records


def test_events_become_avro_records_of_their_collections_topic(client, kafka, registry, project):
    name, key = project
    one = client.post(
        "/event/collect",
        json={"api": {"write_key": key}, "collection": "pageview", "properties": {"url": "/", "ms": 3}},
    )
    assert (one.status_code, one.json()) == (200, {"accepted": 1})
    batch = client.post(
        "/event/batch",
        json={
            "api": {"write_key": key},
            "events": [
                {
                    "collection": "pageview",
                    "properties": {"url": "/a", "at": "2026-11-26T10:00:00Z"},
                    "key": "u1",
                },
                {"collection": "click", "properties": {"target": "buy", "tags": ["x", "y"]}},
            ],
        },
    )
    assert (batch.status_code, batch.json()) == (200, {"accepted": 2})
    pageviews = decoded(kafka, registry, topic_of(name, "pageview"))
    assert sorted(pageviews, key=lambda record: record[1]["url"]) == [
        (None, {"url": "/", "ms": 3, "at": None}),  # written before `at` existed: read as null
        (
            b"u1",
            {
                "url": "/a",
                "ms": None,
                "at": datetime(2026, 11, 26, 10, tzinfo=UTC),
            },
        ),
    ]
    assert decoded(kafka, registry, topic_of(name, "click")) == [
        (None, {"target": "buy", "tags": ["x", "y"]})
    ]
    assert [version.version for version in registry.versions(name, "pageview")] == [1, 2]


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "malformed JSON"),
        (json.dumps({"collection": "c", "properties": {}}).encode(), 400, "no api.write_key"),
        ("KEY", 403, "unknown write key"),
        ({"properties": {"a": 1}}, 400, "the event has no collection"),
        ({"collection": "a.b", "properties": {"a": 1}}, 400, "may hold only letters"),
        (
            {"collection": "c", "properties": {"bad name": 1}},
            400,
            "property 'bad name' is not a valid field name",
        ),
        ({"collection": "c", "properties": {"n": 1, "pad": "x" * 70_000}}, 413, "bytes"),
    ],
)
def test_a_bad_event_is_refused_and_nothing_is_written(
    client, kafka, registry, project, body, status, message
):
    name, key = project
    if body == "KEY":
        body = json.dumps(
            {"api": {"write_key": key + "x"}, "collection": "c", "properties": {"a": 1}}
        ).encode()
    elif isinstance(body, dict):
        body = json.dumps({"api": {"write_key": key}, **body}).encode()
    answer = client.post("/event/collect", content=body, headers={"content-type": "application/json"})
    assert answer.status_code == status and message in answer.json()["error"]
    assert all(project_name != name for project_name, _ in registry.collections())
    assert topic_of(name, "c") not in AdminClient(kafka.client_config()).list_topics(timeout=30).topics


def test_a_type_conflict_names_the_field_and_writes_none_of_the_request(client, kafka, registry, project):
    name, key = project
    assert (
        client.post(
            "/event/collect", json={"api": {"write_key": key}, "collection": "c", "properties": {"n": 1}}
        ).status_code
        == 200
    )
    answer = client.post(
        "/event/batch",
        json={
            "api": {"write_key": key},
            "events": [
                {"collection": "c", "properties": {"n": 2, "extra": True}},
                {"collection": "c", "properties": {"n": "three"}},
            ],
        },
    )
    assert answer.status_code == 400
    assert answer.json()["error"] == "collection c: field 'n' is long, the event's value is string"
    assert decoded(kafka, registry, topic_of(name, "c")) == [(None, {"n": 1})]
    assert [version.version for version in registry.versions(name, "c")] == [1]


def test_more_events_than_the_batch_limit_are_refused(client, project):
    _, key = project
    events = [{"collection": "c", "properties": {"n": index}} for index in range(51)]
    answer = client.post("/event/batch", json={"api": {"write_key": key}, "events": events})
    assert (answer.status_code, answer.json()["error"]) == (413, "51 events in one request; at most 50")


def test_an_unreachable_broker_answers_503_so_the_client_retries(registry, project):
    _, key = project
    delivery = KafkaDelivery(f"127.0.0.1:{free_port()}", timeout_s=2.0)
    client = TestClient(create_app(Collector(registry, delivery, CollectorLimits())))
    answer = client.post(
        "/event/collect", json={"api": {"write_key": key}, "collection": "c", "properties": {"n": 1}}
    )
    assert answer.status_code == 503 and "topic" in answer.json()["error"]
