"""ElementAt, MapGet, ListContains, ArrayAggregate and ArrayOperate.

ElementAt and MapGet are JVM functions (`CollectionFunctions.java`), and so are ArrayAggregate and
ArrayOperate (`ArrayFunctions.java`); ElementAt's path forms (four or five arguments) are calls of
`DaggerElementAtPath`, which the SQL stage writes for them. Dagger returns elements and map values as
Java objects that Flink prints with `String.valueOf`; Spark needs one result type per function, so
ElementAt and MapGet return that text (`CAST(... AS DOUBLE)` reads it back, as Dagger's documented queries
do), ArrayAggregate a DOUBLE and ArrayOperate an ARRAY<STRING>. Maps may be Spark maps or Dagger's layout,
an array of (key, value) rows.

Dagger's ArrayAggregate and ArrayOperate run a Java stream of the declared input type (`IntStream` for
'int', `LongStream` for 'long', `DoubleStream` for 'double' and 'float'), so their results have that
type: ArrayOperate(array(1, 2, 1), 'distinct.sorted', 'int') is [1, 2], a sum of ints an int. Where the
operation and the input type are written as literals, the SQL stage casts the call to that type
(`rewrite_array_calls`); with an 'other' input, or types given by columns, the text and DOUBLE remain.
"""

from __future__ import annotations

from jobs.udfs.aggregate import RewrittenSql, SqlBuilder
from jobs.udfs.registration import FunctionSet
from jobs.udfs.sql_text import Call, code_tokens, find_calls

_NUMERIC_TERMINALS = {"average", "sum", "min", "max", "count", "findFirst", "findAny"}
"""The terminals of ArrayAggregate over numbers (`ArrayFunctions.java`), whose result has the elements'
type."""

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


ELEMENT_AT_PATH = "DaggerElementAtPath"
_JAVA = "dagger.jobs.udfs.CollectionFunctions"
_ARRAYS_JAVA = "dagger.jobs.udfs.ArrayFunctions"


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
    functions.jvm("ArrayAggregate", f"{_ARRAYS_JAVA}$ArrayAggregate", "double")
    functions.jvm("ArrayOperate", f"{_ARRAYS_JAVA}$ArrayOperate", "array<string>")
