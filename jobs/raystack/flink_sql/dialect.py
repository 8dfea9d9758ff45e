"""Flink SQL's syntax as a sqlglot dialect: the query is read once, with Flink's lexical rules, into the tree
every pass of the translator rewrites.

- Lexing: `''` escapes a quote and a backslash is an ordinary character; SESSION is a function name (the
  group window), not a keyword; BYTES is a type.
- Window table functions, `TABLE(TUMBLE(TABLE t, DESCRIPTOR(c), size))` (and HOP, CUMULATE, SESSION),
  named arguments `DATA => TABLE t` included: a `WindowTableFunction` node, which `window_tvfs` replaces.
- Intervals as Flink (Calcite) writes them, `INTERVAL '1' HOUR(2)`, `INTERVAL '10' MINUTES`, `INTERVAL
  '1:30' HOUR TO MINUTE`: an `exp.Interval` of the value and its singular unit(s), as Spark reads them.
- `LATERAL TABLE(fn(x))`: the lateral call of fn itself.
- A script's DDL (`scripts`): `ROW<name type, ...>` (and `ROW(...)` in a column's type) is a STRUCT, and
  `WATERMARK FOR c AS expression` a `WatermarkColumnConstraint` of the table's schema.
- `JOIN t FOR SYSTEM_TIME AS OF x AS a`: a `Version` of the table `t` (`proctime` reads it).
- `JSON_VALUE(json, path [RETURNING type] [{NULL | ERROR | DEFAULT literal} ON EMPTY] [... ON ERROR])`:
  `FlinkJsonValue(json, path, 'type', 'empty behavior', default, 'error behavior', default)`, the
  value's text (`jobs.udfs.json_path`, `FlinkJsonValue.java`), cast to the RETURNING type. A RETURNING
  type Flink 2.3 cannot plan, and a DEFAULT that is not a literal (Flink's planner fails on one), are
  refused by name.
- What Spark streams cannot run is refused by name at its token, before it is parsed (the parser would
  fail on some without naming them): MATCH_RECOGNIZE, the group windows' `..._PROCTIME()`, and Flink's
  functions that Spark lacks or means otherwise (`functions.toml`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import ClassVar

from sqlglot import exp
from sqlglot.tokens import Token, TokenType

from jobs.model.sql_tree import DaggerSpark
from jobs.raystack.flink_sql.functions import refusal

JSON_VALUE_TYPES = {
    exp.DataType.Type.TEXT: "STRING", exp.DataType.Type.VARCHAR: "STRING", exp.DataType.Type.CHAR: "STRING",
    exp.DataType.Type.BOOLEAN: "BOOLEAN", exp.DataType.Type.INT: "INT", exp.DataType.Type.DOUBLE: "DOUBLE",
}  # fmt: skip
"""JSON_VALUE's RETURNING types that Flink 2.3 plans (its code generator fails on BIGINT, DECIMAL...)."""
AUXILIARY = re.compile(r"^(TUMBLE|HOP|SESSION)_(START|END|ROWTIME|PROCTIME)$")
WINDOW_TABLE_FUNCTIONS = ("TUMBLE", "HOP", "CUMULATE", "SESSION")
INTERVAL_UNITS = ("YEAR", "MONTH", "DAY", "HOUR", "MINUTE", "SECOND")


