"""Query results as JSON values, and the reason a query failed, as `dagger sql` and the Analysis API give
them: timestamps ISO 8601 in UTC, dates ISO, decimals strings (every digit kept), binary base64, maps
objects, NaN and infinities the strings "NaN", "Infinity", "-Infinity"."""

from __future__ import annotations

import base64
import datetime as dt
import re
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa

_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception): ")


def failure_reason(message: str) -> str:
    """The line of a Spark failure that says what went wrong: a Python worker's exception when there is
    one, else Spark's own first line (`[ERROR_CLASS] ...`), without stack traces."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    python_errors = [
        line
        for line in lines
        if _EXCEPTION_LINE.match(line) and not line.startswith(("org.", "java.", "py4j.", "scala."))
    ]
    return python_errors[-1] if python_errors else (lines[0] if lines else message)


def json_rows(table: pa.Table) -> Iterator[list[Any]]:
    """Each row of `table` as a list of JSON-ready values, columns in their order."""
    columns = [(field.type, table.column(index)) for index, field in enumerate(table.schema)]
    for row in range(table.num_rows):
        yield [_json_value(column[row].as_py(), kind) for kind, column in columns]


def _json_value(value: Any, kind: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_map(kind):
        return {
            str(_json_value(key, kind.key_type)): _json_value(item, kind.item_type) for key, item in value
        }
    if pa.types.is_struct(kind):
        return {field.name: _json_value(value[field.name], field.type) for field in kind}
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return [_json_value(item, kind.value_type) for item in value]
    if isinstance(value, float) and (value != value or value in (float("inf"), float("-inf"))):
        return "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.datetime):
        return (
            value.astimezone(dt.UTC).isoformat().replace("+00:00", "Z") if value.tzinfo else value.isoformat()
        )
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value
