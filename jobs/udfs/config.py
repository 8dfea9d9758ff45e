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
    functions: dict[str, str] = Field(default_factory=dict)
    """SQL name -> `package.module.function`: one function of an importable module under a name of its own
    (a Flink SQL script's `CREATE FUNCTION name AS 'package.module.function' LANGUAGE PYTHON`). It declares
    its type as a `modules` function does (PyFlink's `@udf(result_type=...)` too)."""
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
            _check_dotted(value, "a module name")
        return values

    @field_validator("functions")
    @classmethod
    def _function_paths(cls, values: dict[str, str]) -> dict[str, str]:
        for name, path in values.items():
            _check_dotted(name, "a function name")
            _check_dotted(path, "a module's function (package.module.function)", parts=2)
        return values


class JavaUdfsConfig(ConfigModel):
    """Users' Java functions: classes of public `eval` methods (Flink's ScalarFunction convention), called
    in the JVM by reflection, with no Python (`jvm/.../udfs/EvalFunctions.java`)."""

    jars: list[str] = Field(default_factory=list)
    """Jars the classes (and what they need) are loaded from, added to the session (local paths)."""
    classes: dict[str, str] = Field(default_factory=dict)
    """SQL name -> class name (a Flink SQL script's `CREATE FUNCTION name AS 'class'`)."""

    @field_validator("jars")
    @classmethod
    def _resolve_jars(cls, values: list[str], info: ValidationInfo) -> list[str]:
        return [resolve_path(value, info) for value in values]

    @field_validator("classes")
    @classmethod
    def _class_names(cls, values: dict[str, str]) -> dict[str, str]:
        for name, class_name in values.items():
            _check_dotted(name, "a function name")
            _check_dotted(class_name.replace("$", "_"), "a Java class name")
        return values


def _check_dotted(value: str, what: str, parts: int = 1) -> None:
    """`value` is `parts` or more identifiers joined by dots, else refused as not `what`."""
    names = value.split(".")
    if len(names) < parts or not all(name.isidentifier() for name in names):
        raise ValueError(f"{value!r} is not {what}")


class FunctionsConfig(ConfigModel):
    """Settings of the function library; Dagger's functions are always registered."""

    darts: DartStoreConfig | None = None
    """The darts' store; without it, calling DartContains or DartGet is an error that says so."""
    python_udfs: PythonUdfsConfig = Field(default_factory=PythonUdfsConfig)
    java_udfs: JavaUdfsConfig = Field(default_factory=JavaUdfsConfig)
