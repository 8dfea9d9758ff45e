"""PostgreSQL enrichment (Dagger's `pg` external source): one query per row, on the shared engine.

Each Python worker keeps one `psycopg_pool.AsyncConnectionPool` per configuration, of at most `capacity`
connections (opened on demand, closed after `idle_timeout` unused; a connection attempt gives up after
`connect_timeout`), in autocommit mode.

`query_pattern`'s `%s` are bound parameters, never text spliced into the SQL, so a value cannot change the
statement (`%%` is a literal `%`). A bare `%s` binds the value with its own type (numbers, booleans,
timestamps; strings as untyped text that PostgreSQL reads as the type the query needs); a quoted `'%s'`
(Dagger's style, where the value was spliced into a string literal) binds it as untyped text, rendered as
Dagger renders variables (timestamps `yyyy-MM-dd HH:mm:ss` UTC, structures as JSON). A `%s` inside a
longer string literal (`'a%s'`) cannot be bound and stops the dagger at start; write `'a' || %s`. A null
variable binds SQL NULL.

Answers, as in Dagger: no row -> null output fields; one row -> each output field is the result column
`path`, cast to its declared type (for STRING fields, non-text values as text: timestamps in ISO 8601,
timestamptz in UTC; numerics exactly; json / jsonb and arrays as compact JSON); more than one row ->
Dagger's `invalid_configuration`: the micro-batch fails when `fail_on_errors` is true, else the row goes
on with null output fields. SQL errors (a bad query, a value PostgreSQL cannot convert) are not retried;
connection errors, lost connections and server-side cancellations are.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal
from typing import Any
from uuid import UUID

from pyspark.sql import DataFrame

from jobs.processors.config import PostgresEnrichment
from jobs.processors.context import TransformContext
from jobs.processors.enrichment.engine import CallFailed, EnrichmentPlan, NoAnswer, enrich
from jobs.processors.enrichment.http import render

# --------------------------------------------------------------------------------------------------------
# The query pattern
# --------------------------------------------------------------------------------------------------------


class QueryPatternError(ValueError):
    """A `query_pattern` that cannot be run with bound parameters."""


def psycopg_query(pattern: str) -> tuple[str, tuple[bool, ...]]:
    """The query for psycopg, and for each placeholder whether it was a quoted `'%s'` (bound as text).

    String literals, quoted identifiers and comments are copied as they are; a `%s` inside a string literal
    other than `'%s'` itself, or a lone `%`, is an error.
    """
    out: list[str] = []
    quoted: list[bool] = []
    index, length = 0, len(pattern)
    while index < length:
        char = pattern[index]
        if pattern.startswith("'%s'", index):
            out.append("%s")
            quoted.append(True)
            index += 4
        elif char in "'\"":
            end = _closing_quote(pattern, index)
            literal = pattern[index : end + 1]
            _check_percent(literal.replace("%%", ""), inside_literal=char == "'")
            out.append(literal)
            index = end + 1
        elif pattern.startswith("--", index) or pattern.startswith("/*", index):
            end = pattern.find("\n" if char == "-" else "*/", index + 2)
            end = length if end < 0 else end + (1 if char == "-" else 2)
            _check_percent(pattern[index:end].replace("%%", ""), inside_literal=False, comment=True)
            out.append(pattern[index:end])
            index = end
        elif pattern.startswith("%%", index):
            out.append("%%")
            index += 2
        elif pattern.startswith("%s", index):
            out.append("%s")
            quoted.append(False)
            index += 2
        elif char == "%":
            raise QueryPatternError(f"a lone '%' at position {index}: write '%%' for a literal '%'")
        else:
            out.append(char)
            index += 1
    return "".join(out), tuple(quoted)


def _closing_quote(pattern: str, start: int) -> int:
    quote = pattern[start]
    index = start + 1
    while True:
        end = pattern.find(quote, index)
        if end < 0:
            kind = "string literal" if quote == "'" else "quoted identifier"
            raise QueryPatternError(f"unterminated {kind} starting at position {start}")
        if pattern.startswith(quote * 2, end):  # '' (or "") inside is an escaped quote
            index = end + 2
            continue
        return end


def _check_percent(text: str, inside_literal: bool, comment: bool = False) -> None:
    if "%s" in text:
        if comment:
            raise QueryPatternError(f"%s in a comment ({text.strip()!r}); write %%s or remove it")
        where = "a string literal" if inside_literal else "a quoted identifier"
        raise QueryPatternError(
            f"%s inside {where} ({text!r}) cannot be a bound parameter; write '%s' alone as the "
            "literal, or concatenate: 'prefix' || %s"
        )
    if "%" in text:
        raise QueryPatternError(f"a lone '%' in {text!r}: write '%%' for a literal '%'")


def _bound(value: Any, as_text: bool) -> Any:
    """One variable as a query parameter."""
    if value is None:
        return None
    if as_text or isinstance(value, dict):
        return render(value)
    if isinstance(value, list) and any(isinstance(item, dict | list | tuple) for item in value):
        return render(value)  # maps, arrays of structs: JSON text (PostgreSQL reads it as json / jsonb)
    return value  # str (untyped text), numbers, booleans, timestamps, dates, bytes, arrays of scalars


# --------------------------------------------------------------------------------------------------------
# Answers
# --------------------------------------------------------------------------------------------------------

_TEXT_TYPE = re.compile(r"\s*(string|varchar\s*\(\s*\d+\s*\)|char\s*\(\s*\d+\s*\))\s*", re.IGNORECASE)


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()
    return str(value)


def as_text(value: Any) -> str:
    """A result value for a STRING output field."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int | float):
        return json.dumps(value)
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).isoformat()  # timestamptz in UTC, like the Spark session
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, default=_json_default, ensure_ascii=False, separators=(",", ":"))
    if isinstance(value, bytes | bytearray | memoryview):
        return "\\x" + bytes(value).hex()  # bytea's text form
    return str(value)  # Decimal exactly, UUID, intervals, ranges...


