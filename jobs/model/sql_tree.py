"""The SQL stage's one tree: a dagger's query parsed once (sqlglot), rewritten in place by each pass, and
written as Spark SQL once at the end.

`DaggerSpark` reads Spark SQL with every function call as written (`exp.Anonymous`, printed back by its
name and arguments), but the few aggregates the passes reason about (COUNT, SUM, AVG, MIN, MAX and
ROW_NUMBER) and calls with a syntax of their own (CAST, EXTRACT, FLOOR(t TO unit)...). sqlglot's typed
functions are built to transpile between dialects: read and written back they may change (a date format
goes through strftime's), and a dagger's query must reach Spark meaning what it says.

Parsed nodes keep where their first token stands in the user's text (`meta`): `position` and `where`
give it, so errors name the user's line and column however the tree was rewritten.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import ClassVar

from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.dialects.spark import Spark
from sqlglot.tokens import TokenType

_TYPED_FUNCTIONS = {"COUNT", "SUM", "AVG", "MIN", "MAX", "ROW_NUMBER"}
"""The function calls parsed into sqlglot's own classes: the OVER, Top-N and typed passes read them."""
_STRUCTURED_CALLS = {"CAST", "TRY_CAST", "SAFE_CAST", "CONVERT", "TRY_CONVERT"}
"""Calls whose arguments would read as a plain list (`x AS INT` an alias), always parsed by their syntax."""
_SYNTAX_WORDS = {
    "FROM", "FOR", "IN", "AS", "PLACING", "BOTH", "LEADING", "TRAILING", "TO", "USING", "SEPARATOR",
}  # fmt: skip
"""The words of the calls with a syntax of their own."""
_AGGREGATES_OF_THEIR_OWN_SYNTAX = {"PERCENTILE", "PERCENTILE_APPROX", "APPROX_PERCENTILE", "STRING_AGG"}
"""Aggregates that sqlglot parses by a syntax of their own, so not among the builders `_aggregate_names`
reads."""


def _aggregate_names() -> frozenset[str]:
    """The names of Spark's aggregate (and ranking) functions, by the class sqlglot's builder makes of a
    call with placeholder arguments: parsed as written, they are still known as aggregates."""
    names = set()
    for name, builder in Spark.Parser.FUNCTIONS.items():
        for count in (1, 2, 3):
            arguments = [exp.column(f"argument_{index}") for index in range(count)]
            try:
                try:
                    built = builder(arguments)
                except TypeError:
                    built = builder(arguments, dialect=Spark())
            except Exception:  # a builder that wants other arguments: the next count may do
                continue
            if isinstance(built, exp.AggFunc):
                names.add(name)
            break
    return frozenset(names)


SPARK_AGGREGATES = _aggregate_names() | _AGGREGATES_OF_THEIR_OWN_SYNTAX


