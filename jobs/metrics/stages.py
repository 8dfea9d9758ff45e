"""Rows in and out of each stage between the streams and the sinks (pre-processors, the SQL, enrichments,
transformers), counted inside the query with Spark's observed metrics: no Python per row, and the counts
arrive with each micro-batch's progress report.

A stage is named by its key in the dagger file (`streams[0].pre_processors[1]`, `sql`,
`post_processors.http[0]`, `post_processors.transformers[0]`). The SQL's rows in are the rows of every
stream's table it reads, counted per table and added up; a stream without pre-processors or expectations
is not counted again for it: its own count of the records it passes (`passed`) is those rows."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.sources.config import StreamConfig

INVALID_RECORDS_METRIC = "invalid_records"
"""Observed per stream as `invalid_records.<table>`: `records` read, `count` invalid, `late` skipped as
late, `passed` handed on (to its pre-processors, expectations, or the SQL)."""
ROWS_IN = "dagger.stage_rows_in"
ROWS_OUT = "dagger.stage_rows_out"
SQL_STAGE = "sql"
_SEPARATOR = "|"  # stage keys hold dots and brackets


def counted_again_for_the_sql(stream: StreamConfig) -> bool:
    """Whether the SQL's rows in from `stream` need a count of their own: its pre-processors or
    expectations may change the rows after the stream counted those it passes."""
    return bool(stream.pre_processors or stream.expectations)


def counted(frame: DataFrame, metric: str, stage: str, part: str = "", enabled: bool = True) -> DataFrame:
    """`frame`, its rows counted as `metric` (`ROWS_IN` or `ROWS_OUT`) of `stage` (of its `part`); as it is
    when not `enabled` (the dagger's `metrics.stage_rows`)."""
    if not enabled:
        return frame
    name = _SEPARATOR.join([metric, stage, *([part] if part else [])])
    return frame.observe(name, F.count(F.lit(1)).alias("rows"))


def stage_rows(observed: Mapping[str, Mapping[str, Any]]) -> dict[str, dict[str, int]]:
    """Per stage, its rows `in` and `out` in one micro-batch's observed metrics."""
    rows: dict[str, dict[str, int]] = {}
    passed = {
        name.removeprefix(f"{INVALID_RECORDS_METRIC}."): int(row.get("passed", 0))
        for name, row in observed.items()
        if name.startswith(f"{INVALID_RECORDS_METRIC}.")
    }
    for name, row in observed.items():
        metric, _, rest = name.partition(_SEPARATOR)
        if metric in (ROWS_IN, ROWS_OUT):
            stage = rest.split(_SEPARATOR)[0]
            direction = "in" if metric == ROWS_IN else "out"
            counts = rows.setdefault(stage, {"in": 0, "out": 0})
            counts[direction] += int(row.get("rows", 0))
            if metric == ROWS_IN and stage == SQL_STAGE:
                passed.pop(rest.split(_SEPARATOR)[1], None)  # counted again: see counted_again_for_the_sql
    if SQL_STAGE in rows:  # the streams not counted again for the SQL
        rows[SQL_STAGE]["in"] += sum(passed.values())
    return rows
