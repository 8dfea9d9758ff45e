"""A collection's Avro schema, grown from the JSON events it receives.

Every field of a collection is nullable with a null default, so a record written before a field existed
reads it as NULL. An event property the schema does not have yet appends a field whose type is inferred
from the JSON value; a value that does not fit its field's type is a conflict, reported with the
collection, the field and both types, and nothing of the event is kept.

Types inferred from JSON values:

    string            a string that is not an ISO-8601 instant
    timestamp         an ISO-8601 instant with its zone (Avro long, logical type timestamp-micros)
    long / double     an integer / a number with a fraction or exponent (a double field takes integers)
    boolean           true / false
    array<T>          a list of values of one type (its first non-null element's)
    map<T>            an object whose values are of one type

A null, an empty list or an empty object says nothing about the type: no field is added for it until a
later event brings a value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

AvroType = str | dict[str, Any]
"""A field's (non-null) type as Avro JSON: a primitive's name, or an array, map or logical-type object."""

STRING: AvroType = "string"
LONG: AvroType = "long"
DOUBLE: AvroType = "double"
BOOLEAN: AvroType = "boolean"
TIMESTAMP: AvroType = {"type": "long", "logicalType": "timestamp-micros"}

_FIELD_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ISO_INSTANT = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})")


class CollectionSchemaError(ValueError):
    """An event the collection's schema cannot take; the message names the collection and the property."""


class InvalidPropertyError(CollectionSchemaError):
    """A property name that cannot be an Avro field name."""


class SchemaConflictError(CollectionSchemaError):
    """A value whose type differs from its field's."""


class MixedTypesError(ValueError):
    """A list or object whose elements are of different types (the message lists them)."""


def type_name(avro_type: AvroType) -> str:
    """How errors and docs name a type: `string`, `timestamp`, `array<long>`, `map<string>`."""
    if avro_type == TIMESTAMP:
        return "timestamp"
    if isinstance(avro_type, dict):
        if avro_type["type"] == "array":
            return f"array<{type_name(avro_type['items'])}>"
        if avro_type["type"] == "map":
            return f"map<{type_name(avro_type['values'])}>"
    return str(avro_type)


def is_instant(text: str) -> bool:
    """Whether `text` is an ISO-8601 date and time with its zone (`2026-11-26T10:00:00Z`)."""
    if not _ISO_INSTANT.fullmatch(text):
        return False
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return False
    return True


def inferred_type(value: Any) -> AvroType | None:
    """The type a new field gets from its first value; None when the value says nothing (null, [], {}).
    Raises `MixedTypesError` for a list or an object whose elements mix types."""
    if value is None:
        return None
    if isinstance(value, bool):  # before int: a bool is an int in Python
        return BOOLEAN
    if isinstance(value, int):
        return LONG
    if isinstance(value, float):
        return DOUBLE
    if isinstance(value, str):
        return TIMESTAMP if is_instant(value) else STRING
    if isinstance(value, list):
        items = _common_type(value)
        return None if items is None else {"type": "array", "items": items}
    if isinstance(value, dict):
        values = _common_type(value.values())
        return None if values is None else {"type": "map", "values": values}
    raise TypeError(f"not a JSON value: {value!r}")


def _common_type(elements: Iterable[Any]) -> AvroType | None:
    """The one type of a list's or an object's non-null elements (integers and fractions: double)."""
    types = []
    for element in elements:
        element_type = inferred_type(element)
        if element_type is not None and element_type not in types:
            types.append(element_type)
    if not types:
        return None
    if len(types) == 1:
        return types[0]
    if all(element_type in (LONG, DOUBLE) for element_type in types):
        return DOUBLE
    raise MixedTypesError(", ".join(type_name(element_type) for element_type in types))


