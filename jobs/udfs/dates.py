"""Dagger's calendar functions: TimestampFromUnix, StartOfWeek, EndOfWeek, StartOfMonth, EndOfMonth,
TimeInDate and FormatTimeInZone.

TimestampFromUnix is a SQL function. The others are JVM functions (`CalendarFunctions.java`) on the
classes Dagger's own run on, `java.util.Calendar` and `SimpleDateFormat` in the en_US locale, so their
results are Dagger's, including where they differ from its documentation:

* StartOfWeek and EndOfWeek take and return epoch **milliseconds**; the others epoch seconds.
* StartOfWeek is the Monday 00:00 after the Sunday that starts the date's week, so a Sunday gives the
  next day; EndOfWeek is 23:59:59.999 seven days after that Sunday (a Sunday gives the next Sunday).
* StartOfMonth gives the same instant as StartOfWeek (in seconds), not the first of the month: Dagger's
  code sets the day of the week after the day of the month, and Calendar resolves the date from the
  week. Dagger's tests pass only because their dates fall in a week starting on the 1st.
* A local time that occurs twice (clocks going back) is the later one, a local time that does not exist
  (clocks going forward) is moved forward by the gap, as Calendar does.
* Time zones are Java's `TimeZone` IDs: region names, `GMT+7`-style offsets and Java's three-letter IDs
  (`IST`, `PST`...); an unknown ID is GMT, as in Java.
"""

from __future__ import annotations

from jobs.udfs.registration import FunctionSet

_JAVA = "dagger.jobs.udfs.CalendarFunctions"


def declare(functions: FunctionSet) -> None:
    # Dagger makes a negative time positive, and returns the instant.
    functions.sql("TimestampFromUnix", "seconds BIGINT", "TIMESTAMP", "timestamp_seconds(abs(seconds))")
    functions.jvm("StartOfWeek", f"{_JAVA}$StartOfWeek", "bigint")
    functions.jvm("EndOfWeek", f"{_JAVA}$EndOfWeek", "bigint")
    functions.jvm("StartOfMonth", f"{_JAVA}$StartOfMonth", "bigint")
    functions.jvm("EndOfMonth", f"{_JAVA}$EndOfMonth", "bigint")
    # A JVM function has one arity; Dagger's TimeInDate has two (the zone defaults to UTC).
    functions.jvm("DaggerTimeInDate", f"{_JAVA}$TimeInDate", "bigint")
    functions.sql(
        "TimeInDate",
        "seconds BIGINT, hour INT, minute INT, timeZone STRING DEFAULT 'UTC'",
        "BIGINT",
        "DaggerTimeInDate(seconds, hour, minute, timeZone)",
    )
    functions.jvm("FormatTimeInZone", f"{_JAVA}$FormatTimeInZone", "string")
