"""How Dagger's functions get into a Spark session: SQL functions over built-in expressions, JVM functions
of the project's jar (package `dagger.jobs.udfs` of `jvm/`), or vectorized Arrow UDFs where neither is
written yet.

Modules declare their functions in a `FunctionSet`; nothing reaches Spark until `FunctionSet.register`
is asked for some names. Registering is what costs (Spark analyses each SQL function's body, 0.1-1 s
each on a busy machine), so a dagger registers only the functions its SQL names.
"""

from __future__ import annotations

import inspect
import re
import threading
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import SparkSession
from pyspark.sql.functions import arrow_udf

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def words(text: str) -> set[str]:
    """Every word (a run of letters, digits and `_` not starting with a digit) of `text`, in lower case,
    wherever it stands: in code, literals, comments or backticks."""
    return {word.lower() for word in _WORD.findall(text)}


_lock = threading.Lock()


class UdfError(ValueError):
    """A function called with an argument it cannot work with; the message names function and argument."""


def create_sql_function(spark: SparkSession, name: str, parameters: str, returns: str, body: str) -> None:
    """`name(parameters)` as a SQL function: Spark inlines `body` into the plan, so it runs as built-in
    expressions (whole-stage code generation, no Python)."""
    spark.sql(f"CREATE OR REPLACE TEMPORARY FUNCTION {name}({parameters}) RETURNS {returns} RETURN {body}")


def register_jvm(spark: SparkSession, name: str, java_class: str, returns: str) -> None:
    """The project's Java UDF `java_class` under `name`: it runs in the JVM, so a query calling it keeps its
    records there (and can run in real-time mode). Classic and Spark Connect sessions alike."""
    spark.udf.registerJavaFunction(name, java_class, returns)


def register_arrow(
    spark: SparkSession,
    name: str,
    function: Callable[..., pa.Array],
    returns: str,
    arities: tuple[int, ...] | None = None,
) -> None:
    """`function` (pyarrow arrays in, one array out, a whole Arrow batch per call) under `name`.

    Spark passes as many columns as the call has, so one Python function can serve all of a Dagger
    function's overloads: `arities` lists the argument counts it takes (default: its parameters; a
    function with `*arguments` and no `arities` checks the count itself).
    """
    parameters = inspect.signature(function).parameters.values()
    variadic = any(parameter.kind is inspect.Parameter.VAR_POSITIONAL for parameter in parameters)
    accepted = arities or (() if variadic else (len(parameters),))

    def checked(*arguments: pa.Array) -> pa.Array:
        if accepted:
            expect_arguments(name, len(arguments), *accepted)
        return function(*arguments)

    spark.udf.register(name, arrow_udf(checked, returns))


@dataclass(frozen=True)
class _Declared:
    name: str
    """As Spark lists it; calls match it in any case."""
    register: Callable[[SparkSession], None]
    calls: frozenset[str]
    """Lower-case names of other declared functions its SQL body calls: registered before it."""
    replace: bool
    """Registered again even when the session has it: it carries one dagger's settings (descriptor
    sets, a dart store), which may not be those of the dagger that registered it first."""


class FunctionSet:
    """Functions declared by name, registered on a session only when asked for."""

    def __init__(self) -> None:
        self._declared: dict[str, _Declared] = {}

    def declare(
        self, name: str, register: Callable[[SparkSession], None], *, body: str = "", replace: bool = False
    ) -> None:
        """`register(spark)` puts `name` on a session; `body` is the SQL it runs, for its dependencies."""
        calls = frozenset(words(body) - {name.lower()})
        self._declared[name.lower()] = _Declared(name, register, calls, replace)

    def sql(self, name: str, parameters: str, returns: str, body: str) -> None:
        """A SQL function (see `create_sql_function`)."""
        self.declare(
            name, lambda spark: create_sql_function(spark, name, parameters, returns, body), body=body
        )

    def jvm(self, name: str, java_class: str, returns: str) -> None:
        """A JVM function (see `register_jvm`)."""
        self.declare(name, lambda spark: register_jvm(spark, name, java_class, returns))

    def arrow(
        self,
        name: str,
        function: Callable[..., pa.Array],
        returns: str,
        arities: tuple[int, ...] | None = None,
        *,
        replace: bool = False,
    ) -> None:
        """A vectorized Arrow UDF (see `register_arrow`)."""
        self.declare(
            name, lambda spark: register_arrow(spark, name, function, returns, arities), replace=replace
        )

    @property
    def names(self) -> list[str]:
        return [declared.name for declared in self._declared.values()]

    def register(self, spark: SparkSession, names: Collection[str] | None = None) -> list[str]:
        """Register the declared functions among `names` (any case; None: all of them) and the ones their
        bodies call, skipping those the session has unless they carry settings; returns the names
        registered.

        Names that are not declared are ignored: `names` may be every word of a query.
        """
        asked = None if names is None else {name.lower() for name in names}
        wanted = [key for key in self._declared if asked is None or key in asked]
        registered: list[str] = []
        done: set[str] = set()

        def visit(key: str) -> None:
            if key in done:
                return
            done.add(key)
            declared = self._declared[key]
            for dependency in sorted(declared.calls & self._declared.keys()):
                visit(dependency)
            if declared.replace or not spark.catalog.functionExists(declared.name):
                declared.register(spark)
                registered.append(declared.name)

        with _lock:  # sessions are shared by threads (Dagster, tests): check and register as one step
            for key in wanted:
                visit(key)
        return registered


def expect_arguments(function: str, given: int, *allowed: int) -> None:
    if given not in allowed:
        counts = " or ".join(str(count) for count in allowed)
        raise UdfError(f"{function} takes {counts} arguments, got {given}")


def distinct_values(array: pa.Array) -> Iterator[tuple[object, pa.Array]]:
    """(value, row mask) for each distinct non-null value of an argument that is usually a literal
    (a time zone, a pattern, a JSONPath): the work that depends on it is then done once per value."""
    if array.null_count == len(array):
        return
    for value in pc.unique(array.drop_null()).to_pylist():
        yield value, pc.fill_null(pc.equal(array, pa.scalar(value, array.type)), False)
