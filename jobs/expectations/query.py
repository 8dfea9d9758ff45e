"""Expectations applied to a stage's rows, inside the query (see the package's docstring)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.errors import AnalysisException, ParseException
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.expectations.config import CHECKED_ROWS, EXPECTATIONS_METRIC, Expectation


class ExpectationError(ValueError):
    """An expectation whose condition is not a boolean Spark SQL expression over the stage's columns."""


DeadLetterWriters = Callable[[Expectation], str]
"""Registers the JVM function copying an expectation's rows to its dead-letter topic; gives its name."""


def apply_expectations(
    frame: DataFrame,
    expectations: list[Expectation],
    stage: str,
    where: str,
    dead_letters: DeadLetterWriters | None = None,
) -> DataFrame:
    """`frame` with its expectations counted, then its `fail` rows raising and its `drop` and `dead_letter`
    rows removed (the latter copied through `dead_letters`). `stage` names the metrics (a stream's table or
    `RESULT_STAGE`), `where` the errors (`dagger d: stream 'orders'`)."""
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
        elif expectation.action == "dead_letter":
            if dead_letters is None:
                raise ExpectationError(f"{where}: expectation {expectation.name!r}: {_NO_DEAD_LETTERS}")
            frame = frame.where(
                met[expectation.name] | ~_copied(frame, expectation, dead_letters(expectation))
            )
    return frame


_NO_DEAD_LETTERS = "action 'dead_letter' needs a Kafka stream's cluster to write to; use 'drop'"


def _copied(frame: DataFrame, expectation: Expectation, writer: str) -> Column:
    """The row copied, as JSON, by the dead-letter writer `writer` (true); evaluated only for the rows
    that miss the expectation, as `Or` does not evaluate its right side when its left is true."""
    row = F.to_json(F.struct(*(F.col(f"`{name}`") for name in frame.columns))).cast("binary")
    nothing = {kind: F.lit(None).cast(kind) for kind in ("binary", "string", "int", "long")}
    reason = F.lit(f"expectation {expectation.name!r} not met: {expectation.condition}")
    return F.call_function(
        writer,
        row,
        nothing["binary"],  # no key
        nothing["string"],  # no source position: the row is no longer a record
        nothing["int"],
        nothing["long"],
        reason,
        nothing["long"],
        nothing["long"],
    )


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
