"""Arrow -> protobuf, whole batches at a time, through the native `ptars` codec (`ProtoEncoder`).

Encoding fills an output message from result columns by name; `a.b` columns fill nested fields; values in
Dagger's layout are accepted too. Columns that name no field are ignored (a SQL result usually carries
helper columns); a column whose type cannot fill its field is an `EncodeError` naming the column, the
field and both types.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.codec.protobuf_dagger_layout import from_seconds_nanos, is_seconds_nanos
from jobs.codec.protobuf_json import JsonColumns
from jobs.codec.protobuf_types import (
    DURATION,
    JSON_WELL_KNOWN_TYPES,
    TIMESTAMP,
    WRAPPERS,
    EncodeError,
    codec_handler,
    element_view,
    is_map,
    is_repeated,
    proto_type_name,
)

_INTEGER_TYPES = {
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
}
_FLOAT_TYPES = {pa.float16(), pa.float32(), pa.float64()}


def _spark_type_name(arrow_type: pa.DataType) -> str:
    from pyspark.sql.pandas.types import from_arrow_type

    try:
        return from_arrow_type(arrow_type).simpleString()
    except Exception:
        return str(arrow_type)


class ProtoEncoder:
    """Result columns -> serialized messages of the output type, one per row."""

    def __init__(self, descriptor: Descriptor) -> None:
        self.descriptor = descriptor
        self._handler = codec_handler(descriptor)
        # Nullable throughout: SQL results carry nulls anywhere, and an absent value encodes as the default.
        self._codec_schema = pa.schema([_nullable(field) for field in self._handler.schema()])
        self._json_codecs: dict[str, JsonColumns] = {}

    def encode(self, batch: pa.RecordBatch) -> pa.BinaryArray:
        columns = _nest_dotted_columns(batch, self.descriptor)
        fields, arrays, json_fields = [], [], []
        for codec_field in self._codec_schema:
            if codec_field.name not in columns:
                continue
            field = self.descriptor.fields_by_name[codec_field.name]
            if field.message_type is not None and field.message_type.full_name in JSON_WELL_KNOWN_TYPES:
                json_fields.append((field, columns[codec_field.name]))
                continue
            arrays.append(self._conform(columns[codec_field.name], codec_field.type, field, codec_field.name))
            fields.append(codec_field)
        if arrays:
            encoded = self._handler.record_batch_to_array(
                pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))
            )
        else:
            encoded = pa.array([b""] * batch.num_rows, pa.binary())
        return self._append_json_fields(encoded, json_fields) if json_fields else encoded

    def _append_json_fields(self, encoded: pa.BinaryArray, json_fields: list) -> pa.BinaryArray:
        """Struct-typed fields, appended as length-delimited fields: concatenated protobuf is a merge."""
        rows = encoded.to_pylist()
        for field, array in json_fields:
            if pa.types.is_null(array.type):
                continue
            if not pa.types.is_string(array.type):
                raise self._mismatch(field.name, array, field, " (expects a JSON string)")
            codec = self._json_codecs.setdefault(
                field.message_type.full_name, JsonColumns(field.message_type)
            )
            tag = _varint(field.number << 3 | 2)
            for index, payload in enumerate(codec.serialized(array, field.name)):
                if payload is not None:
                    rows[index] += tag + _varint(len(payload)) + payload
        return pa.array(rows, pa.binary())

    def _mismatch(
        self, column: str, array: pa.Array, field: FieldDescriptor, detail: str = ""
    ) -> EncodeError:
        return EncodeError(
            f"column {column!r}: type mismatch, {_spark_type_name(array.type)} cannot fill field "
            f"{field.containing_type.full_name}.{field.name} of type {proto_type_name(field)}{detail}"
        )

    def _conform(self, array: pa.Array, target: pa.DataType, field: FieldDescriptor, column: str) -> pa.Array:
        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        if pa.types.is_null(array.type):  # `SELECT NULL AS x`: leave the field unset
            return pa.nulls(len(array), target)
        message = field.message_type
        if is_map(field):
            if _is_entry_list(array.type):  # Dagger's layout: ARRAY<STRUCT<key, value>>
                entries = array.flatten()
                keys, values = entries.flatten()
                offsets = pc.subtract(array.offsets, array.offsets[0])
                array = pa.MapArray.from_arrays(offsets, keys, values, mask=array.is_null())
            if not pa.types.is_map(array.type):
                raise self._mismatch(column, array, field)
            key_field, value_field = message.fields_by_name["key"], message.fields_by_name["value"]
            keys = self._conform_scalar(array.keys, target.key_type, key_field, f"{column} key")
            items = self._conform_value(array.items, target.item_type, value_field, f"{column} value")
            offsets = pc.subtract(array.offsets, array.offsets[0])
            return pa.MapArray.from_arrays(offsets, keys, items, type=target, mask=array.is_null())
        if is_repeated(field):
            if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
                raise self._mismatch(column, array, field)
            values = self._conform_value(
                array.flatten(), target.value_type, element_view(field), f"{column}[]"
            )
            offsets = pc.subtract(array.offsets, array.offsets[0])
            return pa.ListArray.from_arrays(offsets, values, type=target, mask=array.is_null())
        return self._conform_value(array, target, field, column)

    def _conform_value(
        self, array: pa.Array, target: pa.DataType, field: FieldDescriptor, column: str
    ) -> pa.Array:
        message = field.message_type
        if message is not None and message.full_name in JSON_WELL_KNOWN_TYPES:
            raise EncodeError(
                f"column {column!r}: {message.full_name} fields are written only at the top level of the "
                f"output message, not inside {field.containing_type.full_name}"
            )
        seconds_and_nanos = message is not None and message.full_name in (TIMESTAMP, DURATION)
        if seconds_and_nanos and is_seconds_nanos(array.type):
            return from_seconds_nanos(array, target)
        if message is not None and message.full_name in WRAPPERS and pa.types.is_struct(array.type):
            if [child.name for child in array.type] != ["value"]:
                raise self._mismatch(column, array, field, " (expects a value or a STRUCT<value>)")
            return self._conform_scalar(array.flatten()[0], target, field, column)
        if message is not None and message.full_name == TIMESTAMP:
            if not pa.types.is_timestamp(array.type):
                raise self._mismatch(column, array, field)
            return pc.cast(array, target)
        if message is not None and pa.types.is_struct(target):
            if not pa.types.is_struct(array.type):
                raise self._mismatch(column, array, field)
            present = {
                array.type.field(index).name: array.field(index) for index in range(array.type.num_fields)
            }
            for name in present:
                if name not in message.fields_by_name:
                    raise EncodeError(
                        f"column {f'{column}.{name}'!r}: {message.full_name} has no field {name!r} "
                        f"(fields: {', '.join(message.fields_by_name)})"
                    )
            children, child_fields = [], []
            for child_target in target:
                child = present.get(child_target.name)
                if child is None:
                    children.append(pa.nulls(len(array), child_target.type))
                else:
                    child_field = message.fields_by_name[child_target.name]
                    path = f"{column}.{child_target.name}"
                    children.append(self._conform(child, child_target.type, child_field, path))
                child_fields.append(child_target)
            return pa.StructArray.from_arrays(children, fields=child_fields, mask=array.is_null())
        return self._conform_scalar(array, target, field, column)

    def _conform_scalar(
        self, array: pa.Array, target: pa.DataType, field: FieldDescriptor, column: str
    ) -> pa.Array:
        if field.enum_type is not None:
            return self._conform_enum(array, field, column)
        source = array.type
        if source == target:
            return array
        numeric_ok = (source in _INTEGER_TYPES and (target in _INTEGER_TYPES or target in _FLOAT_TYPES)) or (
            source in _FLOAT_TYPES and target in _FLOAT_TYPES
        )
        if numeric_ok or (
            pa.types.is_decimal(source) and (target in _FLOAT_TYPES or target in _INTEGER_TYPES)
        ):
            # int64 -> uint64 wraps back what decoding wrapped; floats narrow as Java would
            wraps = source == pa.int64() and target == pa.uint64()
            try:
                return pc.cast(array, target, safe=not (wraps or source in _FLOAT_TYPES))
            except pa.ArrowInvalid as error:
                raise self._mismatch(column, array, field, f": {error}") from None
        if pa.types.is_large_string(source) and pa.types.is_string(target):
            return pc.cast(array, target)
        if pa.types.is_large_binary(source) and pa.types.is_binary(target):
            return pc.cast(array, target)
        raise self._mismatch(column, array, field)

    def _conform_enum(self, array: pa.Array, field: FieldDescriptor, column: str) -> pa.Array:
        enum = field.enum_type
        if pa.types.is_integer(array.type):
            by_number = enum.values_by_number
            numbers = pc.unique(array.drop_null()).to_pylist()
            unknown = [number for number in numbers if number not in by_number]
            if unknown:
                raise EncodeError(
                    f"column {column!r}: {unknown[0]} is not a number of enum {enum.full_name} "
                    f"(field {field.name}; numbers: {sorted(by_number)})"
                )
            keys = pa.array(sorted(by_number), array.type)
            names = pa.array([by_number[number].name for number in sorted(by_number)], pa.string())
            return pc.take(names, pc.index_in(array, value_set=keys))
        if not pa.types.is_string(array.type):
            raise self._mismatch(column, array, field)
        names = pa.array(list(enum.values_by_name), pa.string())
        present = array.drop_null()
        known = pc.is_in(present, value_set=names)
        if not pc.all(known, min_count=0).as_py():
            bad = pc.filter(present, pc.invert(known))[0].as_py()
            raise EncodeError(
                f"column {column!r}: {bad!r} is not a value of enum {enum.full_name} "
                f"(field {field.name}; values: {', '.join(enum.values_by_name)})"
            )
        return array


def _is_entry_list(arrow_type: pa.DataType) -> bool:
    return (
        pa.types.is_list(arrow_type)
        and pa.types.is_struct(arrow_type.value_type)
        and [child.name for child in arrow_type.value_type] == ["key", "value"]
    )


def _nullable(field: pa.Field) -> pa.Field:
    arrow_type = field.type
    if pa.types.is_struct(arrow_type):
        arrow_type = pa.struct([_nullable(child) for child in arrow_type])
    elif pa.types.is_list(arrow_type):
        arrow_type = pa.list_(_nullable(arrow_type.value_field))
    elif pa.types.is_map(arrow_type):
        arrow_type = pa.map_(arrow_type.key_field.with_nullable(False), _nullable(arrow_type.item_field))
    return field.with_type(arrow_type).with_nullable(True)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _nest_dotted_columns(batch: pa.RecordBatch, descriptor: Descriptor) -> dict[str, pa.Array]:
    """Top-level columns by name, with `a.b.c` columns gathered into struct columns for field `a`.

    A dotted column whose first segment names no field is ignored, like any other extra column.
    """
    columns: dict[str, pa.Array] = {}
    nested: dict[str, dict] = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        if "." not in name:
            columns[name] = column
            continue
        head, *rest = name.split(".")
        if head not in descriptor.fields_by_name:
            continue
        node = nested.setdefault(head, {})
        for part in rest[:-1]:
            node = node.setdefault(part, {})
        node[rest[-1]] = column
    for head, tree in nested.items():
        if head in columns:
            raise EncodeError(f"columns {head!r} and {head}.* both fill field {head!r}; keep one of them")
        columns[head] = _struct_from_tree(tree, batch.num_rows)
    return columns


def _struct_from_tree(tree: dict, length: int) -> pa.StructArray:
    names = list(tree)
    arrays = [
        _struct_from_tree(value, length) if isinstance(value, dict) else value for value in tree.values()
    ]
    return pa.StructArray.from_arrays(arrays, names=names)
