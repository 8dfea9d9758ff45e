"""Avro and JSON records as dagger streams, on Apache Kafka: events collected through the Collection API
read with their writer schemas (through the metadata database and through the Confluent registry API),
JSON objects read with columns from an Avro or JSON Schema file, and records that cannot be read sent
to the stream's invalid-record policy."""

from __future__ import annotations

import io
import json
import struct
from pathlib import Path

import fastavro
import pytest

from jobs.collection.delivery import topic_of
from jobs.model.spec import DaggerConfigError
from jobs.running.runner import DaggerBuildError, DaggerQueryError

BEFORE = [
    {"user_id": "u1", "at": "2026-11-26T10:00:00Z", "ms": 30, "tags": {"screen": "home"}},
    {"user_id": "u2", "at": "2026-11-26T10:00:01Z", "ms": 45, "tags": {"screen": "play", "ab": "b"}},
]
AFTER = [{"user_id": "u3", "at": "2026-11-26T10:00:02Z", "ms": 50, "app_version": "2.1"}]


def logged_rows(logged: list[str]) -> list[dict]:
    return [json.loads(line.split(" | ", 1)[1]) for line in logged]


def avro_stream(kafka, topic: str, registry_url: str, **fields) -> dict:
    return {
        "kind": "kafka",
        "bootstrap_servers": kafka.bootstrap_servers,
        "table": "heartbeats",
        "topics": [topic],
        "format": "avro",
        "schema_registry_url": registry_url,
        "event_time_field": "at",
        "auto_offset_reset": "earliest",
        **fields,
    }


@pytest.fixture
def heartbeats(collector, apache_kafka) -> str:
    """A new project's heartbeat topic: two events, then one that brings a new property."""
    project, write_key = collector.new_project()
    collector.collect(write_key, "heartbeat", BEFORE)
    collector.collect(write_key, "heartbeat", AFTER)
    return topic_of(project, "heartbeat")


