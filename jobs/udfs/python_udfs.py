"""Users' Python functions in Spark SQL, without touching this package.

Two ways in, both listed in the dagger file's `functions.python_udfs`:

* Dagger's convention (`files`): `.py` files, folders of them or `.zip` archives; each file defines one
  function named like the file, registered under that name in upper case (`multiply.py` -> MULTIPLY; SQL
  names are case-insensitive, so `multiply(...)` works as well).
* `modules`: importable modules; each function decorated with `@dagger_function` is registered.
* `functions`: one function of an importable module each, under the SQL name given (a Flink SQL script's
  `CREATE FUNCTION name AS 'package.module.function' LANGUAGE PYTHON`).

A function declares its SQL return type with `@dagger_function(returns="double")` (any Spark SQL type), a
return annotation (`-> float`), or, in a file written for Dagger, PyFlink's
`@udf(result_type=DataTypes.FLOAT())` (see `jobs.udfs.pyflink_compat`; PyFlink need not be installed).
A function written for pandas (parameters annotated `pd.Series`, `vectorized=True`, or PyFlink's
`func_type="pandas"`) gets whole batches; any other is called once per row, its rows moved in Arrow
batches.

Functions loaded from files travel to the executors by value (their module's globals included), so a file
may read a data file next to it when it is imported, as `examples/python_udfs/sample.py` does.
"""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import hashlib
import importlib
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import tempfile
import types
import typing
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession
from pyspark.sql.functions import pandas_udf, udf
from pyspark.util import PythonEvalType

from jobs.udfs.config import PythonUdfsConfig
from jobs.udfs.declaration import FunctionDeclaration
from jobs.udfs.locations import LocationError, LocationNotFound, read_location

MODULE_PREFIX = "dagger_python_udfs"
_CACHE_FOLDER = Path(tempfile.gettempdir(), "dagger-python-udfs")
_SIMPLE_TYPES: dict[Any, str] = {
    float: "double",
    int: "bigint",
    str: "string",
    bool: "boolean",
    bytes: "binary",
    datetime.datetime: "timestamp",
    datetime.date: "date",
    decimal.Decimal: "decimal(38, 18)",
}

F = TypeVar("F", bound=Callable[..., Any])


class PythonUdfError(ValueError):
    """A Python function that cannot be registered; the message names its file or module."""


def dagger_function(
    returns: str, *, vectorized: bool | None = None, name: str | None = None
) -> Callable[[F], F]:
    """Declare a function for Spark SQL: `returns` is its SQL type (`"double"`, `"array<string>"`...),
    `vectorized` whether it takes pandas Series (default: read from its annotations), `name` its SQL
    name (default: the function's own)."""

    def declare(function: F) -> F:
        function.__dagger_function__ = FunctionDeclaration(returns, vectorized, name)  # type: ignore[attr-defined]
        return function

    return declare


@dataclass(frozen=True)
class PythonFunction:
    sql_name: str
    function: Callable[..., Any]
    return_type: str
    vectorized: bool
    source: str
    """The file or module it came from, for messages."""


def _type_hints(function: Callable[..., Any], source: str) -> dict[str, Any]:
    try:
        return typing.get_type_hints(function)
    except Exception as error:  # any name an annotation uses may be missing
        raise PythonUdfError(
            f"{source}: cannot read the annotations of {function.__name__}: {error}"
        ) from None


def _sql_type(hint: Any) -> str | None:
    """The Spark SQL type of a return annotation, None when there is no plain equivalent."""
    if hint in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[hint]
    origin, arguments = typing.get_origin(hint), typing.get_args(hint)
    if origin is list and len(arguments) == 1 and (item := _sql_type(arguments[0])):
        return f"array<{item}>"
    if origin is dict and len(arguments) == 2:
        key, value = _sql_type(arguments[0]), _sql_type(arguments[1])
        return f"map<{key}, {value}>" if key and value else None
    if origin in (typing.Union, types.UnionType):
        present = [argument for argument in arguments if argument is not type(None)]
        return _sql_type(present[0]) if len(present) == 1 else None
    return None


def describe(function: Callable[..., Any], sql_name: str, source: str) -> PythonFunction:
    """How `function` is registered: its return type and whether it takes batches."""
    declaration: FunctionDeclaration = getattr(function, "__dagger_function__", FunctionDeclaration())
    hints = _type_hints(function, source)
    takes_series = any(hint is pd.Series for hint in hints.values())
    vectorized = takes_series if declaration.vectorized is None else declaration.vectorized
    return_type = declaration.returns
    if return_type is None and "return" in hints and not vectorized:
        return_type = _sql_type(hints["return"])
    if return_type is None:
        raise PythonUdfError(
            f"{source}: function {function.__name__} declares no SQL return type: decorate it with "
            "@dagger_function(returns='double') (from jobs.udfs.python_udfs) or annotate its return "
            "(-> float, -> str, -> list[int], ...)"
        )
    return PythonFunction(declaration.name or sql_name, function, return_type, vectorized, source)


def _local_copy(location: str) -> Path:
    """A local path for `location`, downloading an http(s):// or gs:// file once per content."""
    if "://" not in location or location.startswith("file://"):
        return Path(location.removeprefix("file://"))
    try:
        payload = read_location(location)
    except (LocationNotFound, LocationError) as error:
        raise PythonUdfError(f"files: {error}") from None
    digest = hashlib.sha256(payload).hexdigest()[:16]
    target = _CACHE_FOLDER / "downloads" / digest / Path(location.split("?")[0]).name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(payload)
    return target


