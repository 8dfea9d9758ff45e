"""The `functions:` section of a dagger file: where darts read their data, which Python functions to add."""

from __future__ import annotations

from datetime import timedelta

from pydantic import Field, PositiveInt, ValidationInfo, field_validator

from jobs.model.config import ConfigModel, Duration, resolve_path


class DartStoreConfig(ConfigModel):
    """Where DartContains and DartGet read `dart-contains/<list>` and `dart-get/<collection>`."""

    location: str = Field(min_length=1)
    """A local folder, an http(s):// URL prefix, or gs://<bucket>[/<prefix>] (Google Cloud Storage, with
    the environment's application-default credentials)."""
    gcs_project: str | None = None
    """Project of the bucket's client (Dagger's UDF_DART_GCS_PROJECT_ID); default: the credentials' own."""
    fetch_timeout: Duration = timedelta(seconds=10)
    fetch_headers: dict[str, str] = Field(default_factory=dict)
    """HTTP headers for an http(s) store (e.g. Authorization)."""

    @field_validator("location")
    @classmethod
    def _resolve(cls, value: str, info: ValidationInfo) -> str:
        return resolve_path(value, info)


class PythonUdfsConfig(ConfigModel):
    """Users' Python functions, registered in Spark SQL next to Dagger's."""

    files: list[str] = Field(default_factory=list)
    """`.py` files, `.zip` archives or folders (local, http(s):// or gs://). Dagger's convention: one function
    per file, named like the file (`multiply.py` defines `multiply`, called MULTIPLY or multiply in SQL)."""
    modules: list[str] = Field(default_factory=list)
    """Importable module names; every function decorated with `@dagger_function` in them is registered."""
    requirements: str | None = None
    """A requirements file the functions need; checked against the environment before the dagger starts
    (install it into the project environment with pip, it is not installed at run time)."""
    arrow_batch_size: PositiveInt | None = None
    """Rows per Arrow batch handed to vectorized functions (Spark's arrow.maxRecordsPerBatch, 10000)."""

    @field_validator("files")
    @classmethod
    def _resolve_files(cls, values: list[str], info: ValidationInfo) -> list[str]:
        return [resolve_path(value, info) for value in values]

    @field_validator("requirements")
    @classmethod
    def _resolve_requirements(cls, value: str | None, info: ValidationInfo) -> str | None:
        return None if value is None else resolve_path(value, info)

    @field_validator("modules")
    @classmethod
    def _module_names(cls, values: list[str]) -> list[str]:
        for value in values:
            if not all(part.isidentifier() for part in value.split(".")):
                raise ValueError(f"{value!r} is not a module name (dotted Python identifiers)")
        return values


class FunctionsConfig(ConfigModel):
    """Settings of the function library; Dagger's functions are always registered."""

    darts: DartStoreConfig | None = None
    """The darts' store; without it, calling DartContains or DartGet is an error that says so."""
    python_udfs: PythonUdfsConfig = Field(default_factory=PythonUdfsConfig)
