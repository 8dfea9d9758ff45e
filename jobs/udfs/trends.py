"""LinearTrend and ExponentialMovingAverage: JVM functions (`TrendFunctions.java`) over the per-minute
series of a hop window, as Dagger computes them.

Both take the window's values and their times (`CollectArray` of a column and of `rowtime`), the hop's
start and the window length in minutes. A value belongs to minute `(time - hopStart) / 60 s`, truncated
toward zero; a later value for the same minute replaces an earlier one.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet

_JAVA = "dagger.jobs.udfs.TrendFunctions"


def declare(functions: FunctionSet) -> None:
    functions.jvm("LinearTrend", f"{_JAVA}$LinearTrend", "double")
    functions.jvm("ExponentialMovingAverage", f"{_JAVA}$ExponentialMovingAverage", "double")
