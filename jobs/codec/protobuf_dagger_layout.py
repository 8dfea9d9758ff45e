"""Decoded message columns re-shaped into the row layout of Dagger (Flink), for daggers converted from
Dagger jobs (`DaggerRowLayout`): Timestamp and Duration fields as STRUCT<seconds BIGINT, nanos INT>,
wrappers as STRUCT<value>, maps as ARRAY<STRUCT<key, value>>; and such seconds-and-nanos structs read
back into microseconds (`is_seconds_nanos`, `from_seconds_nanos`), which the encoder accepts."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.codec.protobuf_types import (
    DURATION,
    TIMESTAMP,
    WRAPPERS,
    TypePlan,
    element_view,
    is_map,
    is_repeated,
    rebuild_list,
)

SECONDS_NANOS = pa.struct([pa.field("seconds", pa.int64()), pa.field("nanos", pa.int32())])
_MICROS_PER_SECOND = 1_000_000


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


def _plan_dagger_layout(arrow_type: pa.DataType, field: FieldDescriptor) -> TypePlan:
    message = field.message_type
    if is_map(field):
        value_plan = _plan_dagger_layout(arrow_type.item_type, message.fields_by_name["value"])
        entry = pa.struct([pa.field("key", arrow_type.key_type), pa.field("value", value_plan.target)])
        target = pa.list_(entry)

        def map_to_entries(array: pa.MapArray) -> pa.Array:
            items = value_plan.convert(array.items) if value_plan.convert else array.items
            entries = pa.StructArray.from_arrays([array.keys, items], fields=list(entry))
            offsets = pc.subtract(array.offsets, array.offsets[0])
            return pa.ListArray.from_arrays(offsets, entries, type=target, mask=array.is_null())

        return TypePlan(target, map_to_entries)
    if is_repeated(field):
        element = _plan_dagger_layout(arrow_type.value_type, element_view(field))
        if element.convert is None:
            return TypePlan(arrow_type, None)
        target, convert_values = pa.list_(element.target), element.convert
        return TypePlan(target, lambda array: rebuild_list(array, convert_values(array.flatten()), target))
    if message is None:
        return TypePlan(arrow_type, None)
    if message.full_name in (TIMESTAMP, DURATION):
        floor = message.full_name == TIMESTAMP  # a Timestamp's nanos are never negative, a Duration's may be
        return TypePlan(SECONDS_NANOS, lambda array: _to_seconds_nanos(array, floor))
    if message.full_name in WRAPPERS:
        wrapped = pa.struct([pa.field("value", arrow_type)])
        return TypePlan(
            wrapped,
            lambda array: pa.StructArray.from_arrays([array], fields=list(wrapped), mask=array.is_null()),
        )
    if pa.types.is_struct(arrow_type):
        children = [
            _plan_dagger_layout(child.type, message.fields_by_name[child.name]) for child in arrow_type
        ]
        if all(plan.convert is None for plan in children):
            return TypePlan(arrow_type, None)
        target = pa.struct(
            [pa.field(child.name, plan.target) for child, plan in zip(arrow_type, children, strict=True)]
        )

        def convert_struct(array: pa.StructArray) -> pa.Array:
            converted = [
                plan.convert(array.field(index)) if plan.convert else array.field(index)
                for index, plan in enumerate(children)
            ]
            return pa.StructArray.from_arrays(converted, fields=list(target), mask=array.is_null())

        return TypePlan(target, convert_struct)
    return TypePlan(arrow_type, None)


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


def from_seconds_nanos(array: pa.StructArray, target: pa.DataType) -> pa.Array:
    """STRUCT<seconds, nanos> (Dagger's Timestamp / Duration row) -> microseconds of `target`'s type."""
    seconds, nanos = (pc.cast(child, pa.int64()) for child in array.flatten())
    micros = pc.add(pc.multiply(seconds, _MICROS_PER_SECOND), pc.divide(nanos, 1000))
    return pc.cast(micros, target)


def is_seconds_nanos(arrow_type: pa.DataType) -> bool:
    return pa.types.is_struct(arrow_type) and [field.name for field in arrow_type] == ["seconds", "nanos"]
