"""LinearTrend and ExponentialMovingAverage: per-minute series of a hop window, as Dagger computes them.

Both take the window's values and their times (`CollectArray` of a column and of `rowtime`), the hop's
start and the window length in minutes. A value belongs to minute `(time - hopStart) / 60 s`, truncated
toward zero; a later value for the same minute replaces an earlier one.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs.registration import FunctionSet, UdfError, epoch_millis, floats

MILLIS_PER_MINUTE = 60_000


def _series(function: str, times: pa.Array, values: pa.Array) -> tuple[list, list]:
    """Per row, the values' epoch millis and the values (lists of equal length, or None)."""
    if not pa.types.is_list(times.type) or not pa.types.is_list(values.type):
        raise UdfError(
            f"{function}: the timestamps and values must be arrays, got {times.type} and {values.type}"
        )
    millis = pa.ListArray.from_arrays(
        times.offsets, epoch_millis(function, times.values), mask=times.is_null()
    )
    numbers = pa.ListArray.from_arrays(
        values.offsets, pc.cast(values.values, pa.float64()), mask=values.is_null()
    )
    return millis.to_pylist(), numbers.to_pylist()


def _minute(delta_millis: int) -> int:
    return int(delta_millis / MILLIS_PER_MINUTE) if delta_millis < 0 else delta_millis // MILLIS_PER_MINUTE


def _check(function: str, times: list, values: list) -> None:
    if len(times) != len(values) or None in values or None in times:
        raise UdfError(
            f"{function}: every value needs a timestamp and neither may be NULL "
            f"(got {len(times)} timestamps for {len(values)} values)"
        )


def linear_trend(
    times: pa.Array, values: pa.Array, hop_start: pa.Array, window_minutes: pa.Array
) -> pa.Array:
    """The least-squares slope of the window's per-minute values, minutes without a value counting 0."""
    all_times, all_values = _series("LinearTrend", times, values)
    starts = epoch_millis("LinearTrend", hop_start).to_pylist()
    slopes: list[float | None] = []
    for row_times, row_values, start, window in zip(
        all_times, all_values, starts, pc.cast(window_minutes, pa.int64()).to_pylist(), strict=True
    ):
        if None in (row_times, row_values, start, window):
            slopes.append(None)
            continue
        _check("LinearTrend", row_times, row_values)
        series = np.zeros(window)
        for time, value in zip(row_times, row_values, strict=True):
            minute = _minute(time - start)
            if not 0 <= minute < window:
                raise UdfError(
                    f"LinearTrend: a value {minute} minutes after the hop start lies outside the "
                    f"{window}-minute window"
                )
            series[minute] = value
        x = np.arange(window, dtype=np.float64)
        covariance = math.fsum(x * series) - math.fsum(x) * math.fsum(series) / window
        variance = math.fsum(x * x) - math.fsum(x) ** 2 / window
        with np.errstate(divide="ignore", invalid="ignore"):  # Java's double division: 0/0 is NaN
            slopes.append(float(np.float64(covariance) / np.float64(variance)))
    return pa.array(slopes, pa.float64())


def _java_round_float(delta_millis: int) -> int:
    """Dagger rounds the millisecond difference with Math.round(float): through a 32-bit float, to int."""
    rounded = math.floor(float(np.float32(delta_millis)) + 0.5)
    return max(-(2**31), min(2**31 - 1, rounded))


def exponential_moving_average(
    times: pa.Array, values: pa.Array, hop_start: pa.Array, window: pa.Array, alpha: pa.Array
) -> pa.Array:
    """Sum of value * alpha * (1 - alpha)^position, position = window - 1 - minute (the oldest minute,
    position window - 1, without the alpha factor)."""
    all_times, all_values = _series("ExponentialMovingAverage", times, values)
    starts = epoch_millis("ExponentialMovingAverage", hop_start).to_pylist()
    averages: list[float | None] = []
    for row_times, row_values, start, size, weight in zip(
        all_times, all_values, starts, floats(window), floats(alpha), strict=True
    ):
        if None in (row_times, row_values, start, size, weight):
            averages.append(None)
            continue
        _check("ExponentialMovingAverage", row_times, row_values)
        by_position: dict[float, float] = {}
        for time, value in zip(row_times, row_values, strict=True):
            minutes = _minute(_java_round_float(time - start))
            by_position[size - 1.0 - minutes] = value
        total = 0.0
        for position in sorted(by_position):
            factor = (1 - weight) ** position
            total += (
                by_position[position] * factor
                if position == size - 1
                else by_position[position] * weight * factor
            )
        averages.append(total)
    return pa.array(averages, pa.float64())


def declare(functions: FunctionSet) -> None:
    functions.arrow("LinearTrend", linear_trend, "double")
    functions.arrow("ExponentialMovingAverage", exponential_moving_average, "double")
