"""The typed pass: the operators and functions whose result type Flink derives otherwise than Spark call the
project's typed functions instead (`FlinkTypes.java`, a session extension), which choose once Spark has
resolved their arguments' types:

| Flink                                   | Spark                 | typed function  |
|-----------------------------------------|-----------------------|-----------------|
| `INT / INT` is an INT (7 / 2 = 3)       | a DOUBLE (3.5)        | `FlinkDivide`   |
| `BIGINT % INT`, `MOD(...)`: the divisor's type | the wider type  | `FlinkMod`      |
| `AVG` of an INT column is an INT        | a DOUBLE              | `FlinkAvg`      |
| `SUM` of an INT column is an INT        | a BIGINT              | `FlinkSum`      |
| `FLOOR`, `CEIL` of a DOUBLE are DOUBLEs | BIGINTs               | `FlinkFloor`... |
| `LN(0)` is -Infinity, `LOG10` by `Math` | NULL, by `StrictMath` | `FlinkLn`...    |

`SUM(x) FILTER (WHERE c)` and `AVG(x) FILTER (WHERE c)` become `FlinkSum(CASE WHEN c THEN x END)`...

Each is Spark's own operator or function where the types agree (a DOUBLE divided, a DECIMAL summed), so
every `/` and every call of these names is rewritten; the pass runs last, on the query and on each OVER or
Top-N view, so it sees the other passes' rewrites as ordinary calls.
"""

from __future__ import annotations

from sqlglot import exp

_TYPED_CALLS = {
    "MOD": "FlinkMod", "AVG": "FlinkAvg", "SUM": "FlinkSum",
    "FLOOR": "FlinkFloor", "CEIL": "FlinkCeil", "CEILING": "FlinkCeil",
    "LN": "FlinkLn", "LOG": "FlinkLog", "LOG10": "FlinkLog10", "LOG2": "FlinkLog2",
}  # fmt: skip
_TYPED_OPERATORS: dict[type[exp.Expr], str] = {exp.Div: "FlinkDivide", exp.Mod: "FlinkMod"}
_ARGUMENT_COUNTS = {"MOD": {2}, "LOG": {1, 2}}
"""The typed calls of more than one argument; the others take one."""


def rewrite_typed(tree: exp.Expr) -> exp.Expr:
    """Every `/` as `FlinkDivide(left, right)` (`%` as `FlinkMod`), and MOD, AVG, SUM, FLOOR, CEIL and the
    logarithms as their typed functions; the (maybe new) root."""
    for node in reversed(list(tree.walk())):  # children first: a rewrite holds its rewritten parts
        typed = _typed(node)
        if typed is None:
            continue
        if isinstance(node, exp.Avg | exp.Sum) and isinstance(node.parent, exp.Filter):
            node = node.parent
            typed.set("expressions", [_only_where(node.expression.this, typed.expressions[0])])
        if node is tree:
            tree = typed
        node.replace(typed)
    return tree


def _only_where(condition: exp.Expr, value: exp.Expr) -> exp.Case:
    """`AGG(x) FILTER (WHERE c)` of a typed aggregate as `FlinkAgg(CASE WHEN c THEN x END)`: SUM and AVG
    skip NULLs, so the rows where `c` is not true count for nothing, as the FILTER would leave them out
    (Spark takes a FILTER on its own aggregate functions only, and a typed one is an expression around
    one)."""
    return exp.Case(ifs=[exp.If(this=condition.copy(), true=value)])


def _typed(node: exp.Expr) -> exp.Expr | None:
    if type(node) in _TYPED_OPERATORS:
        return exp.Anonymous(this=_TYPED_OPERATORS[type(node)], expressions=[node.this, node.expression])
    arguments = _plain_arguments(node)
    if arguments is None:
        return None
    return exp.Anonymous(this=_TYPED_CALLS[_name(node)], expressions=arguments)


def _name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return node.name.upper()
    return node.key.upper() if isinstance(node, exp.Avg | exp.Sum | exp.Floor | exp.Ceil) else ""


def _plain_arguments(node: exp.Expr) -> list[exp.Expr] | None:
    """The arguments of a call the typed function takes: MOD's two, LOG's one or two, one for the others,
    a single argument without DISTINCT or `TO unit` (those forms keep Spark's, or another pass's,
    meaning); None for any other node."""
    name = _name(node)
    if name not in _TYPED_CALLS:
        return None
    if isinstance(node, exp.Anonymous):
        arguments = list(node.expressions)
    elif any(node.args.get(part) is not None for part in ("to", "decimals", "expression")):
        return None
    else:
        arguments = [node.this]
    if len(arguments) not in _ARGUMENT_COUNTS.get(name, {1}):
        return None
    if len(arguments) == 1 and isinstance(arguments[0], exp.Distinct):
        return None
    return arguments
