"""An analysis project file: where a project's data lies and the materialized tables defined over it.

    project: shop
    lake: ../lake                 # collections: <lake>/<project>.<collection> (a `per_topic` lake dagger)
    tables: ../tables             # materialized snapshots: <tables>/<project>/<name>/
    database: postgresql://...    # continuous tables; default $DAGGER_COLLECTOR_DATABASE
    materialized:
      - name: daily_revenue
        refresh_interval: 1h
        sql: SELECT to_date(at) AS day, sum(amount) AS revenue FROM orders GROUP BY 1

The files live in `$DAGGER_ANALYSIS_DIR` (default `<dagger folder>/analysis`), one per project; the
Analysis API, `dagger sql --project` and the Dagster code location read them. Relative paths are the
file's folder's.
"""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import yaml
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from jobs.model.config import ConfigModel, Duration, resolve_path
from jobs.model.spec import DaggerConfigError, format_validation_error
from jobs.project import PROJECT_ROOT

TABLE_NAME = r"^[a-z_][a-z0-9_]{0,62}$"
"""Project and table names: lower case, as PostgreSQL keeps them unquoted, and as Spark compares them."""

DATABASE_ENV = "DAGGER_COLLECTOR_DATABASE"
ANALYSIS_DIR_ENV = "DAGGER_ANALYSIS_DIR"


class MaterializedTable(ConfigModel):
    """A query's snapshot, refreshed by replacing the whole table."""

    name: str = Field(pattern=TABLE_NAME)
    """Read as `materialized.<name>`."""
    sql: str = Field(min_length=1)
    """A query over the project's collections, `continuous.` and other `materialized.` tables."""
    refresh_interval: Duration
    """How often the Dagster schedule refreshes it: whole minutes dividing an hour, whole hours dividing a
    day, or one day."""
    description: str | None = None

    @field_validator("refresh_interval")
    @classmethod
    def _schedulable(cls, value: timedelta) -> timedelta:
        refresh_cron(value)
        return value


class AnalysisProject(ConfigModel):
    project: str = Field(pattern=TABLE_NAME)
    lake: str = Field(min_length=1)
    """Folder of the collections' Parquet lakes, one `<project>.<collection>` folder each."""
    tables: str = Field(min_length=1)
    """Folder of the materialized tables' snapshots."""
    database: str | None = None
    """PostgreSQL of the continuous tables; default $DAGGER_COLLECTOR_DATABASE."""
    materialized: list[MaterializedTable] = Field(default_factory=list)

    @field_validator("lake", "tables")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return resolve_path(value, info)

    @model_validator(mode="after")
    def _unique_names(self) -> AnalysisProject:
        names = [table.name for table in self.materialized]
        repeated = sorted({name for name in names if names.count(name) > 1})
        if repeated:
            raise ValueError(f"materialized table names repeat: {', '.join(repeated)}")
        return self

    def database_url(self) -> str | None:
        return self.database or os.environ.get(DATABASE_ENV)

    def materialized_table(self, name: str) -> MaterializedTable:
        for table in self.materialized:
            if table.name == name:
                return table
        raise LookupError(f"project {self.project} has no materialized table {name!r}")


def refresh_cron(interval: timedelta) -> str:
    """The cron schedule that refreshes every `interval`; ValueError for one cron cannot keep."""
    seconds = int(interval.total_seconds())
    if seconds != interval.total_seconds() or seconds <= 0 or seconds % 60:
        raise ValueError("must be a whole number of minutes")
    minutes = seconds // 60
    if minutes < 60 and 60 % minutes == 0:
        return f"*/{minutes} * * * *"
    if minutes % 60 == 0 and 24 % (minutes // 60) == 0:
        return f"0 */{minutes // 60} * * *" if minutes < 24 * 60 else "0 0 * * *"
    raise ValueError("must divide an hour (minutes) or a day (hours), or be one day")


def analysis_folder(dagger_folder: Path | None = None) -> Path:
    """$DAGGER_ANALYSIS_DIR, else the `analysis` folder of the dagger folder (default $DAGGER_DIR, then
    the repository's `daggers/`)."""
    if ANALYSIS_DIR_ENV in os.environ:
        return Path(os.environ[ANALYSIS_DIR_ENV])
    return (dagger_folder or Path(os.environ.get("DAGGER_DIR", PROJECT_ROOT / "daggers"))) / "analysis"


def load_project(path: str | Path) -> AnalysisProject:
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        raise DaggerConfigError(f"{path}: cannot read the analysis project: {error}") from None
    try:
        return AnalysisProject.model_validate(data, context={"base_dir": str(path.parent.resolve())})
    except ValidationError as error:
        message = format_validation_error(str(path), error).replace("invalid dagger", "invalid project")
        raise DaggerConfigError(message) from None


def load_projects(folder: Path | None = None) -> dict[str, AnalysisProject]:
    """Every project file of `folder` (default `analysis_folder()`) by project name."""
    projects: dict[str, AnalysisProject] = {}
    for path in sorted((folder or analysis_folder()).glob("*.yaml")):
        project = load_project(path)
        if project.project in projects:
            raise DaggerConfigError(f"{path}: project {project.project} is defined twice")
        projects[project.project] = project
    return projects
