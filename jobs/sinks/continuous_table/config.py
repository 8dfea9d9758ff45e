"""The keys of a continuous table sink in the dagger file, and the names its tables get in PostgreSQL."""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator, model_validator

from jobs.model.config import FROM_RESOURCE, is_secret_key
from jobs.sinks.config import SinkConfig

NAME_PATTERN = r"^[a-z_][a-z0-9_]*$"
MAX_NAME_BYTES = 63
"""PostgreSQL's identifiers are at most 63 bytes; it cuts longer ones short without a word."""

TableName = Annotated[str, Field(pattern=NAME_PATTERN)]


def check_name(key: str, value: str) -> None:
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(f"{key} {value!r}: expected lower-case letters, digits and _, not first a digit")


def table_name(project: str, name: str) -> str:
    """The table's name in the `continuous_tables` schema: `<project>.<name>`, one (quoted) identifier."""
    check_name("project", project)
    check_name("name", name)
    table = f"{project}.{name}"
    if len(table) > MAX_NAME_BYTES:
        raise ValueError(
            f"project and name: the table name {table!r} has {len(table)} bytes, PostgreSQL's names have "
            f"at most {MAX_NAME_BYTES}; shorten the name"
        )
    return table


def database_display(conninfo: str) -> str:
    """The connection string without its secrets (`password`...), for messages and asset metadata."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parameters = conninfo_to_dict(conninfo)
    return make_conninfo(**{key: value for key, value in parameters.items() if not is_secret_key(key)})


class ContinuousTableSink(SinkConfig):
    """Keeps the result as a table in PostgreSQL, `continuous_tables."<project>.<name>"`: each micro-batch's
    rows are merged into it by `key` in one transaction, so readers always see whole micro-batches."""

    kind: Literal["continuous_table"]
    deployment_keys: ClassVar[tuple[str, ...]] = ("database",)
    takes_complete_results: ClassVar[bool] = True
    replaces_partitions: ClassVar[bool] = True
    project: TableName
    """Lower-case letters, digits and `_`; the tables of one project are read together."""
    name: TableName
    """The table's name in its project (same characters; with the project at most 62 bytes)."""
    key: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    """Result columns that identify a row, the table's primary key (`[window_start, category]`); a row
    of a later micro-batch with the same key replaces it. Required unless the dagger's `output_mode` is
    `complete`, where each micro-batch replaces the whole table."""
    database: str | None = Field(default=None, min_length=1)
    """The PostgreSQL database, as a libpq connection string (`host=... dbname=... user=...`) or a
    `postgresql://` URL; default the `continuous_table_sink` resource's ($DAGGER_COLLECTOR_DATABASE)."""

    def takes_upserts(self) -> bool:
        return self.key is not None  # a row merged over the one of its key

    def describe(self) -> str:
        return f"continuous_table sink {self.project}.{self.name}"

    def asset_metadata(self) -> dict[str, str | int]:
        database = FROM_RESOURCE if self.database is None else database_display(self.database)
        return {"project": self.project, "name": self.name, "database": database}

    def output(self) -> str | None:
        return f"continuous:{self.project}.{self.name}"

    @field_validator("key")
    @classmethod
    def _distinct_columns(cls, key: list[str] | None) -> list[str] | None:
        if key is not None and len(set(key)) < len(key):
            raise ValueError("names a column more than once")
        return key

    @model_validator(mode="after")
    def _fits_postgres(self) -> ContinuousTableSink:
        table_name(self.project, self.name)
        return self

    @model_validator(
        mode="after"
    )  # not a field validator: its errors would repeat the value, password and all
    def _database_parses(self) -> ContinuousTableSink:
        if self.database is not None:
            from psycopg import ProgrammingError
            from psycopg.conninfo import conninfo_to_dict

            try:
                conninfo_to_dict(self.database)
            except ProgrammingError as error:  # libpq quotes an option's name or a stray word, never a value
                raise ValueError(
                    f"database: not a libpq connection string or postgresql:// URL: {error}"
                ) from None
        return self
