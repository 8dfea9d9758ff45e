"""Rows of Flink and of a dagger in one form, for the oracles that compare the two.

Flink's side (`tagged`, `run_query`) runs inside PyFlink's own virtualenv (build/flink-venv), not the
project's: only the standard library and PyFlink (imported where used), for `tests/flink/runner.py` (the
oracle's corpus) and `jobs/tools/nexmark/flink_job.py` (the Nexmark oracle). The dagger's side
(`spark_tagged`, PySpark imported where used) tags the values of a dagger's log sink the same way.

A query whose result is a changelog (an aggregation without a window) is reported as its final table.
Values are tagged with their column's type (`int8`, `int16`, `int32`, `int64`, `float32`, `float64`,
`decimal(p,s)`, `str`, `bool`, `ts`, `date`, `array`) so that an INT and a BIGINT, or a DOUBLE, of the same
value stay different; instants are cut to milliseconds, as Flink hands them to Python.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any


def kind_of(data_type: Any) -> str | None:
    """The tag of a number column's values: its width or its decimal shape (None: the value decides)."""
    from pyflink.table import types

    widths = {
        types.TinyIntType: "int8", types.SmallIntType: "int16", types.IntType: "int32",
        types.BigIntType: "int64", types.FloatType: "float32", types.DoubleType: "float64",
    }  # fmt: skip
    if isinstance(data_type, types.DecimalType):
        return f"decimal({data_type.precision},{data_type.scale})"
    return widths.get(type(data_type))


def tagged(value: Any, data_type: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return ["bool", value]
    if isinstance(value, int | float | Decimal):
        kind = kind_of(data_type)
        return [kind, str(value) if isinstance(value, Decimal) else value]
    if isinstance(value, datetime):
        return ["ts", value.replace(tzinfo=None).isoformat(timespec="milliseconds")]
    if isinstance(value, date):
        return ["date", value.isoformat()]
    if isinstance(value, list | tuple):
        return ["array", [tagged(item, data_type.element_type) for item in value]]
    return ["str", str(value)]


def failure(error: Exception) -> str:
    """The Java exception's own message where there is one (py4j's first line only says a call failed)."""
    java = getattr(error, "java_exception", None)
    if java is not None:
        return f"{java.getClass().getName()}: {java.getMessage()}"
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__


def run_query(t_env: Any, sql: str) -> dict[str, Any]:
    """Runs `sql` to its end: its columns, its final rows (a changelog applied), whether it was one, and
    the wall-clock times (`time.time()`) of its first and last row, which the Nexmark benchmark reads."""
    from pyflink.common import RowKind

    started = time.monotonic()
    first_output = last_output = None
    table = t_env.sql_query(sql)
    schema = table.get_schema()
    columns, types = schema.get_field_names(), schema.get_field_data_types()
    final: list[tuple] = []
    changelog = False
    with table.execute().collect() as results:
        for row in results:
            last_output = time.time()
            first_output = first_output or last_output
            kind = row.get_row_kind()
            values = tuple(json.dumps(tagged(value, kind)) for value, kind in zip(row, types, strict=True))
            if kind in (RowKind.INSERT, RowKind.UPDATE_AFTER):
                final.append(values)
            else:
                final.remove(values)
            changelog = changelog or kind != RowKind.INSERT
    return {
        "columns": columns,
        "rows": [[json.loads(value) for value in row] for row in final],
        "changelog": changelog,
        "seconds": round(time.monotonic() - started, 2),
        "first_output": first_output,
        "last_output": last_output,
    }


def spark_tagged(value: Any, data_type: Any) -> Any:
    """A value of a dagger's log sink (JSON) of Spark type `data_type`, tagged as `tagged` tags Flink's."""
    from pyspark.sql import types

    widths = {
        types.ByteType: "int8", types.ShortType: "int16", types.IntegerType: "int32",
        types.LongType: "int64", types.FloatType: "float32", types.DoubleType: "float64",
    }  # fmt: skip
    if value is None:
        return None
    if isinstance(data_type, types.BooleanType):
        return ["bool", value]
    if isinstance(
        data_type,
        types.ByteType
        | types.ShortType
        | types.IntegerType
        | types.LongType
        | types.FloatType
        | types.DoubleType,
    ):
        return [
            widths[type(data_type)],
            float(value) if isinstance(data_type, types.FloatType | types.DoubleType) else value,
        ]
    if isinstance(data_type, types.DecimalType):
        return [f"decimal({data_type.precision},{data_type.scale})", value]
    if isinstance(data_type, types.TimestampType | types.TimestampNTZType):
        instant = datetime.fromisoformat(value)
        if instant.tzinfo is not None:
            instant = instant.astimezone(UTC).replace(tzinfo=None)
        return ["ts", instant.isoformat(timespec="milliseconds")]
    if isinstance(data_type, types.DateType):
        return ["date", value]
    if isinstance(data_type, types.ArrayType):
        return ["array", [spark_tagged(item, data_type.elementType) for item in value]]
    if isinstance(data_type, types.StringType):
        return ["str", value]
    raise ValueError(f"no tag for {data_type.simpleString()}")
