"""The SQL stage: the dagger's query over the streams' views, checked before anything runs."""

from __future__ import annotations

import contextlib
import re

from pyspark.errors import AnalysisException, ParseException, PySparkException
from pyspark.sql import DataFrame, SparkSession

from jobs.udfs.aggregate import FunctionCallError, RewrittenSql, rewrite_aggregate_calls
from jobs.udfs.arrays import rewrite_array_calls
from jobs.udfs.sql_text import words

_COUNT_STAR = re.compile(r"count\s*\(\s*\*\s*\)", re.IGNORECASE)


class SqlError(ValueError):
    """A query Spark cannot parse or analyse; the message carries the position."""


def analyse(spark: SparkSession, sql: str) -> DataFrame:
    """Parse and analyse the query against the registered views (Spark resolves names eagerly).

    Calls of Dagger's aggregates are expanded first (`jobs.udfs.aggregate`), its typed array functions
    cast to their types and ElementAt's path forms named (`jobs.udfs.arrays`); error positions are those of
    `sql` as written.
    """
    typed = rewrite_array_calls(sql)
    try:
        rewritten = rewrite_aggregate_calls(typed.text).after(typed)
    except FunctionCallError as error:
        raise SqlError(f"SQL error{_at(sql, error.position)}: {error}") from None
    try:
        return spark.sql(rewritten.text)
    except (AnalysisException, ParseException) as error:
        raise SqlError(f"SQL error{_position(rewritten, error)}: {_without_plan(str(error))}") from None


def _without_plan(message: str) -> str:
    """Spark appends the analysed plan (with every source option) after ';\n': users need the reason."""
    return message.split(";\n", 1)[0].strip()


def _position(rewritten: RewrittenSql, error: PySparkException) -> str:
    """' at line L, column C' (in the query as written) of the first position Spark reports, if any."""
    for context in error.getQueryContext() or []:
        start = context.startIndex()
        if start is not None and start >= 0:
            original_start = rewritten.original_index(start)
            stop = context.stopIndex()
            fragment = context.fragment()
            if stop is not None and stop >= start and rewritten.text != rewritten.original:
                fragment = rewritten.original[original_start : rewritten.original_index(stop) + 1] or fragment
            return _at(rewritten.original, original_start, fragment)
    return ""


def _at(sql: str, start: int, fragment: str | None = None) -> str:
    line = sql.count("\n", 0, start) + 1
    column = start - (sql.rfind("\n", 0, start) + 1) + 1
    return f" at line {line}, column {column}" + (f" ({fragment!r})" if fragment else "")


def named_words(sql: str) -> set[str]:
    """Every word of the query as Spark analyses it (Dagger's aggregate and array calls rewritten), in lower
    case.

    The functions it calls are among them, so `jobs.udfs.register_functions` registers just those.
    Deliberately a superset (column names, keywords, words in literals): a word too many registers a
    function the query does not call, a word too few would fail analysis.
    """
    text = rewrite_array_calls(sql).text
    with contextlib.suppress(FunctionCallError):  # `analyse` rejects the call before Spark sees the query
        text = rewrite_aggregate_calls(text).text
    return words(text)


def referenced_fields(sql: str, field_names: list[str]) -> list[str] | None:
    """The fields a query may read, for decoding only those; None when it may read every field.

    Deliberately a superset: a field counts as read when its name appears anywhere in the query as a
    word (in any case), and any `*` other than `count(*)` (a star select, a multiplication) keeps all.
    A field left out would make the query fail analysis, never silently change its result.
    """
    if "*" in _COUNT_STAR.sub("", sql):
        return None
    named = words(sql)
    return [name for name in field_names if name.lower() in named]
