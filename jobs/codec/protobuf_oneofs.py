"""A oneof holds the member that came last on the wire, as protobuf reads it: each member clears the
others. The native codec (ptars) reads every member it finds, so a message whose oneof was set twice with
different members (two messages concatenated, which is protobuf's merge) would decode with both.
`LastOneofMembers` finds the rows of a decoded batch where a oneof holds more than one member, at any
depth, and gives their payloads as protobuf reads them (parsed and written again, they hold the last member
only), for the decoder to decode again. A batch without such rows, the usual one, costs a count per
oneof; a message without oneofs costs nothing.

The JVM decoder reads oneofs the same way (`WireFields.java`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from google.protobuf import message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import DecodeError


class LastOneofMembers:
    """The rows of one message type's decoded batches whose oneofs hold several members."""

    def __init__(self, descriptor: Descriptor) -> None:
        self._descriptor = descriptor
        self._message_class = message_factory.GetMessageClass(descriptor)

    @staticmethod
    def needed(descriptor: Descriptor) -> bool:
        """Whether the message holds a oneof of two members or more, at any depth."""
        return _has_oneofs(descriptor, set())

    def rows_with_several(self, batch: pa.RecordBatch) -> list[int]:
        """The rows of a batch (as the codec decoded it) where some oneof holds more than one member."""
        if batch.num_rows == 0:
            return []
        rows = pa.StructArray.from_arrays(batch.columns, fields=list(batch.schema))
        several = _several(rows, self._descriptor)
        return [] if several is None else np.flatnonzero(several).tolist()

    def as_protobuf_reads_it(self, payload: bytes) -> bytes:
        """The payload parsed and written again: each oneof holds the member that came last."""
        try:
            return self._message_class.FromString(payload).SerializeToString()
        except DecodeError:
            return payload  # the codec decides whether it is valid


def _has_oneofs(message: Descriptor, seen: set[str]) -> bool:
    if message.full_name in seen:
        return False
    seen.add(message.full_name)
    if any(len(oneof.fields) > 1 for oneof in message.oneofs):
        return True
    return any(
        field.message_type is not None and _has_oneofs(field.message_type, seen) for field in message.fields
    )


def _several(array: pa.Array, message: Descriptor) -> np.ndarray | None:
    """Per element of `array` (the message's values, or lists or maps of them): whether a oneof in it holds
    more than one member; None when none can. Members kept as serialized bytes are not looked into (the
    codec left them to be parsed later, by protobuf)."""
    arrow_type = array.type
    if pa.types.is_map(arrow_type):
        value = message.fields_by_name["value"].message_type
        return None if value is None else _in_lists(array, array.items, value)
    if pa.types.is_list(arrow_type):
        return _in_lists(array, array.flatten(), message)
    if not pa.types.is_struct(arrow_type):
        return None
    found: np.ndarray | None = None
    names = {child.name: index for index, child in enumerate(arrow_type)}
    for oneof in message.oneofs:
        members = [array.field(names[field.name]) for field in oneof.fields if field.name in names]
        if len(members) > 1:
            counts = sum(np.asarray(member.is_valid(), dtype=np.int32) for member in members)
            found = _either(found, counts > 1)
    for name, index in names.items():
        field = message.fields_by_name[name]
        if field.message_type is not None:
            found = _either(found, _several(array.field(index), field.message_type))
    return found


def _in_lists(lists: pa.ListArray | pa.MapArray, values: pa.Array, message: Descriptor) -> np.ndarray | None:
    offsets = lists.offsets.to_numpy()
    if len(values) != offsets[-1] - offsets[0]:  # a map's items are its whole child, not its slice's
        values = values.slice(offsets[0], offsets[-1] - offsets[0])
    several = _several(values, message)
    if several is None:
        return None
    parents = np.repeat(np.arange(len(lists)), np.diff(offsets))
    found = np.zeros(len(lists), dtype=bool)
    found[parents[several]] = True
    return found


def _either(found: np.ndarray | None, more: np.ndarray | None) -> np.ndarray | None:
    if more is None:
        return found
    return more if found is None else found | more
