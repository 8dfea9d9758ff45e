package dagger.jobs.raystack.flink_sql;

import java.io.Serializable;
import java.math.BigDecimal;
import java.sql.Timestamp;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Deque;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Flink's OVER aggregation on a stream, ordered by its event time: each row comes out once the watermark
 * has passed its time, with the aggregates of its frame appended, as Flink emits it. The frame is {@code
 * ROWS BETWEEN n PRECEDING AND CURRENT ROW} (the row and the n rows before it, in time and then arrival
 * order), {@code RANGE BETWEEN INTERVAL ... PRECEDING AND CURRENT ROW} (the rows of the interval up to
 * the row's time, rows of the same time included), or either one {@code UNBOUNDED PRECEDING}.
 *
 * <p>Per partition key the state holds the rows the watermark has not yet passed, the earlier rows still
 * in a bounded frame, and for an unbounded frame the aggregates so far. A row that arrives behind the
 * watermark is dropped, as Flink drops it. The aggregates are COUNT, SUM, AVG, MIN and MAX, with Flink's
 * types: SUM and AVG of an integer column are of the column's type (AVG truncated), COUNT a BIGINT.
 */
public final class FlinkOver extends StatefulProcessor<Row, Row, Row> {

  /** {@code preceding} of an UNBOUNDED PRECEDING frame. */
  public static final long UNBOUNDED = -1;

  private final int timeIndex;
  private final boolean rowsFrame;
  private final long preceding;
  private final Aggregate[] aggregates;
  private final StructType inputSchema;
  private final StructType totalsSchema;
  private transient ListState<Row> pending;
  private transient ListState<Row> frame;
  private transient ValueState<Row> totals;
  private transient ValueState<Long> timerMs;

  private FlinkOver(
      StructType inputSchema,
      int timeIndex,
      boolean rowsFrame,
      long preceding,
      Aggregate[] aggregates) {
    this.inputSchema = inputSchema;
    this.timeIndex = timeIndex;
    this.rowsFrame = rowsFrame;
    this.preceding = preceding;
    this.aggregates = aggregates;
    this.totalsSchema = Totals.schema(aggregates);
  }

  /**
   * {@code rows} with a column per aggregate appended: {@code aggregated[i]} (COUNT, SUM, AVG, MIN, MAX)
   * of the column {@code arguments[i]} (empty for COUNT(*)), named {@code outputs[i]}. Partitioned by
   * the columns {@code keys}, ordered by {@code timeColumn}, which must carry the stream's watermark;
   * {@code preceding} counts rows ({@code rowsFrame}) or microseconds, or is {@link #UNBOUNDED}. The
   * result carries no watermark.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      String[] keys,
      String timeColumn,
      boolean rowsFrame,
      long preceding,
      String[] aggregated,
      String[] arguments,
      String[] outputs) {
    StructType schema = rows.schema();
    int timeIndex = schema.fieldIndex(timeColumn);
    DataType timeType = schema.fields()[timeIndex].dataType();
    if (!(timeType instanceof TimestampType || timeType instanceof TimestampNTZType)) {
      throw new IllegalArgumentException(
          "an OVER window is ordered by a time attribute: " + timeColumn + " is a " + timeType.sql());
    }
    Aggregate[] aggregates = new Aggregate[aggregated.length];
    StructType output = schema;
    for (int index = 0; index < aggregated.length; index++) {
      int argument = arguments[index].isEmpty() ? -1 : schema.fieldIndex(arguments[index]);
      DataType argumentType = argument < 0 ? DataTypes.LongType : schema.fields()[argument].dataType();
      aggregates[index] = new Aggregate(aggregated[index].toUpperCase(), argument, argumentType);
      output = output.add(outputs[index], aggregates[index].resultType(), true);
    }
    FlinkOver processor = new FlinkOver(schema, timeIndex, rowsFrame, preceding, aggregates);
    return partitioned(rows, keys)
        .transformWithState(processor, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(output));
  }

  /** {@code rows} grouped by the columns {@code keys}; all in one group without keys. */
  static KeyValueGroupedDataset<Row, Row> partitioned(Dataset<Row> rows, String[] keys) {
    Column[] keyColumns =
        keys.length == 0
            ? new Column[] {functions.lit(true)}
            : Arrays.stream(keys).map(rows::col).toArray(Column[]::new);
    StructType keySchema = rows.select(keyColumns).schema();
    return rows.groupBy(keyColumns).as(Encoders.row(keySchema), Encoders.row(rows.schema()));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    pending = getHandle().getListState("pending", Encoders.row(inputSchema), TTLConfig.NONE());
    frame = getHandle().getListState("frame", Encoders.row(inputSchema), TTLConfig.NONE());
    totals = getHandle().getValueState("totals", Encoders.row(totalsSchema), TTLConfig.NONE());
    timerMs = getHandle().getValueState("timer_ms", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    long watermarkMicros = timerValues.getCurrentWatermarkInMs() * 1000;
    List<Row> arrived = new ArrayList<>();
    long earliestMicros = Long.MAX_VALUE;
    while (rows.hasNext()) {
      Row row = rows.next();
      if (!row.isNullAt(timeIndex) && micros(row) > watermarkMicros) { // Flink drops late rows
        arrived.add(row);
        earliestMicros = Math.min(earliestMicros, micros(row));
      }
    }
    if (!arrived.isEmpty()) {
      pending.appendList(arrived.toArray(new Row[0]));
      wakeAt(earliestMicros);
    }
    return none();
  }

  /**
   * One timer per key, at its earliest pending row: each firing reads the pending rows once, however
   * many times they hold.
   */
  private void wakeAt(long earliestMicros) {
    long atMs = Math.floorDiv(earliestMicros + 999, 1000);
    Long registered = timerMs.get();
    if (registered != null && registered <= atMs) {
      return;
    }
    if (registered != null) {
      getHandle().deleteTimer(registered);
    }
    getHandle().registerTimer(atMs);
    timerMs.update(atMs);
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    long passedMicros = timerValues.getCurrentWatermarkInMs() * 1000;
    List<Row> due = new ArrayList<>();
    List<Row> waiting = new ArrayList<>();
    CollectionConverters.asJava(pending.get())
        .forEachRemaining(row -> (micros(row) <= passedMicros ? due : waiting).add(row));
    timerMs.clear();
    pending.clear();
    if (!waiting.isEmpty()) {
      pending.put(waiting.toArray(new Row[0]));
      wakeAt(waiting.stream().mapToLong(this::micros).min().getAsLong());
    }
    due.sort(Comparator.comparingLong(this::micros)); // stable: rows of one time in arrival order
    List<Row> out = preceding == UNBOUNDED ? unboundedFrame(due) : boundedFrame(due);
    return CollectionConverters.asScala(out.iterator());
  }

  private List<Row> unboundedFrame(List<Row> due) {
    Totals sums = totals.exists() ? Totals.of(totals.get(), aggregates) : new Totals(aggregates);
    List<Row> out = new ArrayList<>(due.size());
    for (List<Row> peers : rowsFrame ? singles(due) : peers(due)) {
      peers.forEach(sums::add);
      peers.forEach(row -> out.add(sums.appendedTo(row)));
    }
    totals.update(sums.toRow());
    return out;
  }

  private List<Row> boundedFrame(List<Row> due) {
    Deque<Row> inFrame = new ArrayDeque<>();
    CollectionConverters.asJava(frame.get()).forEachRemaining(inFrame::addLast);
    List<Row> out = new ArrayList<>(due.size());
    for (List<Row> peers : rowsFrame ? singles(due) : peers(due)) {
      inFrame.addAll(peers);
      if (rowsFrame) {
        while (inFrame.size() > preceding + 1) {
          inFrame.removeFirst();
        }
      } else {
        long earliest = micros(peers.get(0)) - preceding;
        while (micros(inFrame.peekFirst()) < earliest) {
          inFrame.removeFirst();
        }
      }
      Totals sums = new Totals(aggregates);
      inFrame.forEach(sums::add);
      peers.forEach(row -> out.add(sums.appendedTo(row)));
    }
    frame.clear();
    if (!inFrame.isEmpty()) {
      frame.put(inFrame.toArray(new Row[0]));
    }
    return out;
  }

  private static List<List<Row>> singles(List<Row> rows) {
    List<List<Row>> singles = new ArrayList<>(rows.size());
    rows.forEach(row -> singles.add(List.of(row)));
    return singles;
  }

  /** `rows` (in time order) cut into runs of one time: a RANGE frame's peers share their results. */
  private List<List<Row>> peers(List<Row> rows) {
    List<List<Row>> runs = new ArrayList<>();
    for (Row row : rows) {
      if (runs.isEmpty() || micros(runs.get(runs.size() - 1).get(0)) != micros(row)) {
        runs.add(new ArrayList<>());
      }
      runs.get(runs.size() - 1).add(row);
    }
    return runs;
  }

  /** The row's time in microseconds. */
  private long micros(Row row) {
    return timeMicros(row.get(timeIndex));
  }

  /** A time value in microseconds (a Timestamp, or an Instant or LocalDateTime with Java 8's API). */
  static long timeMicros(Object time) {
    Instant instant;
    if (time instanceof Timestamp timestamp) {
      instant = timestamp.toInstant();
    } else if (time instanceof LocalDateTime local) {
      instant = local.toInstant(ZoneOffset.UTC);
    } else {
      instant = (Instant) time;
    }
    return instant.getEpochSecond() * 1_000_000L + instant.getNano() / 1000;
  }

  private static Iterator<Row> none() {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  /**
   * One aggregate of an OVER window or a group ({@link FlinkAggregate}): its function, its argument's
   * column (-1: COUNT(*)) and type.
   */
  record Aggregate(String function, int argument, DataType argumentType) implements Serializable {

    Aggregate {
      if (!List.of("COUNT", "SUM", "AVG", "MIN", "MAX").contains(function)) {
        throw new IllegalArgumentException(
            function + " is not an aggregate the project's operators run: COUNT, SUM, AVG, MIN and MAX are");
      }
      boolean numeric = FlinkTypes.isInteger(argumentType) || isReal(argumentType);
      if ((function.equals("SUM") || function.equals("AVG")) && !numeric) {
        throw new IllegalArgumentException(
            function + " takes an integer or a floating-point number here, not a "
                + argumentType.sql());
      }
    }

    DataType resultType() {
      return function.equals("COUNT") ? DataTypes.LongType : argumentType;
    }

    static boolean isReal(DataType type) {
      return type instanceof DoubleType || type instanceof FloatType;
    }
  }

  /** A frame's aggregates, as far as it has been added up: counts, integer and real sums, extremes. */
  static final class Totals {
    private final Aggregate[] aggregates;
    private final long[] counts;
    private final long[] integerSums;
    private final double[] realSums;
    private final Object[] minimums;
    private final Object[] maximums;

    Totals(Aggregate[] aggregates) {
      this.aggregates = aggregates;
      counts = new long[aggregates.length];
      integerSums = new long[aggregates.length];
      realSums = new double[aggregates.length];
      minimums = new Object[aggregates.length];
      maximums = new Object[aggregates.length];
    }

    static StructType schema(Aggregate[] aggregates) {
      List<StructField> fields = new ArrayList<>();
      for (int index = 0; index < aggregates.length; index++) {
        fields.add(DataTypes.createStructField("count_" + index, DataTypes.LongType, false));
        fields.add(DataTypes.createStructField("integer_sum_" + index, DataTypes.LongType, false));
        fields.add(DataTypes.createStructField("real_sum_" + index, DataTypes.DoubleType, false));
        fields.add(DataTypes.createStructField("min_" + index, aggregates[index].argumentType(), true));
        fields.add(DataTypes.createStructField("max_" + index, aggregates[index].argumentType(), true));
      }
      return DataTypes.createStructType(fields);
    }

    static Totals of(Row row, Aggregate[] aggregates) {
      Totals totals = new Totals(aggregates);
      for (int index = 0; index < aggregates.length; index++) {
        totals.counts[index] = row.getLong(5 * index);
        totals.integerSums[index] = row.getLong(5 * index + 1);
        totals.realSums[index] = row.getDouble(5 * index + 2);
        totals.minimums[index] = row.get(5 * index + 3);
        totals.maximums[index] = row.get(5 * index + 4);
      }
      return totals;
    }

    /** {@code row} with the aggregates' results after its columns: an OVER row. */
    Row appendedTo(Row row) {
      Object[] values = new Object[row.length() + aggregates.length];
      for (int index = 0; index < row.length(); index++) {
        values[index] = row.get(index);
      }
      for (int index = 0; index < aggregates.length; index++) {
        values[row.length() + index] = result(index);
      }
      return RowFactory.create(values);
    }

    Row toRow() {
      Object[] values = new Object[5 * aggregates.length];
      for (int index = 0; index < aggregates.length; index++) {
        values[5 * index] = counts[index];
        values[5 * index + 1] = integerSums[index];
        values[5 * index + 2] = realSums[index];
        values[5 * index + 3] = minimums[index];
        values[5 * index + 4] = maximums[index];
      }
      return RowFactory.create(values);
    }

    @SuppressWarnings({"unchecked", "rawtypes"})
    void add(Row row) {
      for (int index = 0; index < aggregates.length; index++) {
        int argument = aggregates[index].argument();
        if (argument >= 0 && row.isNullAt(argument)) {
          continue; // NULLs are not counted, as in every SQL aggregate
        }
        counts[index]++;
        if (argument < 0) {
          continue;
        }
        Object value = row.get(argument);
        if (value instanceof Number number && !(value instanceof BigDecimal)) {
          integerSums[index] += number.longValue(); // wraps on overflow, as Java's (and Flink's) integers
          realSums[index] += number.doubleValue();
        }
        Comparable comparable = (Comparable) value;
        if (minimums[index] == null || comparable.compareTo(minimums[index]) < 0) {
          minimums[index] = value;
        }
        if (maximums[index] == null || comparable.compareTo(maximums[index]) > 0) {
          maximums[index] = value;
        }
      }
    }

    Object result(int index) {
      Aggregate aggregate = aggregates[index];
      long count = counts[index];
      return switch (aggregate.function()) {
        case "COUNT" -> count;
        case "MIN" -> minimums[index];
        case "MAX" -> maximums[index];
        case "SUM" -> count == 0 ? null : number(integerSums[index], realSums[index], aggregate);
        default -> // AVG
            count == 0 ? null : number(integerSums[index] / count, realSums[index] / count, aggregate);
      };
    }

    /** An integer result in its column's type (narrowed as Java narrows), or a real one. */
    static Object number(long integer, double real, Aggregate aggregate) {
      DataType type = aggregate.argumentType();
      if (type instanceof ByteType) {
        return (byte) integer;
      }
      if (type instanceof ShortType) {
        return (short) integer;
      }
      if (type instanceof IntegerType) {
        return (int) integer;
      }
      if (type instanceof LongType) {
        return integer;
      }
      return type instanceof FloatType ? (float) real : real;
    }
  }
}
