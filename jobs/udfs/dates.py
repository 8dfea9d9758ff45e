"""Dagger's calendar functions: TimestampFromUnix, StartOfMonth, EndOfMonth, StartOfWeek, EndOfWeek,
TimeInDate and FormatTimeInZone.

They follow Dagger's code, which runs `java.util.Calendar` in the JVM's default locale (en_US: weeks start
on Sunday), including what differs from their documentation:

* StartOfWeek and EndOfWeek take and return epoch **milliseconds**; the others epoch seconds.
* StartOfWeek is the Monday 00:00 after the Sunday that starts the date's week, so a Sunday gives the
  next day; EndOfWeek is 23:59:59.999 seven days after that Sunday (a Sunday gives the next Sunday).
* StartOfMonth gives the same instant as StartOfWeek (in seconds), not the first of the month: Dagger's
  code sets the day of the week after the day of the month, and Calendar resolves the date from the
  week. Dagger's tests pass only because their dates fall in a week starting on the 1st.
* A local time that occurs twice (clocks going back) is the later one, a local time that does not exist
  (clocks going forward) is moved forward by the gap, as Calendar does.
* Time zones are Java's `TimeZone` IDs: region names, `GMT+7`-style offsets and Java's three-letter IDs
  (`IST`, `PST`...); an unknown ID is GMT, as in Java (a warning is logged).

The result of each function depends only on the local date (and zone, hour, minute), so the zone work
is done once per distinct date in a batch and the rows are mapped in Arrow.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.udfs.registration import FunctionSet, UdfError, distinct_values, epoch_millis

logger = logging.getLogger(__name__)

# java.time.ZoneId.SHORT_IDS, which java.util.TimeZone also accepts
_JAVA_SHORT_IDS = {
    "ACT": "Australia/Darwin", "AET": "Australia/Sydney", "AGT": "America/Argentina/Buenos_Aires",
    "ART": "Africa/Cairo", "AST": "America/Anchorage", "BET": "America/Sao_Paulo", "BST": "Asia/Dhaka",
    "CAT": "Africa/Harare", "CNT": "America/St_Johns", "CST": "America/Chicago", "CTT": "Asia/Shanghai",
    "EAT": "Africa/Addis_Ababa", "ECT": "Europe/Paris", "IET": "America/Indiana/Indianapolis",
    "IST": "Asia/Kolkata", "JST": "Asia/Tokyo", "MIT": "Pacific/Apia", "NET": "Asia/Yerevan",
    "NST": "Pacific/Auckland", "PLT": "Asia/Karachi", "PNT": "America/Phoenix", "PRT": "America/Puerto_Rico",
    "PST": "America/Los_Angeles", "SST": "Pacific/Guadalcanal", "VST": "Asia/Ho_Chi_Minh",
}  # fmt: skip
_JAVA_CUSTOM_ID = re.compile(r"GMT([+-])(\d{1,2})(?::?(\d{2}))?")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclass(frozen=True)
class Zone:
    tzinfo: dt.tzinfo
    arrow_name: str
    """The zone as Arrow names it, for computing local times of whole arrays."""
    custom_name: str | None = None
    """Java's display name of a fixed `GMT+hh:mm` zone."""


