"""Errors of the translator, which name the setting and the place in the user's text."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from jobs.model.sql_tree import line_and_column, where


class FlinkSqlError(ValueError):
    """Flink SQL that cannot run on Spark; the message names the construct and where it is."""


@dataclass(frozen=True)
class UserText:
    """The query as the user wrote it, and the setting (`key`) it came from."""

    text: str
    key: str

    def fail(self, node: exp.Expr, reason: str) -> FlinkSqlError:
        """The error for the construct `node`, at its line and column when known."""
        place = where(self.text, node)
        return FlinkSqlError(f"{self.key} {place}: {reason}" if place else f"{self.key}: {reason}")

    def fail_at(self, start: int, reason: str) -> FlinkSqlError:
        """The error for the construct at offset `start` of the text."""
        line, column = line_and_column(self.text, start)
        return FlinkSqlError(f"{self.key} at line {line}, column {column}: {reason}")


def parse_message(error: ParseError | TokenError) -> str:
    if isinstance(error, ParseError) and error.errors:
        first = error.errors[0]
        description = re.sub(
            r"<Token token_type: [^>]*?text: (.*?), line: [^>]*>", r"'\1'", first["description"]
        )
        return f"{description} at line {first['line']}, column {first['col']}"
    return str(error).splitlines()[0]
