"""CondEq, Filters and SelectFields: reading arrays of serialized protobuf messages (LongbowPlus's
`proto_data`), decoded a whole batch at a time by the native codec.

Dagger passes Java objects between them (a Predicate, a List<DynamicMessage>); here they are SQL values:

* `CondEq(fieldPath, value)` is a STRUCT<field_path, equals>; `value` is kept as text and a message
  matches when its field, printed as Dagger prints values (`3`, `2.5`, an enum's name, `true`), is that
  text (Dagger compares Java objects, so there `CondEq('count', 5)` never matches an int64 field).
* `Filters(protos, protoClass, conditions...)` returns STRUCT<proto_class, messages ARRAY<BINARY>>: the
  messages that meet every condition, still serialized, with their class for SelectFields.
* `SelectFields(protos, protoClass, fieldPath)` and `SelectFields(filtered, fieldPath)` return the field
  of each message as text in an ARRAY<STRING> (nested messages and repeated fields as JSON).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from google.protobuf.descriptor import Descriptor, FieldDescriptor

from jobs.codec.protobuf import column_at_path, decoder_for
from jobs.model.schema_registry import (
    SchemaRegistry,
    SchemaRegistryError,
    encode_descriptor_sets,
    registry_from_option,
)
from jobs.udfs.javatext import texts
from jobs.udfs.registration import FunctionSet, UdfError, distinct_values

FILTERED_DDL = "struct<proto_class: string, messages: array<binary>>"
_FILTERED_TYPE = pa.struct([("proto_class", pa.string()), ("messages", pa.list_(pa.binary()))])


class _Messages:
    """Decoding for one dagger's descriptor sets; pickled into the UDFs as the encoded sets only."""

    def __init__(self, descriptor_sets: str | None) -> None:
        self._descriptor_sets = descriptor_sets

    def descriptor(self, function: str, proto_class: str) -> Descriptor:
        if self._descriptor_sets is None:
            raise UdfError(f"{function}: reading protobuf bytes needs the dagger's schema_registry")
        try:
            return registry_from_option(self._descriptor_sets).message(proto_class)
        except SchemaRegistryError as error:
            raise UdfError(f"{function}: protoClassName: {error}") from None

    def decode(self, function: str, proto_class: str, payloads: pa.Array, paths: list[str]) -> pa.RecordBatch:
        """The messages, decoded to the top-level fields the dotted `paths` start with."""
        descriptor = self.descriptor(function, proto_class)
        for path in paths:
            _check_path(function, descriptor, path)
        fields = sorted({path.split(".", 1)[0] for path in paths})
        assert self._descriptor_sets is not None
        batch, invalid = decoder_for(self._descriptor_sets, proto_class, fields).decode(payloads.to_pylist())
        if invalid:
            index, error = next(iter(invalid.items()))
            raise UdfError(f"{function}: message {index + 1} is not a valid {proto_class}: {error}")
        return batch


def _check_path(function: str, descriptor: Descriptor, path: str) -> None:
    """Dagger's MessageParser: every name must be a field, and only the last may be other than a message."""
    message: Descriptor | None = descriptor
    for name in path.split("."):
        field = message.fields_by_name.get(name) if message is not None else None
        if field is None:
            owner = message.full_name if message is not None else "a non-message field"
            raise UdfError(f"{function}: Key : {name} does not exist in Message {owner}")
        repeated = field.label == FieldDescriptor.LABEL_REPEATED
        message = field.message_type if field.message_type is not None and not repeated else None


def _messages(protos: pa.Array) -> pa.ListArray | None:
    """The ARRAY<BINARY> of messages, or None for anything else (Dagger returns NULL then)."""
    if isinstance(protos, pa.ListArray) and pa.types.is_binary(protos.type.value_type):
        return protos
    if isinstance(protos, pa.ListArray) and pa.types.is_null(protos.type.value_type):  # `array()`
        return pa.ListArray.from_arrays(protos.offsets, pa.nulls(0, pa.binary()), mask=protos.is_null())
    return None


def _owners(lists: pa.ListArray) -> np.ndarray:
    """For each message in `lists.values` between the first and last offset, the row it belongs to."""
    counts = np.diff(lists.offsets.to_numpy())
    return np.repeat(np.arange(len(lists)), counts)


