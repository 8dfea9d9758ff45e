"""Protobuf -> Arrow, whole batches at a time, through the native `ptars` codec (`ProtoDecoder`).

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
| oneof                             | a nullable column per member: NULL but the one set last |
| message                           | struct / STRUCT                                 |
| repeated T                        | list / ARRAY<T>                                 |
| map<K, V>                         | map / MAP<K, V>                                 |

Encoding and the rest have modules of their own: encoding (`jobs.codec.protobuf_encoding`),
Dagger's row layout (`jobs.codec.protobuf_dagger_layout`), Struct/Value/ListValue as JSON text
(`jobs.codec.protobuf_json`) and what they share about fields (`jobs.codec.protobuf_types`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.codec.protobuf_json import JsonColumns
from jobs.codec.protobuf_oneofs import LastOneofMembers
from jobs.codec.protobuf_types import (
    JSON_WELL_KNOWN_TYPES,
    TIMESTAMP,
    TypePlan,
    codec_handler,
    element_view,
    is_map,
    is_repeated,
    proto_type_name,
    rebuild_list,
)
from jobs.model.schema_registry import registry_from_option

_UNSIGNED = {pa.uint32(), pa.uint64()}


def _plan_decode(arrow_type: pa.DataType, field: FieldDescriptor | None, json_codecs: dict) -> TypePlan:
    message = field.message_type if field is not None else None
    if message is not None and message.full_name in JSON_WELL_KNOWN_TYPES and not is_repeated(field):
        codec = json_codecs.setdefault(message.full_name, JsonColumns(message))
        return TypePlan(pa.string(), codec.to_json)
    if field is not None and is_repeated(field) and not is_map(field):
        element = _plan_decode(arrow_type.value_type, element_view(field), json_codecs)
        target = pa.list_(element.target)
        if element.convert is None:
            return TypePlan(target, None if target == arrow_type else _cast_to(target))
        convert_values = element.convert
        return TypePlan(target, lambda array: rebuild_list(array, convert_values(array.flatten()), target))
    if is_map(field) if field is not None else False:
        value_field = field.message_type.fields_by_name["value"]
        item = _plan_decode(arrow_type.item_type, value_field, json_codecs)
        key_target = pa.int64() if arrow_type.key_type in _UNSIGNED else arrow_type.key_type
        target = pa.map_(key_target, item.target)
        if item.convert is None:
            return TypePlan(target, None if target == arrow_type else _cast_to(target))
        convert_items = item.convert
        return TypePlan(target, lambda array: _rebuild_map(array, convert_items, target))
    if pa.types.is_struct(arrow_type) and message is not None:
        children = [
            _plan_decode(child.type, message.fields_by_name[child.name], json_codecs) for child in arrow_type
        ]
        target = pa.struct(
            [pa.field(child.name, plan.target) for child, plan in zip(arrow_type, children, strict=True)]
        )
        if all(plan.convert is None for plan in children):
            return TypePlan(target, None if target == arrow_type else _cast_to(target))

        def convert_struct(array: pa.Array) -> pa.Array:
            fields = [array.field(index) for index in range(array.type.num_fields)]
            converted = [
                plan.convert(f) if plan.convert else f.cast(plan.target)
                for f, plan in zip(fields, children, strict=True)
            ]
            return pa.StructArray.from_arrays(converted, fields=list(target), mask=array.is_null())

        return TypePlan(target, convert_struct)
    if arrow_type in _UNSIGNED:
        return TypePlan(pa.int64(), _cast_to(pa.int64()))
    return TypePlan(arrow_type, None)


def _cast_to(target: pa.DataType) -> Callable[[pa.Array], pa.Array]:
    # unsafe: uint64 wraps to int64 as in Java; every other change here is a widening
    return lambda array: pc.cast(array, target, safe=False)


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
        self._handler = codec_handler(descriptor)
        codec_schema: pa.Schema = self._handler.schema()
        json_codecs: dict[str, JsonColumns] = {}
        self._plans = [
            _plan_decode(field.type, descriptor.fields_by_name[field.name], json_codecs)
            for field in codec_schema
        ]
        self.schema = pa.schema(
            [pa.field(field.name, plan.target) for field, plan in zip(codec_schema, self._plans, strict=True)]
        )
        self._oneofs = LastOneofMembers(descriptor) if LastOneofMembers.needed(descriptor) else None

    def decode(self, payloads: Sequence[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        """Decode a batch; returns the batch and {index: error} of payloads that are not valid messages.

        Invalid payloads get a row of default values, so the batch stays aligned with its input; the
        caller decides (by its invalid-record policy) what to do with those rows.
        """
        invalid: dict[int, str] = {}
        cleaned = payloads
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
        several = self._oneofs.rows_with_several(decoded) if self._oneofs is not None else []
        if several:  # a oneof set twice on the wire: decoded again as protobuf reads them (rare)
            cleaned = list(cleaned)
            for index in several:
                cleaned[index] = self._oneofs.as_protobuf_reads_it(cleaned[index])
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
        message = field.message_type if not is_repeated(field) else None
    assert field is not None
    if field.message_type is None or field.message_type.full_name != TIMESTAMP or is_repeated(field):
        raise ValueError(f"event-time field {dotted_path!r} is {proto_type_name(field)}, not {TIMESTAMP}")
    return field


# --------------------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------------------


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
