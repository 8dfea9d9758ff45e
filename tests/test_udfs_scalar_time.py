"""Dagger's calendar and time-series functions called from Spark SQL.

Expected values: Dagger's published test values, `zoneinfo` and `strftime` calculations written here,
values `java.util.Calendar` gives (JDK 17, en_US) for the daylight-saving cases, and numpy's
least-squares fit for LinearTrend.
"""

from __future__ import annotations

import calendar
import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pytest

from tests.test_udfs_scalar import fails

IST, WIB, UTC = "Asia/Kolkata", "Asia/Jakarta", "UTC"


def test_week_and_month_functions_give_daggers_published_values(sql) -> None:
    thursday_ms, monday_ms = 1562224758000, 1561939200000  # 2019-07-04 07:19:18Z, 2019-07-01 00:00Z
    got = sql(
        f"StartOfWeek({thursday_ms}, '{IST}')",
        f"StartOfWeek({thursday_ms}, '{WIB}')",
        f"StartOfWeek({thursday_ms}, '{UTC}')",
        f"StartOfWeek({monday_ms}, '{UTC}')",
        f"EndOfWeek({thursday_ms}, '{IST}')",
        f"EndOfWeek({thursday_ms}, '{WIB}')",
        f"EndOfWeek({thursday_ms}, '{UTC}')",
        f"EndOfWeek({monday_ms}, '{UTC}')",
        f"StartOfMonth({thursday_ms // 1000}, '{IST}')",
        f"StartOfMonth({thursday_ms // 1000}, '{UTC}')",
        f"StartOfMonth({thursday_ms // 1000}, '{WIB}')",
        f"EndOfMonth({thursday_ms // 1000}, '{IST}')",
        f"EndOfMonth({thursday_ms // 1000}, '{UTC}')",
        f"EndOfMonth({thursday_ms // 1000}, '{WIB}')",
        f"TimeInDate({thursday_ms // 1000}, 21, 0, '{IST}')",
        f"TimeInDate({thursday_ms // 1000}, 21, 0, '{WIB}')",
        f"TimeInDate({thursday_ms // 1000}, 21, 0, '{UTC}')",
        f"TimeInDate({thursday_ms // 1000}, 21, 0)",  # UTC by default
    )
    assert got == [
        1561919400000, 1561914000000, 1561939200000, 1561939200000,
        1562524199999, 1562518799999, 1562543999999, 1562543999999,
        1561919400, 1561939200, 1561914000,
        1564597799, 1564617599, 1564592399,
        1562254200, 1562248800, 1562274000, 1562274000,
    ]  # fmt: skip


def local_date(epoch_seconds: float, zone: str) -> dt.date:
    return dt.datetime.fromtimestamp(epoch_seconds, ZoneInfo(zone)).date()


def epoch(day: dt.date, zone: str, at: dt.time = dt.time()) -> float:
    return dt.datetime.combine(day, at, ZoneInfo(zone)).timestamp()


def sunday_starting_week(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=day.isoweekday() % 7)


# Thursday, Saturday, Sunday (twice: midnight and noon), a month's last day, 1970, a leap day, New York's
# summer and winter
TIMES = [
    1562224758,
    1563624000,
    1562457600,
    1562500000,
    1564617599,
    5000000,
    1583017200,
    1594000000,
    1607003114,
]
ZONES = [UTC, IST, "America/New_York", WIB]


def test_week_and_month_functions_follow_daggers_calendar(sql) -> None:
    """Weeks start on Sunday (en_US); StartOfWeek is the Monday after that Sunday and EndOfWeek the next
    Sunday's last millisecond; StartOfMonth is, as in Dagger's code, the same Monday (not the 1st)."""
    cases = [(seconds, zone) for seconds in TIMES for zone in ZONES]
    got = sql(
        *(
            f"StartOfWeek({seconds * 1000}, '{zone}'), EndOfWeek({seconds * 1000}, '{zone}'), "
            f"StartOfMonth({seconds}, '{zone}'), EndOfMonth({seconds}, '{zone}')"
            for seconds, zone in cases
        )
    )
    expected = []
    for seconds, zone in cases:
        day = local_date(seconds, zone)
        sunday = sunday_starting_week(day)
        monday = epoch(sunday + dt.timedelta(days=1), zone)
        last_day = day.replace(day=calendar.monthrange(day.year, day.month)[1])
        expected += [
            int(monday * 1000),
            int(epoch(sunday + dt.timedelta(days=7), zone, dt.time(23, 59, 59, 999000)) * 1000),
            int(monday),
            int(epoch(last_day, zone, dt.time(23, 59, 59))),
        ]
    assert got == expected