def extract_column(text_columns: frozenset[str], answer: dict[str, Any], column: str) -> Any:
    """A result column's value (`KeyError` for a column the query does not return)."""
    value = answer[column]
    if value is None:
        return None
    if column in text_columns:
        return as_text(value)
    if isinstance(value, UUID):
        return str(value)
    if isinstance(value, memoryview | bytearray):
        return bytes(value)
    return value


# --------------------------------------------------------------------------------------------------------
# The caller
# --------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PostgresSettings:
    """What an executor needs to query the database (picklable, plain values)."""

    conninfo: str
    target: str
    """`host:port/database`, for messages (the conninfo may hold a password)."""
    query: str
    text_parameters: tuple[bool, ...]
    capacity: int
    connect_timeout_s: float
    idle_timeout_s: float
    pool_name: str

    @property
    def key(self) -> str:
        return "postgres:" + hashlib.sha256(repr(self).encode()).hexdigest()


class PostgresCaller:
    """An `AsyncConnectionPool` of at most `capacity` connections, kept on the worker's event loop."""

    def __init__(self, settings: PostgresSettings) -> None:
        from psycopg_pool import AsyncConnectionPool

        self.settings = settings
        self.pool = AsyncConnectionPool(
            settings.conninfo,
            min_size=0,
            max_size=settings.capacity,
            open=False,
            timeout=settings.connect_timeout_s,
            max_idle=settings.idle_timeout_s,
            kwargs={"autocommit": True},
            name=settings.pool_name,
        )
        self._opened = False
        self._open_lock = asyncio.Lock()

    async def _open(self) -> None:
        if self._opened:
            return
        async with self._open_lock:
            if not self._opened:
                await self.pool.open(wait=False)
                self._opened = True

    async def call(self, variables: Sequence[Any]) -> Any:
        import psycopg
        from psycopg.rows import dict_row
        from psycopg_pool import PoolTimeout

        settings = self.settings
        parameters = [
            _bound(value, as_text) for value, as_text in zip(variables, settings.text_parameters, strict=True)
        ]
        await self._open()
        try:
            async with (
                self.pool.connection() as connection,
                connection.cursor(row_factory=dict_row) as cursor,
            ):
                await cursor.execute(settings.query, parameters)
                if cursor.description is None:
                    raise CallFailed("the query returns no rows (is it a SELECT?)", retryable=False)
                rows = await cursor.fetchmany(2)
                count = cursor.rowcount
        except PoolTimeout:
            reason = await self._connect_error()
            raise CallFailed(
                f"no connection to PostgreSQL at {settings.target} within {settings.connect_timeout_s:g}s"
                + (f": {reason}" if reason else "")
            ) from None
        except psycopg.Error as error:
            # Connection problems, server shutdowns, cancellations and deadlocks are OperationalErrors.
            raise CallFailed(
                f"PostgreSQL at {settings.target}: {_describe(error)}",
                retryable=isinstance(error, psycopg.OperationalError),
            ) from None
        if not rows:
            raise NoAnswer
        if len(rows) > 1:
            raise CallFailed(
                f"invalid_configuration: the query returned {count if count > 1 else 'more than one'} rows "
                "for one input row (it must return at most one)",
                retryable=False,
            )
        return rows[0]

    async def _connect_error(self) -> str:
        """Why connecting fails (the pool only logs it), from one attempt of our own."""
        import psycopg

        try:
            connection = await asyncio.wait_for(
                psycopg.AsyncConnection.connect(self.settings.conninfo), self.settings.connect_timeout_s
            )
        except TimeoutError:
            return "connecting timed out"
        except psycopg.Error as error:
            return " ".join(str(error).split("\n")[0].split())
        await connection.close()
        return ""

    async def close(self) -> None:
        if self._opened:
            await self.pool.close()


