"""Rows as the text of Flink's `csv` format, which a Flink SQL script's `filesystem` table with `'format' =
'csv'` writes (Nexmark q10), for the types whose text was checked on Flink 2.3: integers, strings,
booleans and timestamps.

One line a row, `\\n`-ended, no header, `,` between values: a NULL is nothing, an integer its digits, a
boolean `true`/`false`, a timestamp `"2026-12-01 10:00:01.5"` (its fraction without trailing zeros, none
for a whole second). A text is quoted, its `"` doubled, when it holds a character before `-` (space,
`,`, `"`, control characters...), as Flink's CSV writer (Jackson's) quotes; the timestamp's space quotes it.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import BooleanType, DataType, IntegralType, StringType, TimestampNTZType, TimestampType

CSV_TYPES = (StringType, IntegralType, BooleanType, TimestampType, TimestampNTZType)
"""The Spark types written as Flink writes them; a CSV sink refuses a column of another."""


def csv_lines(batch: pa.RecordBatch) -> bytes:
    """The batch's rows as Flink's CSV lines."""
    columns = [_texts(column) for column in batch.columns]
    return "".join(",".join(row) + "\n" for row in zip(*columns, strict=True)).encode()


def writes_as_flink(data_type: DataType) -> bool:
    return isinstance(data_type, CSV_TYPES)


def _texts(column: pa.Array) -> list[str]:
    if pa.types.is_timestamp(column.type):
        wall_clock = column.cast(pa.timestamp("us")) if column.type.tz else column  # UTC, as Flink's
        stamps = pc.strftime(wall_clock, format="%Y-%m-%d %H:%M:%S").to_pylist()
        return [_quoted(stamp.rstrip("0").rstrip(".")) if stamp else "" for stamp in stamps]
    if pa.types.is_boolean(column.type):
        return ["" if value is None else str(value).lower() for value in column.to_pylist()]
    if pa.types.is_integer(column.type):
        return ["" if value is None else str(value) for value in column.to_pylist()]
    return ["" if value is None else _quoted(value) for value in column.to_pylist()]


def _quoted(text: str) -> str:
    if any(char < "-" for char in text):
        return '"' + text.replace('"', '""') + '"'
    return text