def test_time_in_date_and_daylight_saving(sql) -> None:
    fall_back, spring_forward = 1572786000, 1552226400  # 2019-11-03 and 2019-03-10, 13:00 and 14:00 UTC
    new_york = "America/New_York"
    got = sql(
        *(f"TimeInDate({seconds}, 9, 45, '{zone}')" for seconds in TIMES for zone in ZONES),
        f"TimeInDate({fall_back}, 1, 30, '{new_york}')",  # 01:30 happens twice
        f"TimeInDate({spring_forward}, 2, 30, '{new_york}')",  # 02:30 does not happen
        f"TimeInDate({fall_back}, 25, 0, '{new_york}')",  # lenient: 01:00 the next day
        f"TimeInDate({fall_back}, 0, 90, '{new_york}')",
        "EndOfMonth(0, 'No/Such_Zone')",  # Java's TimeZone falls back to GMT
        f"TimeInDate({fall_back}, 12, 0, 'IST')",  # Java's three-letter IDs
        f"TimeInDate({fall_back}, 12, 0, 'GMT+7')",
        f"TimeInDate(NULL, 12, 0, '{UTC}')",
    )
    expected = [
        int(epoch(local_date(seconds, zone), zone, dt.time(9, 45))) for seconds in TIMES for zone in ZONES
    ]
    assert got[: len(expected)] == expected
    assert got[len(expected) :] == [
        1572762600,  # java.util.Calendar: the later 01:30 (EST, 06:30Z)
        1552203000,  # java.util.Calendar: 03:30 EDT (07:30Z), moved forward by the gap
        int(epoch(dt.date(2019, 11, 4), new_york, dt.time(1, 0))),
        1572762600,
        31 * 86400 - 1,
        int(epoch(dt.date(2019, 11, 3), IST, dt.time(12))),
        int(epoch(dt.date(2019, 11, 3), WIB, dt.time(12))),  # Jakarta is GMT+7 all year
        None,
    ]


def test_timestamp_from_unix_makes_negative_times_positive(sql) -> None:
    got = sql("TimestampFromUnix(1554101494)", "TimestampFromUnix(-1554101494)", "TimestampFromUnix(0)")
    # the session time zone is UTC; Dagger's test reads 2019-04-01 13:51:34 WIB (UTC+7)
    assert got == [
        dt.datetime(2019, 4, 1, 6, 51, 34),
        dt.datetime(2019, 4, 1, 6, 51, 34),
        dt.datetime(1970, 1, 1),
    ]


PATTERNS = [
    ("yyyy-MM-dd HH:mm:ss", "%Y-%m-%d %H:%M:%S"),
    ("EEE, d MMM yyyy hh:mm a", "%a, %-d %b %Y %I:%M %p"),
    ("EEEE MMMM yy", "%A %B %y"),
    ("Z z", "%z %Z"),
    ("'week day' u, 'day' D", "week day %u, day %-j"),
]


def sql_text(text: str) -> str:
    quote = "'"
    return quote + text.replace(quote, quote * 2) + quote