def test_collected_events_are_a_stream_and_old_records_read_a_later_field_as_null(
    collector, heartbeats, kafka, kafka_connector, make_dagger, start_dagger
):
    spec = make_dagger(
        streams=[avro_stream(kafka, heartbeats, collector.database_url, connector=kafka_connector)],
        sql="SELECT user_id, ms * 2 AS doubled, tags['screen'] AS screen, app_version AS v, rowtime AS t "
        "FROM heartbeats",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert sorted(logged_rows(running.logged), key=lambda row: row["user_id"]) == [
        {"user_id": "u1", "doubled": 60, "screen": "home", "v": None, "t": "2026-11-26T10:00:00+00:00"},
        {"user_id": "u2", "doubled": 90, "screen": "play", "v": None, "t": "2026-11-26T10:00:01+00:00"},
        {"user_id": "u3", "doubled": 100, "screen": None, "v": "2.1", "t": "2026-11-26T10:00:02+00:00"},
    ]


def test_a_pinned_version_through_the_confluent_registry_api_gives_that_versions_columns(
    collector, heartbeats, kafka, kafka_connector, make_dagger, start_dagger
):
    spec = make_dagger(
        streams=[avro_stream(kafka, heartbeats, collector.url, schema_version=1, connector=kafka_connector)],
        sql="SELECT * FROM heartbeats",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()
    rows = logged_rows(running.logged)
    record_columns = [sorted(name for name in row if not name.startswith("kafka_")) for row in rows]
    assert record_columns == [["at", "ms", "rowtime", "tags", "user_id"]] * 3
    assert sorted(row["user_id"] for row in rows) == ["u1", "u2", "u3"]  # u3's newer record read as v1


def test_records_an_avro_stream_cannot_read_follow_its_invalid_record_policy(
    collector, heartbeats, kafka, kafka_connector, make_dagger, start_dagger
):
    """A record of an unknown schema id: the Python source asks the registry, which has no such id (an
    invalid record); the JVM knows the subject's versions as the dagger started, so the record stops the
    query under every policy (a restart, which looks them up again, reads it)."""
    good = kafka.read_all(heartbeats)[0].value()
    kafka.produce(heartbeats, [b"{not avro}", good[:6]])
    stream = avro_stream(
        kafka, heartbeats, collector.url, connector=kafka_connector, invalid_records={"action": "drop"}
    )
    dropping = make_dagger(
        streams=[stream],
        sql="SELECT user_id FROM heartbeats",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(dropping)
    running.process_available()
    assert sorted(row["user_id"] for row in logged_rows(running.logged)) == ["u1", "u2", "u3"]
    assert sum(report.invalid_records.get("heartbeats", 0) for report in running.run.reports) == 2

    failing = make_dagger(
        name="failing",
        streams=[avro_stream(kafka, heartbeats, collector.url, connector=kafka_connector)],
        sql="SELECT user_id FROM heartbeats",
        sinks=[{"kind": "log"}],
        checkpoint_location=str(Path(dropping.resolved_checkpoint_location).parent / "failing"),
    )
    with pytest.raises(
        DaggerQueryError,
        match=rf"{heartbeats}\[\d\]@\d+: record is not a valid Avro {heartbeats}-value version 2: ",
    ):
        start_dagger(failing).process_available()

    unknown = 2**31 - 1
    kafka.produce(heartbeats, [struct.pack(">bI", 0, unknown) + good[5:]])
    if kafka_connector == "python":
        running.process_available()
        assert sum(report.invalid_records.get("heartbeats", 0) for report in running.run.reports) == 3
        return
    with pytest.raises(
        DaggerQueryError,
        match=rf"{heartbeats}\[\d\]@\d+: schema id {unknown} is not a version of subject "
        rf"'{heartbeats}-value' as the dagger started \(\d+, \d+\); restart the dagger to read it",
    ):
        running.process_available()


def test_an_unreachable_registry_stops_the_build_naming_the_stream_and_the_registry(
    kafka, make_dagger, start_dagger
):
    spec = make_dagger(
        streams=[avro_stream(kafka, "nowhere", "http://127.0.0.1:9")],
        sql="SELECT user_id FROM heartbeats",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(DaggerBuildError, match=r"stream 'heartbeats': schema registry http://127.0.0.1:9: "):
        start_dagger(spec)


def json_stream(kafka, topic: str, schema_file: Path, **fields) -> dict:
    return {
        "kind": "kafka",
        "bootstrap_servers": kafka.bootstrap_servers,
        "table": "clicks",
        "topics": [topic],
        "format": "json",
        "schema_file": str(schema_file),
        "event_time_field": "at",
        "auto_offset_reset": "earliest",
        **fields,
    }


CLICKS = [
    b'{"user": "u1", "at": "2026-11-26T10:00:00Z", "page": {"path": "/", "ms": 12}, "ids": [1, 2]}',
    b'{"at": "2026-11-26T11:00:00.5+01:00", "user": "u2", "extra": true}',
    b"not json",
    b'{"user": "u3", "at": "2026-11-26T10:00:02Z", "ids": ["three"]}',  # a string where a long belongs
    b'{\n  "user": "u4",\n  "at": "2026-11-26T10:00:03Z"\n}',
]
CLICK_SCHEMAS = {
    "clicks.avsc": {
        "type": "record",
        "name": "click",
        "fields": [
            {"name": "user", "type": "string"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {
                "name": "page",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "page",
                        "fields": [{"name": "path", "type": "string"}, {"name": "ms", "type": "long"}],
                    },
                ],
            },
            {"name": "ids", "type": ["null", {"type": "array", "items": "long"}]},
        ],
    },
    "clicks.json": {
        "type": "object",
        "properties": {
            "user": {"type": "string"},
            "at": {"type": "string", "format": "date-time"},
            "page": {
                "type": ["object", "null"],
                "properties": {"path": {"type": "string"}, "ms": {"type": "integer"}},
            },
            "ids": {"type": "array", "items": {"type": "integer"}},
        },
    },
}


@pytest.mark.parametrize("schema_file", sorted(CLICK_SCHEMAS))
def test_json_records_are_read_into_the_columns_of_a_schema_file(
    schema_file, tmp_path, kafka, kafka_connector, make_dagger, start_dagger
):
    path = tmp_path / schema_file
    path.write_text(json.dumps(CLICK_SCHEMAS[schema_file]))
    topic = kafka.new_topic("clicks")
    kafka.produce(topic, CLICKS)
    spec = make_dagger(
        streams=[
            json_stream(kafka, topic, path, invalid_records={"action": "drop"}, connector=kafka_connector)
        ],
        sql="SELECT user, page.path AS path, page.ms AS ms, ids, rowtime FROM clicks",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged_rows(running.logged) == [
        {"user": "u1", "path": "/", "ms": 12, "ids": [1, 2], "rowtime": "2026-11-26T10:00:00+00:00"},
        {"user": "u2", "path": None, "ms": None, "ids": None, "rowtime": "2026-11-26T10:00:00.500000+00:00"},
        {"user": "u4", "path": None, "ms": None, "ids": None, "rowtime": "2026-11-26T10:00:03+00:00"},
    ]
    assert sum(report.invalid_records.get("clicks", 0) for report in running.run.reports) == 2


def test_a_json_record_that_is_not_an_object_of_the_schema_fails_the_dagger_naming_its_offset(
    tmp_path, kafka, kafka_connector, make_dagger, start_dagger
):
    path = tmp_path / "clicks.json"
    path.write_text(json.dumps(CLICK_SCHEMAS["clicks.json"]))
    topic = kafka.new_topic("clicks")
    kafka.produce(topic, CLICKS)
    spec = make_dagger(
        streams=[json_stream(kafka, topic, path, connector=kafka_connector)],
        sql="SELECT user FROM clicks",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(
        DaggerQueryError,
        match=rf"stream 'clicks': {topic}\[0\]@2: record is not a valid JSON of {path}: "
        r"not (a|one) JSON object",
    ):
        start_dagger(spec).process_available()


@pytest.mark.parametrize(
    ("keys", "error"),
    [
        ({"format": "avro"}, "format 'avro' needs 'schema_registry_url'"),
        ({"format": "json"}, "format 'json' needs one of 'schema_file' and 'record_schema'"),
        (
            {"format": "json", "schema_file": "x.avsc", "proto_message": "dagger.testing.Order"},
            "'proto_message' is a key of format 'protobuf', not 'json'",
        ),
        (
            {"proto_message": "dagger.testing.Order", "schema_version": 2},
            "'schema_version': keys of format 'avro'",
        ),
        (
            {"format": "avro", "schema_registry_url": "http://r", "topics": None, "topic_pattern": "a.*"},
            "format 'avro' over several topics or a pattern needs 'schema_subject'",
        ),
        (
            {"format": "avro", "schema_registry_url": "http://r", "row_layout": "dagger"},
            "row_layout 'dagger' is Dagger's layout of protobuf records",
        ),
    ],
)
def test_format_keys_are_checked_when_the_file_is_read(keys, error, make_dagger):
    stream = {"kind": "kafka", "table": "t", "topics": ["t"], "event_time_field": "at", **keys}
    with pytest.raises(DaggerConfigError, match=error):
        make_dagger(streams=[stream], sql="SELECT * FROM t", sinks=[{"kind": "log"}])


def test_a_json_schema_with_a_map_is_refused_naming_the_property(tmp_path, kafka, make_dagger, start_dagger):
    path = tmp_path / "map.json"
    schema = {
        "type": "object",
        "properties": {"at": {"type": "string", "format": "date-time"}, "m": {"type": "object"}},
    }
    path.write_text(json.dumps(schema))
    spec = make_dagger(
        streams=[json_stream(kafka, "t", path)], sql="SELECT * FROM clicks", sinks=[{"kind": "log"}]
    )
    with pytest.raises(
        DaggerBuildError, match=r"stream 'clicks': schema_file .*map.json: property 'm': an object"
    ):
        start_dagger(spec)


def test_avro_maps_decode_through_their_entries_encoding():
    """polars cannot read Avro maps; the codec reads them as the key/value arrays they are encoded as."""
    from jobs.codec.avro import ConfluentAvroDecoder

    schema = {
        "type": "record",
        "name": "r",
        "fields": [
            {"name": "m", "type": ["null", {"type": "map", "values": ["null", "long"]}]},
            {"name": "nested", "type": {"type": "array", "items": {"type": "map", "values": "string"}}},
        ],
    }
    rows = [{"m": {"a": 1, "b": None}, "nested": [{"x": "y"}, {}]}, {"m": None, "nested": []}]
    payloads = []
    for row in rows:
        out = io.BytesIO(struct.pack(">bI", 0, 7))
        out.seek(5)
        fastavro.schemaless_writer(out, fastavro.parse_schema(schema), row)
        payloads.append(out.getvalue())
    batch, invalid = ConfluentAvroDecoder(schema, {7: schema}.get).decode(payloads)
    assert invalid == {}
    assert batch.to_pylist() == [
        {"m": [("a", 1), ("b", None)], "nested": [[("x", "y")], []]},
        {"m": None, "nested": []},
    ]


def test_an_avro_stream_reads_records_serialized_against_apicurio_registry(
    apicurio, kafka, kafka_connector, make_dagger, start_dagger
):
    """Confluent's serializer against a real third-party registry: two versions of a subject, the
    second adding an optional field, read by one stream at the latest version."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    v1 = {
        "type": "record",
        "name": "payment",
        "fields": [
            {"name": "id", "type": "string"},
            {"name": "cents", "type": "long"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        ],
    }
    v2 = {**v1, "fields": [*v1["fields"], {"name": "currency", "type": ["null", "string"], "default": None}]}
    topic = kafka.new_topic("payments")
    client = SchemaRegistryClient({"url": apicurio})
    context = SerializationContext(topic, MessageField.VALUE)
    at = 1_795_000_000_000
    old = AvroSerializer(client, json.dumps(v1), conf={"auto.register.schemas": True})
    new = AvroSerializer(client, json.dumps(v2), conf={"auto.register.schemas": True})
    kafka.produce(
        topic,
        [
            old({"id": "p1", "cents": 250, "at": at}, context),
            new({"id": "p2", "cents": 990, "at": at + 1000, "currency": "EUR"}, context),
            old({"id": "p3", "cents": 5, "at": at + 2000}, context),
        ],
    )
    stream = avro_stream(kafka, topic, apicurio, event_time_field="at", connector=kafka_connector)
    stream["table"] = "payments"
    spec = make_dagger(
        streams=[stream],
        sql="SELECT id, cents, currency FROM payments",
        sinks=[{"kind": "log", "max_rows_per_batch": 100}],
    )
    running = start_dagger(spec)
    running.process_available()
    assert logged_rows(running.logged) == [
        {"id": "p1", "cents": 250, "currency": None},
        {"id": "p2", "cents": 990, "currency": "EUR"},
        {"id": "p3", "cents": 5, "currency": None},
    ]
