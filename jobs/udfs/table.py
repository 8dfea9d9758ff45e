"""Dagger's table functions, for `LATERAL` in a FROM clause: HistogramBucket and OutlierMad.

Their columns keep the names Flink gives a Dagger table function's tuple (`f0`, `f1`, ...); rename them
with `LATERAL HistogramBucket(x, '10,20') AS t(bucket)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta

from pyspark.sql.functions import udtf

from jobs.udfs.registration import FunctionSet
from jobs.udfs.strings import java_split

# HistogramBucket(value, '10,20,50'): the row '+Inf', then each bucket (as written) with value <= bucket,
# Prometheus-style cumulative buckets. Buckets are split as Java splits them (as Dagger's Split does):
# trailing empty parts are dropped, an empty part in the middle is an error (it is not a number). The
# expression is inlined rather than a call of DaggerSplit: Spark runs no SQL function inside a generator,
# and a subquery around it would turn every LATERAL call into a join.
_BUCKETS = java_split("split(buckets, ',', -1)")
_HISTOGRAM_BUCKET = f"""SELECT explode(concat(array('+Inf'), filter(
  coalesce({_BUCKETS}, CAST(array() AS ARRAY<STRING>)), bucket -> dValue <= CAST(bucket AS DOUBLE))))"""

OUTLIER_MAD_COLUMNS = "f0 timestamp, f1 double, f2 double, f3 double, f4 boolean"
"""(timestamp, value, upperBound, lowerBound, isOutlier) per observable point."""


class _NoMad(ArithmeticError):
    """Dagger's MedianNotFound / MadZeroException: the points cannot tell outliers apart."""


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    count = len(ordered)
    if count == 0:
        raise _NoMad("To calculate median we need at least 1 element")
    if count % 2 == 0:
        return (ordered[count // 2 - 1] + ordered[count // 2]) / 2
    return ordered[count // 2]


def _mad(values: Sequence[float]) -> float:
    center = _median(values)
    mad = _median([abs(value - center) for value in values])
    if mad == 0:
        raise _NoMad("MAD is ZERO, outlier cannot be detected")
    return mad


def outlier_mad_rows(
    values: Sequence[float | None],
    timestamps: Sequence[datetime | None],
    window_start: datetime,
    window_minutes: int,
    observation_minutes: int,
    tolerance: int,
    outlier_percentage: int,
) -> list[tuple[datetime, float, float, float, bool]]:
    """Dagger's double-MAD outlier test over one window's time series.

    The points (sorted by time) are observable from `window_start + window - observation` on. The median
    of all values and a MAD per side of it (values <= median, values >= median) give each point a
    distance |value - median| / MAD(its side) and bounds median +- tolerance * MAD(its side); an
    observable point further than `tolerance` is an outlier. When a side's MAD is zero (or a side is
    empty) nothing is an outlier and each point's bounds are its own value. Every row's `isOutlier` says
    whether outliers make up at least `outlier_percentage` percent of the observable points.
    """
    if len(timestamps) < len(values):
        raise ValueError(
            f"OutlierMad: {len(values)} values but only {len(timestamps)} timestamps; each value needs one"
        )
    points = sorted(
        (
            (moment, value)
            for moment, value in zip(timestamps, values, strict=False)
            if moment is not None and value is not None
        ),
        key=lambda point: point[0],
    )
    observable_from = window_start + timedelta(minutes=window_minutes - observation_minutes)
    numbers = [value for _, value in points]
    bounds = [(value, value) for value in numbers]
    outliers = [False] * len(points)
    try:
        center = _median(numbers)
        lower_mad = _mad([value for value in numbers if value <= center])
        upper_mad = _mad([value for value in numbers if value >= center])
    except _NoMad:
        pass
    else:
        for index, (moment, value) in enumerate(points):
            mad = lower_mad if value <= center else upper_mad
            bounds[index] = (center + tolerance * mad, center - tolerance * mad)
            outliers[index] = moment >= observable_from and abs(value - center) / mad > tolerance
    observable = [index for index, (moment, _) in enumerate(points) if moment >= observable_from]
    if not observable:
        return []
    flagged = sum(outliers) * 100.0 / len(observable) >= outlier_percentage
    return [(points[index][0], points[index][1], *bounds[index], flagged) for index in observable]


@udtf(returnType=OUTLIER_MAD_COLUMNS, useArrow=True)
class OutlierMad:
    """OutlierMad(values, timestamps, windowStart, windowMinutes, observationMinutes, tolerance,
    outlierPercentage); a null argument gives no rows. Called once per aggregated window, so plain Python
    per call is cheap next to the aggregation that built its arrays."""

    def eval(
        self,
        values: Sequence[float | None] | None,
        timestamps: Sequence[datetime | None] | None,
        window_start: datetime | None,
        window_minutes: int | None,
        observation_minutes: int | None,
        tolerance: int | None,
        outlier_percentage: int | None,
    ) -> Iterator[tuple[datetime, float, float, float, bool]]:
        arguments = (values, timestamps, window_start, window_minutes, observation_minutes, tolerance)
        if any(argument is None for argument in (*arguments, outlier_percentage)):
            return
        yield from outlier_mad_rows(
            list(values),
            list(timestamps),
            window_start,
            window_minutes,
            observation_minutes,
            tolerance,
            outlier_percentage,
        )


def declare(functions: FunctionSet) -> None:
    functions.sql("HistogramBucket", "dValue DOUBLE, buckets STRING", "TABLE (f0 STRING)", _HISTOGRAM_BUCKET)
    functions.declare("OutlierMad", lambda spark: spark.udtf.register("OutlierMad", OutlierMad))
