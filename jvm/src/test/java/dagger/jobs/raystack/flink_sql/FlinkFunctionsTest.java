package dagger.jobs.raystack.flink_sql;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.math.BigDecimal;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.DecimalType;
import org.junit.jupiter.api.Test;

/**
 * TRUNCATE's and TIMESTAMPDIFF's arithmetic and the timestamp text, on the values Apache Flink 2.3 gave
 * for the same calls (the Flink oracle's {@code flink_time_and_number_functions} runs them end to end).
 */
class FlinkFunctionsTest {

  private static long millis(String instant) {
    return LocalDateTime.parse(instant).toInstant(ZoneOffset.UTC).toEpochMilli();
  }

  @Test
  void truncateCutsTowardZero() {
    assertEquals(-1.2, FlinkFunctions.truncateDouble(-1.29, 1));
    assertEquals(7.0, FlinkFunctions.truncateDouble(7.9, 0));
    assertEquals(1200L, FlinkFunctions.truncateLong(1234, -2));
    assertEquals(-1000L, FlinkFunctions.truncateLong(-1999, -3));
    assertEquals(1234L, FlinkFunctions.truncateLong(1234, 2));
    assertEquals(Double.NaN, FlinkFunctions.truncateDouble(Double.NaN, 1));
  }

  @Test
  void truncateOfADecimalTakesTheDigitsAsItsScale() {
    DecimalType type = FlinkFunctions.truncatedType(new DecimalType(5, 4), 2);
    assertEquals(new DecimalType(4, 2), type);
    Decimal cut = FlinkFunctions.truncateDecimal(Decimal.apply(new BigDecimal("1.2345")), 2, 4, 2);
    assertEquals(new BigDecimal("1.23"), cut.toJavaBigDecimal());
    assertEquals(new DecimalType(8, 0), FlinkFunctions.truncatedType(new DecimalType(10, 3), 0));
    assertEquals(new DecimalType(8, 0), FlinkFunctions.truncatedType(new DecimalType(10, 3), -1));
    assertEquals(new DecimalType(10, 3), FlinkFunctions.truncatedType(new DecimalType(10, 3), 5));
  }

  @Test
  void timestampDiffTruncatesWholeUnitsTowardZero() {
    long start = millis("2024-01-01T00:00:00");
    assertEquals(90, FlinkFunctions.diffUnits(start, millis("2024-01-01T00:01:30.900"), 1_000));
    assertEquals(-1, FlinkFunctions.diffUnits(millis("2024-01-01T00:01:30"), start, 60_000));
    assertEquals(5, FlinkFunctions.diffUnits(start, millis("2024-01-01T05:59:59.999"), 3_600_000));
  }

  @Test
  void monthsCountTheLastDayOfAMonthAsAWholeMonth() {
    assertEquals(1, FlinkFunctions.diffMonths(millis("2024-01-31T00:00"), millis("2024-02-29T00:00"), 1));
    assertEquals(3, FlinkFunctions.diffMonths(millis("2020-02-29T00:00"), millis("2024-02-28T00:00"), 12));
    assertEquals(1, FlinkFunctions.diffMonths(millis("2024-01-15T00:00"), millis("2024-07-14T00:00"), 3));
    assertEquals(0, FlinkFunctions.diffMonths(millis("2024-01-15T10:00"), millis("2024-02-15T09:00"), 1));
    assertEquals(-1, FlinkFunctions.diffMonths(millis("2024-02-29T00:00"), millis("2024-01-31T00:00"), 1));
  }

  @Test
  void timestampsKeepTheirPrecisionsDigits() {
    assertEquals("yyyy-MM-dd HH:mm:ss.SSS", FlinkFunctions.timestampPattern(3));
    assertEquals("yyyy-MM-dd HH:mm:ss", FlinkFunctions.timestampPattern(0));
  }
}
