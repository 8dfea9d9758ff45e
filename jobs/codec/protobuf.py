"""Protobuf <-> Arrow, whole batches at a time, through the native `ptars` codec.

Decoding gives Arrow columns that Spark accepts as they are:

| protobuf                          | Arrow / Spark                                   |
|-----------------------------------|-------------------------------------------------|
| int32, sint32, sfixed32           | int32 / INT                                     |
| int64, sint64, sfixed64           | int64 / BIGINT                                  |
| uint32, fixed32                   | int64 / BIGINT (exact)                          |
| uint64, fixed64                   | int64 / BIGINT (two's complement, as Java/Dagger)|
| float, double, bool, string       | float, double, bool, string                     |
| bytes                             | binary / BINARY                                 |
| enum                              | string / STRING: the value's name (unknown numbers as digits) |
| google.protobuf.Timestamp         | timestamp[us, UTC] / TIMESTAMP                  |
| google.protobuf.Duration          | duration[us] / INTERVAL DAY TO SECOND           |
| wrappers (`Int64Value`...)        | the nullable scalar                             |
| google.protobuf.Struct/Value/ListValue | string / STRING holding JSON               |
| message                           | struct / STRUCT                                 |
| repeated T                        | list / ARRAY<T>                                 |
| map<K, V>                         | map / MAP<K, V>                                 |

`DaggerRowLayout` re-shapes decoded columns the way Dagger (Flink) lays out rows, for daggers converted
from Dagger jobs: Timestamp and Duration fields as STRUCT<seconds BIGINT, nanos INT>, wrappers as
STRUCT<value>, maps as ARRAY<STRUCT<key, value>>.

Encoding fills an output message from result columns by name; `a.b` columns fill nested fields; values in
Dagger's layout are accepted too. Columns that name no field are ignored (a SQL result usually carries
helper columns); a column whose type cannot fill its field is an `EncodeError` naming the column, the
field and both types.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import ptars
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.model.schema_registry import registry_from_option

JSON_WELL_KNOWN_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
WRAPPERS = frozenset(
    f"google.protobuf.{kind}Value"
    for kind in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
SECONDS_NANOS = pa.struct([pa.field("seconds", pa.int64()), pa.field("nanos", pa.int32())])
_MICROS_PER_SECOND = 1_000_000
_CODEC_CONFIG = ptars.PtarsConfig(
    timestamp_unit="us", timestamp_tz="UTC", duration_unit="us", enum_repr="string", time_unit="us"
)
_UNSIGNED = {pa.uint32(), pa.uint64()}
_PROTO_TYPE_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and isinstance(value, int)
}


class EncodeError(ValueError):
    """A result column that cannot be written into the output message."""


def _handler(descriptor: Descriptor) -> ptars._lib.MessageHandler:
    return ptars.HandlerPool([descriptor.file], config=_CODEC_CONFIG).get_for_message(descriptor)


def proto_type_name(field: FieldDescriptor) -> str:
    if field.message_type is not None:
        if field.message_type.GetOptions().map_entry:
            key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
            return f"map<{proto_type_name(key)}, {proto_type_name(value)}>"
        name = field.message_type.full_name
    elif field.enum_type is not None:
        name = field.enum_type.full_name
    else:
        name = _PROTO_TYPE_NAMES[field.type]
    return f"repeated {name}" if _is_repeated(field) else name


def _is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def _is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


# --------------------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------------------


class _JsonColumns:
    """Struct/Value/ListValue columns as JSON text, which is what SQL users can work with.

    The codec decodes these messages one level deep and keeps nested Struct/ListValue payloads as bytes;
    the JSON is assembled per row from that shape (only columns of these types pay for it).
    """

    def __init__(self, descriptor: Descriptor) -> None:
        pool = descriptor.file.pool
        self._full_name = descriptor.full_name
        self._message_class = message_factory.GetMessageClass(descriptor)
        self._struct = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.Struct"))
        self._value = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.Value"))
        self._list = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.ListValue"))

    def to_json(self, array: pa.Array) -> pa.Array:
        convert = {
            "google.protobuf.Struct": self._struct_to_python,
            "google.protobuf.Value": self._value_to_python,
            "google.protobuf.ListValue": self._list_to_python,
        }[self._full_name]
        texts = [
            None if row is None else json.dumps(convert(row), sort_keys=True, separators=(",", ":"))
            for row in array.to_pylist()
        ]
        return pa.array(texts, pa.string())

    def _struct_to_python(self, row: dict) -> dict:
        return {key: self._value_to_python(value) for key, value in row["fields"]}

    def _list_to_python(self, row: dict) -> list:
        return [json_format.MessageToDict(self._value.FromString(item)) for item in row["values"]]

    def _value_to_python(self, value: dict) -> object:
        if value["struct_value"] is not None:
            return json_format.MessageToDict(self._struct.FromString(value["struct_value"]))
        if value["list_value"] is not None:
            return self._list_to_python(value["list_value"])
        for kind in ("string_value", "number_value", "bool_value"):
            if value[kind] is not None:
                return value[kind]
        return None

    def serialized(self, array: pa.Array, column: str) -> list[bytes | None]:
        """JSON text -> serialized messages (None for null)."""
        payloads: list[bytes | None] = []
        for text in array.to_pylist():
            if text is None:
                payloads.append(None)
                continue
            try:
                payloads.append(json_format.Parse(text, self._message_class()).SerializeToString())
            except json_format.ParseError as error:
                raise EncodeError(
                    f"column {column!r}: {text[:80]!r} is not JSON for a {self._full_name}: {error}"
                ) from None
        return payloads


@dataclass(frozen=True)
class _TypePlan:
    """How one decoded Arrow type becomes its Spark-ready type (None = unchanged)."""

    target: pa.DataType
    convert: Callable[[pa.Array], pa.Array] | None


def _plan_decode(arrow_type: pa.DataType, field: FieldDescriptor | None, json_codecs: dict) -> _TypePlan:
    message = field.message_type if field is not None else None
    if message is not None and message.full_name in JSON_WELL_KNOWN_TYPES and not _is_repeated(field):
        codec = json_codecs.setdefault(message.full_name, _JsonColumns(message))
        return _TypePlan(pa.string(), codec.to_json)
    if field is not None and _is_repeated(field) and not _is_map(field):
        element = _plan_decode(arrow_type.value_type, _element_view(field), json_codecs)
        target = pa.list_(element.target)
        if element.convert is None:
            return _TypePlan(target, None if target == arrow_type else _cast_to(target))
        convert_values = element.convert
        return _TypePlan(target, lambda array: _rebuild_list(array, convert_values(array.flatten()), target))
    if _is_map(field) if field is not None else False:
        value_field = field.message_type.fields_by_name["value"]
        item = _plan_decode(arrow_type.item_type, value_field, json_codecs)
        key_target = pa.int64() if arrow_type.key_type in _UNSIGNED else arrow_type.key_type
        target = pa.map_(key_target, item.target)
        if item.convert is None:
            return _TypePlan(target, None if target == arrow_type else _cast_to(target))
        convert_items = item.convert
        return _TypePlan(target, lambda array: _rebuild_map(array, convert_items, target))
    if pa.types.is_struct(arrow_type) and message is not None:
        children = [
            _plan_decode(child.type, message.fields_by_name[child.name], json_codecs) for child in arrow_type
        ]
        target = pa.struct(
            [pa.field(child.name, plan.target) for child, plan in zip(arrow_type, children, strict=True)]
        )
        if all(plan.convert is None for plan in children):
            return _TypePlan(target, None if target == arrow_type else _cast_to(target))

        def convert_struct(array: pa.Array) -> pa.Array:
            fields = [array.field(index) for index in range(array.type.num_fields)]
            converted = [
                plan.convert(f) if plan.convert else f.cast(plan.target)
                for f, plan in zip(fields, children, strict=True)
            ]
            return pa.StructArray.from_arrays(converted, fields=list(target), mask=array.is_null())

        return _TypePlan(target, convert_struct)
    if arrow_type in _UNSIGNED:
        return _TypePlan(pa.int64(), _cast_to(pa.int64()))
    return _TypePlan(arrow_type, None)


class _ElementView:
    """A repeated field seen as one element: same types, not repeated."""

    def __init__(self, field: FieldDescriptor) -> None:
        self.message_type = field.message_type
        self.enum_type = field.enum_type
        self.type = field.type
        self.is_repeated = False
        self.name = field.name
        self.number = field.number
        self.containing_type = field.containing_type


def _element_view(field: FieldDescriptor) -> FieldDescriptor:
    return _ElementView(field)  # type: ignore[return-value]


def _cast_to(target: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    # unsafe: uint64 wraps to int64 as in Java; every other change here is a widening
    return lambda array: pc.cast(array, target, safe=False)


def _rebuild_list(array: pa.ListArray, values: pa.Array, target: pa.DataType) -> pa.Array:
    offsets = pc.subtract(array.offsets, array.offsets[0])
    return pa.ListArray.from_arrays(offsets, values, type=target, mask=array.is_null())


def _rebuild_map(array: pa.MapArray, convert_items: Callable, target: pa.MapType) -> pa.Array:
    offsets = pc.subtract(array.offsets, array.offsets[0])
    keys = pc.cast(array.keys, target.key_type, safe=False)
    return pa.MapArray.from_arrays(
        offsets, keys, convert_items(array.items), type=target, mask=array.is_null()
    )


class ProtoDecoder:
    """Serialized messages of one type -> an Arrow batch with the Spark-ready schema."""

    def __init__(self, descriptor: Descriptor) -> None:
        self.descriptor = descriptor
        self._handler = _handler(descriptor)
        codec_schema: pa.Schema = self._handler.schema()
        json_codecs: dict[str, _JsonColumns] = {}
        self._plans = [
            _plan_decode(field.type, descriptor.fields_by_name[field.name], json_codecs)
            for field in codec_schema
        ]
        self.schema = pa.schema(
            [pa.field(field.name, plan.target) for field, plan in zip(codec_schema, self._plans, strict=True)]
        )

    def decode(self, payloads: Sequence[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        """Decode a batch; returns the batch and {index: error} of payloads that are not valid messages.

        Invalid payloads get a row of default values, so the batch stays aligned with its input; the
        caller decides (by its invalid-record policy) what to do with those rows.
        """
        invalid: dict[int, str] = {}
        try:
            decoded = self._handler.list_to_record_batch(payloads)
        except ValueError:
            # The codec rejects the whole batch: find the culprits one by one (error path only).
            cleaned = list(payloads)
            for index, payload in enumerate(payloads):
                try:
                    self._handler.list_to_record_batch([payload])
                except ValueError as error:
                    invalid[index] = str(error)
                    cleaned[index] = b""
            decoded = self._handler.list_to_record_batch(cleaned)
        return self._to_spark_ready(decoded), invalid

    def _to_spark_ready(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        columns = [
            plan.convert(column) if plan.convert else column
            for column, plan in zip(batch.columns, self._plans, strict=True)
        ]
        return pa.RecordBatch.from_arrays(columns, schema=self.schema)


def column_at_path(batch: pa.RecordBatch, dotted_path: str) -> pa.Array:
    """The (possibly nested) column at `a.b.c`; a parent that is null gives null."""
    head, *rest = dotted_path.split(".")
    array = batch.column(head)
    for name in rest:
        array = pc.struct_field(array, name)
    return array


def timestamp_field_at_path(descriptor: Descriptor, dotted_path: str) -> FieldDescriptor:
    """The Timestamp field at `a.b.c`, or a ValueError saying why the path is not one."""
    message = descriptor
    field: FieldDescriptor | None = None
    for name in dotted_path.split("."):
        if message is None:
            raise ValueError(f"{field.name!r} in {dotted_path!r} is not a message, it has no field {name!r}")
        field = message.fields_by_name.get(name)
        if field is None:
            raise ValueError(
                f"{message.full_name} has no field {name!r} (fields: {', '.join(message.fields_by_name)})"
            )
        message = field.message_type if not _is_repeated(field) else None
    assert field is not None
    if field.message_type is None or field.message_type.full_name != TIMESTAMP or _is_repeated(field):
        raise ValueError(f"event-time field {dotted_path!r} is {proto_type_name(field)}, not {TIMESTAMP}")
    return field


class DaggerRowLayout:
    """Decoded message columns re-shaped into Dagger's row layout (its protobuf type handlers' rows).

    | protobuf                     | native layout     | Dagger's layout                        |
    |------------------------------|-------------------|----------------------------------------|
    | google.protobuf.Timestamp    | TIMESTAMP         | STRUCT<seconds BIGINT, nanos INT>      |
    | google.protobuf.Duration     | INTERVAL          | STRUCT<seconds BIGINT, nanos INT>      |
    | wrappers (`Int64Value`...)   | the scalar        | STRUCT<value>                          |
    | map<K, V>                    | MAP<K, V>         | ARRAY<STRUCT<key K, value V>>          |

    Nested and repeated fields are re-shaped at every depth; everything else is unchanged. Timestamps are
    decoded to microseconds first, so `nanos` is a multiple of 1000.
    """

    def __init__(self, descriptor: Descriptor, native: pa.Schema) -> None:
        self._plans = [
            _plan_dagger_layout(field.type, descriptor.fields_by_name[field.name]) for field in native
        ]
        self.schema = pa.schema(
            [pa.field(field.name, plan.target) for field, plan in zip(native, self._plans, strict=True)]
        )

    def convert(self, columns: Sequence[pa.Array]) -> list[pa.Array]:
        return [
            plan.convert(column) if plan.convert else column
            for column, plan in zip(columns, self._plans, strict=True)
        ]


def _plan_dagger_layout(arrow_type: pa.DataType, field: FieldDescriptor) -> _TypePlan:
    message = field.message_type
    if _is_map(field):
        value_plan = _plan_dagger_layout(arrow_type.item_type, message.fields_by_name["value"])
        entry = pa.struct([pa.field("key", arrow_type.key_type), pa.field("value", value_plan.target)])
        target = pa.list_(entry)

        def map_to_entries(array: pa.MapArray) -> pa.Array:
            items = value_plan.convert(array.items) if value_plan.convert else array.items
            entries = pa.StructArray.from_arrays([array.keys, items], fields=list(entry))
            offsets = pc.subtract(array.offsets, array.offsets[0])
            return pa.ListArray.from_arrays(offsets, entries, type=target, mask=array.is_null())

        return _TypePlan(target, map_to_entries)
    if _is_repeated(field):
        element = _plan_dagger_layout(arrow_type.value_type, _element_view(field))
        if element.convert is None:
            return _TypePlan(arrow_type, None)
        target, convert_values = pa.list_(element.target), element.convert
        return _TypePlan(target, lambda array: _rebuild_list(array, convert_values(array.flatten()), target))
    if message is None:
        return _TypePlan(arrow_type, None)
    if message.full_name in (TIMESTAMP, DURATION):
        floor = message.full_name == TIMESTAMP  # a Timestamp's nanos are never negative, a Duration's may be
        return _TypePlan(SECONDS_NANOS, lambda array: _to_seconds_nanos(array, floor))
    if message.full_name in WRAPPERS:
        wrapped = pa.struct([pa.field("value", arrow_type)])
        return _TypePlan(
            wrapped,
            lambda array: pa.StructArray.from_arrays([array], fields=list(wrapped), mask=array.is_null()),
        )
    if pa.types.is_struct(arrow_type):
        children = [
            _plan_dagger_layout(child.type, message.fields_by_name[child.name]) for child in arrow_type
        ]
        if all(plan.convert is None for plan in children):
            return _TypePlan(arrow_type, None)
        target = pa.struct(
            [pa.field(child.name, plan.target) for child, plan in zip(arrow_type, children, strict=True)]
        )

        def convert_struct(array: pa.StructArray) -> pa.Array:
            converted = [
                plan.convert(array.field(index)) if plan.convert else array.field(index)
                for index, plan in enumerate(children)
            ]
            return pa.StructArray.from_arrays(converted, fields=list(target), mask=array.is_null())

        return _TypePlan(target, convert_struct)
    return _TypePlan(arrow_type, None)


def _to_seconds_nanos(array: pa.Array, floor: bool) -> pa.StructArray:
    micros = pc.cast(array, pa.int64())
    seconds = pc.divide(micros, _MICROS_PER_SECOND)  # truncates towards zero
    remainder = pc.subtract(micros, pc.multiply(seconds, _MICROS_PER_SECOND))
    if floor:
        negative = pc.less(remainder, 0)
        seconds = pc.if_else(negative, pc.subtract(seconds, 1), seconds)
        remainder = pc.if_else(negative, pc.add(remainder, _MICROS_PER_SECOND), remainder)
    nanos = pc.cast(pc.multiply(remainder, 1000), pa.int32())
    return pa.StructArray.from_arrays([seconds, nanos], fields=list(SECONDS_NANOS), mask=array.is_null())


def _from_seconds_nanos(array: pa.StructArray, target: pa.DataType) -> pa.Array:
    """STRUCT<seconds, nanos> (Dagger's Timestamp / Duration row) -> microseconds of `target`'s type."""
    seconds, nanos = (pc.cast(child, pa.int64()) for child in array.flatten())
    micros = pc.add(pc.multiply(seconds, _MICROS_PER_SECOND), pc.divide(nanos, 1000))
    return pc.cast(micros, target)


def is_seconds_nanos(arrow_type: pa.DataType) -> bool:
    return pa.types.is_struct(arrow_type) and [field.name for field in arrow_type] == ["seconds", "nanos"]


# --------------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------------

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
        self._handler = _handler(descriptor)
        # Nullable throughout: SQL results carry nulls anywhere, and an absent value encodes as the default.
        self._codec_schema = pa.schema([_nullable(field) for field in self._handler.schema()])
        self._json_codecs: dict[str, _JsonColumns] = {}

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
                field.message_type.full_name, _JsonColumns(field.message_type)
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
        if _is_map(field):
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
        if _is_repeated(field):
            if not (pa.types.is_list(array.type) or pa.types.is_large_list(array.type)):
                raise self._mismatch(column, array, field)
            values = self._conform_value(
                array.flatten(), target.value_type, _element_view(field), f"{column}[]"
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
            return _from_seconds_nanos(array, target)
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


_decoders: dict[tuple[str, str, tuple[str, ...] | None], ProtoDecoder] = {}
_decoders_lock = threading.Lock()


def decoder_for(
    descriptor_sets_option: str, message_name: str, fields: list[str] | None = None
) -> ProtoDecoder:
    """A decoder per process, message and field selection: building one compiles the codec, so workers
    reuse it. With `fields`, only those fields are decoded (see `SchemaRegistry.projection`)."""
    registry = registry_from_option(descriptor_sets_option)
    key = (
        hashlib.sha256(descriptor_sets_option.encode()).hexdigest(),
        message_name,
        None if fields is None else tuple(fields),
    )
    with _decoders_lock:
        decoder = _decoders.get(key)
        if decoder is None:
            descriptor = (
                registry.message(message_name)
                if fields is None
                else registry.projection(message_name, fields)
            )
            decoder = _decoders[key] = ProtoDecoder(descriptor)
        return decoder