def fits(avro_type: AvroType, value: Any) -> bool:
    """Whether a non-null `value` can be written to a field of `avro_type`."""
    if avro_type == BOOLEAN:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if avro_type == LONG:
        return isinstance(value, int)
    if avro_type == DOUBLE:
        return isinstance(value, int | float)
    if avro_type == STRING:
        return isinstance(value, str)
    if avro_type == TIMESTAMP:
        return isinstance(value, str) and is_instant(value)
    if isinstance(avro_type, dict) and avro_type["type"] == "array":
        return isinstance(value, list) and all(
            item is None or fits(avro_type["items"], item) for item in value
        )
    if isinstance(avro_type, dict) and avro_type["type"] == "map":
        return isinstance(value, dict) and all(
            item is None or fits(avro_type["values"], item) for item in value.values()
        )
    return False


@dataclass(frozen=True)
class Field:
    name: str
    type: AvroType


@dataclass(frozen=True)
class CollectionSchema:
    """The fields of one collection, in the order they were added."""

    project: str
    collection: str
    fields: tuple[Field, ...] = ()

    def field(self, name: str) -> Field | None:
        return next((field for field in self.fields if field.name == name), None)

    def to_avro(self) -> dict[str, Any]:
        """The Avro record schema: every field nullable, null by default."""
        return {
            "type": "record",
            "name": _record_name(self.collection),
            "namespace": _record_name(self.project),
            "fields": [
                {"name": field.name, "type": ["null", _to_avro(field.type)], "default": None}
                for field in self.fields
            ],
        }

    @classmethod
    def from_avro(cls, project: str, collection: str, record: Mapping[str, Any]) -> CollectionSchema:
        return cls(
            project,
            collection,
            tuple(Field(field["name"], _from_avro(field["type"])) for field in record["fields"]),
        )

    def evolved(self, events: Iterable[Mapping[str, Any]]) -> CollectionSchema:
        """This schema with a field appended for every new property of `events` (itself when none is
        new); raises for a property name Avro cannot take or a value that does not fit its field."""
        fields = {field.name: field for field in self.fields}
        added: list[Field] = []
        for properties in events:
            for name, value in properties.items():
                if not _FIELD_NAME.fullmatch(name):
                    raise InvalidPropertyError(
                        f"collection {self.collection}: property {name!r} is not a valid field name "
                        "(letters, digits and _, not starting with a digit)"
                    )
                if value is None:
                    continue
                try:
                    found = inferred_type(value)
                except MixedTypesError as error:
                    raise SchemaConflictError(
                        f"collection {self.collection}: property {name!r} mixes types in one value ({error})"
                    ) from None
                known = fields.get(name)
                if known is None:
                    if found is not None:
                        fields[name] = Field(name, found)
                        added.append(fields[name])
                elif not fits(known.type, value):
                    raise SchemaConflictError(
                        f"collection {self.collection}: field {name!r} is {type_name(known.type)}, "
                        f"the event's value is {type_name(found) if found is not None else 'empty'}"
                    )
        if not added:
            return self
        return CollectionSchema(self.project, self.collection, self.fields + tuple(added))


def _to_avro(avro_type: AvroType) -> AvroType:
    """A field type as the record declares it: an array's items and a map's values may be null."""
    if isinstance(avro_type, dict) and avro_type["type"] == "array":
        return {"type": "array", "items": ["null", _to_avro(avro_type["items"])]}
    if isinstance(avro_type, dict) and avro_type["type"] == "map":
        return {"type": "map", "values": ["null", _to_avro(avro_type["values"])]}
    return avro_type


def _from_avro(declared: Any) -> AvroType:
    """The inverse of `_to_avro`, from a declared (possibly nullable) type."""
    if isinstance(declared, list):
        [declared] = [branch for branch in declared if branch != "null"]
    if isinstance(declared, dict) and declared["type"] == "array":
        return {"type": "array", "items": _from_avro(declared["items"])}
    if isinstance(declared, dict) and declared["type"] == "map":
        return {"type": "map", "values": _from_avro(declared["values"])}
    return declared


def _record_name(name: str) -> str:
    """An Avro name from a project or collection name (which may hold `-` or `.`)."""
    cleaned = re.sub(r"[^A-Za-z0-9_]", "_", name)
    return cleaned if cleaned[:1].isalpha() or cleaned[:1] == "_" else f"_{cleaned}"
