"""Flink's spellings of types, functions and table expressions, rewritten in the tree the way Spark reads
them. (Literals need no pass: the dialect reads Flink's `''` and backslashes, and Spark's text escapes them
as Spark reads them.)"""

from __future__ import annotations

from sqlglot import exp

from jobs.model.sql_tree import call, cast
from jobs.raystack.flink_sql.errors import UserText

# Functions whose names Spark's built-ins take with other meanings: a Flink query means Dagger's function
# (Split) or Flink's (REGEXP_EXTRACT, which gives NULL where nothing matches).
_DAGGER_FUNCTIONS_SHADOWED_BY_SPARK = {"SPLIT": "DaggerSplit", "REGEXP_EXTRACT": "FlinkRegexpExtract"}
# Functions whose results have another type in Flink than Spark's of the same names: those of a time unit
# give BIGINTs (Spark's INTs), ARRAY_POSITION an INT (Spark's a BIGINT).
_BIGINT_TIME_FUNCTIONS = [
    "YEAR", "QUARTER", "MONTH", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE", "SECOND",
]  # fmt: skip
_FLINK_RESULT_TYPES = {**dict.fromkeys(_BIGINT_TIME_FUNCTIONS, "BIGINT"), "ARRAY_POSITION": "INT"}
# Spark's timestamps have no precision and no zone; UTC sessions make them agree with Flink's.
_TIMESTAMPS = {
    exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
}  # fmt: skip


def rewrite_flink_forms(tree: exp.Expr, user: UserText) -> None:
    """Types, shadowed functions, Flink's result types, FLOOR(t TO unit), subscripts, COUNT(DISTINCT x),
    UNNEST and LATERAL TABLE, in place."""
    # Children first: a node is copied into its rewrite with its parts already rewritten.
    for node in reversed(list(tree.walk())):
        if isinstance(node, exp.DataType):
            _spark_type(node)
        elif isinstance(node, exp.Anonymous):
            _function(node)
        elif isinstance(node, exp.Extract):
            # Whole seconds, as Flink's (Spark's EXTRACT of SECOND has the fraction); a BIGINT always.
            seconds = node.this.name.upper() == "SECOND"
            node.replace(cast(exp.Floor(this=node.copy()) if seconds else node.copy(), "BIGINT"))
        elif isinstance(node, exp.Floor) and node.args.get("to") is not None:
            node.replace(
                call("date_trunc", exp.Literal.string(node.args["to"].name.upper()), node.this.copy())
            )
        elif isinstance(node, exp.Bracket):  # Flink counts array elements from 1, NULL past the end
            node.replace(call("try_element_at", node.this.copy(), *(key.copy() for key in node.expressions)))
        elif (
            isinstance(node, exp.Count)
            and isinstance(node.this, exp.Distinct)
            and len(node.this.expressions) == 1
        ):
            counted = call("size", call("collect_set", node.this.expressions[0].copy()))
            node.replace(cast(counted, "BIGINT"))  # a BIGINT, as Flink's count
        elif isinstance(node, exp.Unnest):
            _unnest(node, user)


def _spark_type(node: exp.DataType) -> None:
    if node.this in _TIMESTAMPS:
        node.set("this", exp.DataType.Type.TIMESTAMP)
        node.set("expressions", None)
    elif node.this == exp.DataType.Type.VARCHAR and not node.expressions:
        node.set("this", exp.DataType.Type.TEXT)


def _function(node: exp.Anonymous) -> None:
    name = node.name.upper()
    if name in _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK:
        node.set("this", _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK[name])
    elif name in _FLINK_RESULT_TYPES:
        node.replace(cast(node.copy(), _FLINK_RESULT_TYPES[name]))


def _unnest(node: exp.Unnest, user: UserText) -> None:
    """`UNNEST(x) AS t (a, b)`: rows spread into columns (inline); one column: the elements (explode)."""
    alias = node.args.get("alias")
    names = len(alias.columns) if alias is not None else 0
    if names == 0:
        raise user.fail(
            node, "UNNEST(...) needs a table alias with column names (UNNEST(items) AS item (id, name))"
        )
    function = call("inline" if names > 1 else "explode", *(argument.copy() for argument in node.expressions))
    node.replace(exp.Lateral(this=function, alias=alias.copy()))
