"""Flink's spellings of types, functions and table expressions, rewritten in the tree the way Spark reads
them. (Literals need no pass: the dialect reads Flink's `''` and backslashes, and Spark's text escapes them
as Spark reads them.)"""

from __future__ import annotations

from sqlglot import exp

from jobs.model.sql_tree import call, cast
from jobs.raystack.flink_sql.errors import UserText

# Functions whose names Spark's built-ins take with other meanings, or that Spark lacks: a Flink query
# means Dagger's function (Split) or Flink's (REGEXP_EXTRACT, which gives NULL where nothing matches;
# INITCAP, whose words are runs of letters and digits; SPLIT_INDEX), which jobs.udfs declares, or
# TRUNCATE, the JVM module's (FlinkFunctions.java).
_DAGGER_FUNCTIONS_SHADOWED_BY_SPARK = {
    "SPLIT": "DaggerSplit", "REGEXP_EXTRACT": "FlinkRegexpExtract", "INITCAP": "FlinkInitcap",
    "SPLIT_INDEX": "FlinkSplitIndex", "TRUNCATE": "FlinkTruncate",
}  # fmt: skip
# Functions whose results have another type in Flink than Spark's of the same names: those of a time unit
# give BIGINTs (Spark's INTs), ARRAY_POSITION an INT (Spark's a BIGINT).
_BIGINT_TIME_FUNCTIONS = [
    "YEAR", "QUARTER", "MONTH", "DAYOFYEAR", "DAYOFMONTH", "DAYOFWEEK", "HOUR", "MINUTE", "SECOND",
]  # fmt: skip
_STR_TO_MAP_DELIMITERS = (",", "=")
"""Flink's default delimiters of STR_TO_MAP's entries and of a key from its value."""
_FLINK_RESULT_TYPES = {**dict.fromkeys(_BIGINT_TIME_FUNCTIONS, "BIGINT"), "ARRAY_POSITION": "INT"}
# Spark's timestamps have no precision and no zone; UTC sessions make them agree with Flink's.
_TIMESTAMPS = {
    exp.DataType.Type.TIMESTAMP, exp.DataType.Type.TIMESTAMPLTZ, exp.DataType.Type.TIMESTAMPTZ,
    exp.DataType.Type.TIMESTAMPNTZ,
}  # fmt: skip


_DISTINCT_AGGREGATES = (exp.Count, exp.Sum, exp.Avg, exp.Min, exp.Max)
_STRINGS = {exp.DataType.Type.TEXT, exp.DataType.Type.VARCHAR, exp.DataType.Type.CHAR}
_EVENT_TIME_PRECISION = 3
"""Fraction digits of a timestamp whose precision the query does not show: an event time's, TIMESTAMP(3)."""
_FLINK_TIMESTAMP_PRECISION = 6
"""Flink's TIMESTAMP and TIMESTAMP_LTZ without a precision."""
# Flink's functions the project's JVM module computes (FlinkFunctions.java), whose first argument is a
# time unit written as a keyword (TIMESTAMPADD(HOUR, n, t)), passed on as a string.
_UNIT_FUNCTIONS = {"TIMESTAMPADD": "FlinkTimestampAdd", "TIMESTAMPDIFF": "FlinkTimestampDiff"}
_TIME_UNITS = ("SECOND", "MINUTE", "HOUR", "DAY", "WEEK", "MONTH", "QUARTER", "YEAR")


def rewrite_flink_forms(tree: exp.Expr, user: UserText) -> None:
    """Casts to strings, types, shadowed functions, Flink's result types, FLOOR(t TO unit), subscripts,
    DISTINCT aggregates, UNNEST and LATERAL TABLE, in place."""
    # Before the types lose their precisions: a timestamp's is the number of digits its text has.
    for node in reversed(list(tree.find_all(exp.Cast))):
        if node.to.this in _STRINGS:
            precision = exp.Literal.number(_timestamp_precision(node.this))
            node.replace(call("FlinkCastString", node.this.copy(), precision))
    # Children first: a node is copied into its rewrite with its parts already rewritten.
    for node in reversed(list(tree.walk())):
        if isinstance(node, exp.DataType):
            _spark_type(node)
        elif isinstance(node, exp.Anonymous):
            _function(node, user)
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
            isinstance(node, _DISTINCT_AGGREGATES)
            and isinstance(node.this, exp.Distinct)
            and len(node.this.expressions) == 1
        ):
            _distinct_aggregate(node)
        elif isinstance(node, exp.Unnest):
            _unnest(node, user)


