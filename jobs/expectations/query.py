"""Expectations applied to a stage's rows, inside the query (see the package's docstring)."""

from __future__ import annotations

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.expectations.config import CHECKED_ROWS, EXPECTATIONS_METRIC, Expectation


class ExpectationError(ValueError):
    """An expectation whose condition is not a boolean Spark SQL expression over the stage's columns."""


def apply_expectations(
    frame: DataFrame, expectations: list[Expectation], stage: str, where: str
) -> DataFrame:
    """`frame` with its expectations counted, then its `fail` rows raising and its `drop` rows removed.
    `stage` names the metrics (a stream's table or `RESULT_STAGE`), `where` the errors (`dagger d:
    stream 'orders'`)."""
    if not expectations:
        return frame
    met = {expectation.name: _met(frame, expectation, where) for expectation in expectations}
    frame = frame.observe(
        f"{EXPECTATIONS_METRIC}.{stage}",
        F.count(F.lit(1)).alias(CHECKED_ROWS),
        *(F.count(F.when(~met[name], 1)).alias(name) for name in met),
    )
    for expectation in expectations:
        if expectation.action == "fail":
            failure = (
                f"{where}: a row does not meet expectation {expectation.name!r} ({expectation.condition})"
            )
            frame = frame.where(
                F.when(met[expectation.name], F.lit(True)).otherwise(F.raise_error(F.lit(failure)))
            )
        elif expectation.action == "drop":
            frame = frame.where(met[expectation.name])
    return frame


def _met(frame: DataFrame, expectation: Expectation, where: str) -> Column:
    """Whether a row meets the condition: true, never NULL."""
    problem = f"{where}: expectation {expectation.name!r}: condition {expectation.condition!r}"
    try:
        condition = F.expr(expectation.condition)
        kind = frame.select(condition.alias("met")).schema["met"].dataType.simpleString()
    except (ParseException, AnalysisException) as error:
        message = str(error).split("\n")[0].split("SQLSTATE")[0].strip()
        raise ExpectationError(f"{problem} is not Spark SQL over the stage's columns: {message}") from None
    if kind != "boolean":
        raise ExpectationError(f"{problem} is of type {kind}, not boolean")
    return F.coalesce(condition, F.lit(False))
