"""Arrow record batches encoded as Avro binary datums in the Confluent wire format, a column at a time.

A result row becomes one Kafka record value: magic byte 0, the 4-byte big-endian schema id, then the
row's Avro datum in the record schema `avro_schema_of` derives from the batch's schema (every field a
union of null and its type). Rows never become Python objects: each column is encoded over its whole
length with numpy, into *segments*, and the segments are joined row by row in one gather.

A segment list holds one byte string per row, `data[starts[i] : starts[i] + lengths[i]]`:

- numbers (zig-zag varints, IEEE floats, booleans) are rows of a small byte matrix, the union branch in
  its first column; a row's length says how many of its bytes count, so a null is just the branch byte;
- a string is a varint length (a matrix) then its bytes, read in place from the Arrow data buffer; a
  null's slot gets length 0, whatever its offsets say;
- a struct's fields are its children's segments with the lengths of null structs set to 0;
- a list's items are joined into one contiguous buffer first, so a row's items are a single slice of it
  (Arrow keeps a list's values in row order), between the block count and the end-of-blocks byte.

Joining K segment lists of n rows is one numpy gather over the output bytes: the source position of each
output byte is its own position plus its segment's shift (`np.repeat` of the shifts, plus a running
index). Batches are encoded in slices of about `_SLICE_BYTES` of Arrow data, which bounds that index (8
bytes an output byte) and the other temporaries.

| Arrow                                  | Avro (each in a union with null)      |
|----------------------------------------|---------------------------------------|
| bool                                   | boolean                               |
| int8, int16, int32, uint8, uint16      | int                                   |
| int64, uint32                          | long                                  |
| float32, float64                       | float, double                         |
| string, large_string                   | string                                |
| binary, large_binary                   | bytes                                 |
| timestamp (any unit and time zone)     | long `timestamp-micros` (ns: floored) |
| date32                                 | int `date`                            |
| struct                                 | record                                |
| list, large_list                       | array                                 |
| map with string keys                   | map                                   |
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

AvroSchema = dict[str, Any]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SLICE_BYTES = 1 << 20
_MAX_BINARY_BYTES = 2**31 - 1  # a BinaryArray's 32-bit offsets
_INTEGERS = {
    pa.int8(): ("int", np.int8),
    pa.int16(): ("int", np.int16),
    pa.int32(): ("int", np.int32),
    pa.uint8(): ("int", np.uint8),
    pa.uint16(): ("int", np.uint16),
    pa.int64(): ("long", np.int64),
    pa.uint32(): ("long", np.uint32),
}
_FLOATS = {pa.float32(): ("float", np.float32), pa.float64(): ("double", np.float64)}
_MICROS_PER_UNIT = {"s": 1_000_000, "ms": 1_000, "us": 1}
_ZERO_BYTE = np.zeros(1, np.uint8)


@dataclass(frozen=True)
class _Segments:
    """One byte string per row: `data[starts[i] : starts[i] + lengths[i]]` (int64 starts and lengths)."""

    data: np.ndarray
    starts: np.ndarray
    lengths: np.ndarray

    def masked(self, valid: np.ndarray) -> _Segments:
        """The rows where `valid` is false emptied (the bytes of a null's garbage slot, left out)."""
        return _Segments(self.data, self.starts, np.where(valid, self.lengths, 0))


_Encode = Callable[[pa.Array], list[_Segments]]
"""A column's rows as Avro `["null", T]` unions: segment lists to join row by row."""


def avro_schema_of(schema: pa.Schema, name: str) -> AvroSchema:
    """The Avro record schema of a batch schema: each column a nullable field, in column order."""
    return _record_plan(schema, name)[0]


class AvroEncoder:
    """Record batches of one Arrow schema -> Confluent wire-format Avro records, one per row."""

    def __init__(self, schema: pa.Schema, schema_id: int, name: str = "row") -> None:
        self.schema = schema
        self.avro_schema, self._encoders = _record_plan(schema, name)
        self._header = np.frombuffer(b"\x00" + schema_id.to_bytes(4, "big"), np.uint8)

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        """One record per row: magic byte 0, the schema id, the row's datum. Columns are taken by name."""
        columns = []
        for field in self.schema:
            if field.name not in batch.schema.names:
                raise ValueError(f"column {field.name!r}: not in the batch")
            column = batch.column(field.name)
            if column.type != field.type:
                raise ValueError(f"column {field.name!r}: type {column.type}, the encoder's is {field.type}")
            columns.append(column)
        rows = batch.num_rows
        slice_rows = max(1, _SLICE_BYTES * rows // max(1, sum(column.nbytes for column in columns)))
        data, lengths = [], []
        for start in range(0, rows, slice_rows):
            size = min(slice_rows, rows - start)
            parts = [_Segments(self._header, np.zeros(size, np.int64), np.full(size, len(self._header)))]
            for column, encode in zip(columns, self._encoders, strict=True):
                parts += encode(column.slice(start, size))
            joined = _joined(parts)
            data.append(joined.data)
            lengths.append(joined.lengths)
        if not rows:
            return pa.array([], pa.binary())
        offsets = np.zeros(rows + 1, np.int64)
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
        if offsets[-1] > _MAX_BINARY_BYTES:
            raise ValueError(f"{offsets[-1]} bytes of records: over a BinaryArray's 2 GiB, encode slices")
        buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(np.concatenate(data))]
        return pa.Array.from_buffers(pa.binary(), rows, buffers)


# Planning: the Avro type of each Arrow type, and the function that encodes its columns.


def _record_plan(schema: pa.Schema, name: str) -> tuple[AvroSchema, list[_Encode]]:
    if not all(_NAME.fullmatch(part) for part in name.split(".")):
        raise ValueError(f"record name {name!r} is not a valid Avro name")
    record_names: set[str] = set()
    fields, encoders = _fields_plan(list(schema), "", name.rsplit(".", 1)[-1], record_names)
    return {"type": "record", "name": name, "fields": fields}, encoders


def _fields_plan(
    fields: list[pa.Field], parent: str, record_name: str, record_names: set[str]
) -> tuple[list[AvroSchema], list[_Encode]]:
    avro_fields, encoders, seen = [], [], set()
    for field in fields:
        path = f"{parent}.{field.name}" if parent else field.name
        if not _NAME.fullmatch(field.name):
            raise ValueError(
                f"column {path!r}: {field.name!r} is not a valid Avro name ([A-Za-z_][A-Za-z0-9_]*)"
            )
        if field.name in seen:
            raise ValueError(f"column {path!r}: a second field of that name (Avro names must be unique)")
        seen.add(field.name)
        avro_type, encode = _plan(field.type, path, f"{record_name}_{field.name}", record_names)
        avro_fields.append({"name": field.name, "type": ["null", avro_type], "default": None})
        encoders.append(encode)
    return avro_fields, encoders


def _plan(
    arrow_type: pa.DataType, path: str, record_name: str, record_names: set[str]
) -> tuple[Any, _Encode]:
    """The Avro type of `arrow_type` and the encoder of its columns; `path` names the column in errors,
    `record_name` is the name a struct's record gets (made unique in `record_names`)."""
    if arrow_type in _INTEGERS:
        avro_name, dtype = _INTEGERS[arrow_type]
        return avro_name, lambda array: [_integer(array, dtype)]
    if arrow_type in _FLOATS:
        avro_name, dtype = _FLOATS[arrow_type]
        return avro_name, lambda array: [_float(array, dtype)]
    if pa.types.is_boolean(arrow_type):
        return "boolean", lambda array: [_boolean(array)]
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return "string", lambda array: _bytes(array, _validity(array))
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return "bytes", lambda array: _bytes(array, _validity(array))
    if pa.types.is_timestamp(arrow_type):
        return {"type": "long", "logicalType": "timestamp-micros"}, lambda array: [_timestamp(array)]
    if pa.types.is_date32(arrow_type):
        return {"type": "int", "logicalType": "date"}, lambda array: [_integer(array, np.int32)]
    if pa.types.is_struct(arrow_type):
        return _struct_plan(arrow_type, path, record_name, record_names)
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        items, encode_items = _plan(arrow_type.value_type, f"{path}[]", record_name, record_names)
        return {"type": "array", "items": ["null", items]}, lambda array: _list(array, encode_items)
    if pa.types.is_map(arrow_type) and arrow_type.key_type in (pa.string(), pa.large_string()):
        values, encode_values = _plan(arrow_type.item_type, f"{path}{{}}", record_name, record_names)
        return {"type": "map", "values": ["null", values]}, lambda array: _map(array, encode_values)
    raise ValueError(f"column {path!r}: Arrow type {arrow_type} has no Avro encoding")


def _struct_plan(
    arrow_type: pa.StructType, path: str, record_name: str, record_names: set[str]
) -> tuple[AvroSchema, _Encode]:
    unique_name, suffix = record_name, 1
    while unique_name in record_names:  # `a.b_c` and `a_b.c` would both be `row_a_b_c`
        suffix += 1
        unique_name = f"{record_name}_{suffix}"
    record_names.add(unique_name)
    fields, encoders = _fields_plan(list(arrow_type), path, unique_name, record_names)

    def encode(array: pa.StructArray) -> list[_Segments]:
        valid = _validity(array)
        parts = [_fixed_width_values(np.empty((len(array), 0), np.uint8), valid)]
        for index, encode_field in enumerate(encoders):
            field_parts = encode_field(array.field(index))
            parts += field_parts if valid.all() else [part.masked(valid) for part in field_parts]
        return parts

    return {"type": "record", "name": unique_name, "fields": fields}, encode


# Encoding: each function gives a column's rows as segments, the union branch (0 null, 2 value) first.


def _integer(array: pa.Array, dtype: type[np.generic]) -> _Segments:
    return _varints(_values(array, dtype).astype(np.int64), _validity(array))


def _timestamp(array: pa.Array) -> _Segments:
    ticks = _values(array, np.int64)
    if array.type.unit == "ns":
        return _varints(ticks // 1_000, _validity(array))  # floored to the microsecond, as datetime does
    return _varints(ticks * _MICROS_PER_UNIT[array.type.unit], _validity(array))


def _float(array: pa.Array, dtype: type[np.generic]) -> _Segments:
    """IEEE floats: Arrow's value bytes (little-endian, like the platforms numpy and Arrow run on)."""
    values = _values(array, dtype).view(np.uint8).reshape(len(array), np.dtype(dtype).itemsize)
    return _fixed_width_values(values, _validity(array))


def _boolean(array: pa.Array) -> _Segments:
    values = _bits(array.buffers()[1], array.offset, len(array))
    return _fixed_width_values(values.view(np.uint8).reshape(-1, 1), _validity(array))


def _bytes(array: pa.Array, valid: np.ndarray | None) -> list[_Segments]:
    """Strings and bytes: length then bytes, read in place from the Arrow data buffer. `valid` None: not
    in a union (a map's keys)."""
    offsets = _offsets(array)
    lengths = np.diff(offsets)
    if valid is not None:
        lengths = np.where(valid, lengths, 0)
    data = array.buffers()[2]
    data = np.frombuffer(data, np.uint8)[offsets[0] : offsets[-1]] if data is not None else _ZERO_BYTE[:0]
    return [_varints(lengths, valid), _Segments(data, offsets[:-1] - offsets[0], lengths)]


def _list(array: pa.Array, encode_items: _Encode) -> list[_Segments]:
    offsets = _offsets(array)
    items = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return _blocks(array, offsets, _joined(encode_items(items)))


def _map(array: pa.MapArray, encode_values: _Encode) -> list[_Segments]:
    offsets = _offsets(array)
    entries = array.values.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    keys, values = entries.field(0), entries.field(1)
    return _blocks(array, offsets, _joined(_bytes(keys, None) + encode_values(values)))


def _blocks(array: pa.Array, offsets: np.ndarray, items: _Segments) -> list[_Segments]:
    """A list's or map's rows from its encoded items (contiguous, in row order): one block (the count,
    then the row's items) and the 0 that ends the blocks; an empty one is just that 0."""
    valid = _validity(array)
    counts = np.where(valid, np.diff(offsets), 0)
    item_bounds = np.append(items.starts, len(items.data))[offsets - offsets[0]]
    row_items = _Segments(items.data, item_bounds[:-1], np.diff(item_bounds)).masked(valid)
    end = _Segments(_ZERO_BYTE, np.zeros(len(array), np.int64), (counts > 0).astype(np.int64))
    return [_varints(counts, valid), row_items, end]


def _varints(values: np.ndarray, valid: np.ndarray | None) -> _Segments:
    """int64 values as zig-zag varints, after the union branch unless `valid` is None."""
    zigzag = ((values << 1) ^ (values >> 63)).view(np.uint64)
    width = max(1, (int(zigzag.max(initial=0)).bit_length() + 6) // 7)
    sizes = np.ones(len(values), np.int64)  # bytes of each varint
    for byte in range(1, width):
        sizes += zigzag >> np.uint64(7 * byte) != 0
    branch = 0 if valid is None else 1
    matrix = np.empty((len(values), branch + width), np.uint8)
    for byte in range(width):
        low_bits = (zigzag >> np.uint64(7 * byte)).astype(np.uint8) & 0x7F
        matrix[:, branch + byte] = low_bits | (sizes > byte + 1).view(np.uint8) << 7
    if valid is None:
        return _rows_of(matrix, sizes)
    matrix[:, 0] = valid.view(np.uint8) << 1
    return _rows_of(matrix, np.where(valid, 1 + sizes, 1))


def _fixed_width_values(values: np.ndarray, valid: np.ndarray) -> _Segments:
    """Rows of a (rows, width) byte matrix after the union branch."""
    matrix = np.empty((len(values), 1 + values.shape[1]), np.uint8)
    matrix[:, 0] = valid.view(np.uint8) << 1
    matrix[:, 1:] = values
    return _rows_of(matrix, np.where(valid, matrix.shape[1], 1))


def _rows_of(matrix: np.ndarray, lengths: np.ndarray) -> _Segments:
    """The first `lengths[i]` bytes of each row of a byte matrix."""
    starts = np.arange(len(matrix), dtype=np.int64) * matrix.shape[1]
    return _Segments(matrix.reshape(-1), starts, lengths.astype(np.int64))


def _joined(parts: list[_Segments]) -> _Segments:
    """Each row's bytes of all parts, in order, as contiguous segments: one gather over the output."""
    rows = len(parts[0].lengths)
    # Row-major (rows, parts) matrices list the segments in output order.
    lengths = np.empty((rows, len(parts)), np.int64)
    shifts = np.empty((rows, len(parts)), np.int64)  # source minus output position of a segment's bytes
    base = 0  # where the part's data starts in the concatenated sources
    for index, part in enumerate(parts):
        lengths[:, index] = part.lengths
        np.add(part.starts, base, out=shifts[:, index])
        base += len(part.data)
    row_lengths = lengths.sum(axis=1)
    lengths, shifts = lengths.reshape(-1), shifts.reshape(-1)
    output_starts = np.cumsum(lengths) - lengths
    shifts -= output_starts
    gather = np.repeat(shifts, lengths)
    gather += np.arange(len(gather))
    data = np.concatenate([part.data for part in parts])[gather]
    return _Segments(data, output_starts[:: len(parts)], row_lengths)


# Arrow buffers as numpy arrays, sliced arrays included.


def _validity(array: pa.Array) -> np.ndarray:
    if array.null_count == 0:
        return np.ones(len(array), bool)
    return _bits(array.buffers()[0], array.offset, len(array))


def _bits(buffer: pa.Buffer, offset: int, length: int) -> np.ndarray:
    if length == 0:
        return np.zeros(0, bool)
    first = offset // 8
    raw = np.frombuffer(buffer, np.uint8, (offset + length + 7) // 8 - first, first)
    return np.unpackbits(raw, bitorder="little")[offset % 8 : offset % 8 + length].view(bool)


def _values(array: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """A fixed-width array's value slots (a null's slot holds anything)."""
    if len(array) == 0:
        return np.zeros(0, dtype)
    size = np.dtype(dtype).itemsize
    return np.frombuffer(array.buffers()[1], dtype, len(array), array.offset * size)


def _offsets(array: pa.Array) -> np.ndarray:
    """The int64 offsets of a string, binary, list or map array's rows."""
    large = array.type in (pa.large_string(), pa.large_binary()) or pa.types.is_large_list(array.type)
    dtype = np.int64 if large else np.int32
    size = np.dtype(dtype).itemsize
    if len(array) == 0:
        return np.zeros(1, np.int64)
    return np.frombuffer(array.buffers()[1], dtype, len(array) + 1, array.offset * size).astype(np.int64)