def _distinct_aggregate(node: exp.Count | exp.Sum | exp.Avg | exp.Min | exp.Max) -> None:
    """`AGG(DISTINCT x) [FILTER (WHERE c)]` without a DISTINCT aggregate, which Spark's streams lack: over
    the set of the (filtered) values, `collect_set(x) FILTER (WHERE c)`, a single aggregate Spark keeps
    once however often the set is named. COUNT is the set's size (a BIGINT, as Flink's count); SUM adds its
    elements from the first, so the total keeps their type (NULL for no values); AVG is that sum divided
    by the size, a division the typed pass gives Flink's type (an INT column's average is an INT); MIN
    and MAX are the same with or without DISTINCT."""
    value = node.this.expressions[0]
    if isinstance(node, exp.Min | exp.Max):
        node.set("this", value)
        return
    filtered = node.parent if isinstance(node.parent, exp.Filter) else None
    values: exp.Expr = call("collect_set", value.copy())
    if filtered is not None:
        values = exp.Filter(this=values, expression=filtered.expression.copy())
    size = call("size", values)
    if isinstance(node, exp.Count):
        result: exp.Expr = cast(size, "BIGINT")
    else:
        total = exp.Lambda(
            this=exp.Add(this=exp.column("total"), expression=exp.column("element")),
            expressions=[exp.to_identifier("total"), exp.to_identifier("element")],
        )
        first = call("try_element_at", values.copy(), exp.Literal.number(1))
        rest = call("slice", values.copy(), exp.Literal.number(2), size.copy())
        result = call("aggregate", rest, first, total)
        if isinstance(node, exp.Avg):
            result = exp.Div(this=result, expression=size.copy())
    (filtered or node).replace(result)


def _timestamp_precision(value: exp.Expr) -> int:
    """The fraction digits Flink prints for `value` cast to a string, if it is a timestamp: the precision a
    CAST to TIMESTAMP(p) gives it (6 without one, as Flink's TIMESTAMP), a literal's own digits
    (`TIMESTAMP '... 12:00:00.25'` is a TIMESTAMP(2)), and an event time's 3 otherwise."""
    if not isinstance(value, exp.Cast) or value.to.this not in _TIMESTAMPS:
        return _EVENT_TIME_PRECISION
    if value.to.expressions:
        return int(value.to.expressions[0].name)
    if type(value) is exp.Cast and isinstance(value.this, exp.Literal):  # TIMESTAMP '...', not CAST(...)
        _, _, fraction = value.this.name.partition(".")
        return len(fraction)
    return _FLINK_TIMESTAMP_PRECISION


def _spark_type(node: exp.DataType) -> None:
    if node.this in _TIMESTAMPS:
        node.set("this", exp.DataType.Type.TIMESTAMP)
        node.set("expressions", None)
    elif node.this == exp.DataType.Type.VARCHAR and not node.expressions:
        node.set("this", exp.DataType.Type.TEXT)


def _function(node: exp.Anonymous, user: UserText) -> None:
    name = node.name.upper()
    if name in _UNIT_FUNCTIONS and node.expressions:
        unit = node.expressions[0]
        if not isinstance(unit, exp.Column) or unit.name.upper() not in _TIME_UNITS:
            raise user.fail(unit, f"{name}() takes a time unit first: one of {', '.join(_TIME_UNITS)}")
        node.set("this", _UNIT_FUNCTIONS[name])
        unit.replace(exp.Literal.string(unit.name.upper()))
        return
    if name in ("GREATEST", "LEAST"):  # Flink's are NULL when any argument is; Spark's skip NULLs
        any_null = exp.or_(
            *(exp.Is(this=argument.copy(), expression=exp.Null()) for argument in node.expressions)
        )
        node.replace(exp.Case(ifs=[exp.If(this=any_null, true=exp.Null())], default=node.copy()))
    elif name == "STR_TO_MAP" and 0 < len(node.expressions) < len(_STR_TO_MAP_DELIMITERS) + 1:
        # Flink's delimiters by default are ',' and '=' (Spark's ',' and ':')
        for delimiter in _STR_TO_MAP_DELIMITERS[len(node.expressions) - 1 :]:
            node.append("expressions", exp.Literal.string(delimiter))
    elif name in _DAGGER_FUNCTIONS_SHADOWED_BY_SPARK:
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