def _extracted(archive: Path) -> Path:
    """The folder an archive is unpacked into (once per content)."""
    try:
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()[:16]
        target = _CACHE_FOLDER / "archives" / digest
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=target.parent))  # then renamed: never seen half-written
            with zipfile.ZipFile(archive) as content:
                content.extractall(staging)
            staging.replace(target)
        return target
    except (OSError, zipfile.BadZipFile) as error:
        raise PythonUdfError(f"files: {archive}: cannot unpack: {error}") from None


def _python_files(entry: str) -> list[tuple[Path, tuple[str, ...]]]:
    """(file, module path) of every function file in a `files` entry."""
    path = _local_copy(entry)
    if path.is_dir() or path.suffix == ".zip":
        root = path if path.is_dir() else _extracted(path)
        found = [
            (file, file.relative_to(root).with_suffix("").parts)
            for file in sorted(root.rglob("*.py"))
            if not any(part.startswith(("_", ".")) for part in file.relative_to(root).parts)
        ]
        if not found:
            raise PythonUdfError(f"files: {entry}: holds no .py file")
        return found
    if path.suffix != ".py":
        raise PythonUdfError(f"files: {entry}: Python files should be in .py or .zip format")
    if not path.is_file():
        raise PythonUdfError(f"files: {entry}: no such file")
    return [(path, (path.stem,))]


def _import_file(file: Path, module_path: tuple[str, ...]) -> Any:
    from pyspark import cloudpickle

    from jobs.udfs.pyflink_compat import pyflink_modules

    name = ".".join([MODULE_PREFIX, *(re.sub(r"\W", "_", part) for part in module_path)])
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise PythonUdfError(f"{file}: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        with pyflink_modules():  # Dagger's files declare their types with PyFlink's `udf`
            spec.loader.exec_module(module)
    except Exception as error:
        del sys.modules[name]
        raise PythonUdfError(f"{file}: cannot be imported: {type(error).__name__}: {error}") from None
    # Executors get the function and what it uses from its module by value: the file need not be there.
    cloudpickle.register_pickle_by_value(module)
    return module


def _import_module(name: str) -> Any:
    from jobs.udfs.pyflink_compat import pyflink_modules

    try:
        with pyflink_modules():  # a module written for PyFlink declares its types with PyFlink's `udf`
            return importlib.import_module(name)
    except Exception as error:
        raise PythonUdfError(f"modules: cannot import {name}: {type(error).__name__}: {error}") from None


def check_requirements(path: str) -> None:
    """Every requirement of the file is installed in this environment (they are never installed here)."""
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise PythonUdfError(f"requirements: cannot read {path}: {error.strerror}") from None
    problems = []
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if not text or text.startswith("-"):
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as error:
            raise PythonUdfError(f"requirements: {path}: {error}") from None
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            version = importlib.metadata.version(requirement.name)
        except importlib.metadata.PackageNotFoundError:
            problems.append(f"{requirement} (not installed)")
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            problems.append(f"{requirement} (installed: {version})")
    if problems:
        raise PythonUdfError(
            f"requirements: {path}: not satisfied in this environment: {'; '.join(problems)}. "
            f"Install them into the project environment: .venv/bin/pip install -r {path}"
        )


def load_functions(config: PythonUdfsConfig) -> list[PythonFunction]:
    """Every function the configuration names, checked (imports, return types, unique names)."""
    if config.requirements:
        check_requirements(config.requirements)
    functions: list[PythonFunction] = []
    for entry in config.files:
        for file, module_path in _python_files(entry):
            module = _import_file(file, module_path)
            function_name = module_path[-1]
            function = getattr(module, function_name, None)
            if not inspect.isfunction(function):
                raise PythonUdfError(
                    f"{file}: defines no function {function_name!r} "
                    "(one function per file, named like the file)"
                )
            functions.append(describe(function, function_name.upper(), str(file)))
    for name in config.modules:
        module = _import_module(name)
        declared = [
            value
            for value in vars(module).values()
            if inspect.isfunction(value) and hasattr(value, "__dagger_function__")
        ]
        if not declared:
            raise PythonUdfError(f"modules: {name} has no function decorated with @dagger_function")
        functions += [describe(function, function.__name__, name) for function in declared]
    for sql_name, path in config.functions.items():
        module_name, _, function_name = path.rpartition(".")
        function = getattr(_import_module(module_name), function_name, None)
        if not inspect.isfunction(function):
            raise PythonUdfError(
                f"functions: {sql_name}: module {module_name} defines no function {function_name!r}"
            )
        functions.append(dataclasses.replace(describe(function, sql_name, path), sql_name=sql_name))
    seen: dict[str, str] = {}
    for function in functions:
        previous = seen.setdefault(function.sql_name.lower(), function.source)
        if previous != function.source:
            raise PythonUdfError(
                f"python function {function.sql_name} is defined twice: "
                f"in {previous} and in {function.source}"
            )
    return functions


def _spark_function(function: PythonFunction) -> Any:
    if not function.vectorized:
        return udf(function.function, function.return_type, useArrow=True)
    with warnings.catch_warnings():
        # Declared vectorized without pandas annotations: the evaluation type is given instead of read.
        warnings.simplefilter("ignore", UserWarning)
        return pandas_udf(function.function, function.return_type, PythonEvalType.SQL_SCALAR_PANDAS_UDF)


def register(spark: SparkSession, config: PythonUdfsConfig) -> list[PythonFunction]:
    """Register the configured functions on `spark`; returns what was registered."""
    if config.arrow_batch_size is not None:
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(config.arrow_batch_size))
    functions = load_functions(config)
    for function in functions:
        try:
            spark.udf.register(function.sql_name, _spark_function(function))
        except (PySparkException, ValueError) as error:
            raise PythonUdfError(
                f"{function.source}: cannot register {function.sql_name} returning {function.return_type!r}: "
                f"{str(error).splitlines()[0]}"
            ) from None
    return functions