class DaggerSpark(Spark):
    """Spark SQL with function calls kept as written (see the module doc)."""

    class Tokenizer(Spark.Tokenizer):
        # Spark reads `''` in a literal as a quote (`'yyyy-MM-dd''T''HH'`), not as two adjacent literals.
        STRING_ESCAPES: ClassVar[list[str]] = ["\\", "'"]

    class Parser(Spark.Parser):
        FUNCTIONS: ClassVar[dict[str, Callable]] = {
            name: builder for name, builder in Spark.Parser.FUNCTIONS.items() if name in _TYPED_FUNCTIONS
        }

        # `FROM a, b` stays a comma join (Hive's dialect, and so Spark's, writes it as a CROSS JOIN).
        JOINS_HAVE_EQUAL_PRECEDENCE = False
        # Not a GROUP BY's end: `GROUP BY window(t, '1 minute')` is Spark's window function.
        QUERY_MODIFIER_TOKENS: ClassVar[set[TokenType]] = {*Spark.Parser.QUERY_MODIFIER_TOKENS} - {
            TokenType.WINDOW
        }

        def _parse_function_call(
            self,
            functions: dict[str, Callable] | None = None,
            anonymous: bool = False,
            optional_parens: bool = True,
            any_token: bool = False,
        ) -> exp.Expr | None:
            # A call with a syntax of its own (SUBSTRING(s FROM 1), POSITION(a IN b)...) is parsed by it; a
            # plain argument list as written.
            name = self._curr.text.upper() if self._curr else ""
            if name in self.FUNCTION_PARSERS and name not in _STRUCTURED_CALLS and self._plain_arguments():
                anonymous = True
            return super()._parse_function_call(functions, anonymous, optional_parens, any_token)

        def _plain_arguments(self) -> bool:
            """Whether the call at the current token has a plain argument list, no word of a syntax of its
            own (FROM, FOR, IN, PLACING, BOTH...) among its arguments."""
            depth = 0
            for token in self._tokens[self._index + 1 :]:
                depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
                if depth == 0:
                    return True
                if depth == 1 and token.text.upper() in _SYNTAX_WORDS:
                    return False
            return False

        def _parse_field(
            self,
            any_token: bool = False,
            tokens: Collection[TokenType] | None = None,
            anonymous_func: bool = False,
        ) -> exp.Expr | None:
            if self._names_spark_window():
                if self._next is not None and self._next.token_type == TokenType.L_PAREN:
                    name = self._curr
                    self._advance(2)
                    arguments = self._parse_function_args()
                    self._match_r_paren()
                    return self.expression(exp.Anonymous(this=name.text, expressions=arguments), token=name)
                return self._parse_id_var(any_token=True)
            return super()._parse_field(any_token, tokens, anonymous_func)

        def _names_spark_window(self) -> bool:
            """Whether the WINDOW keyword here is Spark's window function or column (`window(t, '1 minute')`,
            `window.start`), not the clause naming windows (`WINDOW w AS (...)`)."""
            if self._curr is None or self._curr.token_type != TokenType.WINDOW:
                return False
            names = (
                self._index + 2 < len(self._tokens)
                and self._tokens[self._index + 2].token_type == TokenType.ALIAS
            )
            return not names

    class Generator(Spark.Generator):
        # A nested WITH stays where it was written: hoisting it to the top, as sqlglot does for older
        # Sparks, changes which names its CTEs see and shadow.
        EXPRESSIONS_WITHOUT_NESTED_CTES: ClassVar[set[type[exp.Expr]]] = set()

        def __init__(self, **options: object) -> None:
            super().__init__(**{**options, "normalize_functions": False})


def parse_statements(text: str, dialect: type[Dialect]) -> list[exp.Expr]:
    """The statements of `text`: the one place the SQL stage parses (`ParseError`, `TokenError` as
    sqlglot raises them)."""
    instance = dialect()
    return [statement for statement in instance.parser().parse(instance.tokenize(text), text) if statement]


def spark_text(tree: exp.Expr) -> str:
    """The Spark SQL of a (rewritten) tree."""
    return tree.sql(dialect=DaggerSpark)


def call(name: str, *arguments: exp.Expr) -> exp.Anonymous:
    """A call of the function `name`, written as named."""
    return exp.Anonymous(this=name, expressions=list(arguments))


def cast(node: exp.Expr, type_name: str, *parameters: int) -> exp.Cast:
    """`CAST(node AS type_name(parameters))`, `type_name` one of sqlglot's `DataType.Type`s."""
    to = exp.DataType(
        this=exp.DataType.Type[type_name],
        expressions=[exp.DataTypeParam(this=exp.Literal.number(value)) for value in parameters] or None,
    )
    return exp.Cast(this=node, to=to)


def position(node: exp.Expr) -> int | None:
    """The offset in the user's text where `node` starts: its own token's, or the first of its parts'."""
    starts = [part.meta["start"] for part in node.walk() if "start" in part.meta]
    return min(starts) if starts else None


def line_and_column(text: str, start: int) -> tuple[int, int]:
    line = text.count("\n", 0, start) + 1
    return line, start - (text.rfind("\n", 0, start) + 1) + 1


def where(text: str, node: exp.Expr) -> str:
    """`at line L, column C` of `node` in `text` (the text it was parsed from), or "" when unknown."""
    start = position(node)
    if start is None:
        return ""
    line, column = line_and_column(text, start)
    return f"at line {line}, column {column}"
