"""Avro records in the Confluent wire format (magic byte 0, 4-byte schema id, Avro binary) decoded a whole
batch at a time into Arrow, in the stream's reader schema.

Avro binary has no per-record framing a columnar reader could use, but an Avro object container file is
just a header (the writer schema) and blocks of concatenated datums. So the records of one batch are
grouped by schema id, each group's datums are joined after its writer schema into one in-memory container,
and polars' native reader decodes the container into Arrow columns. No Python object is made per record:
the per-record work is slicing off the 5-byte header, done by `bytes.join`.

polars cannot read Avro maps, but a map's binary encoding is the same as that of an array of
`{key: string, value: V}` records (blocks of counted entries, each a key then a value). The writer schema
handed to polars says so, and the entries are turned back into an Arrow map afterwards.

Writer schemas resolve to the reader schema the way Avro resolves them for the fields a collection's
schema can grow: a reader field the writer did not have is null, a field the reader does not have is
dropped, and numbers are promoted. A record with a wrong magic byte, an unknown schema id or a datum its
schema cannot read is reported in `invalid`, with a row of nulls in its place, for the stream's
invalid-record policy.

| Avro                                   | Arrow / Spark                         |
|----------------------------------------|---------------------------------------|
| boolean, int, long, float, double      | bool, int32, int64, float, double     |
| string, enum, `uuid`                   | string / STRING                       |
| bytes, fixed                           | binary / BINARY                       |
| `timestamp-millis`, `timestamp-micros` | timestamp[us, UTC] / TIMESTAMP        |
| `date`                                 | date32 / DATE                         |
| record                                 | struct / STRUCT                       |
| array<T>                               | list / ARRAY<T>                       |
| map<V>                                 | map<string, V> / MAP<STRING, V>       |
| union of null and T                    | T, nullable                           |
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
import pyarrow.compute as pc

AvroSchema = dict[str, Any]
"""A parsed Avro record schema (`json.loads` of its text)."""

_WIRE_HEADER = struct.Struct(">bI")
_CONTAINER_MAGIC = b"Obj\x01"
_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}
_LOGICAL = {
    "timestamp-millis": pa.timestamp("us", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "date": pa.date32(),
    "uuid": pa.string(),
}


class AvroSchemaError(ValueError):
    """An Avro schema a stream cannot turn into columns."""


def arrow_schema(record: AvroSchema) -> pa.Schema:
    """The Arrow schema of an Avro record schema's rows (see the module's table)."""
    if not isinstance(record, dict) or record.get("type") != "record":
        raise AvroSchemaError("an Avro stream's schema must be a record")
    return pa.schema(
        [pa.field(field["name"], _arrow_type(field["type"], field["name"])) for field in record["fields"]]
    )


def _arrow_type(avro_type: Any, where: str) -> pa.DataType:
    if isinstance(avro_type, list):  # a union: only null and one other type have a column type
        branches = [branch for branch in avro_type if branch != "null"]
        if len(branches) != 1:
            raise AvroSchemaError(f"field {where!r}: a union of {avro_type} has no single column type")
        return _arrow_type(branches[0], where)
    if isinstance(avro_type, str):
        if avro_type in _PRIMITIVES:
            return _PRIMITIVES[avro_type]
        raise AvroSchemaError(
            f"field {where!r}: type {avro_type!r} (a named type reference) is not supported"
        )
    kind = avro_type["type"]
    if avro_type.get("logicalType") in _LOGICAL:
        return _LOGICAL[avro_type["logicalType"]]
    if kind == "record":
        return pa.struct(
            [pa.field(f["name"], _arrow_type(f["type"], f"{where}.{f['name']}")) for f in avro_type["fields"]]
        )
    if kind == "array":
        return pa.list_(_arrow_type(avro_type["items"], f"{where}[]"))
    if kind == "map":
        return pa.map_(pa.string(), _arrow_type(avro_type["values"], f"{where}{{}}"))
    if kind == "enum":
        return pa.string()
    if kind == "fixed":
        return pa.binary()
    return _arrow_type(kind, where)


class ConfluentAvroDecoder:
    """Decodes the batches of one stream.

    `writer_schema(id)` is a schema id's Avro schema (None: no such id). With `fields`, only those fields
    of the reader schema are decoded.
    """

    def __init__(
        self,
        reader_schema: AvroSchema,
        writer_schema: Callable[[int], AvroSchema | None],
        fields: Sequence[str] | None = None,
    ) -> None:
        self.reader_schema = reader_schema
        self._writer_schema = writer_schema
        self._writers: dict[int, AvroSchema | None] = {}
        full = arrow_schema(reader_schema)
        self.schema = full if fields is None else pa.schema([full.field(name) for name in fields])
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
        if len(groups) == 1 and not invalid:  # the usual case: one schema, input order kept
            schema_id, _ = groups.popitem()
            table, bad = self._decode_group(schema_id, payloads)
            if not bad:
                return _single_batch(table), {}
            groups = {schema_id: list(range(len(payloads)))}
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
        return _single_batch(combined.take(positions)), invalid

    def _writer(self, schema_id: int) -> AvroSchema | None:
        if schema_id not in self._writers:
            self._writers[schema_id] = self._writer_schema(schema_id)
        return self._writers[schema_id]

    def _decode_group(self, schema_id: int, payloads: Sequence[bytes]) -> tuple[pa.Table, dict[int, str]]:
        writer = self._writer(schema_id)
        assert writer is not None
        try:
            return self._conformed(self._read_container(writer, payloads)), {}
        except Exception:  # polars rejects the whole block: find the culprits one by one (error path only)
            parsed = fastavro.parse_schema(writer)
            bad: dict[int, str] = {}
            for position, payload in enumerate(payloads):
                try:
                    fastavro.schemaless_reader(io.BytesIO(payload[_WIRE_HEADER.size :]), parsed)
                except Exception as error:
                    bad[position] = f"schema id {schema_id}: not a valid datum ({error})"
            good = [payload for position, payload in enumerate(payloads) if position not in bad]
            return self._conformed(self._read_container(writer, good)), bad

    def _read_container(self, writer: AvroSchema, payloads: Sequence[bytes]) -> pa.Table:
        """The datums of `payloads` (wire header cut off) as one container file, read by polars."""
        written = [field["name"] for field in writer["fields"]]
        # One column at least, so the table has the datums' row count when the reader wants none of them.
        columns = [name for name in self.schema.names if name in written] or written[:1]
        sync = os.urandom(16)
        body = b"".join(payload[_WIRE_HEADER.size :] for payload in payloads)
        container = io.BytesIO()
        container.write(_CONTAINER_MAGIC)
        metadata = {"avro.schema": json.dumps(_maps_as_entries(writer)).encode(), "avro.codec": b"null"}
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
        table = pl.read_avro(container, columns=columns).to_arrow()
        if table.num_rows != len(payloads):
            raise ValueError(f"{table.num_rows} rows decoded from {len(payloads)} datums")
        return table

    def _conformed(self, table: pa.Table) -> pa.Table:
        """`table` in the reader schema: its fields in order, missing ones null, types converted."""
        columns = []
        for field in self.schema:
            if field.name in table.column_names:
                columns.append(_converted(table.column(field.name).combine_chunks(), field.type))
            else:
                columns.append(pa.nulls(table.num_rows, field.type))
        return pa.Table.from_arrays(columns, schema=self.schema)


def _maps_as_entries(avro_type: Any) -> Any:
    """`avro_type` with every map written as the array of key/value records it is encoded as."""
    if isinstance(avro_type, list):
        return [_maps_as_entries(branch) for branch in avro_type]
    if not isinstance(avro_type, dict):
        return avro_type
    kind = avro_type["type"]
    if kind == "record":
        fields = [{**field, "type": _maps_as_entries(field["type"])} for field in avro_type["fields"]]
        return {**avro_type, "fields": fields}
    if kind == "array":
        return {**avro_type, "items": _maps_as_entries(avro_type["items"])}
    if kind == "map":
        entry = {
            "type": "record",
            "name": f"map_entry_{os.urandom(6).hex()}",  # unique among the schema's named types
            "fields": [
                {"name": "key", "type": "string"},
                {"name": "value", "type": _maps_as_entries(avro_type["values"])},
            ],
        }
        return {"type": "array", "items": entry}
    return avro_type


def _converted(array: pa.Array, target: pa.DataType) -> pa.Array:
    """A column as polars gives it (large types, maps as entry lists) in the reader's type."""
    if pa.types.is_map(target):
        entries = array.cast(
            pa.list_(pa.struct([("key", pa.string()), ("value", array.type.value_type[1].type)]))
        )
        offsets = pc.subtract(entries.offsets, entries.offsets[0])
        items = entries.flatten()
        keys = items.field("key")
        values = _converted(items.field("value"), target.item_type)
        return pa.MapArray.from_arrays(offsets, keys, values, type=target, mask=entries.is_null())
    if pa.types.is_struct(target):
        children = [_converted(array.field(field.name), field.type) for field in target]
        return pa.StructArray.from_arrays(children, fields=list(target), mask=array.is_null())
    if pa.types.is_list(target):
        lists = array.cast(pa.list_(array.type.value_type)) if pa.types.is_large_list(array.type) else array
        offsets = pc.subtract(lists.offsets, lists.offsets[0])
        values = _converted(lists.flatten(), target.value_type)
        return pa.ListArray.from_arrays(offsets, values, type=target, mask=lists.is_null())
    if pa.types.is_dictionary(array.type):  # an enum
        return array.cast(pa.string())
    return array.cast(target)


def _single_batch(table: pa.Table) -> pa.RecordBatch:
    return table.combine_chunks().to_batches()[0] if table.num_rows else _null_batch(table.schema, 0)


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