def _describe(error: Exception) -> str:
    sqlstate = getattr(error, "sqlstate", None)
    message = " ".join(str(error).split("\n")[0].split()) or type(error).__name__
    return f"{type(error).__name__}{f' [{sqlstate}]' if sqlstate else ''}: {message}"


# --------------------------------------------------------------------------------------------------------
# The post-processor
# --------------------------------------------------------------------------------------------------------


def enrich_postgres(frame: DataFrame, config: PostgresEnrichment, context: TransformContext) -> DataFrame:
    """`frame` with the enrichment's output fields appended, one query per row."""
    from psycopg.conninfo import make_conninfo

    try:
        query, text_parameters = psycopg_query(config.query_pattern)
    except QueryPatternError as error:
        raise context.error(f"query_pattern: {error}") from None
    application_name = f"dagger {context.dagger} {context.key}"[:63]
    conninfo = make_conninfo(
        host=config.host,
        port=config.port,
        user=config.user,
        password=config.password,
        dbname=config.database,
        # libpq counts whole seconds (and reads 1 as 2)
        connect_timeout=max(2, math.ceil(config.connect_timeout.total_seconds())),
        application_name=application_name,
    )
    settings = PostgresSettings(
        conninfo=conninfo,
        target=f"{config.host}:{config.port}/{config.database}",
        query=query,
        text_parameters=text_parameters,
        capacity=config.capacity,
        connect_timeout_s=config.connect_timeout.total_seconds(),
        idle_timeout_s=config.idle_timeout.total_seconds(),
        pool_name=context.key,
    )
    text_columns = frozenset(
        output.path for output in config.output_mapping.values() if _TEXT_TYPE.fullmatch(output.type)
    )
    plan = EnrichmentPlan.for_config(
        config,
        context.key,
        list(config.query_variables),
        caller_key=settings.key,
        make_caller=functools.partial(PostgresCaller, settings),
        extract=functools.partial(extract_column, text_columns),
    )
    return enrich(frame, plan, context)
