"""Confluent wire-format Avro decoded a batch at a time: writer schemas resolved to the reader's, rows in
input order, bad records reported by index with a row of nulls."""

from __future__ import annotations

import io
import struct
from datetime import UTC, datetime

import fastavro

from jobs.codec.avro import ConfluentAvroDecoder

V1 = {
    "type": "record",
    "name": "heartbeat",
    "fields": [
        {"name": "user_id", "type": ["null", "string"], "default": None},
        {
            "name": "at",
            "type": ["null", {"type": "long", "logicalType": "timestamp-micros"}],
            "default": None,
        },
    ],
}
V2 = {
    **V1,
    "fields": [
        *V1["fields"],
        {"name": "tags", "type": ["null", {"type": "array", "items": ["null", "string"]}], "default": None},
    ],
}
SCHEMAS = {11: V1, 12: V2}
AT = datetime(2026, 11, 26, 10, tzinfo=UTC)


def record(schema_id: int, event: dict) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">bI", 0, schema_id))
    fastavro.schemaless_writer(out, fastavro.parse_schema(SCHEMAS[schema_id]), event)
    return out.getvalue()


def test_records_of_two_versions_decode_into_the_readers_columns_in_input_order():
    payloads = [
        record(12, {"user_id": "u1", "at": AT, "tags": ["a", None]}),
        record(11, {"user_id": "u2", "at": AT}),
        record(12, {"user_id": "u3", "at": None, "tags": []}),
    ]
    batch, invalid = ConfluentAvroDecoder(V2, SCHEMAS.get).decode(payloads)
    assert invalid == {}
    assert batch.schema.names == ["user_id", "at", "tags"]
    assert batch.to_pylist() == [
        {"user_id": "u1", "at": AT, "tags": ["a", None]},
        {"user_id": "u2", "at": AT, "tags": None},  # written before the field existed
        {"user_id": "u3", "at": None, "tags": []},
    ]


def test_an_older_reader_drops_the_fields_it_does_not_know():
    batch, _ = ConfluentAvroDecoder(V1, SCHEMAS.get).decode([record(12, {"user_id": "u1", "tags": ["x"]})])
    assert batch.to_pylist() == [{"user_id": "u1", "at": None}]


def test_bad_records_are_reported_by_index_and_keep_their_place():
    payloads = [
        record(11, {"user_id": "u1"}),
        b"plain text",
        struct.pack(">bI", 0, 99) + b"\x02a",
        struct.pack(">bI", 0, 12) + b"\x02\xff",  # a string longer than the datum
        record(12, {"user_id": "u5"}),
    ]
    batch, invalid = ConfluentAvroDecoder(V2, SCHEMAS.get).decode(payloads)
    assert sorted(invalid) == [1, 2, 3]
    assert "no magic byte" in invalid[1] and invalid[2] == "unknown schema id 99"
    assert invalid[3].startswith("schema id 12: not a valid datum")
    assert [row["user_id"] for row in batch.to_pylist()] == ["u1", None, None, None, "u5"]


def test_an_empty_batch_has_the_readers_columns():
    batch, invalid = ConfluentAvroDecoder(V2, SCHEMAS.get).decode([])
    assert (batch.num_rows, batch.schema.names, invalid) == (0, ["user_id", "at", "tags"], {})
