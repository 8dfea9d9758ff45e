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

Each is Spark's own operator or function where the types agree (a DOUBLE divided, a DECIMAL summed), so
every `/` and every call of these names is rewritten; the pass runs last, on the Spark text the other
passes wrote, so it sees their rewrites as ordinary calls.
"""

from __future__ import annotations

from collections.abc import Iterator

from sqlglot.tokens import TokenType

from jobs.raystack.flink_sql.tokens import Edit, TokenScan

_TYPED_CALLS = {
    "MOD": "FlinkMod", "AVG": "FlinkAvg", "SUM": "FlinkSum",
    "FLOOR": "FlinkFloor", "CEIL": "FlinkCeil", "CEILING": "FlinkCeil",
    "LN": "FlinkLn", "LOG": "FlinkLog", "LOG10": "FlinkLog10", "LOG2": "FlinkLog2",
}  # fmt: skip
_FACTOR_OPERATORS = {TokenType.STAR, TokenType.SLASH, TokenType.MOD, TokenType.DIV}
"""The operators that bind as tightly as `/` and `%` (and associate to the left with them)."""
_TYPED_OPERATORS = {TokenType.SLASH: "FlinkDivide", TokenType.MOD: "FlinkMod"}
_SIGNS = {TokenType.DASH, TokenType.PLUS}
_OPERAND_ENDS = {
    TokenType.VAR, TokenType.IDENTIFIER, TokenType.NUMBER, TokenType.STRING, TokenType.R_PAREN,
    TokenType.R_BRACKET, TokenType.END, TokenType.NULL, TokenType.TRUE, TokenType.FALSE,
}  # fmt: skip
"""Tokens an operand can end with: a sign after one is a binary operator, not the next operand's sign."""
_NOT_FUNCTION_NAMES = {
    "AND", "OR", "NOT", "IN", "EXISTS", "WHEN", "THEN", "ELSE", "ON", "AS", "SELECT", "WHERE", "FROM", "BY",
    "HAVING", "IS", "LIKE", "RLIKE", "BETWEEN", "CASE", "JOIN", "ALL", "ANY", "SOME", "DISTINCT", "UNION",
    "INTERSECT", "EXCEPT", "LATERAL", "USING", "LIMIT", "VALUES",
}  # fmt: skip
"""Words that a parenthesis can follow without being a call of them."""


def typed_edits(scan: TokenScan) -> Iterator[Edit]:
    """Every `/` as `FlinkDivide(left, right)` (`%` as `FlinkMod`), and MOD, AVG, SUM, FLOOR, CEIL and the
    logarithms as their typed functions."""
    tokens = scan.tokens
    for index, token in enumerate(tokens):
        name = token.text.upper()
        if token.token_type in _TYPED_OPERATORS and 0 < index < len(tokens) - 1:
            first, last = _operand_start(scan, index - 1), _operand_end(scan, index + 1)
            yield Edit(tokens[first].start, tokens[first].start, f"{_TYPED_OPERATORS[token.token_type]}(")
            yield Edit(tokens[index - 1].end + 1, token.end + 1, ",")  # `a, b`, not `a , b`
            yield Edit(tokens[last].end + 1, tokens[last].end + 1, ")")
        elif name in _TYPED_CALLS and scan.is_call(index) and _plain_argument(scan, index):
            yield scan.span(index, index, _TYPED_CALLS[name])


_ARGUMENT_COUNTS = {"MOD": {2}, "LOG": {1, 2}}
"""The typed calls of more than one argument; the others take one."""


def _plain_argument(scan: TokenScan, name_index: int) -> bool:
    """The arguments the typed function takes: MOD's two, LOG's one or two, one for the others, and a
    single argument without DISTINCT/ALL or `TO unit` (those forms keep Spark's, or another pass's,
    meaning)."""
    arguments = scan.arguments(name_index)
    if len(arguments) not in _ARGUMENT_COUNTS.get(scan.upper(name_index), {1}):
        return False
    if len(arguments) > 1:
        return True
    first, last = arguments[0]
    words = {
        scan.upper(position)
        for position in range(first, last + 1)
        if scan.enclosing[position] == name_index + 1
    }
    return not words & {"DISTINCT", "ALL", "TO"}


