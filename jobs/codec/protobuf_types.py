"""What the protobuf codecs share about a message's fields: the well-known types they treat apart
(Timestamp, Duration, the wrappers, Struct/Value/ListValue), the native codec's handler of a message
(`codec_handler`), a field's type as protobuf names it (`proto_type_name`) and its shape (`is_repeated`,
`is_map`, `element_view`), the plan of a column's conversion (`TypePlan`, `rebuild_list`), and the error of
a column that cannot fill its field (`EncodeError`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import ptars
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

JSON_WELL_KNOWN_TYPES = frozenset(
    {"google.protobuf.Struct", "google.protobuf.Value", "google.protobuf.ListValue"}
)
TIMESTAMP = "google.protobuf.Timestamp"
DURATION = "google.protobuf.Duration"
WRAPPERS = frozenset(
    f"google.protobuf.{kind}Value"
    for kind in ("Double", "Float", "Int64", "UInt64", "Int32", "UInt32", "Bool", "String", "Bytes")
)
_CODEC_CONFIG = ptars.PtarsConfig(
    timestamp_unit="us", timestamp_tz="UTC", duration_unit="us", enum_repr="string", time_unit="us"
)
_PROTO_TYPE_NAMES = {
    value: name.removeprefix("TYPE_").lower()
    for name, value in vars(FieldDescriptor).items()
    if name.startswith("TYPE_") and isinstance(value, int)
}


class EncodeError(ValueError):
    """A result column that cannot be written into the output message."""


def codec_handler(descriptor: Descriptor) -> ptars._lib.MessageHandler:
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
    return f"repeated {name}" if is_repeated(field) else name


def is_repeated(field: FieldDescriptor) -> bool:
    return field.is_repeated


def is_map(field: FieldDescriptor) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


@dataclass(frozen=True)
class TypePlan:
    """How one decoded Arrow type becomes its Spark-ready type (None = unchanged)."""

    target: pa.DataType
    convert: Callable[[pa.Array], pa.Array] | None


class ElementView:
    """A repeated field seen as one element: same types, not repeated."""

    def __init__(self, field: FieldDescriptor) -> None:
        self.message_type = field.message_type
        self.enum_type = field.enum_type
        self.type = field.type
        self.is_repeated = False
        self.name = field.name
        self.number = field.number
        self.containing_type = field.containing_type


def element_view(field: FieldDescriptor) -> FieldDescriptor:
    return ElementView(field)  # type: ignore[return-value]


def rebuild_list(array: pa.ListArray, values: pa.Array, target: pa.DataType) -> pa.Array:
    offsets = pc.subtract(array.offsets, array.offsets[0])
    return pa.ListArray.from_arrays(offsets, values, type=target, mask=array.is_null())
