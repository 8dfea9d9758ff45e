"""Functions for the `python_udfs.modules` test: importable by name, declared with `@dagger_function`."""

from __future__ import annotations

import pandas as pd

from jobs.udfs.python_udfs import dagger_function


@dagger_function(returns="double")
def fahrenheit(celsius: pd.Series) -> pd.Series:
    """Vectorized: one pandas Series per Arrow batch."""
    return celsius * 9 / 5 + 32


@dagger_function(returns="array<string>", name="Initials")
def initials(words: str) -> list[str]:
    """Row at a time, registered under another name."""
    return [word[0] for word in words.split()]


def not_registered(value: str) -> str:
    return value
