"""The SQL stage: the dagger's query over the streams' views, checked before anything runs.

A query is parsed once (`jobs.model.sql_tree`; a Flink query by its translator, `jobs.raystack.flink_sql`),
Dagger's functions are rewritten in its tree (`jobs.udfs.aggregate`, `jobs.udfs.arrays`), and Spark
analyses the text written from it. Spark's errors point into that text: `_position` finds the node the
error names and gives its place in the query as written.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from pyspark.errors import AnalysisException, ParseException, PySparkException
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp
from sqlglot.errors import ParseError, TokenError

from jobs.model.errors import without_plan
from jobs.model.sql_tree import DaggerSpark, line_and_column, parse_statements, position, spark_text
from jobs.udfs.aggregate import FunctionCallError, expand_aggregate_calls
from jobs.udfs.arrays import type_array_calls
from jobs.udfs.registration import words

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class SqlError(ValueError):
    """A query Spark cannot parse or analyse; the message carries the position."""


@dataclass(frozen=True)
class PreparedSql:
    """A query as Spark analyses it: its tree, with Dagger's functions rewritten, and the text written from
    the tree once."""

    original: str
    """The query as written."""
    text: str
    """The Spark SQL to analyse: the tree's, or `original` when sqlglot cannot read it (Spark's parser
    then says why, at the places of the text as written)."""
    tree: exp.Expr | None
    read: ReadNames | None
    """The names of the query as written (None: sqlglot cannot read it)."""
    error: FunctionCallError | None = None
    """A call of a Dagger function that can never run, which `analyse` reports."""


@dataclass(frozen=True)
class ReadNames:
    """What a query as written may read: the names in it, in lower case (its columns', aliases', functions',
    and string literals'), and whether a star reads every field."""

    names: frozenset[str]
    star: bool

    @classmethod
    def of(cls, tree: exp.Expr) -> ReadNames:
        """The names of `tree` as parsed, before any pass rewrites it."""
        names = frozenset(
            node.name.lower()
            for node in tree.walk()
            if isinstance(node, exp.Identifier | exp.Anonymous | exp.Var)
            or (isinstance(node, exp.Literal) and node.is_string)
        )
        star = any(not isinstance(star.parent, exp.Count) for star in tree.find_all(exp.Star))
        return cls(names, star)


@functools.lru_cache(maxsize=256)
def prepare(sql: str) -> PreparedSql:
    """The Spark SQL query `sql`, parsed and prepared (see the module doc); once for each text, however many
    of the stage's functions ask."""
    try:
        statements = parse_statements(sql, DaggerSpark)
    except (ParseError, TokenError):
        return PreparedSql(sql, sql, None, None)
    if len(statements) != 1:  # Spark's parser says what is wrong with them
        return PreparedSql(sql, sql, None, None)
    return prepare_tree(statements[0], sql, ReadNames.of(statements[0]))


def prepare_tree(tree: exp.Expr, original: str, read: ReadNames) -> PreparedSql:
    """The query of `tree` (parsed from `original`, whose names are `read`) with Dagger's aggregates
    expanded, its typed array functions cast to their types and ElementAt's path forms named."""
    try:
        type_array_calls(tree)
        expand_aggregate_calls(tree)
    except FunctionCallError as error:
        return PreparedSql(original, spark_text(tree), tree, read, error)
    return PreparedSql(original, spark_text(tree), tree, read)


def analyse(spark: SparkSession, sql: str | PreparedSql) -> DataFrame:
    """Parse and analyse the query against the registered views (Spark resolves names eagerly); error
    positions are those of the query as written."""
    prepared = prepare(sql) if isinstance(sql, str) else sql
    if prepared.error is not None:
        start = position(prepared.error.node)
        place = "" if start is None else _at(prepared.original, start)
        raise SqlError(f"SQL error{place}: {prepared.error}") from None
    try:
        return spark.sql(prepared.text)
    except (AnalysisException, ParseException) as error:
        raise SqlError(f"SQL error{_position(prepared, error)}: {without_plan(str(error))}") from None


def _position(prepared: PreparedSql, error: PySparkException) -> str:
    """' at line L, column C (fragment)' in the query as written of the first place Spark reports, if any:
    the node of the tree that Spark's fragment is the text of."""
    for context in error.getQueryContext() or []:
        start = context.startIndex()
        if start is None or start < 0:
            continue
        fragment = context.fragment()
        if prepared.tree is None or prepared.text == prepared.original:
            return _at(prepared.original, start, fragment)
        node = _node_of(prepared.tree, prepared.text, fragment, start)
        original_start = position(node) if node is not None else None
        if original_start is None:
            return f" ({fragment!r})" if fragment else ""
        written = prepared.original[original_start : original_start + len(fragment)]
        return _at(
            prepared.original, original_start, written if written.lower() == fragment.lower() else fragment
        )
    return ""


def _node_of(tree: exp.Expr, text: str, fragment: str, start: int) -> exp.Expr | None:
    """The node of `tree` whose Spark text is `fragment`: the n-th such (outermost, a column rather than
    its name) where the fragment at `start` is the n-th in `text`; failing that, the first node named
    the fragment's first word."""
    # Occurrences as Spark reads them: `a` is not one inside `amount`.
    occurrence = len(
        re.findall(
            rf"(?<!\w){re.escape(fragment)}(?!\w)" if fragment[:1].isalnum() else re.escape(fragment),
            text[:start],
        )
    )
    written = [
        node
        for node in tree.walk()
        if spark_text(node) == fragment
        and (node.parent is None or spark_text(node.parent) != fragment)
        and position(node) is not None
    ]
    if written:  # in the order of the text (the tree's walk is breadth first)
        written.sort(key=lambda node: position(node) or 0)
        return written[min(occurrence, len(written) - 1)]
    word = _WORD.search(fragment)
    named = [
        node
        for node in tree.walk()
        if "start" in node.meta and word is not None and node.name.lower() == word.group().lower()
    ]
    return named[0] if named else None


def _at(sql: str, start: int, fragment: str | None = None) -> str:
    line, column = line_and_column(sql, start)
    return f" at line {line}, column {column}" + (f" ({fragment!r})" if fragment else "")


def named_words(sql: str | PreparedSql) -> set[str]:
    """Every word of the query as Spark analyses it (Dagger's aggregate and array calls rewritten), in lower
    case.

    The functions it calls are among them, so `jobs.udfs.register_functions` registers just those.
    Deliberately a superset (column names, keywords, words in literals and comments): a word too many
    registers a function the query does not call, a word too few would fail analysis. A query whose
    Dagger call `analyse` rejects keeps that call's words.
    """
    return words((prepare(sql) if isinstance(sql, str) else sql).text)


def referenced_fields(sql: str | PreparedSql, field_names: list[str]) -> list[str] | None:
    """The fields a query may read, for decoding only those; None when it may read every field.

    Deliberately a superset: a field counts as read when its name is a name in the query as written (a
    column's, an alias', a function's, a string literal, in any case), and a star other than `count(*)`'s
    (`SELECT *`, `t.*`) reads all. A field left out would make the query fail analysis, never silently
    change its result.
    """
    read = (prepare(sql) if isinstance(sql, str) else sql).read
    if read is None or read.star:
        return None  # a query sqlglot cannot read: Spark's parser reports it
    return [name for name in field_names if name.lower() in read.names]
