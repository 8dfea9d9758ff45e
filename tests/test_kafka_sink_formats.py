"""The Kafka sink's Avro and JSON formats, on Apache Kafka: result rows read back with Confluent's own
AvroDeserializer (schemas registered in Apicurio Registry) and as JSON objects, exactly as computed."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from jobs.model.spec import DaggerConfigError
from jobs.running.runner import DaggerBuildError
from tests.conftest import kafka_stream, order_payloads

SQL = (
    "SELECT order_id, CAST(amount AS INT) AS units, amount / 2 AS half, created_at, "
    "named_struct('customer', customer_id, 'even', CAST(amount AS INT) % 2 = 0) AS detail, "
    "array(order_id, customer_id) AS ids, map('amount', amount) AS figures, "
    "IF(amount > 1, NULL, 'first') AS note FROM orders"
)


def orders(kafka, registry) -> dict:
    topic = kafka.new_topic("sink-formats-in")
    kafka.produce(topic, order_payloads(registry, 0, 3))
    return kafka_stream(
        kafka.bootstrap_servers, "orders", "dagger.testing.Order", "created_at", topics=[topic]
    )


def sink(kafka, topic: str, **fields) -> dict:
    return {"kind": "kafka", "bootstrap_servers": kafka.bootstrap_servers, "topic": topic, **fields}


@pytest.mark.parametrize(
    "writer",
    [{}, {"connector": "spark", "delivery": "exactly_once"}],
    ids=["python", "jvm-transactions"],  # the JVM's transactions write the JVM's JSON text
)
def test_json_records_carry_the_results_columns_by_name(kafka, registry, make_dagger, start_dagger, writer):
    topic = kafka.new_topic("sink-json")
    spec = make_dagger(
        streams=[orders(kafka, registry)], sql=SQL, sinks=[sink(kafka, topic, format="json", **writer)]
    )
    start_dagger(spec).process_available()
    rows = [json.loads(r.value()) for r in kafka.read_all(topic, isolation_level="read_committed")]
    assert sorted(rows, key=lambda row: row["order_id"]) == [
        {
            "order_id": f"o{index}",
            "units": index,
            "half": index / 2,
            "created_at": f"2023-11-14T22:13:{20 + index:02d}.000Z",
            "detail": {"customer": "c", "even": index % 2 == 0},
            "ids": [f"o{index}", "c"],
            "figures": {"amount": float(index)},
            "note": "first" if index <= 1 else None,
        }
        for index in range(3)
    ]


@pytest.mark.parametrize(
    "writer",
    [
        {"delivery": "exactly_once"},
        {"connector": "spark"},
        {"connector": "spark", "delivery": "exactly_once"},
    ],
    ids=["python-transactions", "connector", "jvm-transactions"],  # the JVM's records come from to_avro
)
def test_avro_records_are_read_by_confluents_deserializer_with_the_registered_schema(
    apicurio, kafka, registry, make_dagger, start_dagger, writer
):
    topic = kafka.new_topic("sink-avro")
    spec = make_dagger(
        streams=[orders(kafka, registry)],
        sql=SQL,
        sinks=[sink(kafka, topic, format="avro", schema_registry_url=apicurio, **writer)],
    )
    start_dagger(spec).process_available()
    client = SchemaRegistryClient({"url": apicurio})
    deserialize = AvroDeserializer(client)
    context = SerializationContext(topic, MessageField.VALUE)
    records = kafka.read_all(topic, isolation_level="read_committed")
    rows = [deserialize(record.value(), context) for record in records]
    assert sorted(rows, key=lambda row: row["order_id"]) == [
        {
            "order_id": f"o{index}",
            "units": index,
            "half": index / 2,
            "created_at": datetime(2023, 11, 14, 22, 13, 20 + index, tzinfo=UTC),
            "detail": {"customer": "c", "even": index % 2 == 0},
            "ids": [f"o{index}", "c"],
            "figures": {"amount": float(index)},
            "note": "first" if index <= 1 else None,
        }
        for index in range(3)
    ]
    registered = client.get_latest_version(f"{topic}-value")
    assert [field["name"] for field in json.loads(registered.schema.schema_str)["fields"]] == [
        "order_id", "units", "half", "created_at", "detail", "ids", "figures", "note"
    ]  # fmt: skip


def test_a_result_the_subjects_compatibility_refuses_stops_the_start_naming_the_subject(
    apicurio, kafka, registry, make_dagger, start_dagger
):
    topic = kafka.new_topic("sink-avro-refused")
    existing = {"type": "record", "name": "row", "fields": [{"name": "order_id", "type": "long"}]}
    SchemaRegistryClient({"url": apicurio}).register_schema(
        f"{topic}-value", Schema(json.dumps(existing), "AVRO")
    )
    spec = make_dagger(
        streams=[orders(kafka, registry)],
        sql="SELECT order_id FROM orders",  # a string now: not BACKWARD compatible
        sinks=[sink(kafka, topic, format="avro", schema_registry_url=apicurio)],
    )
    with pytest.raises(DaggerBuildError, match=rf"subject '{topic}-value': the result's schema was refused"):
        start_dagger(spec)


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ({}, "format 'protobuf' needs 'proto_message'"),
        ({"format": "avro"}, "format 'avro' needs 'schema_registry_url'"),
        ({"format": "json", "key_proto_message": "k"}, "'key_proto_message': keys of format 'protobuf'"),
        ({"format": "json", "schema_subject": "s"}, "'schema_subject': keys of format 'avro'"),
    ],
)
def test_sink_format_keys_are_checked_when_the_file_is_read(keys, error, make_dagger):
    stream = {"kind": "parquet", "table": "t", "proto_message": "m", "event_time_field": "e", "paths": ["/x"]}
    with pytest.raises(DaggerConfigError, match=error):
        make_dagger(streams=[stream], sql="SELECT 1", sinks=[{"kind": "kafka", "topic": "out", **keys}])
