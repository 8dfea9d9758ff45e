"""google.protobuf.Struct, Value and ListValue columns as JSON text, both ways (`JsonColumns`): decoded
into the text SQL users can work with, and that text parsed back into messages when a result is
encoded."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor
from google.protobuf.message import Message

from jobs.codec.protobuf_types import EncodeError


class JsonColumns:
    """Struct/Value/ListValue columns as JSON text, which is what SQL users can work with.

    The codec decodes these messages to a depth of its own choosing and keeps what lies deeper as serialized
    bytes (a top-level ListValue's values are decoded, a Struct's nested Struct is not, ...): the JSON is
    assembled per row from whichever it gives at each level, so every depth reads alike (only columns of
    these types pay for it). Numbers are floats, as in protobuf; NaN and infinities are written as Python's
    json writes them (`NaN`, `Infinity`), and a Value whose kind is unset reads as null.
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

    # Each level is a dict (decoded by the codec) or bytes (kept serialized), the message of its place.

    def _struct_to_python(self, struct: dict | bytes) -> dict:
        if isinstance(struct, bytes):
            return _message_to_python(self._struct.FromString(struct))
        return {key: self._value_to_python(value) for key, value in struct["fields"]}

    def _list_to_python(self, values: dict | bytes) -> list:
        if isinstance(values, bytes):
            return _message_to_python(self._list.FromString(values))
        return [self._value_to_python(value) for value in values["values"]]

    def _value_to_python(self, value: dict | bytes) -> object:
        if isinstance(value, bytes):
            return _message_to_python(self._value.FromString(value))
        if value["struct_value"] is not None:
            return self._struct_to_python(value["struct_value"])
        if value["list_value"] is not None:
            return self._list_to_python(value["list_value"])
        for kind in ("string_value", "number_value", "bool_value"):
            if value[kind] is not None:
                return value[kind]
        return None  # null_value, or no kind at all

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


def _message_to_python(message: Message) -> Any:
    """A Struct, ListValue or Value message as the Python value of its JSON (what json_format gives, but
    NaN and infinities kept as floats rather than refused)."""
    name = message.DESCRIPTOR.full_name
    if name == "google.protobuf.Struct":
        return {key: _message_to_python(value) for key, value in message.fields.items()}
    if name == "google.protobuf.ListValue":
        return [_message_to_python(value) for value in message.values]
    kind = message.WhichOneof("kind")
    if kind is None or kind == "null_value":
        return None
    held = getattr(message, kind)
    return _message_to_python(held) if kind in ("struct_value", "list_value") else held
