"""Avro records in the Confluent wire format (magic byte 0, 4-byte schema id, Avro binary) decoded a whole
batch at a time into Arrow, in the stream's reader schema.

Avro binary has no per-record framing a columnar reader could use, but an Avro object container file is
just a header (the writer schema) and blocks of concatenated datums. So the records of one batch are
grouped by schema id, each group's datums are joined after its writer schema into one in-memory container,
and polars' native reader decodes the container into Arrow columns. No Python object is made per record:
the headers are read, and cut off, with numpy over the batch's bytes as one Arrow binary array.

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
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

AvroSchema = dict[str, Any]
"""A parsed Avro record schema (`json.loads` of its text)."""

_WIRE_HEADER = struct.Struct(">bI")
_CONTAINER_MAGIC = b"Obj\x01"
_HEADER_PADDING = np.zeros(5, np.uint8)
NOT_WIRE_FORMAT = "not a Confluent wire-format record (no magic byte 0 and schema id)"
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


class _WireRecords:
    """A batch's payloads as one Arrow binary array, their wire headers read a column at a time with numpy
    (no Python object per record): which are framed as Confluent records, and their schema ids."""

    def __init__(self, payloads: Sequence[bytes]) -> None:
        values = pa.array(payloads, pa.binary())
        self.offsets = np.frombuffer(values.buffers()[1], np.int32, len(values) + 1).astype(np.int64)
        data = values.buffers()[2]
        # Padded, so a header read past the end of a short last record stays inside the buffer.
        self.data = np.concatenate(
            [np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8), _HEADER_PADDING]
        )
        starts = self.offsets[:-1]
        header = self.data[starts[:, None] + np.arange(_WIRE_HEADER.size)]
        self.framed = (self.offsets[1:] - starts >= _WIRE_HEADER.size) & (header[:, 0] == 0)
        self.schema_ids = header[:, 1:].astype(np.int64) @ np.array([1 << 24, 1 << 16, 1 << 8, 1], np.int64)

    def datums(self, indexes: np.ndarray) -> bytes:
        """The datums of the records at `indexes`, headers cut off, joined in that order."""
        starts = self.offsets[indexes] + _WIRE_HEADER.size
        lengths = self.offsets[indexes + 1] - starts
        shifts = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
        return self.data[np.arange(int(lengths.sum())) + shifts].tobytes()


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
        records = _WireRecords(payloads)
        invalid = {int(index): NOT_WIRE_FORMAT for index in np.flatnonzero(~records.framed)}
        groups: dict[int, np.ndarray] = {}
        for schema_id in np.unique(records.schema_ids[records.framed]).tolist():
            indexes = np.flatnonzero(records.framed & (records.schema_ids == schema_id))
            if self._writer(schema_id) is None:
                invalid.update((int(index), f"unknown schema id {schema_id}") for index in indexes)
            else:
                groups[schema_id] = indexes
        if len(groups) == 1 and not invalid:  # the usual case: one schema, input order kept
            [(schema_id, indexes)] = groups.items()
            table, bad = self._decode_group(schema_id, records, indexes)
            if not bad:
                return _single_batch(table), {}
        tables = []
        order: list[np.ndarray] = []
        for schema_id, indexes in groups.items():
            table, bad = self._decode_group(schema_id, records, indexes)
            for position, error in bad.items():
                invalid[int(indexes[position])] = error
            tables.append(table)
            order.append(np.delete(indexes, list(bad)))
        nulls = sorted(invalid)
        if nulls:
            tables.append(pa.Table.from_batches([_null_batch(self.schema, len(nulls))]))
            order.append(np.array(nulls, np.int64))
        if not tables:
            return _null_batch(self.schema, 0), invalid
        combined = pa.concat_tables(tables)
        # Back to the input's order: row `order[k]` of the input is row k of the combined table.
        positions = pa.array(np.argsort(np.concatenate(order), kind="stable"), pa.int64())
        return _single_batch(combined.take(positions)), invalid

    def _writer(self, schema_id: int) -> AvroSchema | None:
        if schema_id not in self._writers:
            self._writers[schema_id] = self._writer_schema(schema_id)
        return self._writers[schema_id]

    def _decode_group(
        self, schema_id: int, records: _WireRecords, indexes: np.ndarray
    ) -> tuple[pa.Table, dict[int, str]]:
        """The records at `indexes`, all written with `schema_id`, and {position in indexes: error}."""
        writer = self._writer(schema_id)
        assert writer is not None
        try:
            return self._conformed(self._read_container(writer, records.datums(indexes), len(indexes))), {}
        except Exception:  # polars rejects the whole block: find the culprits one by one (error path only)
            parsed = fastavro.parse_schema(writer)
            bad: dict[int, str] = {}
            for position, index in enumerate(indexes):
                try:
                    fastavro.schemaless_reader(io.BytesIO(records.datums(index[None])), parsed)
                except Exception as error:
                    bad[position] = f"schema id {schema_id}: not a valid datum ({error})"
            good = np.delete(indexes, list(bad))
            return self._conformed(self._read_container(writer, records.datums(good), len(good))), bad

    def _read_container(self, writer: AvroSchema, body: bytes, count: int) -> pa.Table:
        """`count` datums (`body`, wire headers cut off) as one container file, read by polars."""
        written = [field["name"] for field in writer["fields"]]
        # One column at least, so the table has the datums' row count when the reader wants none of them.
        columns = [name for name in self.schema.names if name in written] or written[:1]
        sync = os.urandom(16)
        container = io.BytesIO()
        container.write(_CONTAINER_MAGIC)
        metadata = {"avro.schema": json.dumps(_maps_as_entries(writer)).encode(), "avro.codec": b"null"}
        _write_long(container, len(metadata))
        for key, value in metadata.items():
            _write_bytes(container, key.encode())
            _write_bytes(container, value)
        _write_long(container, 0)
        container.write(sync)
        if count:
            _write_long(container, count)
            _write_long(container, len(body))
            container.write(body)
            container.write(sync)
        container.seek(0)
        # Imported here, not with the module: polars takes longer to import than the rest of the codec, and
        # every Python data source's planning process, started afresh for each query, imports this module
        # whether or not its stream is Avro.
        import polars as pl

        table = pl.read_avro(container, columns=columns).to_arrow()
        if table.num_rows != count:
            raise ValueError(f"{table.num_rows} rows decoded from {count} datums")
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
