package dagger.jobs.udfs;

import java.sql.Timestamp;
import java.text.SimpleDateFormat;
import java.time.Instant;
import java.util.Calendar;
import java.util.Date;
import java.util.Locale;
import java.util.TimeZone;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF2;
import org.apache.spark.sql.api.java.UDF3;
import org.apache.spark.sql.api.java.UDF4;

/**
 * Dagger's calendar functions in the JVM, on the classes Dagger's own run on: {@link Calendar} and
 * {@link SimpleDateFormat} in the en_US locale (weeks start on Sunday), time zones as {@link
 * TimeZone#getTimeZone(String)} reads them (region names, {@code GMT+7}, Java's three-letter IDs; an
 * unknown ID is GMT). So every result is Dagger's, quirks included, and a query calling them keeps its
 * records in the JVM. A NULL argument gives NULL.
 *
 * <p>StartOfWeek and EndOfWeek take and return epoch milliseconds, the others epoch seconds. Dagger's
 * StartOfWeek and StartOfMonth set the day of the week to {@code firstDayOfWeek - 86400}, which a lenient
 * Calendar resolves to the Monday after the Sunday that starts the date's week: StartOfMonth is that
 * instant too, not the first of the month.
 */
public final class CalendarFunctions {
  private static final Locale DAGGER_LOCALE = Locale.US;
  /** What Dagger subtracts from the first day of the week, in StartOfWeek and StartOfMonth. */
  private static final int DAGGER_DAY_OF_WEEK_OFFSET = 86400;

  private static final int MILLIS_PER_SECOND = 1000;

  private CalendarFunctions() {}

  static Calendar calendarAt(long epochMillis, String zone) {
    Calendar calendar = Calendar.getInstance(TimeZone.getTimeZone(zone), DAGGER_LOCALE);
    calendar.setTime(new Date(epochMillis));
    return calendar;
  }

  /**
   * Dagger's start-of-week fields. Set last, the day of the week outranks a day of the month set before
   * it, and the Calendar resolves the date from the week it already holds.
   */
  static long startOfWeekMillis(Calendar calendar) {
    calendar.set(Calendar.HOUR_OF_DAY, 0);
    calendar.clear(Calendar.MINUTE);
    calendar.clear(Calendar.SECOND);
    calendar.clear(Calendar.MILLISECOND);
    calendar.set(Calendar.DAY_OF_WEEK, calendar.getFirstDayOfWeek() - DAGGER_DAY_OF_WEEK_OFFSET);
    return calendar.getTimeInMillis();
  }

  static void setLastMillisecondOfDay(Calendar calendar) {
    calendar.set(Calendar.HOUR_OF_DAY, 23);
    calendar.set(Calendar.MINUTE, 59);
    calendar.set(Calendar.SECOND, 59);
    calendar.set(Calendar.MILLISECOND, 999);
  }

  /** Java's {@code long / 1000}: truncated toward zero, as Dagger's functions divide. */
  static long seconds(long epochMillis) {
    return epochMillis / MILLIS_PER_SECOND;
  }

  static long longValue(Object value) {
    return ((Number) value).longValue();
  }

  /**
   * A function of an epoch time and a zone ID, as Dagger's take them: NULL for a NULL argument, else
   * {@link #apply} on a Calendar at that time, in milliseconds or seconds as the function counts. Each
   * function names {@code UDF2} again: Spark reads a Java UDF's arity from its own class's interfaces.
   */
  abstract static class ZonedTimeFunction implements UDF2<Object, String, Long> {
    private static final long serialVersionUID = 1L;
    private final long millisPerUnit;

    ZonedTimeFunction(long millisPerUnit) {
      this.millisPerUnit = millisPerUnit;
    }

    /** The result's epoch milliseconds, from a Calendar at the argument's time. */
    abstract long apply(Calendar calendar);

    @Override
    public Long call(Object time, String zone) {
      if (time == null || zone == null) {
        return null;
      }
      long millis = apply(calendarAt(longValue(time) * millisPerUnit, zone));
      return millisPerUnit == 1 ? millis : seconds(millis);
    }
  }

  /** {@code StartOfWeek(millis, zone)}. */
  public static final class StartOfWeek extends ZonedTimeFunction
      implements UDF2<Object, String, Long> {
    private static final long serialVersionUID = 1L;

    public StartOfWeek() {
      super(1);
    }

    @Override
    long apply(Calendar calendar) {
      return startOfWeekMillis(calendar);
    }
  }

