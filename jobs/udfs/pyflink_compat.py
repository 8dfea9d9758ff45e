"""Dagger's Python UDF files as they are: `from pyflink.table import DataTypes` and
`from pyflink.table.udf import udf`, without PyFlink.

While users' files are imported (and only when PyFlink is not installed), `pyflink.table` and
`pyflink.table.udf` resolve to this module's stand-ins: `@udf(result_type=DataTypes.FLOAT())` declares the
function like `@dagger_function(returns="float")`, and `func_type="pandas"` makes it vectorized. The
decorated function stays a plain function (with `_func`, as PyFlink's wrapper has, for Dagger's tests).
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from jobs.udfs.declaration import FunctionDeclaration


class FlinkType:
    """A Flink data type, kept as the Spark SQL type it maps to."""

    def __init__(self, spark_type: str) -> None:
        self.spark_type = spark_type

    def nullable(self) -> FlinkType:
        return self

    def not_null(self) -> FlinkType:
        return self


class FlinkField:
    def __init__(self, name: str, data_type: FlinkType) -> None:
        self.name, self.data_type = name, data_type


def _plain(spark_type: str) -> Callable[..., FlinkType]:
    return lambda *_, **__: FlinkType(spark_type)


class DataTypes:
    """PyFlink's `DataTypes` factory methods, as Spark SQL types."""

    CHAR = VARCHAR = STRING = staticmethod(_plain("string"))
    BOOLEAN = staticmethod(_plain("boolean"))
    BINARY = VARBINARY = BYTES = staticmethod(_plain("binary"))
    TINYINT = staticmethod(_plain("tinyint"))
    SMALLINT = staticmethod(_plain("smallint"))
    INT = staticmethod(_plain("int"))
    BIGINT = staticmethod(_plain("bigint"))
    FLOAT = staticmethod(_plain("float"))
    DOUBLE = staticmethod(_plain("double"))
    DATE = staticmethod(_plain("date"))
    TIMESTAMP = TIMESTAMP_LTZ = TIMESTAMP_WITH_LOCAL_TIME_ZONE = staticmethod(_plain("timestamp"))

    @staticmethod
    def DECIMAL(precision: int, scale: int, nullable: bool = True) -> FlinkType:
        return FlinkType(f"decimal({precision}, {scale})")

    @staticmethod
    def ARRAY(element: FlinkType, nullable: bool = True) -> FlinkType:
        return FlinkType(f"array<{element.spark_type}>")

    @staticmethod
    def MAP(key: FlinkType, value: FlinkType, nullable: bool = True) -> FlinkType:
        return FlinkType(f"map<{key.spark_type}, {value.spark_type}>")

    @staticmethod
    def FIELD(name: str, data_type: FlinkType, description: str | None = None) -> FlinkField:
        return FlinkField(name, data_type)

    @staticmethod
    def ROW(fields: Sequence[FlinkField] = (), nullable: bool = True) -> FlinkType:
        return FlinkType("struct<" + ", ".join(f"{f.name}: {f.data_type.spark_type}" for f in fields) + ">")


def udf(
    f: Callable[..., Any] | None = None,
    input_types: Any = None,
    result_type: FlinkType | None = None,
    deterministic: bool | None = None,
    name: str | None = None,
    func_type: str = "general",
    udf_type: str | None = None,
) -> Any:
    """PyFlink's `udf` decorator: declares the function's result type for registration here."""

    def declare(function: Callable[..., Any]) -> Callable[..., Any]:
        returns = result_type.spark_type if result_type is not None else None
        vectorized = (udf_type or func_type) == "pandas"
        function.__dagger_function__ = FunctionDeclaration(returns, vectorized, name)  # type: ignore[attr-defined]
        function._func = function  # type: ignore[attr-defined]
        return function

    return declare if f is None else declare(f)


@contextlib.contextmanager
def pyflink_modules() -> Iterator[None]:
    """`pyflink.table` and `pyflink.table.udf` importable while users' files are imported (unless PyFlink
    itself is installed)."""
    if importlib.util.find_spec("pyflink") is not None:
        yield
        return
    table = types.ModuleType("pyflink.table")
    udf_module = types.ModuleType("pyflink.table.udf")
    table.DataTypes = DataTypes  # type: ignore[attr-defined]
    table.udf = udf_module  # type: ignore[attr-defined]
    udf_module.udf = udf  # type: ignore[attr-defined]
    root = types.ModuleType("pyflink")
    root.table = table  # type: ignore[attr-defined]
    modules = {"pyflink": root, "pyflink.table": table, "pyflink.table.udf": udf_module}
    sys.modules.update(modules)
    try:
        yield
    finally:
        for name in modules:
            sys.modules.pop(name, None)
