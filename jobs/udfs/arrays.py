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
operation and the input type are written as literals, the SQL stage casts the call to that type in the
query's tree (`type_array_calls`); with an 'other' input, or types given by columns, the text and DOUBLE
remain.
"""

from __future__ import annotations

from sqlglot import exp

from jobs.udfs.registration import FunctionSet

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


def type_array_calls(tree: exp.Expr) -> None:
    """Each ArrayOperate and ArrayAggregate call of `tree` whose operation and input type are literals cast
    to the type Dagger's call returns, and ElementAt's path forms (four or five arguments) calling
    `DaggerElementAtPath` (a JVM function has one arity), in place."""
    for node in list(tree.find_all(exp.Anonymous)):
        name = "" if isinstance(node.parent, exp.Dot) else node.name.lower()  # `db.name(...)` is another
        if name in ("arrayoperate", "arrayaggregate"):
            result_type = _typed_result(node)
            if result_type is not None:
                node.replace(exp.Cast(this=node.copy(), to=result_type))
        elif name == "elementat" and len(node.expressions) in (4, 5):  # two arguments: ElementAt itself
            node.set("this", ELEMENT_AT_PATH)
            if len(node.expressions) == 4:  # no tableName
                node.append("expressions", exp.null())


def _typed_result(node: exp.Anonymous) -> exp.DataType | None:
    """The type an ArrayOperate or ArrayAggregate call returns in Dagger, when its operation and input
    type are literals; None otherwise (the function's own error names a wrong argument count)."""
    if len(node.expressions) != 3:
        return None
    operation, input_type = node.expressions[1:]
    if not all(
        isinstance(argument, exp.Literal) and argument.is_string for argument in (operation, input_type)
    ):
        return None
    result_type = dagger_result_type(node.name, operation.name, input_type.name)
    return None if result_type is None else _spark_type(result_type)


def _spark_type(name: str) -> exp.DataType:
    """The type `name` (`INT`, `ARRAY<BIGINT>`...) as a tree."""
    if name.startswith("ARRAY<"):
        return exp.DataType(this=exp.DataType.Type.ARRAY, expressions=[_spark_type(name[6:-1])], nested=True)
    return exp.DataType(this=exp.DataType.Type[name])


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
