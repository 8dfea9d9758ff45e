"""Just enough of Spark SQL's lexical rules to find function calls and statement ends in query text.

String literals, quoted identifiers and comments are skipped, so a name or a `;` inside them is never
taken for code. Everything else is left to Spark's parser: these helpers only locate text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def words(text: str) -> set[str]:
    """Every word (a run of letters, digits and `_` not starting with a digit) of `text`, in lower case,
    wherever it stands: in code, literals, comments or backticks."""
    return {word.lower() for word in _IDENTIFIER.findall(text)}


@dataclass(frozen=True)
class Token:
    kind: str
    """`identifier`, `string`, `quoted` (a backtick identifier), `comment`, `space` or `symbol`."""
    start: int
    end: int


def tokens(sql: str) -> Iterator[Token]:
    """The text cut into tokens; an unterminated literal or comment runs to the end (Spark reports it)."""
    index, length = 0, len(sql)
    while index < length:
        char = sql[index]
        if char in "'\"":
            end = _string_end(sql, index)
            yield Token("string", index, end)
        elif char == "`":
            end = _backtick_end(sql, index)
            yield Token("quoted", index, end)
        elif sql.startswith("--", index):
            newline = sql.find("\n", index)
            end = length if newline < 0 else newline + 1
            yield Token("comment", index, end)
        elif sql.startswith("/*", index):
            end = _block_comment_end(sql, index)
            yield Token("comment", index, end)
        elif char.isspace():
            end = index + 1
            while end < length and sql[end].isspace():
                end += 1
            yield Token("space", index, end)
        elif match := _IDENTIFIER.match(sql, index):
            end = match.end()
            if end < length and sql[end] in "'\"" and match.group().lower() in ("r", "x"):
                end = _string_end(sql, end)  # r'raw' and X'hex' literals
                yield Token("string", index, end)
            else:
                yield Token("identifier", index, end)
        else:
            end = index + 1
            yield Token("symbol", index, end)
        index = end


def _string_end(sql: str, start: int) -> int:
    quote, index = sql[start], start + 1
    while index < len(sql):
        if sql[index] == "\\":
            index += 2
            continue
        if sql[index] == quote:
            return index + 1
        index += 1
    return len(sql)


def _backtick_end(sql: str, start: int) -> int:
    index = start + 1
    while index < len(sql):
        if sql[index] == "`":
            if sql.startswith("``", index):  # a doubled backtick is one backtick in the name
                index += 2
                continue
            return index + 1
        index += 1
    return len(sql)


def _block_comment_end(sql: str, start: int) -> int:
    depth, index = 0, start
    while index < len(sql):
        if sql.startswith("/*", index):
            depth += 1
            index += 2
        elif sql.startswith("*/", index):
            depth -= 1
            index += 2
            if depth == 0:
                return index
        else:
            index += 1
    return len(sql)


def code_tokens(sql: str) -> list[Token]:
    """The tokens that are code: no spaces, no comments."""
    return [token for token in tokens(sql) if token.kind not in ("space", "comment")]


@dataclass(frozen=True)
class Call:
    """`name(arguments)` in the text: offsets of the name, the parentheses and each argument."""

    name: str
    """As written in the text."""
    start: int
    open_paren: int
    close_paren: int
    arguments: tuple[tuple[int, int], ...]
    """(start, end) of each top-level argument, surrounding spaces excluded."""
    after: Token | None
    """The first code token after the closing parenthesis."""


def find_calls(sql: str, names: set[str]) -> list[Call]:
    """Calls of the functions named in `names` (lower case), outermost only, in text order.

    A qualified name (`db.name(`) is not a call of `name`. A call without its closing parenthesis is left
    out: the text is not valid SQL, and Spark's parser says where.
    """
    code = code_tokens(sql)
    calls: list[Call] = []
    index = 0
    while index < len(code) - 1:
        token = code[index]
        follows_dot = index > 0 and sql[code[index - 1].start : code[index - 1].end] == "."
        if (
            token.kind == "identifier"
            and sql[token.start : token.end].lower() in names
            and sql[code[index + 1].start] == "("
            and code[index + 1].kind == "symbol"
            and not follows_dot
        ):
            call, next_index = _read_call(sql, code, index)
            if call is not None:
                calls.append(call)
                index = next_index
                continue
        index += 1
    return calls


def _read_call(sql: str, code: list[Token], name_index: int) -> tuple[Call | None, int]:
    depth = 0
    arguments: list[tuple[int, int]] = []
    argument_tokens: list[Token] = []
    for position in range(name_index + 1, len(code)):
        token = code[position]
        text = sql[token.start : token.end] if token.kind == "symbol" else ""
        if text == "(":
            depth += 1
            if depth == 1:
                continue
        elif text == ")":
            depth -= 1
            if depth == 0:
                if argument_tokens:
                    arguments.append((argument_tokens[0].start, argument_tokens[-1].end))
                after = code[position + 1] if position + 1 < len(code) else None
                name_token = code[name_index]
                call = Call(
                    name=sql[name_token.start : name_token.end],
                    start=name_token.start,
                    open_paren=code[name_index + 1].start,
                    close_paren=token.start,
                    arguments=tuple(arguments),
                    after=after,
                )
                return call, position + 1
        elif text == "," and depth == 1:
            arguments.append(
                (argument_tokens[0].start, argument_tokens[-1].end) if argument_tokens else (token.start,) * 2
            )
            argument_tokens = []
            continue
        argument_tokens.append(token)
    return None, name_index + 1


def split_statements(sql: str) -> list[tuple[int, str]]:
    """Statements separated by top-level `;`, each with its offset in `sql`; blank ones left out."""
    statements: list[tuple[int, str]] = []
    start = 0
    for token in tokens(sql):
        if token.kind == "symbol" and sql[token.start] == ";":
            statements.append((start, sql[start : token.start]))
            start = token.end
    statements.append((start, sql[start:]))
    return [(offset, text) for offset, text in statements if code_tokens(text)]
