"""A collection's Avro schema grown from JSON events: inferred types, conflicts, and old records read with
the new schema (fastavro resolves the writer's schema to the reader's)."""

from __future__ import annotations

import io

import fastavro
import pytest

from jobs.collection.schema import (
    DOUBLE,
    LONG,
    STRING,
    TIMESTAMP,
    CollectionSchema,
    Field,
    InvalidPropertyError,
    SchemaConflictError,
    inferred_type,
)

EMPTY = CollectionSchema("shop", "pageview")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("home", STRING),
        ("2026-11-26T10:00:00Z", TIMESTAMP),
        ("2026-11-26T10:00:00.123+05:30", TIMESTAMP),
        ("2026-11-26", STRING),  # a date without a time is not an instant
        ("2026-13-40T10:00:00Z", STRING),  # shaped like one, but no such day
        (3, LONG),
        (3.5, DOUBLE),
        (True, "boolean"),
        ([1, 2], {"type": "array", "items": LONG}),
        ([None, 1, 2.5], {"type": "array", "items": DOUBLE}),
        ({"a": "x"}, {"type": "map", "values": STRING}),
        (None, None),
        ([], None),
        ({}, None),
    ],
)
def test_types_inferred_from_json_values(value, expected):
    assert inferred_type(value) == expected


def test_new_properties_append_fields_in_arrival_order_and_a_known_schema_is_kept():
    first = EMPTY.evolved([{"url": "/", "ms": 120}, {"url": "/a", "ratio": 0.5, "note": None}])
    assert first.fields == (Field("url", STRING), Field("ms", LONG), Field("ratio", DOUBLE))
    assert first.evolved([{"url": "/b", "ms": 3, "ratio": 1}]) is first  # a double field takes an integer


def test_a_conflicting_value_names_the_collection_the_field_and_both_types():
    schema = EMPTY.evolved([{"ms": 120}])
    with pytest.raises(SchemaConflictError, match=r"collection pageview: field 'ms' is long, .* is string"):
        schema.evolved([{"ms": "slow"}])
    with pytest.raises(SchemaConflictError, match=r"field 'ms' is long, the event's value is double"):
        schema.evolved([{"ms": 1.5}])
    with pytest.raises(
        SchemaConflictError, match=r"property 'tags' mixes types in one value \(long, string\)"
    ):
        schema.evolved([{"tags": [1, "a"]}])


def test_a_conflict_anywhere_in_a_request_adds_no_field():
    schema = EMPTY.evolved([{"ms": 1}])
    with pytest.raises(SchemaConflictError):
        schema.evolved([{"new": "x"}, {"ms": "slow"}])
    assert schema.fields == (Field("ms", LONG),)  # the schema object is never changed in place


@pytest.mark.parametrize("name", ["1st", "with space", "dash-ed", "dot.ted", ""])
def test_a_property_name_avro_cannot_take_is_refused_by_name(name):
    with pytest.raises(InvalidPropertyError, match=f"property {name!r} is not a valid field name"):
        EMPTY.evolved([{name: 1}])


def test_records_written_before_a_field_existed_read_it_as_null():
    old = EMPTY.evolved([{"url": "/", "ms": 1}])
    new = old.evolved([{"at": "2026-11-26T10:00:00Z", "tags": ["a", None], "seen": {"x": 1}}])
    written = io.BytesIO()
    fastavro.schemaless_writer(written, fastavro.parse_schema(old.to_avro()), {"url": "/", "ms": 7})
    written.seek(0)
    record = fastavro.schemaless_reader(
        written, fastavro.parse_schema(old.to_avro()), fastavro.parse_schema(new.to_avro())
    )
    assert record == {"url": "/", "ms": 7, "at": None, "tags": None, "seen": None}
    assert CollectionSchema.from_avro("shop", "pageview", new.to_avro()) == new