@cache
def java_zone(zone_id: str) -> Zone:
    """`java.util.TimeZone.getTimeZone(zone_id)`."""
    if match := _JAVA_CUSTOM_ID.fullmatch(zone_id):
        sign, hours, minutes = match.group(1), int(match.group(2)), int(match.group(3) or 0)
        if hours <= 23 and minutes <= 59:
            offset = f"{sign}{hours:02d}:{minutes:02d}"
            delta = dt.timedelta(hours=hours, minutes=minutes) * (-1 if sign == "-" else 1)
            return Zone(dt.timezone(delta), offset, f"GMT{offset}")
    name = _JAVA_SHORT_IDS.get(zone_id, zone_id)
    try:
        return Zone(zoneinfo.ZoneInfo(name), name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        logger.warning("unknown time zone %r: using GMT, as Dagger (java.util.TimeZone) does", zone_id)
        return Zone(dt.UTC, "UTC", "GMT")


def java_instant(wall: dt.datetime, zone: Zone) -> dt.datetime:
    """A local date-time as Calendar resolves it: of two candidates (a repeated or a skipped hour), the
    later instant, which is standard time when clocks go back and shifted past the gap when they go
    forward."""
    first, second = wall.replace(tzinfo=zone.tzinfo, fold=0), wall.replace(tzinfo=zone.tzinfo, fold=1)
    return max(first.astimezone(dt.UTC), second.astimezone(dt.UTC))


def _millis_of(instant: dt.datetime) -> int:
    return (instant - _EPOCH) // dt.timedelta(milliseconds=1)


def _java_seconds(millis: int) -> int:
    """Java's `millis / 1000`: truncated toward zero."""
    return int(millis / 1000) if millis < 0 else millis // 1000


def _local_dates(instants_ms: pa.Array, zone: Zone) -> np.ndarray:
    """The local calendar date (days since the epoch) of each instant, null instants as 0."""
    stamps = pc.cast(pc.fill_null(instants_ms, 0), pa.int64()).cast(pa.timestamp("ms", tz=zone.arrow_name))
    days = pc.cast(pc.local_timestamp(stamps), pa.date32())
    return days.cast(pa.int32()).to_numpy(zero_copy_only=False)


def _sunday_before(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=(day.weekday() + 1) % 7)


def _start_of_week_ms(day: dt.date, zone: Zone) -> int:
    monday = _sunday_before(day) + dt.timedelta(days=1)
    return _millis_of(java_instant(dt.datetime.combine(monday, dt.time()), zone))


def _last_milli(day: dt.date, zone: Zone) -> int:
    return _millis_of(java_instant(dt.datetime.combine(day, dt.time(23, 59, 59, 999000)), zone))


def _end_of_week_ms(day: dt.date, zone: Zone) -> int:
    return _last_milli(_sunday_before(day) + dt.timedelta(days=7), zone)


def _start_of_month_s(day: dt.date, zone: Zone) -> int:
    return _java_seconds(_start_of_week_ms(day, zone))  # Dagger's code: the week's start, see above


def _end_of_month_s(day: dt.date, zone: Zone) -> int:
    next_month = (day.replace(day=28) + dt.timedelta(days=4)).replace(day=1)
    return _java_seconds(_last_milli(next_month - dt.timedelta(days=1), zone))


def _by_local_date(to_millis: int, day_result: Callable[[dt.date, Zone], int]) -> Callable[..., pa.Array]:
    """A (time, timeZone) function whose result depends on the time's local date only."""

    def evaluate(time: pa.Array, time_zone: pa.Array) -> pa.Array:
        results = np.zeros(len(time), dtype=np.int64)
        millis = pc.multiply(pc.cast(time, pa.int64()), to_millis)
        for zone_id, rows in distinct_values(time_zone):
            zone = java_zone(zone_id)
            days, positions = np.unique(_local_dates(millis, zone), return_inverse=True)
            per_day = np.array([day_result(_EPOCH.date() + dt.timedelta(days=int(d)), zone) for d in days])
            mask = rows.to_numpy(zero_copy_only=False)
            results[mask] = per_day[positions][mask]
        missing = pc.or_(time.is_null(), time_zone.is_null())
        return pa.array(results, mask=missing.to_numpy(zero_copy_only=False))

    return evaluate


def time_in_date(seconds: pa.Array, hour: pa.Array, minute: pa.Array, *time_zone: pa.Array) -> pa.Array:
    """The same local day at hour:minute:00 (Calendar is lenient: hour 25 is 01:00 the next day)."""
    zones = time_zone[0] if time_zone else pa.repeat("UTC", len(seconds))
    millis = pc.multiply(pc.cast(seconds, pa.int64()), 1000)
    offsets = pc.add(pc.multiply(pc.cast(hour, pa.int64()), 60), pc.cast(minute, pa.int64()))
    results = np.zeros(len(seconds), dtype=np.int64)
    for zone_id, rows in distinct_values(zones):
        zone = java_zone(zone_id)
        keys = np.stack([_local_dates(millis, zone), pc.fill_null(offsets, 0).to_numpy(zero_copy_only=False)])
        unique, positions = np.unique(keys, axis=1, return_inverse=True)
        per_key = np.array(
            [
                _java_seconds(_millis_of(java_instant(_wall(int(day), int(minutes)), zone)))
                for day, minutes in unique.T
            ]
        )
        mask = rows.to_numpy(zero_copy_only=False)
        results[mask] = per_key[positions.reshape(-1)][mask]
    missing = pc.or_(pc.or_(seconds.is_null(), offsets.is_null()), zones.is_null())
    return pa.array(results, mask=missing.to_numpy(zero_copy_only=False))


def _wall(day: int, minutes: int) -> dt.datetime:
    return dt.datetime.combine(_EPOCH.date() + dt.timedelta(days=day), dt.time()) + dt.timedelta(
        minutes=minutes
    )


# --------------------------------------------------------------------------------------------------------
# FormatTimeInZone: java.text.SimpleDateFormat patterns, en_US
# --------------------------------------------------------------------------------------------------------

_MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
           "October", "November", "December"]  # fmt: skip
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_PATTERN_LETTERS = set("GyYMLwWDdFEuaHkKhmsSzZX")


