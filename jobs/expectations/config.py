"""The `expectations` key of a stream and of the dagger (on the SQL's result)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import Field, model_validator

from jobs.model.config import DeadLetterPolicy, SqlIdentifier

EXPECTATIONS_METRIC = "dagger.expectations"
"""Observed-metrics name prefix: `<prefix>.<stage>` holds `rows` and each expectation's violations."""
RESULT_STAGE = "sql"
"""The stage name of the expectations on the SQL's result."""
CHECKED_ROWS = "rows"
"""The observed metric counting the rows checked, beside each expectation's violations."""


class Expectation(DeadLetterPolicy):
    """A condition every row should meet."""

    name: SqlIdentifier
    """Names the expectation in metrics, asset checks and errors; unique among a stage's expectations."""
    condition: str = Field(min_length=1)
    """A Spark SQL boolean expression over the stage's columns, e.g. `amount > 0`, `user_id IS NOT NULL`."""
    action: Literal["warn", "drop", "dead_letter", "fail"] = "warn"
    """`warn` keeps the row and counts it; `drop` counts it and removes it from the stage's rows;
    `dead_letter` (a Kafka stream's expectations) also copies it, as JSON, to `dead_letter_topic` on the
    stream's cluster, with the expectation's name and condition in headers; `fail` stops the dagger with
    an error naming the expectation (the micro-batch is not committed, so a restart reads it again)."""

    @model_validator(mode="after")
    def _not_the_rows_count(self) -> Self:
        if self.name == CHECKED_ROWS:
            raise ValueError(f"name {CHECKED_ROWS!r} is taken by the count of rows checked")
        return self


def unique_names(expectations: list[Expectation]) -> list[Expectation]:
    """A validator of a stage's list: the names are unique."""
    names = [expectation.name for expectation in expectations]
    if repeated := sorted({name for name in names if names.count(name) > 1}):
        raise ValueError(f"expectation names must be unique; repeated: {', '.join(repeated)}")
    return expectations


def without_dead_letters(expectations: list[Expectation]) -> list[Expectation]:
    """A validator of a stage without a Kafka cluster of its own (the result, a Parquet stream)."""
    if named := [expectation.name for expectation in expectations if expectation.action == "dead_letter"]:
        raise ValueError(
            f"action 'dead_letter' needs a Kafka stream's cluster to write to ({', '.join(named)}); "
            "use 'drop'"
        )
    return unique_names(expectations)
