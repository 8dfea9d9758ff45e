"""Dagger's row layout (`row_layout: dagger`): Timestamp and Duration as STRUCT<seconds, nanos>, wrappers
as STRUCT<value>, maps as ARRAY<STRUCT<key, value>>, decoded in Arrow and accepted back by the encoder.

Expected values come from the protobuf messages themselves (their `seconds` / `nanos`, their maps)."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from jobs.codec.protobuf import ProtoDecoder
from jobs.codec.protobuf_dagger_layout import DaggerRowLayout
from jobs.codec.protobuf_encoding import ProtoEncoder
from jobs.model.plan import resolve_plan
from jobs.model.spec import parse_dagger
from jobs.running.stream_tables import stream_view_schema
from tests.conftest import message_class

ALL_TYPES = "dagger.testing.AllTypes"


def sample_messages(registry) -> list:
    all_types = message_class(registry, ALL_TYPES)
    first = all_types(id="a", labels={"k1": "v1", "k2": "v2"}, words=["x"])
    first.event_time.FromDatetime(datetime(2024, 5, 1, 12, 0, 7, 123456, tzinfo=UTC))
    first.elapsed.FromMicroseconds(-1_500_000)  # a negative Duration: seconds and nanos share the sign
    first.optional_count.value = 42
    first.points_by_id[7].label = "seven"
    segment = first.segments.add()
    segment.travel_time.FromMicroseconds(90_250_000)
    second = all_types(id="b")  # nothing else set
    second.event_time.FromMicroseconds(-1_500_000)  # before the epoch: nanos stay positive
    return [first, second]


def dagger_rows(registry, messages) -> list[dict]:
    decoder = ProtoDecoder(registry.message(ALL_TYPES))
    batch, invalid = decoder.decode([message.SerializeToString() for message in messages])
    assert invalid == {}
    layout = DaggerRowLayout(decoder.descriptor, decoder.schema)
    converted = pa.RecordBatch.from_arrays(layout.convert(batch.columns), schema=layout.schema)
    return converted.to_pylist()


def test_timestamps_and_durations_read_as_seconds_and_nanos(registry):
    messages = sample_messages(registry)
    rows = dagger_rows(registry, messages)
    for message, row in zip(messages, rows, strict=True):
        assert row["event_time"] == {"seconds": message.event_time.seconds, "nanos": message.event_time.nanos}
    assert rows[1]["event_time"] == {"seconds": -2, "nanos": 500_000_000}  # -1.5 s, by hand
    assert rows[0]["elapsed"] == {"seconds": -1, "nanos": -500_000_000}
    assert rows[0]["segments"][0]["travel_time"] == {"seconds": 90, "nanos": 250_000_000}
    assert rows[1]["elapsed"] is None  # unset message fields stay NULL


def test_maps_read_as_key_value_rows_and_wrappers_as_value_rows(registry):
    messages = sample_messages(registry)
    rows = dagger_rows(registry, messages)
    assert sorted(rows[0]["labels"], key=lambda entry: entry["key"]) == [
        {"key": key, "value": value} for key, value in sorted(messages[0].labels.items())
    ]
    assert rows[0]["points_by_id"] == [{"key": 7, "value": {"x": 0.0, "y": 0.0, "label": "seven"}}]
    assert rows[1]["labels"] == []
    assert rows[0]["optional_count"] == {"value": 42}
    assert rows[1]["optional_count"] is None


def test_the_layout_changes_only_the_types_dagger_lays_out_differently(registry):
    decoder = ProtoDecoder(registry.message(ALL_TYPES))
    layout = DaggerRowLayout(decoder.descriptor, decoder.schema)
    changed = {
        field.name: str(field.type)
        for field, native in zip(layout.schema, decoder.schema, strict=True)
        if field.type != native.type
    }
    point = "struct<x: double, y: double, label: string>"
    seconds_nanos = "struct<seconds: int64, nanos: int32>"
    assert changed == {
        "event_time": seconds_nanos,
        "segments": f"list<item: struct<start: {point}, end: {point}, travel_time: {seconds_nanos}>>",
        "labels": "list<item: struct<key: string, value: string>>",
        "points_by_id": f"list<item: struct<key: int32, value: {point}>>",
        "optional_name": "struct<value: string>",
        "optional_count": "struct<value: int64>",
        "optional_flag": "struct<value: bool>",
        "elapsed": seconds_nanos,
    }


def test_the_encoder_takes_dagger_rows_back_into_timestamps_durations_maps_and_wrappers(registry):
    messages = sample_messages(registry)
    decoder = ProtoDecoder(registry.message(ALL_TYPES))
    batch, _ = decoder.decode([message.SerializeToString() for message in messages])
    layout = DaggerRowLayout(decoder.descriptor, decoder.schema)
    dagger_batch = pa.RecordBatch.from_arrays(layout.convert(batch.columns), schema=layout.schema)

    encoded = ProtoEncoder(registry.message(ALL_TYPES)).encode(dagger_batch).to_pylist()

    decode = message_class(registry, ALL_TYPES).FromString
    assert [decode(payload) for payload in encoded] == messages


def test_a_dagger_layout_stream_shows_dagger_columns_to_the_sql(registry, descriptor_set):
    spec = parse_dagger(
        {
            "name": "layout",
            "schema_registry": {"descriptor_sets": [str(descriptor_set)]},
            "streams": [
                {
                    "kind": "kafka",
                    "table": "things",
                    "proto_message": ALL_TYPES,
                    "event_time_field": "event_time",
                    "topics": ["things"],
                    "bootstrap_servers": "localhost:9092",
                    "row_layout": "dagger",
                }
            ],
            "sql": "SELECT event_time.seconds FROM things",
            "sinks": [{"kind": "log"}],
        }
    )
    plan = resolve_plan(spec, spark_connect=False, registry=registry)
    schema = stream_view_schema(plan, plan.streams[0])
    fields = [field.name for field in registry.message(ALL_TYPES).fields]
    assert schema.names == [*fields, "__internal_validation_field__", "rowtime"]
    assert schema["event_time"].dataType.simpleString() == "struct<seconds:bigint,nanos:int>"
    assert schema["labels"].dataType.simpleString() == "array<struct<key:string,value:string>>"
    assert schema["rowtime"].dataType.simpleString() == "timestamp"
