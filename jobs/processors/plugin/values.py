"""Values: Arrow -> JSON (records sent) and JSON -> Arrow (records returned).

Values cross as JSON: BIGINT and DECIMAL as strings (exact, as in protobuf's JSON mapping), other numbers
as numbers (NaN and infinities as "NaN", "Infinity", "-Infinity"), TIMESTAMP as ISO 8601 UTC text, DATE as
`YYYY-MM-DD`, BINARY as base64, INTERVAL DAY TO SECOND as seconds, STRUCT and MAP as objects, ARRAY as
arrays. Returned records are converted back with the output schema: a missing key is null, a key that is
not a column or a value of the wrong kind fails the batch naming the column.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DayTimeIntervalType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from jobs.processors.plugin.protocol import PluginError, snippet


class Unsupported(Exception):
    """A Spark type the protocol has no JSON form for."""


class _Mismatch(Exception):
    """A returned value that does not fit its column."""


def _mismatch(path: str, expected: str, value: Any) -> _Mismatch:
    return _Mismatch(f"column {path!r}: expected {expected}, got {snippet(value, 80)}")


Encoder = Callable[[Any], Any] | None
"""Python value (from Arrow) -> JSON value; None: the value as it is."""


def encoder(data_type: DataType, path: str) -> Encoder:
    if isinstance(data_type, StringType | BooleanType | IntegerType | ShortType | ByteType | NullType):
        return None
    if isinstance(data_type, LongType):
        return str
    if isinstance(data_type, FloatType | DoubleType):
        return _float_to_json
    if isinstance(data_type, DecimalType):
        return lambda value: format(value, "f")
    if isinstance(data_type, BinaryType):
        return lambda value: base64.b64encode(value).decode("ascii")
    if isinstance(data_type, DateType):
        return date.isoformat
    if isinstance(data_type, TimestampType):
        return lambda value: _timestamp_text(_utc(value)) + "Z"
    if isinstance(data_type, TimestampNTZType):
        return _timestamp_text
    if isinstance(data_type, DayTimeIntervalType):
        return timedelta.total_seconds
    if isinstance(data_type, ArrayType):
        element = encoder(data_type.elementType, f"{path}[]")
        if element is None:
            return None
        return lambda value: [None if item is None else element(item) for item in value]
    if isinstance(data_type, MapType):
        key = encoder(data_type.keyType, f"{path}{{key}}")
        item = encoder(data_type.valueType, f"{path}{{}}")

        def encode_map(value: list[tuple[Any, Any]]) -> dict[str, Any]:
            encoded = {}
            for k, v in value:
                encoded[_map_key(k if key is None else key(k))] = v if v is None or item is None else item(v)
            return encoded

        return encode_map
    if isinstance(data_type, StructType):
        fields = [(field.name, encoder(field.dataType, f"{path}.{field.name}")) for field in data_type]

        def encode_struct(value: dict[str, Any]) -> dict[str, Any]:
            encoded = {}
            for name, encode in fields:
                field = value.get(name)
                encoded[name] = field if field is None or encode is None else encode(field)
            return encoded

        return encode_struct
    raise Unsupported("no JSON form")


def _utc(value: datetime) -> datetime:
    """Naive UTC; a naive value already is."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _float_to_json(value: float) -> float | str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    return value


def _timestamp_text(value: datetime) -> str:
    """ISO 8601 without a zone: no fraction for whole seconds, else milliseconds or microseconds."""
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        fraction = f"{value.microsecond:06d}"
        text += "." + (fraction[:3] if fraction.endswith("000") else fraction)
    return text


