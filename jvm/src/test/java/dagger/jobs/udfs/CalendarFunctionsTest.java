package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.LocalTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import org.apache.spark.sql.catalyst.expressions.GenericRowWithSchema;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.junit.jupiter.api.Test;

/** Dagger's calendar functions against instants worked out here with java.time. */
class CalendarFunctionsTest {
  /** 2019-07-17 10:00 UTC, a Wednesday: its week (en_US) starts on Sunday the 14th. */
  private static final long WEDNESDAY_MS = Instant.parse("2019-07-17T10:00:00Z").toEpochMilli();

  private static long utcMillis(LocalDate date, LocalTime time) {
    return LocalDateTime.of(date, time).toInstant(ZoneOffset.UTC).toEpochMilli();
  }

  @Test
  void startOfWeekIsTheMondayAfterTheWeeksSunday() {
    long monday = utcMillis(LocalDate.of(2019, 7, 15), LocalTime.MIDNIGHT);
    assertEquals(monday, new CalendarFunctions.StartOfWeek().call(WEDNESDAY_MS, "UTC"));
    long sunday = utcMillis(LocalDate.of(2019, 7, 14), LocalTime.NOON);
    assertEquals(monday, new CalendarFunctions.StartOfWeek().call(sunday, "UTC"));
  }

  @Test
  void endOfWeekIsTheLastMillisecondOfTheNextSunday() {
    long next = utcMillis(LocalDate.of(2019, 7, 21), LocalTime.of(23, 59, 59, 999_000_000));
    assertEquals(next, new CalendarFunctions.EndOfWeek().call(WEDNESDAY_MS, "UTC"));
  }

  @Test
  void startOfMonthIsTheWeeksStartInSecondsAsInDaggersCode() {
    long weekStart = new CalendarFunctions.StartOfWeek().call(WEDNESDAY_MS, "Asia/Kolkata");
    assertEquals(weekStart / 1000, new CalendarFunctions.StartOfMonth().call(WEDNESDAY_MS / 1000, "Asia/Kolkata"));
  }

  @Test
  void endOfMonthKnowsLeapYears() {
    long february = Instant.parse("2024-02-10T08:00:00Z").getEpochSecond();
    long last = utcMillis(LocalDate.of(2024, 2, 29), LocalTime.of(23, 59, 59)) / 1000;
    assertEquals(last, new CalendarFunctions.EndOfMonth().call(february, "UTC"));
  }

  @Test
  void timeInDateIsLenientAndReadsJavaZoneIds() {
    long seconds = WEDNESDAY_MS / 1000;
    long jakarta = LocalDateTime.of(2019, 7, 17, 21, 0).atZone(ZoneId.of("Asia/Jakarta")).toEpochSecond();
    assertEquals(jakarta, new CalendarFunctions.TimeInDate().call(seconds, 21, 0, "GMT+7"));
    long nextDay = utcMillis(LocalDate.of(2019, 7, 18), LocalTime.of(1, 0)) / 1000;
    assertEquals(nextDay, new CalendarFunctions.TimeInDate().call(seconds, 25, 0, "UTC"));
    assertEquals(
        new CalendarFunctions.TimeInDate().call(seconds, 9, 0, "UTC"),
        new CalendarFunctions.TimeInDate().call(seconds, 9, 0, "No/Such_Zone"));
  }

  @Test
  void formatTimeInZoneTakesTimestampsInstantsAndDaggersStructs() {
    CalendarFunctions.FormatTimeInZone format = new CalendarFunctions.FormatTimeInZone();
    StructType struct = new StructType()
        .add("seconds", DataTypes.LongType)
        .add("nanos", DataTypes.IntegerType);
    Object[] values = {1607003114L, 5_000_000};
    assertEquals("13:45:14.005", format.call(new GenericRowWithSchema(values, struct), "UTC", "HH:mm:ss.SSS"));
    assertEquals("07:15 PM", format.call(new Timestamp(1607003114000L), "Asia/Kolkata", "hh:mm aa"));
    assertEquals("2020-12-03", format.call(Instant.ofEpochSecond(1607003114L), "UTC", "yyyy-MM-dd"));
  }

  @Test
  void nullsGiveNullAndABadPatternIsNamed() {
    assertNull(new CalendarFunctions.StartOfWeek().call(null, "UTC"));
    assertNull(new CalendarFunctions.TimeInDate().call(1L, 1, null, "UTC"));
    IllegalArgumentException error = assertThrows(
        IllegalArgumentException.class,
        () -> new CalendarFunctions.FormatTimeInZone().call(Instant.EPOCH, "UTC", "yyyy q"));
    assertEquals(
        "FormatTimeInZone: invalid dateFormat 'yyyy q': Illegal pattern character 'q'", error.getMessage());
  }
}
