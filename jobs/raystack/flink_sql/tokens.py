"""The query's tokens, as sqlglot's lexer gives them, with their nesting; and edits of the user's text.

Every rewrite of the translator is an `Edit` of the user's own text at token positions, so everything it
does not rewrite (functions, spacing, comments) reaches Spark as written.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import ClassVar

from sqlglot.dialects.spark import Spark
from sqlglot.errors import ParseError, TokenError
from sqlglot.tokens import Token, TokenType

SET_OPERATORS = {TokenType.UNION, TokenType.INTERSECT, TokenType.EXCEPT}
GROUP_BY_ENDS = {TokenType.HAVING, TokenType.ORDER_BY, TokenType.LIMIT, TokenType.SEMICOLON, TokenType.WINDOW}
"""What ends a GROUP BY's list (with `clause_end`, also a set operator or the query's closing parenthesis)."""


class FlinkSqlError(ValueError):
    """Flink SQL that cannot run on Spark; the message names the construct and where it is."""


_KEYWORDS_BUT_SESSION = {key: value for key, value in Spark.Tokenizer.KEYWORDS.items() if key != "SESSION"}


class FlinkDialect(Spark):
    """Flink's lexical rules: `''` escapes a quote and a backslash is an ordinary character; SESSION is a
    function name (the group window), not a keyword."""

    class Tokenizer(Spark.Tokenizer):
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]
        KEYWORDS: ClassVar[dict[str, TokenType]] = _KEYWORDS_BUT_SESSION


class SparkWindowsDialect(Spark):
    """Spark SQL in which SESSION(...) is still Flink's group window, a function call."""

    class Tokenizer(Spark.Tokenizer):
        KEYWORDS: ClassVar[dict[str, TokenType]] = _KEYWORDS_BUT_SESSION


@dataclass(frozen=True)
class Edit:
    start: int
    end: int  # exclusive; start == end inserts
    text: str


def apply_edits(text: str, edits: list[Edit]) -> str:
    ordered = sorted(edits, key=lambda edit: (edit.start, edit.end))
    for before, after in itertools.pairwise(ordered):
        if after.start < before.end:
            raise AssertionError(f"overlapping rewrites at {before.start}..{before.end} and {after.start}")
    for edit in reversed(ordered):
        text = text[: edit.start] + edit.text + text[edit.end :]
    return text


def tokenize(dialect: type[Spark], text: str, key: str) -> list[Token]:
    try:
        return dialect().tokenize(text)
    except TokenError as error:
        raise FlinkSqlError(f"{key} cannot be parsed: {parse_message(error)}") from None


def parse_message(error: ParseError | TokenError) -> str:
    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        description = re.sub(
            r"<Token token_type: [^>]*?text: (.*?), line: [^>]*>", r"'\1'", first["description"]
        )
        return f"{description} at line {first['line']}, column {first['col']}"
    return str(error).splitlines()[0]


def quote(name: str) -> str:
    return f"`{name.replace('`', '``')}`"


class TokenScan:
    """The query's tokens with their nesting: matching parentheses and the SELECT block of each token."""

    def __init__(self, text: str, tokens: list[Token], key: str) -> None:
        self.text = text
        self.tokens = tokens
        self.key = key
        self.partner: dict[int, int] = {}
        self.enclosing: list[int | None] = []  # index of the innermost open '(' around each token
        self.block: list[int] = []  # index of the SELECT token each token belongs to (-1: none)
        open_parens: list[int] = []
        blocks: list[tuple[int, int]] = []  # (parenthesis depth, SELECT index)
        for index, token in enumerate(tokens):
            if token.token_type == TokenType.R_PAREN:
                if not open_parens:
                    raise FlinkSqlError(f"{key}: unbalanced ')' {self.where(index)}")
                opening = open_parens.pop()
                self.partner[opening], self.partner[index] = index, opening
                while blocks and blocks[-1][0] > len(open_parens):
                    blocks.pop()
            elif token.token_type == TokenType.SELECT:
                while blocks and blocks[-1][0] >= len(open_parens):
                    blocks.pop()
                blocks.append((len(open_parens), index))
            self.enclosing.append(open_parens[-1] if open_parens else None)
            self.block.append(blocks[-1][1] if blocks else -1)
            if token.token_type == TokenType.L_PAREN:
                open_parens.append(index)
        if open_parens:
            raise FlinkSqlError(f"{key}: '(' {self.where(open_parens[-1])} is never closed")

    def where(self, index: int) -> str:
        token = self.tokens[index]
        return f"at line {token.line}, column {token.col - len(token.text) + 1}"

    def fail(self, index: int, reason: str) -> FlinkSqlError:
        """The error for a construct at token `index`, naming the setting and the place."""
        return FlinkSqlError(f"{self.key} {self.where(index)}: {reason}")

    def upper(self, index: int) -> str:
        return self.tokens[index].text.upper() if 0 <= index < len(self.tokens) else ""

    def is_call(self, index: int) -> bool:
        """A name followed by '(' (a function call)."""
        return (
            index + 1 < len(self.tokens)
            and self.tokens[index + 1].token_type == TokenType.L_PAREN
            and self.tokens[index].token_type not in (TokenType.STRING, TokenType.NUMBER)
        )

    def call_text(self, name_index: int) -> str:
        return self.source(name_index, self.partner[name_index + 1])

    def source(self, first: int, last: int) -> str:
        """The original text of tokens first..last (inclusive)."""
        return self.text[self.tokens[first].start : self.tokens[last].end + 1]

    def span(self, first: int, last: int, text: str) -> Edit:
        """An edit replacing tokens first..last (inclusive) with `text`."""
        return Edit(self.tokens[first].start, self.tokens[last].end + 1, text)

    def arguments(self, name_index: int) -> list[tuple[int, int]]:
        """(first, last) token indexes of each argument of the call at `name_index`."""
        return self.items(name_index + 2, self.partner[name_index + 1] - 1)

    def items(self, first: int, last: int) -> list[tuple[int, int]]:
        """(first, last) token indexes of the comma-separated items of tokens first..last, commas inside
        parentheses aside."""
        ranges: list[tuple[int, int]] = []
        start = index = first
        while index <= last:
            token = self.tokens[index]
            if token.token_type == TokenType.L_PAREN:
                index = self.partner[index]
            elif token.token_type == TokenType.COMMA:
                ranges.append((start, index - 1))
                start = index + 1
            index += 1
        if start <= last:
            ranges.append((start, last))
        return ranges

    def clause_end(self, first: int, ends: set[TokenType]) -> int:
        """Index of the last token of the clause starting at `first`, at its own nesting level: before one
        of `ends`, a set operator, or the parenthesis that closes the clause's query."""
        paren = self.enclosing[first]
        index = first + 1
        while index < len(self.tokens):
            token = self.tokens[index]
            if token.token_type == TokenType.R_PAREN and self.partner[index] == paren:
                break
            if self.enclosing[index] == paren and token.token_type in ends | SET_OPERATORS:
                break
            if token.token_type == TokenType.L_PAREN:
                index = self.partner[index]
            index += 1
        return index - 1
