"""ElementAt, MapGet, ListContains, ArrayAggregate and ArrayOperate.

Dagger returns elements and map values as Java objects that Flink prints with `String.valueOf`; Spark
needs one result type per function, so ElementAt and MapGet return that text (`CAST(... AS DOUBLE)`
reads it back, as Dagger's documented queries do), ArrayAggregate a DOUBLE and ArrayOperate an
ARRAY<STRING>. Maps may be Spark maps or Dagger's layout, an array of (key, value) rows.

Dagger's ArrayAggregate and ArrayOperate run a Java stream of the declared input type (`IntStream` for
'int', `LongStream` for 'long', `DoubleStream` for 'double' and 'float'), so their results have that
type: ArrayOperate(array(1, 2, 1), 'distinct.sorted', 'int') is [1, 2], a sum of ints an int. Where the
operation and the input type are written as literals, the SQL stage casts the call to that type
(`type_array_calls`); with an 'other' input, or types given by columns, the text and DOUBLE remain.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs.aggregate import RewrittenSql, SqlBuilder
from jobs.udfs.javatext import java_double, java_text, texts
from jobs.udfs.registration import FunctionSet, UdfError, distinct_values
from jobs.udfs.sql_text import code_tokens, find_calls

# --------------------------------------------------------------------------------------------------------
# ElementAt
# --------------------------------------------------------------------------------------------------------


def _lists(array: pa.Array, function: str) -> pa.ListArray:
    if isinstance(array, pa.LargeListArray):
        array = pc.cast(array, pa.list_(array.type.value_type))
    if not isinstance(array, pa.ListArray):
        raise UdfError(f"{function}: the first argument must be an array, got {array.type}")
    return array


def _elements(lists: pa.ListArray, index: pa.Array, *, from_end: bool) -> pa.Array:
    """The element at each row's 0-based index, null where out of range (a negative index counts from
    the end when `from_end`)."""
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    wanted = pc.fill_null(pc.cast(index, pa.int64()), 0).to_numpy(zero_copy_only=False)
    if from_end:
        wanted = np.where(wanted < 0, wanted + lengths, wanted)
    missing = pc.or_(lists.is_null(), index.is_null()).to_numpy(zero_copy_only=False)
    inside = (wanted >= 0) & (wanted < lengths) & ~missing
    starts = lists.offsets.to_numpy()[:-1]
    positions = pa.array(np.where(inside, starts + wanted, 0), mask=~inside)
    return lists.values.take(positions)


def _field_text(elements: pa.Array, path: str) -> pa.Array | str:
    """The dotted field `a.b` of struct elements as text: a NULL leaf prints as Java's
    `String.valueOf(null)`; a missing element, a NULL row on the way or a field that is not there
    gives `''`."""
    values, present = elements, elements.is_valid()
    for name in path.split("."):
        if not pa.types.is_struct(values.type) or values.type.get_field_index(name) < 0:
            return ""
        present = pc.and_(present, values.is_valid())
        values = pc.struct_field(values, name)
    return pc.if_else(present, pc.fill_null(texts(values), "null"), "")


def element_at(*arguments: pa.Array) -> pa.Array:
    """`ElementAt(array, index)`: the element as text, negative index from the end, NULL out of range.
    `ElementAt(rows, pathOfArray, index, path[, tableName])`: the dotted `path` of the row at `index` as
    text, `''` when out of range or the path names no field (rows carry their field names here, so
    `pathOfArray` and `tableName` only keep Dagger's signature)."""
    lists = _lists(arguments[0], "ElementAt")
    if len(arguments) == 2:
        return texts(_elements(lists, arguments[1], from_end=True))
    elements = _elements(lists, arguments[2], from_end=False)
    result = pa.nulls(len(lists), pa.string())
    for path, rows in distinct_values(arguments[3]):
        result = pc.if_else(rows, _field_text(elements, path), result)
    return pc.fill_null(result, "")


# --------------------------------------------------------------------------------------------------------
# MapGet
# --------------------------------------------------------------------------------------------------------


def _entries(maps: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array]:
    """(offsets, keys, values) of a Spark map or of Dagger's array of (key, value) rows."""
    if isinstance(maps, pa.MapArray):
        return maps.offsets, maps.keys, maps.items
    rows = _lists(maps, "MapGet")
    if not pa.types.is_struct(rows.type.value_type) or rows.type.value_type.num_fields != 2:
        raise UdfError(
            f"MapGet: the first argument must be a map or an array of (key, value) rows, got {maps.type}"
        )
    return rows.offsets, rows.values.field(0), rows.values.field(1)


def _comparable_key(key: object, key_type: pa.DataType) -> pa.Scalar | None:
    """`key` as a scalar of the map's key type when it is of the same kind (numbers compare by value)."""
    number = isinstance(key, int | float | Decimal) and not isinstance(key, bool)
    if number and (pa.types.is_integer(key_type) or pa.types.is_floating(key_type)):
        try:
            return pa.scalar(key).cast(key_type)
        except (pa.ArrowInvalid, OverflowError):
            return None  # 1.5 equals no integer key
    if isinstance(key, str) and pa.types.is_string(key_type):
        return pa.scalar(key, key_type)
    if isinstance(key, bool) and pa.types.is_boolean(key_type):
        return pa.scalar(key)
    return None


def map_get(maps: pa.Array, key: pa.Array) -> pa.Array:
    """The value of the first entry whose key equals `key`, as text; NULL when no entry has it."""
    offsets, keys, values = _entries(maps)
    counts = np.diff(offsets.to_numpy())
    owner = np.repeat(np.arange(len(maps)), counts)
    result = pa.nulls(len(maps), pa.string())
    for wanted, rows in distinct_values(key):
        probe = _comparable_key(wanted, keys.type)
        if probe is None:
            continue  # a key of another kind (text for a number key) equals no entry, as in Java
        matches = pc.fill_null(pc.equal(keys, probe), False).to_numpy(zero_copy_only=False)
        matched_rows, first = np.unique(owner[matches], return_index=True)
        hit = np.zeros(len(maps), dtype=bool)
        hit[matched_rows] = True
        position = np.zeros(len(maps), dtype=np.int64)
        position[matched_rows] = np.flatnonzero(matches)[first]
        found = texts(values.take(pa.array(position, mask=~hit)))
        result = pc.if_else(rows, found, result)
    return pc.if_else(maps.is_null(), pa.scalar(None, pa.string()), result)


# --------------------------------------------------------------------------------------------------------
# ArrayAggregate / ArrayOperate
# --------------------------------------------------------------------------------------------------------


def _as_int(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TypeError
    return int(value)


def _as_float32(value: object) -> float:
    return float(np.float32(float(value)))


# Dagger's inputDataType (case-insensitive) -> how an element is read, and the Java integer width
# (sums wrap around as Java's int/long arithmetic does).
_ELEMENT_TYPES: dict[str, tuple[Callable[[object], object], int | None]] = {
    "INTEGER": (_as_int, 32),
    "INT": (_as_int, 32),
    "LONG": (_as_int, 64),
    "BIGINT": (_as_int, 64),
    "DOUBLE": (float, None),
    "FLOAT": (_as_float32, None),
}
_STREAM_OPERATIONS = {"distinct", "sorted"}
_NUMERIC_TERMINALS = {"average", "sum", "min", "max", "count", "findFirst", "findAny"}
_OTHER_TERMINALS = {"count", "findFirst", "findAny"}


def _element_type(function: str, input_data_type: str) -> str:
    name = input_data_type.upper()
    if name not in _ELEMENT_TYPES and name != "OTHER":
        raise UdfError(  # after the function's name, Dagger's message word for word
            f"{function}: No support for inputDataType: {input_data_type}."
            "Please provide 'Other' as inputDataType instead."
        )
    return name


def _read_elements(function: str, elements: list, element_type: str, input_data_type: str) -> list:
    if element_type == "OTHER":
        return elements
    read, _ = _ELEMENT_TYPES[element_type]
    values = []
    for element in elements:
        try:
            values.append(read(element))
        except (TypeError, ValueError):
            raise UdfError(
                f"{function}: element {element!r} is not of inputDataType {input_data_type}"
            ) from None
    return values


def _identity(value: object) -> object:
    """What Java's `equals` tells apart: 1 and 1.0 are different objects; rows compare by content."""
    if isinstance(value, dict | list):
        return ("nested", java_text(value))
    return (type(value).__name__, value)


def _apply_stream_operation(function: str, values: list, operation: str) -> list:
    if operation == "distinct":
        first_seen: dict[object, object] = {}
        for value in values:
            first_seen.setdefault(_identity(value), value)
        return list(first_seen.values())
    try:
        return sorted(values)
    except TypeError:
        raise UdfError(f"{function}: 'sorted' needs comparable elements, got {values!r}") from None


def _wrap(total: int, bits: int | None) -> int:
    if bits is None:
        return total
    half = 1 << (bits - 1)
    return (total + half) % (1 << bits) - half


def _aggregate(values: list, terminal: str, element_type: str) -> float | None:
    """Java's stream terminal on the elements; an empty stream's Optional gives 0, as Dagger unwraps it."""
    if terminal == "count":
        return float(len(values))
    if terminal in ("findFirst", "findAny"):
        if not values:
            return None if element_type == "OTHER" else 0.0
        first = values[0]
        if element_type == "OTHER" and (isinstance(first, bool) or not isinstance(first, int | float)):
            raise UdfError(
                f"ArrayAggregate: {terminal} of 'Other' elements gives {first!r}, which is not a number; "
                "use ElementAt(array, 0)"
            )
        return float(first)
    if not values:
        return 0.0
    if terminal == "sum":
        if element_type in ("DOUBLE", "FLOAT"):
            return math.fsum(values)
        return float(_wrap(sum(values), _ELEMENT_TYPES[element_type][1]))
    if terminal == "average":
        return math.fsum(values) / len(values)
    return float(min(values) if terminal == "min" else max(values))


def _unsolvable(function: str, operation: str, operation_type: str) -> UdfError:
    return UdfError(
        f"{function}: unsolvable function/method '{operation}' in operationType '{operation_type}'"
    )


def _array_aggregate_row(elements: list, operation_type: str, input_data_type: str) -> float | None:
    element_type = _element_type("ArrayAggregate", input_data_type)
    values = _read_elements("ArrayAggregate", elements, element_type, input_data_type)
    *streaming, terminal = operation_type.split(".")
    for operation in streaming:
        if operation not in _STREAM_OPERATIONS:
            raise _unsolvable("ArrayAggregate", operation, operation_type)
        values = _apply_stream_operation("ArrayAggregate", values, operation)
    terminals = _OTHER_TERMINALS if element_type == "OTHER" else _NUMERIC_TERMINALS
    if terminal not in terminals:
        if terminal in _STREAM_OPERATIONS:
            raise UdfError(
                f"ArrayAggregate: operationType '{operation_type}' ends with '{terminal}', which gives an "
                f"array, not a value: end it with one of {', '.join(sorted(terminals))} (or use ArrayOperate)"
            )
        raise _unsolvable("ArrayAggregate", terminal, operation_type)
    return _aggregate(values, terminal, element_type)


def _array_operate_row(elements: list, operation_type: str, input_data_type: str) -> list[str | None]:
    element_type = _element_type("ArrayOperate", input_data_type)
    values = _read_elements("ArrayOperate", elements, element_type, input_data_type)
    for operation in operation_type.split("."):
        if operation not in _STREAM_OPERATIONS:
            raise _unsolvable("ArrayOperate", operation, operation_type)
        values = _apply_stream_operation("ArrayOperate", values, operation)
    if element_type in ("DOUBLE", "FLOAT"):
        return [java_double(value) for value in values]
    return [None if value is None else java_text(value) for value in values]


_STREAM_RESULT_TYPES = {
    "INTEGER": "INT", "INT": "INT", "LONG": "BIGINT", "BIGINT": "BIGINT",
    "DOUBLE": "DOUBLE", "FLOAT": "DOUBLE",
}  # fmt: skip
"""The Spark type of the elements of Dagger's Java stream for each input type."""


def dagger_result_type(function: str, operation_type: str, input_data_type: str) -> str | None:
    """The Spark type of what Dagger's ArrayOperate or ArrayAggregate call returns (None: not typed)."""
    element = _STREAM_RESULT_TYPES.get(input_data_type.upper())
    if function.lower() == "arrayoperate":
        return None if element is None else f"ARRAY<{element}>"
    terminal = operation_type.split(".")[-1]
    if terminal == "count":  # of any stream, 'other' too
        return "BIGINT"
    if element is None:
        return None
    if terminal == "average":
        return "DOUBLE"
    return element if terminal in _NUMERIC_TERMINALS else None


def type_array_calls(sql: str) -> RewrittenSql:
    """`sql` with each ArrayOperate and ArrayAggregate call whose operation and input type are literals
    cast to the type Dagger's call returns."""
    builder, copied_to = SqlBuilder(sql), 0
    for call in find_calls(sql, {"arrayoperate", "arrayaggregate"}):
        if len(call.arguments) != 3:
            continue  # the function's own error names the count
        operation, input_type = (_string_literal(sql, *call.arguments[index]) for index in (1, 2))
        if operation is None or input_type is None:
            continue
        result_type = dagger_result_type(call.name, operation, input_type)
        if result_type is None:
            continue
        builder.copy(copied_to, call.start)
        builder.insert("CAST(", call.start)
        builder.copy(call.start, call.close_paren + 1)
        builder.insert(f" AS {result_type})", call.start)
        copied_to = call.close_paren + 1
    builder.copy(copied_to, len(sql))
    return builder.result()


def _string_literal(sql: str, start: int, end: int) -> str | None:
    tokens = code_tokens(sql[start:end])
    if len(tokens) != 1 or tokens[0].kind != "string" or sql[start] not in "'\"":
        return None
    return sql[start + 1 : end - 1]


def _per_row(function: str, row_function: Callable, result_type: pa.DataType) -> Callable[..., pa.Array]:
    def evaluate(arrays: pa.Array, operation_type: pa.Array, input_data_type: pa.Array) -> pa.Array:
        lists = _lists(arrays, function).to_pylist()
        operations, data_types = operation_type.to_pylist(), input_data_type.to_pylist()
        results = [
            None if None in (elements, operation, data_type) else row_function(elements, operation, data_type)
            for elements, operation, data_type in zip(lists, operations, data_types, strict=True)
        ]
        return pa.array(results, result_type)

    return evaluate


def declare(functions: FunctionSet) -> None:
    functions.arrow("ElementAt", element_at, "string", arities=(2, 4, 5))
    functions.arrow("MapGet", map_get, "string")
    functions.sql(
        "ListContains",
        "list ARRAY<STRING>, item STRING",
        "BOOLEAN",
        # array_contains gives NULL when the item is absent and the list holds a NULL; Java says false
        "CASE WHEN list IS NULL THEN false WHEN item IS NULL THEN exists(list, element -> element IS NULL) "
        "ELSE coalesce(array_contains(list, item), false) END",
    )
    functions.arrow(
        "ArrayAggregate", _per_row("ArrayAggregate", _array_aggregate_row, pa.float64()), "double"
    )
    functions.arrow(
        "ArrayOperate",
        _per_row("ArrayOperate", _array_operate_row, pa.list_(pa.string())),
        "array<string>",
    )
