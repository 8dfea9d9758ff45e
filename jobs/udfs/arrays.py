"""ElementAt, MapGet, ListContains, ArrayAggregate and ArrayOperate.

ElementAt and MapGet are JVM functions (`CollectionFunctions.java`); ElementAt's path forms (four or five
arguments) are calls of `DaggerElementAtPath`, which the SQL stage writes for them. Dagger returns
elements and map values as Java objects that Flink prints with `String.valueOf`; Spark needs one result
type per function, so ElementAt and MapGet return that text (`CAST(... AS DOUBLE)` reads it back, as
Dagger's documented queries do), ArrayAggregate a DOUBLE and ArrayOperate an ARRAY<STRING>. Maps may be
Spark maps or Dagger's layout, an array of (key, value) rows.

Dagger's ArrayAggregate and ArrayOperate run a Java stream of the declared input type (`IntStream` for
'int', `LongStream` for 'long', `DoubleStream` for 'double' and 'float'), so their results have that
type: ArrayOperate(array(1, 2, 1), 'distinct.sorted', 'int') is [1, 2], a sum of ints an int. Where the
operation and the input type are written as literals, the SQL stage casts the call to that type
(`rewrite_array_calls`); with an 'other' input, or types given by columns, the text and DOUBLE remain.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs.aggregate import RewrittenSql, SqlBuilder
from jobs.udfs.javatext import java_double, java_text
from jobs.udfs.registration import FunctionSet, UdfError
from jobs.udfs.sql_text import Call, code_tokens, find_calls


def _lists(array: pa.Array, function: str) -> pa.ListArray:
    if isinstance(array, pa.LargeListArray):
        array = pc.cast(array, pa.list_(array.type.value_type))
    if not isinstance(array, pa.ListArray):
        raise UdfError(f"{function}: the first argument must be an array, got {array.type}")
    return array


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


def rewrite_array_calls(sql: str) -> RewrittenSql:
    """`sql` with each ArrayOperate and ArrayAggregate call whose operation and input type are literals
    cast to the type Dagger's call returns, and ElementAt's path forms (four or five arguments) calling
    `DaggerElementAtPath`: a JVM function has one arity."""
    edits: list[tuple[int, int, int, str]] = []
    """(position, order among edits there, end of the original text it replaces, text)"""
    for call in find_calls(sql, {"arrayoperate", "arrayaggregate"}):
        result_type = _typed_result(sql, call)
        if result_type is not None:
            edits.append((call.start, 0, call.start, "CAST("))
            edits.append((call.close_paren + 1, 0, call.close_paren + 1, f" AS {result_type})"))
    for call in find_calls(sql, {"elementat"}):
        if len(call.arguments) in (4, 5):  # the two-argument form is ElementAt itself
            edits.append((call.start, 0, call.open_paren, ELEMENT_AT_PATH))
            if len(call.arguments) == 4:  # no tableName; after a cast that ends the last argument
                edits.append((call.arguments[-1][1], 1, call.arguments[-1][1], ", NULL"))
    if not edits:
        return RewrittenSql(sql, sql)
    builder, copied_to = SqlBuilder(sql), 0
    for position, _, replaced_to, text in sorted(edits):
        builder.copy(copied_to, position)
        builder.insert(text, position)
        copied_to = replaced_to
    builder.copy(copied_to, len(sql))
    return builder.result()


def _typed_result(sql: str, call: Call) -> str | None:
    """The type an ArrayOperate or ArrayAggregate call returns in Dagger, when its operation and input
    type are literals; None otherwise (the function's own error names a wrong argument count)."""
    if len(call.arguments) != 3:
        return None
    operation, input_type = (_string_literal(sql, *call.arguments[index]) for index in (1, 2))
    if operation is None or input_type is None:
        return None
    return dagger_result_type(call.name, operation, input_type)


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


ELEMENT_AT_PATH = "DaggerElementAtPath"
_JAVA = "dagger.jobs.udfs.CollectionFunctions"


def declare(functions: FunctionSet) -> None:
    functions.jvm("ElementAt", f"{_JAVA}$ElementAt", "string")
    functions.jvm(ELEMENT_AT_PATH, f"{_JAVA}$ElementAtPath", "string")
    functions.jvm("MapGet", f"{_JAVA}$MapGet", "string")
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