def _flat(lists: pa.ListArray) -> pa.Array:
    offsets = lists.offsets.to_numpy()
    return lists.values.slice(offsets[0], offsets[-1] - offsets[0])


def _rebuild(lists: pa.ListArray, items: pa.Array, keep: np.ndarray | None = None) -> pa.ListArray:
    """Lists with the same rows as `lists` (and its nulls), holding `items` (one per kept message)."""
    owners = _owners(lists)
    counts = np.bincount(owners if keep is None else owners[keep], minlength=len(lists))
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items, mask=lists.is_null())


def _filters(messages: _Messages, protos: pa.Array, proto_class: pa.Array, *conditions: pa.Array) -> pa.Array:
    lists = _messages(protos)
    if lists is None:
        return pa.nulls(len(protos), _FILTERED_TYPE)
    payloads, owners = _flat(lists), _owners(lists)
    keep = np.ones(len(payloads), dtype=bool)
    for class_name, rows in distinct_values(proto_class):
        in_class = rows.to_numpy(zero_copy_only=False)[owners]
        for condition in conditions:
            if not pa.types.is_struct(condition.type) or condition.type.get_field_index("field_path") < 0:
                raise UdfError(f"Filters: conditions must be CondEq(fieldPath, value), got {condition.type}")
            for path, path_rows in distinct_values(pc.struct_field(condition, "field_path")):
                selected = in_class & path_rows.to_numpy(zero_copy_only=False)[owners]
                if not selected.any():
                    continue
                batch = messages.decode("Filters", class_name, payloads.filter(selected), [path])
                wanted = pc.struct_field(condition, "equals").take(pa.array(owners[selected]))
                met = pc.fill_null(pc.equal(texts(column_at_path(batch, path)), wanted), False)
                keep[np.flatnonzero(selected)] &= met.to_numpy(zero_copy_only=False)
    kept = _rebuild(lists, payloads.filter(keep), keep)
    return pa.StructArray.from_arrays(
        [pc.cast(proto_class, pa.string()), kept], fields=list(_FILTERED_TYPE), mask=lists.is_null()
    )


def _select_fields(messages: _Messages, *arguments: pa.Array) -> pa.Array:
    if len(arguments) == 2:
        filtered, field_path = arguments
        if filtered.type != _FILTERED_TYPE:
            raise UdfError(
                "SelectFields: with two arguments, the first must be a Filters(...) result, "
                f"got {filtered.type}"
            )
        proto_class = pc.struct_field(filtered, "proto_class")
        lists = pc.struct_field(filtered, "messages")
    else:
        protos, proto_class, field_path = arguments
        lists = _messages(protos)
        if lists is None:
            return pa.nulls(len(protos), pa.list_(pa.string()))
    payloads, owners = _flat(lists), _owners(lists)
    values = pa.nulls(len(payloads), pa.string())
    for class_name, class_rows in distinct_values(proto_class):
        for path, path_rows in distinct_values(field_path):
            rows = class_rows.to_numpy(zero_copy_only=False) & path_rows.to_numpy(zero_copy_only=False)
            selected = rows[owners]
            if not selected.any():
                continue
            batch = messages.decode("SelectFields", class_name, payloads.filter(selected), [path])
            values = pc.replace_with_mask(values, pa.array(selected), texts(column_at_path(batch, path)))
    return _rebuild(lists, values)


def declare(functions: FunctionSet, registry: SchemaRegistry | None) -> None:
    """CondEq, and Filters and SelectFields decoding with `registry`'s descriptor sets."""
    messages = _Messages(
        None if registry is None else encode_descriptor_sets(registry.serialized_descriptor_sets)
    )

    def filters(*arguments: pa.Array) -> pa.Array:
        if len(arguments) < 2:
            raise UdfError(
                f"Filters takes protos, protoClassName and conditions, got {len(arguments)} arguments"
            )
        return _filters(messages, *arguments)

    def select_fields(*arguments: pa.Array) -> pa.Array:
        return _select_fields(messages, *arguments)

    functions.sql(
        "CondEq",
        "field_path STRING, value STRING",
        "STRUCT<field_path: STRING, equals: STRING>",
        "named_struct('field_path', field_path, 'equals', value)",
    )
    functions.arrow("Filters", filters, FILTERED_DDL, replace=True)
    functions.arrow("SelectFields", select_fields, "array<string>", arities=(2, 3), replace=True)
