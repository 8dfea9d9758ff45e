package dagger.jobs.udfs;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import scala.jdk.javaapi.CollectionConverters;

/** The per-minute series functions, on Dagger's published LinearTrend values. */
class TrendFunctionsTest {
  private static final long HOP_MS = 1_700_000_000_000L;

  private static Object times(long... secondsAfterTheHop) {
    List<Object> times = new ArrayList<>();
    for (long seconds : secondsAfterTheHop) {
      times.add(new Timestamp(HOP_MS + seconds * 1000));
    }
    return CollectionConverters.asScala(times).toSeq();
  }

  private static Object values(double... values) {
    List<Object> boxed = new ArrayList<>();
    for (double value : values) {
      boxed.add(value);
    }
    return CollectionConverters.asScala(boxed).toSeq();
  }

  private static final Timestamp HOP = new Timestamp(HOP_MS);

  @Test
  void linearTrendGivesDaggersPublishedSlopes() {
    TrendFunctions.LinearTrend trend = new TrendFunctions.LinearTrend();
    assertEquals(1.0, trend.call(times(0, 60, 120, 180, 240), values(0, 2, 1, 4, 4), HOP, 5), 1e-12);
    assertEquals(0.4, trend.call(times(0, 120, 240), values(2, 1, 4), HOP, 5), 1e-12);
    assertEquals(-0.1, trend.call(times(60, 180), values(2, 1), HOP, 5), 1e-12);
    assertEquals(0.0, trend.call(times(), values(), HOP, 5), 1e-12);
    // 590 s and 599 s fall in the same minute: the later value wins
    assertEquals(
        trend.call(times(0, 540), values(3.5, 4), HOP, 12),
        trend.call(times(0, 590, 599), values(3.5, 1, 4), HOP, 12));
    assertNull(trend.call(null, values(), HOP, 5));
  }

  @Test
  void linearTrendRefusesValuesOutsideTheWindowAndUnpairedValues() {
    TrendFunctions.LinearTrend trend = new TrendFunctions.LinearTrend();
    IllegalArgumentException outside =
        assertThrows(IllegalArgumentException.class, () -> trend.call(times(300), values(1), HOP, 5));
    assertEquals(
        "LinearTrend: a value 5 minutes after the hop start lies outside the 5-minute window",
        outside.getMessage());
    IllegalArgumentException unpaired =
        assertThrows(IllegalArgumentException.class, () -> trend.call(times(0, 60), values(1), HOP, 5));
    assertEquals(
        "LinearTrend: every value needs a timestamp and neither may be NULL (got 2 timestamps for 1 values)",
        unpaired.getMessage());
  }

  @Test
  void exponentialMovingAverageWeightsMinutesByAge() {
    double alpha = 0.3;
    // minutes 0, 1, 3, 4 (240 s and 250 s share minute 4: the later wins); positions 4, 3, 1, 0
    double expected =
        50 * alpha + 30 * alpha * Math.pow(1 - alpha, 1) + 20 * alpha * Math.pow(1 - alpha, 3)
            + 10 * Math.pow(1 - alpha, 4);
    Double got =
        new TrendFunctions.ExponentialMovingAverage()
            .call(times(0, 60, 200, 240, 250), values(10, 20, 30, 40, 50), HOP, 5.0, alpha);
    assertEquals(expected, got, 1e-12);
  }
}