def test_format_time_in_zone_reads_java_patterns(sql) -> None:
    stamps = [1607003114, 1562500000, 0, 1583017200]
    zones = [IST, WIB, "America/New_York", UTC]
    cases = [(stamp, zone, java, python) for stamp in stamps for zone in zones for java, python in PATTERNS]
    got = sql(
        *(
            f"FormatTimeInZone(timestamp_seconds({stamp}), '{zone}', {sql_text(java)})"
            for stamp, zone, java, _ in cases
        ),
        f"FormatTimeInZone(timestamp_seconds(1607003114), '{IST}', 'hh:mm aa')",
        f"FormatTimeInZone(timestamp_seconds(1607003114), '{WIB}', 'hh:mm aa')",
        f"FormatTimeInZone(timestamp_seconds(1607003114), '{IST}', 'yyyy/MM/dd')",
        "FormatTimeInZone(named_struct('seconds', 1607003114L, 'nanos', 5000000), 'UTC', 'HH:mm:ss.SSS')",
        "FormatTimeInZone(timestamp_millis(1607003114045), 'GMT+5:30', 'yyyy-MM-dd''T''HH:mm:ss.SSSXXX')",
        "FormatTimeInZone(CAST(NULL AS TIMESTAMP), 'UTC', 'yyyy')",
        f"FormatTimeInZone(timestamp_seconds(1607003114), '{IST}', 'zzzz')",
    )
    expected = [
        dt.datetime.fromtimestamp(stamp, ZoneInfo(zone)).strftime(python) for stamp, zone, _, python in cases
    ]
    assert got[: len(cases)] == expected
    assert got[len(cases) :] == [
        "07:15 PM",  # Dagger's FormatTimeInZoneTest
        "08:45 PM",
        "2020/12/03",
        "13:45:14.005",  # Dagger's Timestamp row (seconds, nanos)
        "2020-12-03T19:15:14.045+05:30",
        None,
        "India Standard Time",  # Java's long zone name, en_US
    ]
    fails(
        sql,
        "FormatTimeInZone(timestamp_seconds(0), 'UTC', 'yyyy q')",
        "FormatTimeInZone: invalid dateFormat 'yyyy q': Illegal pattern character 'q'",
    )


def timestamps_sql(seconds: list[int]) -> str:
    return "array(" + ", ".join(f"timestamp_seconds({value})" for value in seconds) + ")"


def doubles_sql(values: list[float]) -> str:
    return "array(" + ", ".join(f"{value}D" for value in values) + ")"


def test_linear_trend_is_the_least_squares_slope_of_the_minutes(sql) -> None:
    hop = 1_700_000_000
    published = [  # Dagger's LinearTrendTest: (seconds after the hop, values, window, slope)
        ([0, 60, 120, 180, 240], [0.0, 2.0, 1.0, 4.0, 4.0], 5, 1.0),
        ([0, 120, 240], [2.0, 1.0, 4.0], 5, 0.4),
        ([60, 180], [2.0, 1.0], 5, -0.1),
        ([60], [2.0], 5, -0.2),
        ([], [], 5, 0.0),
        (
            [60, 180, 300, 1140, 420, 480, 600, 660],
            [1.0, 1.0, 2.0, 1.0, 2.0, 2.0, 1.0, 1.0],
            20,
            -0.030827067669172932,
        ),
    ]
    offsets = [0, 70, 130, 400, 590, 599]  # seconds; a minute is counted from the hop's start
    values = [3.5, -1.0, 2.25, 8.0, 1.0, 4.0]  # 590 s and 599 s fall in the same minute: the later wins
    got = sql(
        *(
            f"LinearTrend({timestamps_sql([hop + s for s in seconds])}, {doubles_sql(series)}, "
            f"timestamp_seconds({hop}), {window})"
            for seconds, series, window, _ in published
        ),
        f"LinearTrend({timestamps_sql([hop + s for s in offsets])}, {doubles_sql(values)}, "
        f"timestamp_seconds({hop}), 12)",
    )
    assert got[:-1] == pytest.approx([slope for *_, slope in published], abs=1e-12)
    minutes = np.zeros(12)
    for offset, value in zip(offsets, values, strict=True):
        minutes[offset // 60] = value
    assert got[-1] == pytest.approx(np.polyfit(np.arange(12), minutes, 1)[0], abs=1e-12)


def test_exponential_moving_average_weights_minutes_by_age(sql) -> None:
    hop, window, alpha = 1_700_000_000, 5, 0.3
    offsets, values = [0, 60, 200, 240, 250], [10.0, 20.0, 30.0, 40.0, 50.0]  # 240 s and 250 s: same minute
    [got] = sql(
        f"ExponentialMovingAverage({timestamps_sql([hop + s for s in offsets])}, {doubles_sql(values)}, "
        f"timestamp_seconds({hop}), {window}D, {alpha}D)"
    )
    # position = window - 1 - minute; the oldest position has no alpha factor
    by_position = {window - 1 - offset // 60: value for offset, value in zip(offsets, values, strict=True)}
    expected = sum(
        value * (1 - alpha) ** position * (1 if position == window - 1 else alpha)
        for position, value in sorted(by_position.items())
    )
    assert got == pytest.approx(expected, rel=1e-12)
