"""The SQL console: batch SQL with Dagger's functions, result rows printed as JSON lines.

    dagger sql "SELECT Distance(-6.2, 106.8, -6.3, 106.9) AS km"
    dagger sql -f checks.sql          (statements separated by ';')
    echo "SELECT 1 AS one" | dagger sql
    dagger sql --project shop "SELECT count(*) FROM pageview"   (a project's tables, as the Analysis API)

Each row is one JSON object, columns in order. Timestamps are ISO 8601 in UTC (`2024-01-01T00:00:00Z`),
dates `2024-01-01`, decimals strings (every digit kept), binary base64, maps objects, NaN and infinities
the strings "NaN", "Infinity", "-Infinity". Statements that return nothing (CREATE TEMPORARY VIEW, SET)
print nothing. The first failing statement stops the run: exit status 2 for SQL that cannot be analysed
(the message gives line and column), 1 for a failure while computing rows.

A Dagger function is registered when the text names it (as a dagger registers the ones its SQL names),
so `SHOW USER FUNCTIONS` lists only those.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import TextIO

from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from jobs.cli.analysis import add_projects
from jobs.engine.results import failure_reason, json_rows
from jobs.model import sql as sql_stage
from jobs.model.schema_registry import SchemaRegistry
from jobs.model.sql_tree import DaggerSpark
from jobs.raystack import load_dagger_or_job
from jobs.udfs import FunctionsError, register_functions
from jobs.udfs.config import DartStoreConfig, FunctionsConfig


class ConsoleError(Exception):
    """A statement that failed; `exit_status` is 2 for bad SQL, 1 for a failure computing its rows."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def split_statements(text: str) -> list[tuple[int, str]]:
    """Statements separated by top-level `;` (Spark's lexer's semicolons: none in literals or comments), each
    with its offset in `text`; blank ones left out. Text Spark's lexer cannot read is one statement, for
    Spark's parser to report."""
    try:
        tokens = DaggerSpark().tokenize(text)
    except TokenError:
        return [(0, text)] if text.strip() else []
    statements: list[tuple[int, str]] = []
    start, has_code = 0, False
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            if has_code:
                statements.append((start, text[start : token.start]))
            start, has_code = token.end + 1, False
        else:
            has_code = True
    if has_code:
        statements.append((start, text[start:]))
    return statements


def run_statements(analyse: Callable[[str], DataFrame], text: str, out: TextIO) -> int:
    """Run every statement of `text` in order (`analyse` makes each a DataFrame, raising
    `jobs.model.sql.SqlError` for SQL it cannot run), printing result rows to `out`; returns how many ran."""
    statements = split_statements(text)
    for number, (offset, statement) in enumerate(statements, start=1):
        where = f"statement {number}: " if len(statements) > 1 else ""
        # Blanked text before the statement keeps Spark's line and column those of the whole input.
        padded = "".join(char if char == "\n" else " " for char in text[:offset]) + statement
        try:
            frame = analyse(padded)
        except sql_stage.SqlError as error:
            raise ConsoleError(f"{where}{error}", 2) from None
        try:
            for line in json_lines(frame):
                out.write(line + "\n")
        except PySparkException as error:
            raise ConsoleError(f"{where}{failure_reason(str(error))}", 1) from None
        out.flush()
    return len(statements)


def json_lines(frame: DataFrame) -> Iterator[str]:
    """Each row of `frame` as a JSON object, columns in their order (duplicate names kept)."""
    table = frame.toArrow()
    names = [json.dumps(name, ensure_ascii=False) for name in table.column_names]
    for row in json_rows(table):
        pairs = (
            f"{name}: {json.dumps(value, ensure_ascii=False)}" for name, value in zip(names, row, strict=True)
        )
        yield "{" + ", ".join(pairs) + "}"


def _statement_analyser(spark: SparkSession, args: argparse.Namespace) -> Callable[[str], DataFrame]:
    """Plain Spark SQL, or with `--project` the project's isolated queries."""
    if args.project is None:
        return partial(sql_stage.analyse, spark)
    from jobs.analysis.engine import AnalysisEngine, AnalysisError
    from jobs.analysis.project import load_projects

    engine = AnalysisEngine(spark, load_projects(args.projects))
    try:
        engine.project(args.project)  # an unknown project fails before any statement
    except AnalysisError as error:
        raise ConsoleError(str(error), 2) from None

    def analyse(statement: str) -> DataFrame:
        try:
            return engine.frame(args.project, statement)
        except AnalysisError as error:
            raise sql_stage.SqlError(str(error)) from None

    return analyse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `dagger sql` command line."""
    parser.add_argument("statement", nargs="?", help="SQL text; without it, -f or stdin is read")
    parser.add_argument("-f", "--file", type=Path, help="a file of statements separated by ';'")
    parser.add_argument(
        "--dagger",
        type=Path,
        help="use the functions: section and descriptor sets of this dagger file (or raystack job config)",
    )
    parser.add_argument(
        "--project",
        help="only this analysis project's collections, continuous. and materialized. tables",
    )
    add_projects(parser)
    parser.add_argument("--darts", help="the darts' store: a folder, an http(s):// or a gs:// prefix")
    parser.add_argument(
        "--python-udfs",
        action="append",
        default=[],
        metavar="PATH",
        help="a .py file, a folder or a .zip of Python functions (Dagger's convention; repeatable)",
    )
    parser.add_argument(
        "--python-module",
        action="append",
        default=[],
        metavar="NAME",
        help="an importable module of @dagger_function functions (repeatable)",
    )


def command(args: argparse.Namespace) -> int:
    """`dagger sql`: returns the exit status."""
    from jobs.engine.spark import spark_session

    if args.statement is not None:
        text = args.statement
    elif args.file is not None:
        try:
            text = args.file.read_text(encoding="utf-8")
        except OSError as error:
            print(f"error: cannot read {args.file}: {error.strerror}", file=sys.stderr)
            return 2
    else:
        text = sys.stdin.read()
    registry: SchemaRegistry | None = None
    functions = FunctionsConfig()
    if args.dagger is not None:
        spec = load_dagger_or_job(args.dagger)
        functions = spec.functions
        settings = spec.schema_registry
        registry = SchemaRegistry.load(
            settings.descriptor_sets, settings.fetch_timeout.total_seconds(), settings.fetch_headers
        )
    python_udfs = functions.python_udfs.model_copy(
        update={
            "files": [
                *functions.python_udfs.files,
                *(str(Path(path).resolve()) for path in args.python_udfs),
            ],
            "modules": [*functions.python_udfs.modules, *args.python_module],
        }
    )
    darts = DartStoreConfig(location=args.darts) if args.darts else functions.darts
    functions = functions.model_copy(update={"python_udfs": python_udfs, "darts": darts})
    spark = spark_session(args.master, app_name="dagger-sql")
    try:
        # Per statement: an aggregate call that one statement gets wrong is left unexpanded, and must
        # not take the helpers another statement's calls expand to with it.
        statements = split_statements(text)
        names = set().union(*(sql_stage.named_words(statement) for _, statement in statements))
        register_functions(spark, registry, functions, names)
        run_statements(_statement_analyser(spark, args), text, sys.stdout)
    except FunctionsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ConsoleError as error:
        print(f"error: {error}", file=sys.stderr)
        return error.exit_status
    finally:
        spark.stop()
    return 0
