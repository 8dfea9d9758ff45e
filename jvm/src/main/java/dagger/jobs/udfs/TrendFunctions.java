package dagger.jobs.udfs;

import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF4;
import org.apache.spark.sql.api.java.UDF5;
import scala.jdk.javaapi.CollectionConverters;

/**
 * LinearTrend and ExponentialMovingAverage: per-minute series of a hop window, as Dagger computes them.
 *
 * <p>Both take the window's values and their times ({@code CollectArray} of a column and of the rowtime),
 * the hop's start and the window's length in minutes. A value belongs to minute {@code (time - hopStart) /
 * 60 s}, truncated toward zero; a later value for the same minute replaces an earlier one. A NULL argument
 * gives NULL; a NULL inside the arrays, or arrays of different lengths, is an error naming the function.
 */
public final class TrendFunctions {
  private static final long MILLIS_PER_MINUTE = 60_000L;

  private TrendFunctions() {}

  /** A TIMESTAMP (TIMESTAMP_NTZ read as UTC, or Dagger's ROW(seconds, nanos)) as epoch milliseconds. */
  static long epochMillis(String function, Object time) {
    if (time instanceof Timestamp timestamp) {
      return timestamp.getTime();
    }
    if (time instanceof Instant instant) {
      return instant.toEpochMilli();
    }
    if (time instanceof LocalDateTime local) {
      return local.toInstant(ZoneOffset.UTC).toEpochMilli();
    }
    if (time instanceof Row row && row.schema() != null) {
      long seconds = ((Number) row.getAs("seconds")).longValue();
      long nanos = ((Number) row.getAs("nanos")).longValue();
      return seconds * 1000 + nanos / 1_000_000;
    }
    throw new IllegalArgumentException(
        function + ": expected a TIMESTAMP, got " + time.getClass().getSimpleName());
  }

  /** One window's values and their times, checked. */
  record Series(long[] millis, double[] values) {
    static Series of(String function, Object times, Object values) {
      if (!(times instanceof scala.collection.Seq<?> timeSeq)
          || !(values instanceof scala.collection.Seq<?> valueSeq)) {
        throw new IllegalArgumentException(
            function + ": the timestamps and values must be arrays, got " + typeName(times) + " and "
                + typeName(values));
      }
      List<?> timeList = CollectionConverters.asJava(timeSeq);
      List<?> valueList = CollectionConverters.asJava(valueSeq);
      if (timeList.size() != valueList.size() || timeList.contains(null) || valueList.contains(null)) {
        throw new IllegalArgumentException(
            function + ": every value needs a timestamp and neither may be NULL (got " + timeList.size()
                + " timestamps for " + valueList.size() + " values)");
      }
      long[] millis = new long[timeList.size()];
      double[] numbers = new double[valueList.size()];
      for (int index = 0; index < millis.length; index++) {
        millis[index] = epochMillis(function, timeList.get(index));
        numbers[index] = ((Number) valueList.get(index)).doubleValue();
      }
      return new Series(millis, numbers);
    }

    private static String typeName(Object value) {
      return value.getClass().getSimpleName();
    }
  }

  /**
   * {@code LinearTrend(times, values, hopStart, windowMinutes)}: the least-squares slope of the window's
   * per-minute values, minutes without a value counting 0.
   */
  public static final class LinearTrend implements UDF4<Object, Object, Object, Number, Double> {
    private static final long serialVersionUID = 1L;

    @Override
    public Double call(Object times, Object values, Object hopStart, Number windowMinutes) {
      if (times == null || values == null || hopStart == null || windowMinutes == null) {
        return null;
      }
      int window = windowMinutes.intValue();
      if (window < 1) {
        throw new IllegalArgumentException(
            "LinearTrend: the window must be at least 1 minute, got " + windowMinutes);
      }
      Series series = Series.of("LinearTrend", times, values);
      long start = epochMillis("LinearTrend", hopStart);
      double[] perMinute = new double[window];
      for (int index = 0; index < series.millis().length; index++) {
        long minute = (series.millis()[index] - start) / MILLIS_PER_MINUTE;
        if (minute < 0 || minute >= window) {
          throw new IllegalArgumentException(
              "LinearTrend: a value " + minute + " minutes after the hop start lies outside the " + window
                  + "-minute window");
        }
        perMinute[(int) minute] = series.values()[index];
      }
      double sumX = 0;
      double sumY = 0;
      double sumXY = 0;
      double sumXX = 0;
      for (int minute = 0; minute < window; minute++) {
        sumX += minute;
        sumY += perMinute[minute];
        sumXY += minute * perMinute[minute];
        sumXX += (double) minute * minute;
      }
      return (sumXY - sumX * sumY / window) / (sumXX - sumX * sumX / window);
    }
  }

  /**
   * {@code ExponentialMovingAverage(times, values, hopStart, window, alpha)}: the sum of value * alpha *
   * (1 - alpha)^position, position = window - 1 - minute; the oldest minute (position window - 1) has no
   * alpha factor. Dagger rounds each time's distance from the hop start through a 32-bit float.
   */
  public static final class ExponentialMovingAverage
      implements UDF5<Object, Object, Object, Number, Number, Double> {
    private static final long serialVersionUID = 1L;

    @Override
    public Double call(Object times, Object values, Object hopStart, Number window, Number alpha) {
      if (times == null || values == null || hopStart == null || window == null || alpha == null) {
        return null;
      }
      Series series = Series.of("ExponentialMovingAverage", times, values);
      long start = epochMillis("ExponentialMovingAverage", hopStart);
      double size = window.doubleValue();
      double weight = alpha.doubleValue();
      Map<Double, Double> byPosition = new TreeMap<>();
      for (int index = 0; index < series.millis().length; index++) {
        int minutes = Math.round((float) (series.millis()[index] - start)) / (int) MILLIS_PER_MINUTE;
        byPosition.put(size - 1.0 - minutes, series.values()[index]);
      }
      double total = 0;
      for (Map.Entry<Double, Double> entry : byPosition.entrySet()) {
        double position = entry.getKey();
        double factor = Math.pow(1 - weight, position);
        total += position == size - 1 ? entry.getValue() * factor : entry.getValue() * weight * factor;
      }
      return total;
    }
  }
}