def _map_key(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def encode_records(batch: pa.RecordBatch, names: list[str], encoders: list[Encoder]) -> list[dict[str, Any]]:
    columns = []
    for index, encode in enumerate(encoders):
        values = batch.column(index).to_pylist()
        if encode is not None:
            values = [None if value is None else encode(value) for value in values]
        columns.append(values)
    return [dict(zip(names, row, strict=True)) for row in zip(*columns, strict=True)]


Decoder = Callable[[Any], Any]
"""JSON value (not null) -> Python value for pyarrow; raises `_Mismatch`."""

_INTEGER_RANGES = {
    ByteType: (-(2**7), 2**7 - 1),
    ShortType: (-(2**15), 2**15 - 1),
    IntegerType: (-(2**31), 2**31 - 1),
    LongType: (-(2**63), 2**63 - 1),
}
_FLOAT_WORDS = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def decoder(data_type: DataType, path: str) -> Decoder:
    name = data_type.simpleString()
    if isinstance(data_type, StringType):
        return _expect(str, path, "a string")
    if isinstance(data_type, BooleanType):
        return _expect(bool, path, "true or false")
    if type(data_type) in _INTEGER_RANGES:
        low, high = _INTEGER_RANGES[type(data_type)]
        return lambda value: _integer(value, low, high, path, name)
    if isinstance(data_type, FloatType | DoubleType):
        return lambda value: _float(value, path, name)
    if isinstance(data_type, DecimalType):
        return lambda value: _decimal(value, path, name)
    if isinstance(data_type, BinaryType):
        return lambda value: _binary(value, path)
    if isinstance(data_type, DateType):
        return lambda value: _date(value, path)
    if isinstance(data_type, TimestampType):
        return lambda value: _timestamp(value, path, aware=True)
    if isinstance(data_type, TimestampNTZType):
        return lambda value: _timestamp(value, path, aware=False)
    if isinstance(data_type, DayTimeIntervalType):
        return lambda value: _interval(value, path)
    if isinstance(data_type, NullType):
        return lambda value: _null(value, path)
    if isinstance(data_type, ArrayType):
        element = decoder(data_type.elementType, f"{path}[]")

        def decode_array(value: Any) -> list[Any]:
            if not isinstance(value, list):
                raise _mismatch(path, f"an array ({name})", value)
            return [None if item is None else element(item) for item in value]

        return decode_array
    if isinstance(data_type, MapType):
        key = _map_key_decoder(data_type.keyType, f"{path}{{key}}")
        item = decoder(data_type.valueType, f"{path}{{}}")

        def decode_map(value: Any) -> list[tuple[Any, Any]]:
            if not isinstance(value, dict):
                raise _mismatch(path, f"an object ({name})", value)
            return [(key(k), None if v is None else item(v)) for k, v in value.items()]

        return decode_map
    if isinstance(data_type, StructType):
        fields = {field.name: decoder(field.dataType, f"{path}.{field.name}") for field in data_type}

        def decode_struct(value: Any) -> dict[str, Any]:
            if not isinstance(value, dict):
                raise _mismatch(path, f"an object ({name})", value)
            unknown = [k for k in value if k not in fields]
            if unknown:
                raise _Mismatch(
                    f"column {path!r}: {unknown[0]!r} is not a field of {name} (fields: {', '.join(fields)})"
                )
            return {k: None if value.get(k) is None else decode(value[k]) for k, decode in fields.items()}

        return decode_struct
    raise Unsupported("no JSON form")


def _expect(kind: type, path: str, expected: str) -> Decoder:
    def decode(value: Any) -> Any:
        if not isinstance(value, kind):
            raise _mismatch(path, expected, value)
        return value

    return decode


def _integer(value: Any, low: int, high: int, path: str, name: str) -> int:
    number: Any = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif (isinstance(value, float) and value.is_integer()) or (
        isinstance(value, str) and re.fullmatch(r"\s*[-+]?\d+\s*", value)
    ):
        number = int(value)
    if number is None:
        raise _mismatch(path, f"an integer ({name}: a JSON integer or a string of digits)", value)
    if not low <= number <= high:
        raise _mismatch(path, f"an integer between {low} and {high} ({name})", value)
    return number


def _float(value: Any, path: str, name: str) -> float:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in _FLOAT_WORDS:
        return _FLOAT_WORDS[value]
    raise _mismatch(path, f'a number ({name}; or "NaN", "Infinity", "-Infinity")', value)


def _decimal(value: Any, path: str, name: str) -> Decimal:
    if isinstance(value, str | int | float) and not isinstance(value, bool):
        try:
            number = Decimal(str(value).strip())
        except InvalidOperation:
            number = None
        if number is not None and number.is_finite():
            return number
    raise _mismatch(path, f"a decimal ({name}: a string of digits or a number)", value)


def _binary(value: Any, path: str) -> bytes:
    if isinstance(value, str):
        text = value.replace("-", "+").replace("_", "/")  # the URL-safe alphabet too
        try:
            return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
        except (binascii.Error, ValueError):
            pass
    raise _mismatch(path, "base64 text (binary)", value)


def _date(value: Any, path: str) -> date:
    if isinstance(value, str):
        with contextlib.suppress(ValueError):
            return date.fromisoformat(value)
    raise _mismatch(path, "a date as 'YYYY-MM-DD'", value)


def _timestamp(value: Any, path: str, aware: bool) -> datetime:
    if isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            parsed = None
        if parsed is not None:
            if parsed.tzinfo is None:
                return parsed.replace(tzinfo=UTC) if aware else parsed
            parsed = parsed.astimezone(UTC)
            return parsed if aware else parsed.replace(tzinfo=None)
    kind = "timestamp" if aware else "timestamp_ntz"
    raise _mismatch(path, f"ISO 8601 text ({kind}, e.g. '2024-05-01T12:00:00.123Z')", value)


def _interval(value: Any, path: str) -> timedelta:
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        with contextlib.suppress(OverflowError):
            return timedelta(seconds=value)
    raise _mismatch(path, "a number of seconds (interval day to second)", value)


def _null(value: Any, path: str) -> None:
    raise _mismatch(path, "null (void)", value)


def _map_key_decoder(data_type: DataType, path: str) -> Decoder:
    """Object keys are text: the value itself for types sent as text, else its JSON (`"7"`, `"true"`)."""
    decode = decoder(data_type, path)
    if isinstance(data_type, StringType | LongType | DecimalType | BinaryType | DateType):
        return decode
    if isinstance(data_type, TimestampType | TimestampNTZType):
        return decode

    def decode_key(key: str) -> Any:
        try:
            value = json.loads(key)
        except ValueError:
            raise _mismatch(path, f"a map key holding {data_type.simpleString()} as JSON", key) from None
        return decode(value)

    return decode_key


def decode_records(
    records: list[Any], schema: pa.Schema, decoders: list[Decoder], where: str
) -> pa.RecordBatch:
    names = schema.names
    positions = {name: index for index, name in enumerate(names)}
    columns: list[list[Any]] = [[] for _ in names]
    for number, record in enumerate(records):
        if not isinstance(record, dict):
            raise PluginError(f"{where}: record {number} is not an object: {snippet(record, 80)}")
        for key in record:
            if key not in positions:
                raise PluginError(
                    f"{where}: record {number}: {key!r} is not an output column "
                    f"(columns: {', '.join(names)}); declare it in output_schema"
                )
        for index, (name, decode) in enumerate(zip(names, decoders, strict=True)):
            value = record.get(name)
            try:
                columns[index].append(None if value is None else decode(value))
            except _Mismatch as error:
                raise PluginError(f"{where}: record {number}: {error}") from None
    arrays = []
    for name, values, field in zip(names, columns, schema, strict=True):
        try:
            arrays.append(pa.array(values, type=field.type))
        except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError) as error:
            raise PluginError(f"{where}: column {name!r}: cannot be {field.type}: {error}") from None
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
