"""Regular joins keep every row, as Flink's do (Nexmark q4 and q9).

    FROM auction A, bid B WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires

Flink runs a join as an interval join only when its condition bounds the two inputs' time attributes
against each other both ways (Flink's `IntervalJoinUtil`): of the condition's conjuncts (BETWEEN is two),
those comparing a time attribute of one input with one of the other, and reading no other column, must be
one equality or two ranges, a lower and an upper bound. `B.dateTime <= A.expires` reads `expires`, which
is no time attribute, so q9's join has one such range and is a regular join: it keeps both inputs' rows
for as long as the query runs.

Spark's stream-stream join instead derives a state eviction bound from any conjunct comparing one side's
column with the other side's watermarked event time, and applies it to the first side's own event-time
column: from `B.dateTime <= A.expires` it evicts an auction once the watermark passes `A.dateTime`, and
a bid of a later micro-batch no longer finds it. So in a join Flink runs as a regular join, this pass
hides the event-time column of each comparison between the inputs from Spark's derivation: it becomes
`TIMESTAMP_MICROS(UNIX_MICROS(t))`, the same instant, in an expression Spark's `StreamingJoinHelper`
does not take apart, and the join keeps all its state, as Flink's. An interval join as Flink defines it
is left as it is, and Spark evicts its rows once no row of the other side can match them.

The event-time column is the streams' (`rowtime_column`; every stream of a dagger has the same), read by
its name and the names the query gives it (`B.dateTime AS bid_time`): both engines carry it through such
copies (a time attribute in Flink, the watermark in Spark), and not through expressions. Outer joins are
left as they are (Spark runs them only with a time bound it can derive). This pass runs on the tree after
`flink_forms`.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot import exp

COMPARISONS = (exp.GT, exp.GTE, exp.LT, exp.LTE, exp.EQ)
HIDDEN_TIME = ("TIMESTAMP_MICROS", "UNIX_MICROS")
"""The functions, outer first, that wrap an event-time column Spark's join must not derive a bound from."""


def hide_regular_join_time_bounds(tree: exp.Expr, rowtime: str) -> None:
    """Wraps, in place, the event-time columns (`rowtime`, and its copies under other names) of the
    comparisons between the joined inputs of each SELECT whose inner joins Flink runs as a regular join."""
    names = _event_time_names(tree, rowtime)
    for select in list(tree.find_all(exp.Select)):
        conjuncts = list(_join_conjuncts(select))
        if not conjuncts or _interval_join(conjuncts, names):
            continue
        for conjunct in conjuncts:
            if isinstance(conjunct, (*COMPARISONS, exp.Between)) and len(_tables(conjunct)) > 1:
                for column in _time_columns(conjunct, names):
                    column.replace(_hidden(column.copy()))


def _event_time_names(tree: exp.Expr, rowtime: str) -> frozenset[str]:
    """`rowtime` and the names the query gives it (`B.dateTime AS bid_time`, and copies of those), in
    lower case: each is a time attribute in Flink, and carries the watermark in Spark."""
    names = {rowtime.lower()}
    aliases = [alias for alias in tree.find_all(exp.Alias) if isinstance(alias.this, exp.Column)]
    while new := {a.alias.lower() for a in aliases if a.this.name.lower() in names} - names:
        names |= new
    return frozenset(names)


def _join_conjuncts(select: exp.Select) -> Iterator[exp.Expr]:
    """The conjuncts of the condition of `select`'s inner joins: their ON clauses and its WHERE (Flink and
    Spark move WHERE's conditions on both inputs into the join); none when it joins nothing."""
    joins = [join for join in select.args.get("joins") or [] if not isinstance(join.this, exp.Unnest)]
    if not joins or any(join.side for join in joins):
        return
    conditions = [join.args.get("on") for join in joins]
    where = select.args.get("where")
    for condition in [*conditions, where.this if where else None]:
        if condition is not None:
            yield from condition.flatten() if isinstance(condition, exp.And) else [condition]


def _interval_join(conjuncts: list[exp.Expr], names: frozenset[str]) -> bool:
    """Whether Flink runs a join of these conjuncts as an interval join: its time predicates are one
    equality, or two ranges that bound the same two inputs' times, one from below and one from above."""
    bounds = [bound for conjunct in conjuncts for bound in _time_predicates(conjunct, names)]
    if len(bounds) == 1:
        return bounds[0][0] == "="
    if len(bounds) != 2 or any(kind == "=" for kind, _ in bounds):
        return False
    (first, tables), (second, others) = bounds
    if tables == others:
        return first != second
    return tables == others[::-1] and first == second  # the same bound, read from the other input


def _time_predicates(conjunct: exp.Expr, names: frozenset[str]) -> Iterator[tuple[str, tuple[str, str]]]:
    """The conjunct's time predicates: comparisons of one input's event time with another's, reading no
    other column, each as its kind ("=", or "lower" or "upper": the first input's time bounded from below
    or above) and the inputs, in that order. BETWEEN is two, as Flink reads it."""
    if isinstance(conjunct, exp.Between):
        target, low, high = conjunct.this, conjunct.args["low"], conjunct.args["high"]
        yield from _time_predicates(exp.GTE(this=target.copy(), expression=low.copy()), names)
        yield from _time_predicates(exp.LTE(this=target.copy(), expression=high.copy()), names)
        return
    if not isinstance(conjunct, COMPARISONS):
        return
    left, right = _only_time(conjunct.this, names), _only_time(conjunct.expression, names)
    if left is None or right is None or left == right:
        return
    if isinstance(conjunct, exp.EQ):
        yield "=", (left, right)
    else:
        yield "lower" if isinstance(conjunct, (exp.GT, exp.GTE)) else "upper", (left, right)


def _only_time(operand: exp.Expr, names: frozenset[str]) -> str | None:
    """The input (its name in the query) whose event time `operand` reads, when that is the one column it
    reads; None otherwise."""
    columns = list(operand.find_all(exp.Column))
    if len(columns) != 1 or columns[0].name.lower() not in names:
        return None
    return columns[0].table


def _tables(conjunct: exp.Expr) -> set[str]:
    """The inputs whose columns `conjunct` reads (`""` for a column it does not qualify)."""
    return {column.table for column in conjunct.find_all(exp.Column)}


def _time_columns(conjunct: exp.Expr, names: frozenset[str]) -> list[exp.Column]:
    return [column for column in conjunct.find_all(exp.Column) if column.name.lower() in names]


def _hidden(column: exp.Column) -> exp.Expr:
    """`column`'s instant, in functions Spark's join does not take apart."""
    outer, inner = HIDDEN_TIME
    return exp.Anonymous(this=outer, expressions=[exp.Anonymous(this=inner, expressions=[column])])
