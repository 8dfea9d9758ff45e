"""What `@dagger_function` (and the PyFlink `udf` stand-in) records on a Python function for Spark SQL."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FunctionDeclaration:
    returns: str | None = None
    """The SQL return type (`"double"`, `"array<string>"`...); None: read from the annotations."""
    vectorized: bool | None = None
    """Whether it takes pandas Series; None: read from the annotations."""
    name: str | None = None
    """Its SQL name; None: the function's own."""
