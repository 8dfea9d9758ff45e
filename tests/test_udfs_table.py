"""Dagger's table functions: HistogramBucket (a SQL table function) and OutlierMad (a Python UDTF)."""

from __future__ import annotations

import statistics
from collections import Counter
from datetime import datetime, timedelta

import pytest
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from jobs.model import sql as sql_stage
from jobs.udfs import register_functions
from jobs.udfs.table import outlier_mad_rows


@pytest.fixture(scope="module")
def functions(spark: SparkSession) -> SparkSession:
    register_functions(spark)
    return spark


def buckets_hit(value: float | None, buckets: str) -> list[str]:
    """Prometheus-style cumulative buckets by hand: '+Inf' and every bucket >= value."""
    parts = buckets.split(",")
    while parts and parts[-1] == "":  # Java's split drops trailing empty strings
        parts.pop()
    return ["+Inf"] + [part for part in parts if value is not None and value <= float(part)]


def test_histogram_bucket_alone_and_lateral_with_renamed_column(functions):
    alone = sql_stage.analyse(functions, "SELECT * FROM HistogramBucket(12.5, '5,10, 20,50,')").collect()
    assert [row.f0 for row in alone] == buckets_hit(12.5, "5,10, 20,50,")  # ' 20' kept as written

    data = [("a", 3.0), ("b", 20.0), ("c", 99.0), ("d", None)]
    values = ", ".join(f"('{key}', {'CAST(NULL AS DOUBLE)' if v is None else f'{v}D'})" for key, v in data)
    lateral = sql_stage.analyse(
        functions,
        f"SELECT k, bucket FROM VALUES {values} AS t(k, v), "
        "LATERAL HistogramBucket(v, '5,20,50') AS h(bucket)",
    ).collect()
    expected = Counter((key, bucket) for key, value in data for bucket in buckets_hit(value, "5,20,50"))
    assert Counter((row.k, row.bucket) for row in lateral) == expected


def test_histogram_bucket_with_a_bucket_that_is_not_a_number_fails_naming_it(functions):
    with pytest.raises(PySparkException, match="'x'"):
        sql_stage.analyse(functions, "SELECT * FROM HistogramBucket(1.0, '5,x')").collect()


T0 = datetime(2024, 1, 1, 10, 0)


def mad_by_hand(values: list[float]) -> float:
    center = statistics.median(values)
    return statistics.median([abs(value - center) for value in values])


def test_outlier_mad_follows_daggers_double_mad():
    values = [10.0, 12.0, 11.0, 14.0, 13.0, 10.0, 11.0, 40.0, 14.0, 2.0]
    times = [T0 + timedelta(minutes=minute) for minute in range(10)]
    # Window of 10 minutes from T0, the last 4 minutes observed; tolerance 3, alarm at 20%.
    result = outlier_mad_rows(values, times, T0, 10, 4, 3, 20)

    center = statistics.median(values)
    lower_mad = mad_by_hand([value for value in values if value <= center])
    upper_mad = mad_by_hand([value for value in values if value >= center])
    observed_from = T0 + timedelta(minutes=6)
    observable = [(time, value) for time, value in zip(times, values, strict=True) if time >= observed_from]
    expected_outliers = [
        value
        for _, value in observable
        if abs(value - center) / (lower_mad if value <= center else upper_mad) > 3
    ]
    assert expected_outliers == [40.0, 2.0]
    flagged = len(expected_outliers) * 100 / len(observable) >= 20
    assert result == [
        (
            time,
            value,
            center + 3 * (lower_mad if value <= center else upper_mad),
            center - 3 * (lower_mad if value <= center else upper_mad),
            flagged,
        )
        for time, value in observable
    ]


def test_outlier_mad_sorts_by_time_and_reports_no_outlier_when_a_side_has_zero_mad():
    # Unsorted input; the lower half is all equal, so its MAD is zero: nothing can be an outlier and each
    # point's bounds are its own value. With outlierPercentage 0, 0% >= 0% still raises isOutlier.
    values = [5.0, 5.0, 5.0, 9.0, 100.0]
    times = [T0 + timedelta(minutes=minute) for minute in (4, 0, 1, 3, 2)]
    result = outlier_mad_rows(values, times, T0, 5, 5, 1, 0)
    assert result == [
        (T0, 5.0, 5.0, 5.0, True),
        (T0 + timedelta(minutes=1), 5.0, 5.0, 5.0, True),
        (T0 + timedelta(minutes=2), 100.0, 100.0, 100.0, True),
        (T0 + timedelta(minutes=3), 9.0, 9.0, 9.0, True),
        (T0 + timedelta(minutes=4), 5.0, 5.0, 5.0, True),
    ]
    assert outlier_mad_rows(values, times, T0, 5, 0, 1, 0) == []  # nothing observable: no rows
    with pytest.raises(ValueError, match="OutlierMad: 5 values but only 4 timestamps"):
        outlier_mad_rows(values, times[:4], T0, 5, 5, 1, 0)


def test_outlier_mad_in_sql_with_daggers_column_names(functions):
    result = sql_stage.analyse(
        functions,
        """SELECT CAST(`timestamp` AS STRING) AS at, `value`, upperBound, lowerBound, isOutlier
           FROM VALUES (array(1.0D, 2.0D, 3.0D, 100.0D),
                        array(TIMESTAMP'2024-01-01 10:00:00', TIMESTAMP'2024-01-01 10:01:00',
                              TIMESTAMP'2024-01-01 10:02:00', TIMESTAMP'2024-01-01 10:03:00'),
                        TIMESTAMP'2024-01-01 10:00:00') AS s(vals, times, window_start),
                LATERAL OutlierMad(vals, times, window_start, 4, 2, 1, 50)
                  AS T(`timestamp`, `value`, upperBound, lowerBound, isOutlier)
           ORDER BY `timestamp`""",
    ).collect()
    # Median 2.5; lower side [1, 2] has MAD 0.5, upper side [3, 100] MAD 48.5. Observable from 10:02.
    # 100 is 97.5 / 48.5 > 1 MAD away: 1 of 2 observable points, 50% >= 50%.
    assert [(row.value, row.upperBound, row.lowerBound, row.isOutlier) for row in result] == [
        (3.0, 2.5 + 48.5, 2.5 - 48.5, True),
        (100.0, 2.5 + 48.5, 2.5 - 48.5, True),
    ]
    assert [row.at for row in result] == ["2024-01-01 10:02:00", "2024-01-01 10:03:00"]