def pattern_tokens(pattern: str) -> list[tuple[str, int] | str]:
    """A SimpleDateFormat pattern as (letter, count) fields and literal text."""
    tokens: list[tuple[str, int] | str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "'":
            if pattern.startswith("''", index):
                tokens.append("'")
                index += 2
                continue
            end = pattern.find("'", index + 1)
            while end != -1 and pattern.startswith("''", end):
                end = pattern.find("'", end + 2)
            if end == -1:
                raise UdfError(f"FormatTimeInZone: invalid dateFormat {pattern!r}: Unterminated quote")
            tokens.append(pattern[index + 1 : end].replace("''", "'"))
            index = end + 1
        elif char.isascii() and char.isalpha():
            if char not in _PATTERN_LETTERS:
                raise UdfError(
                    f"FormatTimeInZone: invalid dateFormat {pattern!r}: Illegal pattern character '{char}'"
                )
            count = 1
            while index + count < len(pattern) and pattern[index + count] == char:
                count += 1
            tokens.append((char, count))
            index += count
        else:
            tokens.append(char)
            index += 1
    return tokens


@dataclass
class _LocalFields:
    """Calendar fields of instants in one zone, as numpy arrays."""

    year: np.ndarray
    month: np.ndarray
    day: np.ndarray
    hour: np.ndarray
    minute: np.ndarray
    second: np.ndarray
    millisecond: np.ndarray
    weekday: np.ndarray  # Monday = 0
    day_of_year: np.ndarray
    epoch_day: np.ndarray
    offset_seconds: np.ndarray
    millis: np.ndarray


def _local_fields(millis: np.ndarray, zone: Zone) -> _LocalFields:
    stamps = pa.array(millis, pa.timestamp("ms", tz=zone.arrow_name))
    local = pc.local_timestamp(stamps)
    local_millis = local.cast(pa.int64()).to_numpy()

    def part(function: Callable[[pa.Array], pa.Array]) -> np.ndarray:
        return function(local).to_numpy(zero_copy_only=False).astype(np.int64)

    return _LocalFields(
        year=part(pc.year), month=part(pc.month), day=part(pc.day), hour=part(pc.hour),
        minute=part(pc.minute), second=part(pc.second), millisecond=part(pc.millisecond),
        weekday=part(pc.day_of_week), day_of_year=part(pc.day_of_year),
        epoch_day=np.floor_divide(local_millis, 86_400_000), offset_seconds=(local_millis - millis) // 1000,
        millis=millis,
    )  # fmt: skip


def _numbers(values: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pc.cast(pa.array(values), pa.string()), width, "0")


def _names(values: np.ndarray, names: list[str], count: int) -> pa.Array:
    table = pa.array(names if count >= 4 else [name[:3] for name in names])
    return table.take(pa.array(values))


def _sunday_based_week(epoch_day: np.ndarray, first_of_period: np.ndarray) -> np.ndarray:
    """Week number within a period whose week 1 holds its first day (en_US: weeks start on Sunday)."""

    def sunday_on_or_before(day: np.ndarray) -> np.ndarray:
        return day - (day + 4) % 7  # 1970-01-01 was a Thursday

    return (sunday_on_or_before(epoch_day) - sunday_on_or_before(first_of_period)) // 7 + 1


def _first_days_of_years(years: np.ndarray) -> np.ndarray:
    return (years - 1970).astype("datetime64[Y]").astype("datetime64[D]").astype(np.int64)


def _week_year(fields: _LocalFields) -> np.ndarray:
    """The year of the week's Saturday: a week holding January 1st is week 1 of that year."""
    saturday = fields.epoch_day - (fields.epoch_day + 4) % 7 + 6
    return saturday.astype("datetime64[D]").astype("datetime64[Y]").astype(np.int64) + 1970


def _zone_names(fields: _LocalFields, zone: Zone) -> pa.Array:
    if zone.custom_name:
        return pa.repeat(zone.custom_name, len(fields.millis))
    names = {}
    for offset in np.unique(fields.offset_seconds):
        sample = int(fields.millis[np.argmax(fields.offset_seconds == offset)])
        names[offset] = dt.datetime.fromtimestamp(sample / 1000, zone.tzinfo).tzname()
    return pa.array([names[offset] for offset in fields.offset_seconds])


def _offsets(fields: _LocalFields, count: int, iso: bool) -> pa.Array:
    offset = fields.offset_seconds // 60
    sign = np.where(offset < 0, "-", "+")
    hours, minutes = np.abs(offset) // 60, np.abs(offset) % 60
    hours_text, minutes_text = _numbers(hours, 2), _numbers(minutes, 2)
    if not iso:
        return pc.binary_join_element_wise(pa.array(sign), hours_text, minutes_text, "")
    parts = {
        1: [hours_text],
        2: [hours_text, minutes_text],
        3: [hours_text, pa.repeat(":", len(offset)), minutes_text],
    }
    text = pc.binary_join_element_wise(pa.array(sign), *parts[count], "")
    return pc.if_else(pa.array(offset == 0), "Z", text)


def _field_text(letter: str, count: int, fields: _LocalFields, zone: Zone) -> pa.Array:
    if letter in "yY":
        year = fields.year if letter == "y" else _week_year(fields)
        return _numbers(year % 100, 2) if count == 2 else _numbers(year, count)
    if letter in "ML":
        if count >= 3:
            return _names(fields.month - 1, _MONTHS, count)
        return _numbers(fields.month, count)
    numbers = {
        "d": fields.day, "H": fields.hour, "m": fields.minute, "s": fields.second, "S": fields.millisecond,
        "D": fields.day_of_year, "u": fields.weekday + 1, "F": (fields.day - 1) // 7 + 1,
        "k": np.where(fields.hour == 0, 24, fields.hour), "K": fields.hour % 12,
        "h": (fields.hour + 11) % 12 + 1,
    }  # fmt: skip
    if letter in numbers:
        return _numbers(numbers[letter], count)
    if letter == "w":
        year = _week_year(fields)
        return _numbers(_sunday_based_week(fields.epoch_day, _first_days_of_years(year)), count)
    if letter == "W":
        first_of_month = fields.epoch_day - (fields.day - 1)
        return _numbers(_sunday_based_week(fields.epoch_day, first_of_month), count)
    if letter == "E":
        return _names(fields.weekday, _DAYS, count)
    if letter == "a":
        return pc.if_else(pa.array(fields.hour < 12), "AM", "PM")
    if letter == "G":
        return pa.repeat("AD", len(fields.millis))
    if letter == "z":
        if count >= 4:
            raise UdfError(
                "FormatTimeInZone: full time-zone names ('zzzz') are not supported; use 'z' or 'XXX'"
            )
        return _zone_names(fields, zone)
    if letter == "X" and count > 3:
        raise UdfError(f"FormatTimeInZone: invalid ISO 8601 format: length={count}")
    return _offsets(fields, count, iso=letter == "X")


def format_time_in_zone(timestamp: pa.Array, time_zone: pa.Array, date_format: pa.Array) -> pa.Array:
    millis = epoch_millis("FormatTimeInZone", timestamp)
    result = pa.nulls(len(timestamp), pa.string())
    keys = pc.binary_join_element_wise(time_zone, date_format, "\x00")
    for key, rows in distinct_values(keys):
        zone_id, pattern = key.split("\x00", 1)
        zone, tokens = java_zone(zone_id), pattern_tokens(pattern)
        fields = _local_fields(pc.fill_null(millis, 0).to_numpy(zero_copy_only=False), zone)
        parts = [
            pa.repeat(token, len(timestamp)) if isinstance(token, str) else _field_text(*token, fields, zone)
            for token in tokens
        ]
        text = pc.binary_join_element_wise(*parts, "") if parts else pa.repeat("", len(timestamp))
        result = pc.if_else(rows, text, result)
    return pc.if_else(millis.is_null(), pa.scalar(None, pa.string()), result)


def declare(functions: FunctionSet) -> None:
    # Dagger makes a negative time positive, and returns the instant.
    functions.sql("TimestampFromUnix", "seconds BIGINT", "TIMESTAMP", "timestamp_seconds(abs(seconds))")
    functions.arrow("StartOfWeek", _by_local_date(1, _start_of_week_ms), "bigint")
    functions.arrow("EndOfWeek", _by_local_date(1, _end_of_week_ms), "bigint")
    functions.arrow("StartOfMonth", _by_local_date(1000, _start_of_month_s), "bigint")
    functions.arrow("EndOfMonth", _by_local_date(1000, _end_of_month_s), "bigint")
    functions.arrow("TimeInDate", time_in_date, "bigint", arities=(3, 4))
    functions.arrow("FormatTimeInZone", format_time_in_zone, "string")