def _is_function_name(scan: TokenScan, index: int) -> bool:
    token = scan.tokens[index] if index >= 0 else None
    if token is None or token.token_type in (TokenType.STRING, TokenType.NUMBER):
        return False
    return token.token_type == TokenType.IDENTIFIER or (
        token.text[:1].isalpha() and token.text.upper() not in _NOT_FUNCTION_NAMES
    )


def _primary_start(scan: TokenScan, last: int) -> int:
    """The first token of the operand (a name, literal, call, parenthesis, CASE, with its field accesses,
    subscripts and sign) that ends at token `last`."""
    tokens = scan.tokens
    kind = tokens[last].token_type
    if kind == TokenType.R_PAREN:
        first = scan.partner[last]
        if _is_function_name(scan, first - 1):
            first -= 1
    elif kind == TokenType.R_BRACKET:
        opening = next(
            position
            for position in range(last - 1, -1, -1)
            if tokens[position].token_type == TokenType.L_BRACKET
            and scan.enclosing[position] == scan.enclosing[last]
        )
        first = _primary_start(scan, opening - 1)
    elif kind == TokenType.END:
        first = _case_start(scan, last)
    else:
        first = last
    if first >= 2 and tokens[first - 1].token_type == TokenType.DOT:
        first = _primary_start(scan, first - 2)
    while (
        first >= 1
        and tokens[first - 1].token_type in _SIGNS
        and (first < 2 or tokens[first - 2].token_type not in _OPERAND_ENDS)
    ):
        first -= 1
    return first


def _operand_start(scan: TokenScan, last: int) -> int:
    """The first token of the left operand of a `/` whose operand ends at `last`: `a * b / c` divides
    `a * b`."""
    first = _primary_start(scan, last)
    while first >= 2 and scan.tokens[first - 1].token_type in _FACTOR_OPERATORS:
        first = _primary_start(scan, first - 2)
    return first


def _operand_end(scan: TokenScan, first: int) -> int:
    """The last token of the right operand of a `/` that starts at `first`: one primary, as `a / b * c`
    divides by `b`."""
    tokens = scan.tokens
    while tokens[first].token_type in _SIGNS:
        first += 1
    kind = tokens[first].token_type
    if kind == TokenType.L_PAREN:
        last = scan.partner[first]
    elif kind == TokenType.CASE:
        last = _case_end(scan, first)
    elif _is_function_name(scan, first) and scan.is_call(first):
        last = scan.partner[first + 1]
    else:
        last = first
    while last + 1 < len(tokens):
        following = tokens[last + 1].token_type
        if following == TokenType.DOT and last + 2 < len(tokens):
            last = scan.partner[last + 3] if scan.is_call(last + 2) else last + 2
        elif following == TokenType.L_BRACKET:
            last = next(
                position
                for position in range(last + 2, len(tokens))
                if tokens[position].token_type == TokenType.R_BRACKET
                and scan.enclosing[position] == scan.enclosing[last + 1]
            )
        else:
            break
    return last


def _case_end(scan: TokenScan, case: int) -> int:
    return _matching(scan, case, range(case, len(scan.tokens)), TokenType.CASE, TokenType.END)


def _case_start(scan: TokenScan, end: int) -> int:
    return _matching(scan, end, range(end, -1, -1), TokenType.END, TokenType.CASE)


def _matching(scan: TokenScan, at: int, positions: range, opening: TokenType, closing: TokenType) -> int:
    """The CASE or END that closes the one at `at`, walking `positions` (forward from a CASE, backward from
    an END) at `at`'s parenthesis depth."""
    depth = 0
    for position in positions:
        if scan.enclosing[position] != scan.enclosing[at]:
            continue
        kind = scan.tokens[position].token_type
        depth += 1 if kind == opening else -1 if kind == closing else 0
        if depth == 0:
            return position
    raise scan.fail(at, f"{opening.name} without {closing.name}")
