"""google.protobuf.Struct, Value and ListValue columns as JSON text, both ways (`JsonColumns`): decoded
into the text SQL users can work with, and that text parsed back into messages when a result is
encoded."""

from __future__ import annotations

import json

import pyarrow as pa
from google.protobuf import json_format, message_factory
from google.protobuf.descriptor import Descriptor

from jobs.codec.protobuf_types import EncodeError


class JsonColumns:
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
