"""The collection schemas through the Confluent Schema Registry API, driven by confluent-kafka's official
`SchemaRegistryClient`, `AvroDeserializer` and `AvroSerializer` against the collector served by uvicorn
(`tests.collector`)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jobs.collection.confluent import subject_of
from jobs.collection.delivery import topic_of


def test_confluents_client_and_serdes_read_and_write_a_growing_collection(collector, kafka):
    url, registry = collector.url, collector.registry
    project = f"app{uuid.uuid4().hex[:8]}"
    key = registry.create_project(project)
    for properties in ({"user_id": "u1"}, {"user_id": "u2", "state": "playing"}):
        answer = httpx.post(
            f"{url}/event/collect",
            json={"api": {"write_key": key}, "collection": "heartbeat", "properties": properties},
        )
        assert answer.status_code == 200, answer.text
    v1, v2 = registry.versions(project, "heartbeat")
    topic, subject = topic_of(project, "heartbeat"), subject_of(project, "heartbeat")

    client = SchemaRegistryClient({"url": url})
    assert subject in client.get_subjects()
    assert client.get_versions(subject) == [1, 2]
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id) == (2, v2.id)
    assert json.loads(client.get_schema(v1.id).schema_str) == v1.schema.to_avro()
    assert client.test_compatibility(subject, Schema(json.dumps(v2.schema.to_avro()), "AVRO"), version=1)
    changed = v1.schema.to_avro()
    changed["fields"][0]["type"] = ["null", "long"]
    assert not client.test_compatibility(subject, Schema(json.dumps(changed), "AVRO"), version=1)

    # Records of both versions, read by Confluent's deserializer with the latest schema as its reader's.
    context = SerializationContext(topic, MessageField.VALUE)
    reader = AvroDeserializer(client, schema_str=json.dumps(v2.schema.to_avro()))
    read = [reader(message.value(), context) for message in kafka.read_all(topic)]
    assert sorted(read, key=lambda record: record["user_id"]) == [
        {"user_id": "u1", "state": None},
        {"user_id": "u2", "state": "playing"},
    ]

    # Confluent's serializer finds the collection's schema (no registration) and writes what we read.
    writer = AvroSerializer(
        client,
        json.dumps(v2.schema.to_avro()),
        conf={"auto.register.schemas": False, "use.latest.version": True},
    )
    encoded = writer({"user_id": "u3", "state": "paused"}, context)
    assert int.from_bytes(encoded[1:5], "big") == v2.id
    assert AvroDeserializer(client)(encoded, context) == {"user_id": "u3", "state": "paused"}


def test_a_schema_that_is_not_a_version_cannot_be_registered(collector):
    url, registry = collector.url, collector.registry
    project = f"app{uuid.uuid4().hex[:8]}"
    key = registry.create_project(project)
    httpx.post(
        f"{url}/event/collect", json={"api": {"write_key": key}, "collection": "c", "properties": {"n": 1}}
    )
    client = SchemaRegistryClient({"url": url})
    foreign = {"type": "record", "name": "x", "fields": [{"name": "y", "type": "string"}]}
    with pytest.raises(Exception, match="grow only through collected events"):
        client.register_schema(subject_of(project, "c"), Schema(json.dumps(foreign), "AVRO"))
