"""Feast feature rows the way Dagger builds them (`FeatureUtils`), a whole Arrow batch at a time.

A feature row is `struct<name, value, key>`: `key` repeats `name` (Dagger's rows carry the name twice)
and `value` has one slot per value type, exactly one of them set: bytes, string, int32, int64, double,
float, bool, timestamp (Dagger's slots 0-7). A null value leaves every slot empty.

Untyped features (`Features`) pick the slot from the value's column type; typed ones (`FeaturesWithType`)
take it from a type name such as 'DoubleType' and convert the value the way Dagger's value transformers
do: a null number becomes 0, a null boolean false. Keys and type names are read as `String.valueOf`
reads them, so a null one is the text "null".
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs.javatext import texts
from jobs.udfs.registration import UdfError

VALUE_SLOTS: tuple[tuple[str, pa.DataType, str], ...] = (
    ("bytes_val", pa.binary(), "ByteType"),
    ("string_val", pa.string(), "StringType"),
    ("int32_val", pa.int32(), "IntegerType"),
    ("int64_val", pa.int64(), "LongType"),
    ("double_val", pa.float64(), "DoubleType"),
    ("float_val", pa.float32(), "FloatType"),
    ("bool_val", pa.bool_(), "BooleanType"),
    ("timestamp_val", pa.timestamp("us", tz="UTC"), "TimestampType"),
)
"""(slot name, Arrow type, Dagger's ValueEnum name) in Dagger's slot order."""

VALUE_TYPE_NAMES = tuple(type_name for _, _, type_name in VALUE_SLOTS)
_SLOT_BY_TYPE_NAME = {type_name: index for index, (_, _, type_name) in enumerate(VALUE_SLOTS)}
FEATURE_VALUE_TYPE = pa.struct([(name, arrow_type) for name, arrow_type, _ in VALUE_SLOTS])
FEATURE_ROW_TYPE = pa.struct([("name", pa.string()), ("value", FEATURE_VALUE_TYPE), ("key", pa.string())])
FEATURE_ROWS_DDL = (
    "array<struct<name: string, value: struct<bytes_val: binary, string_val: string, int32_val: int, "
    "int64_val: bigint, double_val: double, float_val: float, bool_val: boolean, "
    "timestamp_val: timestamp>, key: string>>"
)
_ZERO_WHEN_NULL = {"IntegerType": 0, "LongType": 0, "DoubleType": 0.0, "FloatType": 0.0, "BooleanType": False}


class FeatureValueError(UdfError):
    """A value that no feature-row slot can hold, or an unknown value type name."""


def unknown_type_message(type_name: object) -> str:
    """Dagger's text for a type name that is not a ValueEnum constant."""
    enum = "org.raystack.dagger.functions.udfs.aggregate.feast.handler.ValueEnum"
    return f"No enum constant {enum}.{type_name}"


def feature_rows(
    function: str, names: list[pa.Array], values: list[pa.Array], type_names: list[pa.Array] | None
) -> pa.ListArray:
    """Per input row, the list of its features (`names[i]`, `values[i]`), in argument order.

    Typed features are kept once per equal (key, value, type name), first occurrence first: Dagger's
    typed accumulator is a map keyed by that triplet. Untyped ones are all kept, as Dagger's list keeps them.
    """
    length = len(names[0]) if names else 0
    keys = [pc.fill_null(texts(name), "null") for name in names]
    types = None if type_names is None else [pc.fill_null(texts(name), "null") for name in type_names]
    rows = []
    for position, (key, value) in enumerate(zip(keys, values, strict=True)):
        if types is None:
            slots = _untyped_slots(function, position, value)
        else:
            slots = _typed_slots(function, position, value, types[position])
        rows.append(pa.StructArray.from_arrays([key, slots, key], fields=list(FEATURE_ROW_TYPE)))
    count = len(rows)
    if count == 0:
        return pa.array([[] for _ in range(length)], type=pa.list_(FEATURE_ROW_TYPE))
    kept = np.ones((length, count), dtype=bool) if types is None else _first_occurrences(keys, values, types)
    # Feature-major concatenation, then each row's features gathered next to each other.
    order = (np.arange(count)[None, :] * length + np.arange(length)[:, None]).ravel()
    items = pa.concat_arrays(rows).take(pa.array(order)).filter(pa.array(kept.ravel()))
    offsets = np.concatenate([[0], np.cumsum(kept.sum(axis=1))]).astype(np.int32)
    return pa.ListArray.from_arrays(pa.array(offsets), items, type=pa.list_(FEATURE_ROW_TYPE))


def _first_occurrences(keys: list[pa.Array], values: list[pa.Array], types: list[pa.Array]) -> np.ndarray:
    """(row, feature) -> whether no earlier feature of the row has the same key, value and type name."""
    kept = np.ones((len(keys[0]), len(keys)), dtype=bool)
    for later in range(1, len(keys)):
        for earlier in range(later):
            same = pc.and_(pc.equal(keys[earlier], keys[later]), pc.equal(types[earlier], types[later]))
            if not pc.any(same).as_py():
                continue  # the usual case, literal keys that differ: no value comparison needed
            same = pc.and_(same, _java_equals(values[earlier], values[later]))
            kept[:, later] &= ~same.to_numpy(zero_copy_only=False)
    return kept


def _java_equals(left: pa.Array, right: pa.Array) -> pa.BooleanArray:
    """`Objects.equals` per row: values of different column types differ (an Integer never equals a Long),
    two nulls are equal, and doubles compare by their bits (NaN equals NaN, 0.0 differs from -0.0)."""
    both_null = pc.and_(left.is_null(), right.is_null())
    if left.type != right.type:
        return both_null
    if pa.types.is_struct(left.type):  # a (seconds, nanos) Row: equal fields
        equal = pa.array(np.ones(len(left), dtype=bool))
        for left_field, right_field in zip(left.flatten(), right.flatten(), strict=True):
            equal = pc.and_(equal, _java_equals(left_field, right_field))
    elif pa.types.is_float32(left.type) or pa.types.is_float64(left.type):
        bits = pa.int32() if pa.types.is_float32(left.type) else pa.int64()
        same_bits = pc.equal(left.view(bits), right.view(bits))
        equal = pc.or_(same_bits, pc.and_(pc.is_nan(left), pc.is_nan(right)))
    else:
        equal = pc.equal(left, right)
    both_set = pc.and_(left.is_valid(), right.is_valid())
    return pc.or_(both_null, pc.and_(both_set, pc.fill_null(equal, False)))


def _slots_struct(length: int, filled: dict[int, pa.Array]) -> pa.StructArray:
    children = [
        filled.get(index, pa.nulls(length, arrow_type))
        for index, (_, arrow_type, _) in enumerate(VALUE_SLOTS)
    ]
    return pa.StructArray.from_arrays(children, fields=list(FEATURE_VALUE_TYPE))


def _untyped_slots(function: str, position: int, value: pa.Array) -> pa.StructArray:
    value_type = value.type
    if pa.types.is_null(value_type):
        return _slots_struct(len(value), {})
    if pa.types.is_decimal(value_type):
        return _slots_struct(len(value), {4: pc.cast(value, pa.float64())})
    if pa.types.is_timestamp(value_type) or _is_seconds_nanos(value_type):
        return _slots_struct(len(value), {7: _timestamps(value)})
    for index, (_, arrow_type, _) in enumerate(VALUE_SLOTS[:7]):
        if value_type == arrow_type or (index == 1 and pa.types.is_large_string(value_type)):
            return _slots_struct(len(value), {index: pc.cast(value, arrow_type)})
        if index == 0 and pa.types.is_large_binary(value_type):
            return _slots_struct(len(value), {0: pc.cast(value, arrow_type)})
    raise FeatureValueError(
        f"{function}: the value of feature {position + 1} has type {value_type}, which a feature row "
        "cannot hold (binary, string, int, bigint, double, float, boolean, decimal or timestamp)"
    )


def _typed_slots(function: str, position: int, value: pa.Array, type_names: pa.Array) -> pa.StructArray:
    length = len(value)
    filled: dict[int, pa.Array] = {}
    for type_name in pc.unique(type_names).to_pylist():
        if type_name not in _SLOT_BY_TYPE_NAME:
            raise FeatureValueError(f"{function}: {unknown_type_message(type_name)}")
        slot = _SLOT_BY_TYPE_NAME[type_name]
        mask = pc.equal(type_names, type_name)
        try:
            converted = _convert(value.filter(mask), type_name)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as error:
            raise FeatureValueError(
                f"{function}: the value of feature {position + 1} cannot be read as {type_name}: {error}"
            ) from None
        base = filled.get(slot, pa.nulls(length, VALUE_SLOTS[slot][1]))
        filled[slot] = pc.replace_with_mask(base, mask, converted)
    return _slots_struct(length, filled)


def _convert(value: pa.Array, type_name: str) -> pa.Array:
    """`value` as the slot of `type_name`, null numbers and booleans as Dagger's zero values."""
    slot_type = VALUE_SLOTS[_SLOT_BY_TYPE_NAME[type_name]][1]
    value_type = value.type
    if pa.types.is_null(value_type):
        converted = pa.nulls(len(value), slot_type)
    elif type_name == "TimestampType":
        if not (pa.types.is_timestamp(value_type) or _is_seconds_nanos(value_type)):
            raise ValueError(f"expected a timestamp or a (seconds, nanos) struct, got {value_type}")
        converted = _timestamps(value)
    elif type_name == "StringType":
        if not (
            _is_string(value_type)
            or pa.types.is_integer(value_type)
            or pa.types.is_floating(value_type)
            or pa.types.is_boolean(value_type)
            or pa.types.is_decimal(value_type)
        ):
            raise ValueError(f"expected a string, number or boolean, got {value_type}")
        converted = texts(value)  # String.valueOf: 1.0E10, not 10000000000.0
    elif type_name == "ByteType":
        binary = pa.types.is_binary(value_type) or pa.types.is_large_binary(value_type)
        if not (_is_string(value_type) or binary):
            raise ValueError(f"expected bytes or a string, got {value_type}")
        converted = pc.cast(value, pa.binary())
    elif type_name == "BooleanType":
        if _is_string(value_type):
            converted = pc.equal(pc.utf8_lower(value), "true")  # Boolean.parseBoolean
        elif pa.types.is_boolean(value_type):
            converted = value
        else:
            raise ValueError(f"expected a boolean or a string, got {value_type}")
    else:
        if pa.types.is_boolean(value_type) or not (
            _is_string(value_type)
            or pa.types.is_integer(value_type)
            or pa.types.is_floating(value_type)
            or pa.types.is_decimal(value_type)
        ):
            raise ValueError(f"expected a number or a string, got {value_type}")
        if _is_string(value_type) and type_name in ("DoubleType", "FloatType"):
            value = pc.utf8_trim_whitespace(value)  # Double.valueOf trims, Integer.valueOf does not
        # Integers: overflow or a lost fraction is an error (Integer.valueOf); floats round like Java.
        converted = pc.cast(value, slot_type, safe=type_name in ("IntegerType", "LongType"))
    zero = _ZERO_WHEN_NULL.get(type_name)
    return converted if zero is None else pc.fill_null(converted, pa.scalar(zero, slot_type))


def _is_string(value_type: pa.DataType) -> bool:
    return pa.types.is_string(value_type) or pa.types.is_large_string(value_type)


def _is_seconds_nanos(value_type: pa.DataType) -> bool:
    """Dagger's Timestamp row: a struct of two integers (seconds, nanos)."""
    return (
        pa.types.is_struct(value_type)
        and value_type.num_fields == 2
        and all(pa.types.is_integer(value_type.field(index).type) for index in range(2))
    )


def _timestamps(value: pa.Array) -> pa.Array:
    if pa.types.is_timestamp(value.type):
        return pc.cast(value, pa.timestamp("us", tz="UTC"))
    seconds = pc.cast(value.field(0), pa.int64())
    nanos = pc.cast(value.field(1), pa.int64())
    micros = pc.add(pc.multiply(seconds, 1_000_000), pc.divide(nanos, 1000))
    micros = pc.if_else(value.is_null(), pa.scalar(None, pa.int64()), micros)
    return pc.cast(micros, pa.timestamp("us", tz="UTC"))