class Refused(Exception):
    """A construct refused while reading the query, at the offset `start` of the user's text."""

    def __init__(self, reason: str, start: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.start = start


class WindowTableFunction(exp.Expression):
    """`TABLE(kind(arguments))` in a FROM: `this` the kind (TUMBLE...), `expressions` the arguments
    (`exp.Kwarg` when named; the data an `exp.Table` or a subquery), `text` the call as written."""

    arg_types: ClassVar[dict[str, bool]] = {"this": True, "expressions": True, "alias": False, "text": True}


_KEYWORDS = {key: value for key, value in DaggerSpark.Tokenizer.KEYWORDS.items() if key != "SESSION"}


class FlinkDialect(DaggerSpark):
    """Flink SQL, read into a tree that the translator's passes turn into Spark SQL."""

    class Tokenizer(DaggerSpark.Tokenizer):
        STRING_ESCAPES: ClassVar[list[str]] = ["'"]
        KEYWORDS: ClassVar[dict[str, TokenType]] = {
            **_KEYWORDS,
            "BYTES": TokenType.VARBINARY,
            "FOR SYSTEM_TIME": TokenType.TIMESTAMP_SNAPSHOT,  # a temporal join's `FOR SYSTEM_TIME AS OF`
        }

    class Parser(DaggerSpark.Parser):
        CONSTRAINT_PARSERS: ClassVar[dict[str, Callable]] = {
            **DaggerSpark.Parser.CONSTRAINT_PARSERS,
            "WATERMARK": lambda self: self._parse_watermark(),
        }
        SCHEMA_UNNAMED_CONSTRAINTS: ClassVar[set[str]] = {
            *DaggerSpark.Parser.SCHEMA_UNNAMED_CONSTRAINTS,
            "WATERMARK",
        }

        def parse(self, raw_tokens: list[Token], sql: str) -> list[exp.Expr | None]:
            _refuse_unsupported(raw_tokens)
            return super().parse(raw_tokens, sql)

        def _parse_function_call(self, *args: object, **kwargs: object) -> exp.Expr | None:
            if (
                self._curr
                and self._curr.text.upper() == "JSON_VALUE"
                and self._next
                and self._next.token_type == TokenType.L_PAREN
            ):
                return self._parse_json_value_call()
            return super()._parse_function_call(*args, **kwargs)  # type: ignore[arg-type]

        def _parse_json_value_call(self) -> exp.Expr:
            """`JSON_VALUE(...)` with Flink's clauses, as the call of `FlinkJsonValue` (module doc)."""
            start = self._curr
            self._advance(2)
            document = self._parse_assignment()
            self._match(TokenType.COMMA)
            path = self._parse_assignment()
            returning = "STRING"
            if self._match_text_seq("RETURNING"):
                type_start = self._curr
                data_type = self._parse_types()
                if not isinstance(data_type, exp.DataType) or data_type.this not in JSON_VALUE_TYPES:
                    raise Refused(
                        f"JSON_VALUE ... RETURNING {data_type.sql('spark') if data_type else '?'} is not "
                        "supported: Flink 2.3 plans RETURNING STRING, BOOLEAN, INT or DOUBLE only",
                        type_start.start,
                    )
                returning = JSON_VALUE_TYPES[data_type.this]
            behaviors = [*self._parse_json_value_behavior("EMPTY"), *self._parse_json_value_behavior("ERROR")]
            self._match_r_paren()
            arguments = [document, path, exp.Literal.string(returning), *behaviors]
            text = self.expression(exp.Anonymous(this="FlinkJsonValue", expressions=arguments), token=start)
            return text if returning == "STRING" else exp.cast(text, returning).update_positions(start)

        def _parse_json_value_behavior(self, on: str) -> tuple[exp.Expr, exp.Expr]:
            """`{NULL | ERROR | DEFAULT literal} ON <on>` as the behavior's name and its default (NULL)."""
            for word in ("NULL", "ERROR"):
                if self._match_text_seq(word, "ON", on):
                    return exp.Literal.string(word), exp.Null()
            index = self._index
            if self._match(TokenType.DEFAULT):
                start = self._prev
                value = self._parse_bitwise()
                if self._match_text_seq("ON", on):
                    literal = value.this if isinstance(value, exp.Neg) else value
                    if not isinstance(literal, exp.Literal | exp.Boolean):
                        raise Refused(
                            f"JSON_VALUE's DEFAULT ... ON {on} takes a literal (Flink cannot plan an "
                            f"expression there), not {value.sql('spark')}",
                            start.start,
                        )
                    return exp.Literal.string("DEFAULT"), value
                self._retreat(index)
            return exp.Literal.string("NULL"), exp.Null()

        def _parse_watermark(self) -> exp.WatermarkColumnConstraint:
            start = self._prev
            if not self._match(TokenType.FOR):
                self.raise_error("Expected FOR after WATERMARK")
            column = self._parse_column()
            if not self._match(TokenType.ALIAS):
                self.raise_error("Expected AS after WATERMARK FOR <column>")
            constraint = exp.WatermarkColumnConstraint(this=column, expression=self._parse_disjunction())
            return constraint.update_positions(start)

        def _parse_types(
            self, check_func: bool = False, schema: bool = False, **kwargs: bool
        ) -> exp.Expr | None:
            # Flink's ROW type is Spark's STRUCT; `ROW(...)` outside a type stays the row constructor.
            if (
                self._curr
                and self._curr.token_type == TokenType.ROW
                and self._next
                and (
                    self._next.token_type == TokenType.LT
                    or (schema and self._next.token_type == TokenType.L_PAREN)
                )
            ):
                self._curr.token_type = TokenType.STRUCT
            return super()._parse_types(check_func=check_func, schema=schema, **kwargs)

        def _parse_table(self, *args: object, **kwargs: object) -> exp.Expr | None:
            if (
                self._curr
                and self._curr.token_type == TokenType.TABLE
                and self._next
                and self._next.token_type == TokenType.L_PAREN
                and self._index + 2 < len(self._tokens)
                and self._tokens[self._index + 2].text.upper() in WINDOW_TABLE_FUNCTIONS
            ):
                return self._parse_window_table_function()
            return super()._parse_table(*args, **kwargs)  # type: ignore[arg-type]

        def _parse_window_table_function(self) -> WindowTableFunction:
            table = self._curr
            self._advance(2)
            name = self._curr
            self._advance(2)
            arguments = self._parse_csv(self._parse_window_argument)
            self._match_r_paren()
            text = self.sql[name.start : self._prev.end + 1]
            if not self._match(TokenType.R_PAREN):
                raise Refused(f"TABLE(...) must hold one {name.text.upper()}(...) call", table.start)
            node = WindowTableFunction(
                this=name.text.upper(), expressions=arguments, alias=self._parse_table_alias(), text=text
            )
            return node.update_positions(name)

        def _parse_window_argument(self) -> exp.Expr | None:
            if (
                self._curr.token_type == TokenType.VAR
                and self._next
                and self._next.token_type == TokenType.FARROW
            ):
                name = self._curr
                self._advance(2)
                value = self._parse_window_argument()
                return exp.Kwarg(this=exp.var(name.text.upper()), expression=value).update_positions(name)
            if self._match(TokenType.TABLE):
                start = self._prev
                table = self._parse_table_parts()
                if self._match(TokenType.PARTITION_BY):  # SESSION's; refused with it
                    self._parse_csv(self._parse_assignment)
                return table.update_positions(start)
            return self._parse_assignment()

        def _parse_interval(self, require_interval: bool = True) -> exp.Expr | None:
            index = self._index
            if not self._match(TokenType.INTERVAL):
                return super()._parse_interval(require_interval)
            start = self._prev
            sign = ""
            if self._curr and self._curr.token_type in (TokenType.DASH, TokenType.PLUS):
                sign = "-" if self._curr.token_type == TokenType.DASH else ""
                self._advance()
            if not self._curr or self._curr.token_type not in (TokenType.STRING, TokenType.NUMBER):
                self._retreat(index)
                return super()._parse_interval(require_interval)
            value = sign + self._curr.text.strip()
            self._advance()
            units = [self._parse_interval_unit()]
            if units[0] is not None and self._curr and self._curr.text.upper() == "TO":
                self._advance()
                units.append(self._parse_interval_unit())
            if None in units[1:]:
                self.raise_error("Expected an interval unit after TO")
            named = [exp.var(unit) for unit in units if unit is not None]
            unit = (
                exp.IntervalSpan(this=named[0], expression=named[1])
                if len(named) == 2
                else next(iter(named), None)
            )
            return self.expression(exp.Interval(this=exp.Literal.string(value), unit=unit), token=start)

        def _parse_interval_unit(self) -> str | None:
            """A unit, singular (`MINUTES` is MINUTE), its precision (`HOUR(2)`) read and left out."""
            if not self._curr:
                return None
            unit = self._curr.text.upper()
            singular = unit[:-1] if unit.endswith("S") and unit[:-1] in INTERVAL_UNITS else unit
            if singular not in INTERVAL_UNITS:
                return None
            self._advance()
            if self._match(TokenType.L_PAREN):
                self._parse_csv(self._parse_number)
                self._match_r_paren()
            return singular

        def _parse_lateral(self) -> exp.Lateral | None:
            start = self._curr
            lateral = super()._parse_lateral()
            table = lateral.this if lateral is not None else None
            if isinstance(table, exp.Anonymous) and table.name.upper() == "TABLE":
                calls = table.expressions
                if len(calls) != 1 or not isinstance(calls[0], exp.Anonymous):
                    raise Refused("LATERAL TABLE(...) must hold one function call", start.start)
                lateral.set("this", calls[0])
            return lateral


def _refuse_unsupported(tokens: list[Token]) -> None:
    """Refuses, naming it, the first construct Spark streams cannot run."""
    for index, token in enumerate(tokens):
        if token.token_type in (TokenType.STRING, TokenType.IDENTIFIER):
            continue
        name = token.text.upper()
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        is_call = following is not None and following.token_type == TokenType.L_PAREN
        reason = None
        if name == "MATCH_RECOGNIZE":
            reason = "MATCH_RECOGNIZE (row pattern matching) is not supported"
        elif (match := AUXILIARY.match(name)) and match.group(2) == "PROCTIME" and is_call:
            reason = f"{name} (processing time) is not supported: windows run on event time"
        elif is_call and token.token_type != TokenType.NUMBER:
            reason = refusal(name)  # Flink's functions Spark lacks or means otherwise (functions.toml)
        if reason:
            raise Refused(reason, token.start)
