"""JSON records (one object per Kafka record) decoded a whole batch at a time into Arrow.

The records of a batch are joined by newlines and read by Arrow's native JSON reader with the stream's
columns as its explicit schema, so no Python object is made per record. Properties the schema does not
name are ignored; a missing property is null. ISO-8601 strings fill timestamp columns.

The columns come from an Avro record schema (`.avsc`, see `jobs.codec.avro`) or a JSON Schema:

| JSON Schema                                   | Arrow / Spark                     |
|-----------------------------------------------|-----------------------------------|
| `string` (`format: date-time`: timestamp)     | string / STRING, or TIMESTAMP     |
| `string` with `format: date`                  | date32 / DATE                     |
| `integer`, `number`, `boolean`                | int64, double, bool               |
| `array` with `items`                          | list / ARRAY<T>                   |
| `object` with `properties`                    | struct / STRUCT                   |
| a `type` list with `null`                     | the other type, nullable          |

Arrow's JSON reader has no map type, so an object whose keys are data (`additionalProperties` without
`properties`) is refused: declare its properties, or read it as text with an Avro schema of a string.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.json as pa_json

_SCALARS = {"integer": pa.int64(), "number": pa.float64(), "boolean": pa.bool_()}
_STRING_FORMATS = {"date-time": pa.timestamp("us", tz="UTC"), "date": pa.date32()}


class JsonSchemaError(ValueError):
    """A JSON Schema a stream cannot turn into columns."""


def arrow_schema_of_json_schema(document: dict[str, Any]) -> pa.Schema:
    """The columns of an object JSON Schema: its properties in order (see the module's table)."""
    if _type_of(document, "the schema") != "object" or "properties" not in document:
        raise JsonSchemaError("a JSON stream's schema must be an object with properties")
    return pa.schema(_fields(document, ""))


def _fields(document: dict[str, Any], prefix: str) -> list[pa.Field]:
    return [
        pa.field(name, _arrow_type(child, f"{prefix}{name}"))
        for name, child in document["properties"].items()
    ]


def _type_of(document: dict[str, Any], where: str) -> str:
    kind = document.get("type")
    if isinstance(kind, list):
        kinds = [item for item in kind if item != "null"]
        if len(kinds) != 1:
            raise JsonSchemaError(f"{where}: a type list of {kind} has no single column type")
        kind = kinds[0]
    if not isinstance(kind, str):
        raise JsonSchemaError(f"{where}: no 'type' (one of string, integer, number, boolean, array, object)")
    return kind


def _arrow_type(document: dict[str, Any], where: str) -> pa.DataType:
    kind = _type_of(document, f"property {where!r}")
    if kind == "string":
        return _STRING_FORMATS.get(document.get("format", ""), pa.string())
    if kind in _SCALARS:
        return _SCALARS[kind]
    if kind == "array":
        if "items" not in document:
            raise JsonSchemaError(f"property {where!r}: an array needs 'items'")
        return pa.list_(_arrow_type(document["items"], f"{where}[]"))
    if kind == "object":
        if "properties" not in document:
            raise JsonSchemaError(
                f"property {where!r}: an object without 'properties' (a map) cannot be a column; "
                "declare its properties"
            )
        return pa.struct(_fields(document, f"{where}."))
    raise JsonSchemaError(f"property {where!r}: type {kind!r} is not supported")


class JsonDecoder:
    """Decodes the batches of one stream into `schema` (the stream's columns, or those a query reads)."""

    def __init__(self, schema: pa.Schema) -> None:
        for field in schema:
            if _has_map(field.type):
                raise JsonSchemaError(f"field {field.name!r}: a map column cannot be read from JSON")
        self.schema = schema
        self._options = pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore", newlines_in_values=True
        )

    def decode(self, payloads: Sequence[bytes]) -> tuple[pa.RecordBatch, dict[int, str]]:
        """The batch, aligned with `payloads`, and {index: error} of the records that are not valid: each
        gets a row of nulls."""
        rows = self._read(payloads)
        if rows is not None:
            return rows, {}
        invalid: dict[int, str] = {}
        for index, payload in enumerate(payloads):  # the error path: find the culprits one by one
            error = self._error_of(payload)
            if error is not None:
                invalid[index] = error
        cleaned = [b"{}" if index in invalid else payload for index, payload in enumerate(payloads)]
        rows = self._read(cleaned)
        assert rows is not None, "every record the reader refused was replaced"
        return rows, invalid

    def _read(self, payloads: Sequence[bytes]) -> pa.RecordBatch | None:
        """The records read together; None when one is not a JSON object of the schema's types."""
        body = b"\n".join(payloads)
        options = pa_json.ReadOptions(use_threads=False, block_size=max(len(body) + 1, 1 << 16))
        try:
            table = pa_json.read_json(io.BytesIO(body), read_options=options, parse_options=self._options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            return None
        if table.num_rows != len(payloads):  # an empty record, or one holding two objects
            return None
        if table.num_rows == 0:
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        return table.combine_chunks().to_batches()[0]

    def _error_of(self, payload: bytes) -> str | None:
        stripped = payload.strip()
        if not stripped.startswith(b"{"):
            return "not a JSON object"
        if self._read([payload]) is not None:
            return None
        options = pa_json.ReadOptions(use_threads=False, block_size=len(payload) + 1)
        try:
            pa_json.read_json(io.BytesIO(payload), read_options=options, parse_options=self._options)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as error:
            return f"not a valid record: {error}"
        return "not a single JSON object"


def _has_map(arrow_type: pa.DataType) -> bool:
    if pa.types.is_map(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(_has_map(field.type) for field in arrow_type)
    if pa.types.is_list(arrow_type):
        return _has_map(arrow_type.value_type)
    return False
