"""Avro records in the Confluent wire format (magic byte 0, 4-byte schema id, Avro binary) decoded a whole
batch at a time into Arrow, in the stream's reader schema.

Avro binary has no per-record framing a columnar reader could use, but an Avro object container file is
just a header (the writer schema) and blocks of concatenated datums. So the records of one batch are
grouped by schema id, each group's datums are joined after its writer schema into one in-memory container,
and polars' native reader decodes the container into Arrow columns. No Python object is made per record:
the per-record work is slicing off the 5-byte header, done by `bytes.join`.

Writer schemas resolve to the reader schema the way Avro resolves them for the fields a collection's
schema can grow: a reader field the writer did not have is null, a field the reader does not have is
dropped. A record with a wrong magic byte, an unknown schema id or a datum its schema cannot read is
reported in `invalid`, with a row of nulls in its place, for the stream's invalid-record policy.
"""

from __future__ import annotations

import io
import json
import os
import struct
from collections.abc import Callable, Sequence
from typing import Any

import fastavro
import polars as pl
import pyarrow as pa

_WIRE_HEADER = struct.Struct(">bI")
_CONTAINER_MAGIC = b"Obj\x01"


class ConfluentAvroDecoder:
    """Decodes the batches of one stream; `writer_schema(id)` is a schema id's Avro schema (None: unknown)."""

    def __init__(
        self, reader_schema: dict[str, Any], writer_schema: Callable[[int], dict[str, Any] | None]
    ) -> None:
        self.reader_schema = reader_schema
        self._writer_schema = writer_schema
        self._writers: dict[int, dict[str, Any] | None] = {}
        self.schema = _decoded_schema(reader_schema)
        """The Arrow schema of decoded batches: the reader schema's fields, in its order."""

    def decode(self, payloads: Sequence[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        """The batch, aligned with `payloads`, and {index: error} of the records that are not valid."""
        invalid: dict[int, str] = {}
        groups: dict[int, list[int]] = {}
        for index, payload in enumerate(payloads):
            if len(payload) < _WIRE_HEADER.size or payload[0] != 0:
                invalid[index] = "not a Confluent wire-format record (no magic byte 0 and schema id)"
                continue
            schema_id = _WIRE_HEADER.unpack_from(payload)[1]
            if self._writer(schema_id) is None:
                invalid[index] = f"unknown schema id {schema_id}"
                continue
            groups.setdefault(schema_id, []).append(index)
        tables = []
        order: list[int] = []
        for schema_id, indexes in groups.items():
            table, bad = self._decode_group(schema_id, [payloads[index] for index in indexes])
            for position, error in bad.items():
                invalid[indexes[position]] = error
            tables.append(table)
            order += [index for position, index in enumerate(indexes) if position not in bad]
        nulls = sorted(invalid)
        if nulls:
            tables.append(pa.Table.from_batches([_null_batch(self.schema, len(nulls))]))
            order += nulls
        if not tables:
            return _null_batch(self.schema, 0), invalid
        combined = pa.concat_tables(tables)
        # Back to the input's order: row `order[k]` of the input is row k of the combined table.
        positions = pa.array(sorted(range(len(order)), key=order.__getitem__), pa.int64())
        return combined.take(positions).combine_chunks().to_batches()[0], invalid

    def _writer(self, schema_id: int) -> dict[str, Any] | None:
        if schema_id not in self._writers:
            self._writers[schema_id] = self._writer_schema(schema_id)
        return self._writers[schema_id]

    def _decode_group(self, schema_id: int, payloads: list[bytes]) -> tuple[pa.Table, dict[int, str]]:
        writer = self._writer(schema_id)
        assert writer is not None
        try:
            return self._conformed(_read_container(writer, payloads)), {}
        except Exception:  # polars rejects the whole block: find the culprits one by one (error path only)
            parsed = fastavro.parse_schema(writer)
            bad: dict[int, str] = {}
            for position, payload in enumerate(payloads):
                try:
                    fastavro.schemaless_reader(io.BytesIO(payload[_WIRE_HEADER.size :]), parsed)
                except Exception as error:
                    bad[position] = f"schema id {schema_id}: not a valid datum ({error})"
            good = [payload for position, payload in enumerate(payloads) if position not in bad]
            return self._conformed(_read_container(writer, good)), bad

    def _conformed(self, table: pa.Table) -> pa.Table:
        """`table` in the reader schema: its fields in order, missing ones null, types cast."""
        columns = []
        for field in self.schema:
            if field.name in table.column_names:
                columns.append(table.column(field.name).cast(field.type))
            else:
                columns.append(pa.nulls(table.num_rows, field.type))
        return pa.Table.from_arrays(columns, schema=self.schema)


def _read_container(writer: dict[str, Any], payloads: list[bytes]) -> pa.Table:
    """The datums of `payloads` (wire header cut off) as one container file, read by polars."""
    sync = os.urandom(16)
    body = b"".join(payload[_WIRE_HEADER.size :] for payload in payloads)
    container = io.BytesIO()
    container.write(_CONTAINER_MAGIC)
    metadata = {"avro.schema": json.dumps(writer).encode(), "avro.codec": b"null"}
    _write_long(container, len(metadata))
    for key, value in metadata.items():
        _write_bytes(container, key.encode())
        _write_bytes(container, value)
    _write_long(container, 0)
    container.write(sync)
    if payloads:
        _write_long(container, len(payloads))
        _write_long(container, len(body))
        container.write(body)
        container.write(sync)
    container.seek(0)
    return pl.read_avro(container).to_arrow()


def _decoded_schema(reader: dict[str, Any]) -> pa.Schema:
    """The Arrow schema polars gives the reader schema's records."""
    return _read_container(reader, []).schema


def _null_batch(schema: pa.Schema, rows: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([pa.nulls(rows, field.type) for field in schema], schema=schema)


def _write_long(out: io.BytesIO, value: int) -> None:
    """Avro's zig-zag varint."""
    encoded = (value << 1) ^ (value >> 63)
    while encoded & ~0x7F:
        out.write(bytes(((encoded & 0x7F) | 0x80,)))
        encoded >>= 7
    out.write(bytes((encoded,)))


def _write_bytes(out: io.BytesIO, value: bytes) -> None:
    _write_long(out, len(value))
    out.write(value)
