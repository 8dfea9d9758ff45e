"""A dagger is resolved once: its plan reads each schema and prepares the SQL once per build, and the
layers below build the query from the plan."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from jobs.codec import formats
from jobs.codec.formats import AvroSchemas, RecordFormat
from jobs.model import plan as plan_module
from jobs.model import sql as sql_stage
from jobs.model.errors import DaggerBuildError
from jobs.model.plan import resolve_plan
from jobs.model.schema_registry import SchemaRegistry
from jobs.running import runner
from jobs.running.runner import build_dagger

BEAT = {
    "type": "record",
    "name": "beat",
    "fields": [
        {"name": "user_id", "type": "string"},
        {"name": "ms", "type": "long"},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-micros"}},
    ],
}
CLICK = {
    "type": "object",
    "properties": {
        "user_name": {"type": "string"},
        "page": {"type": "string"},
        "at": {"type": "string", "format": "date-time"},
    },
}


class CountingRegistry(AvroSchemas):
    """A registry whose subject `beats-value` has one version (2, schema id 7), counting what is asked."""

    def __init__(self) -> None:
        super().__init__("http://registry.test")
        self.asked: Counter[str] = Counter()

    def latest_version(self, subject: str) -> int:
        self.asked["latest_version"] += 1
        return 2

    def version(self, subject: str, version: int) -> dict:
        self.asked["version"] += 1
        return BEAT

    def by_id(self, schema_id: int) -> dict | None:
        self.asked["by_id"] += 1
        return BEAT if schema_id == 7 else None

    def subject_schemas(self, subject: str) -> dict[int, dict]:
        self.asked["subject_schemas"] += 1
        return {7: BEAT}


@pytest.fixture
def avro_registry(monkeypatch: pytest.MonkeyPatch) -> CountingRegistry:
    registry = CountingRegistry()
    monkeypatch.setattr(formats, "avro_schemas", lambda url: registry)
    return registry


def counted(monkeypatch: pytest.MonkeyPatch, module: object, name: str, calls: Counter[str]) -> None:
    """Count the calls of `module.name`, which go on to the function."""
    function = getattr(module, name)

    def counting(*args, **kwargs):
        calls[name] += 1
        return function(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)


def streams(
    tmp_path: Path, bootstrap_servers: str = "127.0.0.1:9", topics: tuple[str, ...] = ("b", "c", "o")
) -> list[dict]:
    """An Avro stream and a JSON stream of a schema file, both decoded in the JVM, and a protobuf stream
    read by the Python source (building them asks no broker)."""
    schema_file = tmp_path / "click.json"
    schema_file.write_text(json.dumps(CLICK))
    kafka = {"kind": "kafka", "bootstrap_servers": bootstrap_servers, "event_time_field": "at"}
    return [
        {
            **kafka,
            "table": "beats",
            "topics": [topics[0]],
            "schema_subject": "beats-value",
            "format": "avro",
            "schema_registry_url": "http://registry.test",
            "connector": "spark",
        },
        {
            **kafka,
            "table": "clicks",
            "topics": [topics[1]],
            "format": "json",
            "schema_file": str(schema_file),
        },
        {
            **kafka,
            "table": "orders",
            "topics": [topics[2]],
            "proto_message": "dagger.testing.Order",
            "event_time_field": "created_at",
            "connector": "python",
        },
    ]


SQL = (
    "SELECT user_id AS who, rowtime FROM beats UNION ALL SELECT user_name, rowtime FROM clicks "
    "UNION ALL SELECT customer_id, rowtime FROM orders"
)


def test_a_build_resolves_the_dagger_once_and_reads_each_schema_once(
    kafka, spark, registry, avro_registry, make_dagger, monkeypatch, tmp_path
):
    topics = tuple(kafka.new_topic(table) for table in ("beats", "clicks", "orders"))
    spec = make_dagger(
        streams=streams(tmp_path, kafka.bootstrap_servers, topics), sql=SQL, sinks=[{"kind": "log"}]
    )
    calls: Counter[str] = Counter()
    counted(monkeypatch, runner, "resolve_plan", calls)
    counted(monkeypatch, plan_module, "record_format", calls)
    counted(monkeypatch, formats, "_json_document", calls)
    counted(monkeypatch, SchemaRegistry, "load", calls)
    counted(monkeypatch, sql_stage, "prepare", calls)

    built = build_dagger(spark, spec)  # no registry given: the plan loads the descriptor sets
    built.started_result(False)  # planned again, where the broker says the connector's streams start

    assert calls == {"resolve_plan": 1, "record_format": 3, "_json_document": 1, "load": 1, "prepare": 1}
    assert avro_registry.asked == {"latest_version": 1, "version": 1, "subject_schemas": 1}
    # The plan's streams are what the query reads: only the fields it names, and the event time.
    plan = built.plan
    assert [(s.table, s.fields, s.metadata) for s in plan.streams] == [
        ("beats", ("user_id", "at"), ()),
        ("clicks", ("user_name", "at"), ()),
        ("orders", ("customer_id", "created_at"), ()),
    ]
    assert plan.spec.streams[0].schema_version == 2  # pinned
    assert [stream.connector for stream in plan.spec.streams] == ["spark", "spark", "python"]
    assert plan.streams[0].records == RecordFormat(
        "avro",
        schema=json.dumps(BEAT),
        registry_url="http://registry.test",
        writer_schemas=((7, json.dumps(BEAT)),),
    )
    assert spark.table("beats").columns == ["user_id", "at", "rowtime"]
    assert spark.table("clicks").columns == ["user_name", "at", "rowtime"]
    assert built.result.columns == ["who", "rowtime"]


def test_the_plan_is_immutable_and_its_records_travel_as_json(avro_registry, make_dagger, tmp_path):
    plan = resolve_plan(make_dagger(streams=streams(tmp_path), sql=SQL, sinks=[{"kind": "log"}]), False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.streams = ()  # type: ignore[misc]
    for stream in plan.streams:
        assert RecordFormat.from_json(stream.records.to_json()) == stream.records
    assert plan.function_names is not None and "customer_id" in plan.function_names
    assert plan.sql is sql_stage.prepare(SQL)


@pytest.mark.parametrize(
    ("stream", "message"),
    [
        (
            {"table": "clicks", "format": "json", "schema_file": "missing.json"},
            r"^dagger test-dagger: stream 'clicks': schema_file .*missing.json: \[Errno 2\]",
        ),
        (
            {
                "table": "clicks",
                "format": "json",
                "record_schema": {"type": "object", "properties": {"m": {"type": "object"}}},
            },
            r"^dagger test-dagger: stream 'clicks': record_schema: property 'm': ",
        ),
        (
            {"table": "orders", "proto_message": "dagger.testing.Nothing"},
            r"^dagger test-dagger: stream 'orders': .*dagger.testing.Nothing",
        ),
    ],
)
def test_resolving_names_the_stream_and_the_schema_at_fault(make_dagger, stream, message):
    spec = make_dagger(
        streams=[{"kind": "kafka", "topics": ["t"], "event_time_field": "at", **stream}],
        sql="SELECT 1",
        sinks=[{"kind": "log"}],
    )
    with pytest.raises(DaggerBuildError, match=message):
        resolve_plan(spec, spark_connect=False)