  /** {@code EndOfWeek(millis, zone)}: the last millisecond of the Sunday seven days after the week's. */
  public static final class EndOfWeek extends ZonedTimeFunction
      implements UDF2<Object, String, Long> {
    private static final long serialVersionUID = 1L;

    public EndOfWeek() {
      super(1);
    }

    @Override
    long apply(Calendar calendar) {
      setLastMillisecondOfDay(calendar);
      calendar.set(Calendar.DAY_OF_WEEK, calendar.getFirstDayOfWeek());
      calendar.add(Calendar.DATE, 7);
      return calendar.getTimeInMillis();
    }
  }

  /** {@code StartOfMonth(seconds, zone)}: Dagger's, the week's start in seconds (see the class). */
  public static final class StartOfMonth extends ZonedTimeFunction
      implements UDF2<Object, String, Long> {
    private static final long serialVersionUID = 1L;

    public StartOfMonth() {
      super(MILLIS_PER_SECOND);
    }

    @Override
    long apply(Calendar calendar) {
      calendar.set(Calendar.DATE, 1);
      return startOfWeekMillis(calendar);
    }
  }

  /** {@code EndOfMonth(seconds, zone)}: the last second of the date's month. */
  public static final class EndOfMonth extends ZonedTimeFunction
      implements UDF2<Object, String, Long> {
    private static final long serialVersionUID = 1L;

    public EndOfMonth() {
      super(MILLIS_PER_SECOND);
    }

    @Override
    long apply(Calendar calendar) {
      setLastMillisecondOfDay(calendar);
      calendar.set(Calendar.DAY_OF_MONTH, calendar.getActualMaximum(Calendar.DAY_OF_MONTH));
      return calendar.getTimeInMillis();
    }
  }

  /**
   * {@code TimeInDate(seconds, hour, minute, zone)}: the same local day at hour:minute:00 (lenient: hour
   * 25 is 01:00 the next day; a repeated local time is the later instant, a skipped one moved forward).
   */
  public static final class TimeInDate implements UDF4<Object, Object, Object, String, Long> {
    private static final long serialVersionUID = 1L;

    @Override
    public Long call(Object epochSeconds, Object hour, Object minute, String zone) {
      if (epochSeconds == null || hour == null || minute == null || zone == null) {
        return null;
      }
      Calendar calendar = calendarAt(longValue(epochSeconds) * MILLIS_PER_SECOND, zone);
      calendar.set(Calendar.HOUR_OF_DAY, (int) longValue(hour));
      calendar.set(Calendar.MINUTE, (int) longValue(minute));
      calendar.clear(Calendar.SECOND);
      calendar.clear(Calendar.MILLISECOND);
      return seconds(calendar.getTimeInMillis());
    }
  }

  /**
   * {@code FormatTimeInZone(timestamp, zone, pattern)}: a {@link SimpleDateFormat} pattern, en_US. The
   * timestamp is a TIMESTAMP or a Dagger {@code (seconds, nanos)} struct.
   */
  public static final class FormatTimeInZone implements UDF3<Object, String, String, String> {
    private static final long serialVersionUID = 1L;

    @Override
    public String call(Object timestamp, String zone, String pattern) {
      if (timestamp == null || zone == null || pattern == null) {
        return null;
      }
      SimpleDateFormat format;
      try {
        format = new SimpleDateFormat(pattern, DAGGER_LOCALE);
      } catch (IllegalArgumentException error) {
        throw new IllegalArgumentException(
            "FormatTimeInZone: invalid dateFormat '" + pattern + "': " + error.getMessage(), error);
      }
      format.setTimeZone(TimeZone.getTimeZone(zone));
      return format.format(new Date(epochMillis(timestamp)));
    }

    static long epochMillis(Object timestamp) {
      if (timestamp instanceof Timestamp stamp) {
        return stamp.getTime();
      }
      if (timestamp instanceof Instant instant) {
        return instant.toEpochMilli();
      }
      if (timestamp instanceof Row row) {
        long secondsPart = longValue(row.getAs("seconds"));
        Object nanos = row.getAs("nanos");
        return secondsPart * MILLIS_PER_SECOND + (nanos == null ? 0 : longValue(nanos) / 1_000_000);
      }
      throw new IllegalArgumentException(
          "FormatTimeInZone: timestamp must be a TIMESTAMP or a (seconds, nanos) struct, got "
              + timestamp.getClass().getSimpleName());
    }
  }
}
