package dagger.jobs.raystack.flink_sql;

import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import dagger.jobs.raystack.flink_sql.FlinkOver.Totals;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Flink's TUMBLE window aggregation on processing time ({@code TUMBLE(TABLE t, DESCRIPTOR(p), size)} with
 * {@code p AS PROCTIME()}): a row belongs to the window of the wall clock when it is processed, and a
 * window comes out when the wall clock passes its end, whether or not rows still arrive, as Flink emits
 * it. Spark's own windows close on a watermark, which only rows move.
 *
 * <p>A row's processing time is its micro-batch's (Spark's processing-time timers and clock are the
 * batch's), so the rows of one micro-batch share a window. Per group key the state holds the open window's
 * end and its aggregates (COUNT, SUM, AVG, MIN, MAX, as {@link FlinkOver} computes them), and one timer at
 * that end; Spark runs a batch at each trigger while a processing-time operator has state, so the window
 * comes out at the first trigger after its end. Its rows are the keys, {@code window_start}, {@code
 * window_end} (TIMESTAMPs of the wall clock, UTC) and the aggregates.
 *
 * <p>A bounded run that ends as Flink's ({@code endsWithInput}) cannot run on processing time: Spark runs
 * a batch at every trigger while such an operator has state, so the run would never end. There the
 * operator runs on event time instead, its one timer per key at {@link #END_OF_INPUT_MS}, which only the
 * final watermark passes (the row at the end of time that ends a flushing run's input). At the end of the
 * input it does what Flink 2.3's bounded run does: a window the wall clock has passed comes out, and a
 * window still open is dropped (Flink quiesces its processing-time timers at the end of input, so their
 * windows never fire). A window the wall clock has passed also comes out, as on processing time, when the
 * key's next row is processed in a later window.
 */
public final class FlinkProcTimeWindow extends StatefulProcessor<Row, Row, Row> {

  private static final String START_MS = "__window_start_ms";
  private static final String END_MS = "__window_end_ms";

  /**
   * 9000-01-01T00:00Z: past every event's time, and passed by the final watermark (9999-12-31 less the
   * stream's watermark delay, which is far below a thousand years).
   */
  static final long END_OF_INPUT_MS = 221845392000000L;

  private final int keyCount;
  private final long sizeMs;
  private final Aggregate[] aggregates;
  private final StructType totalsSchema;
  private final boolean endsWithInput;
  private transient ValueState<Row> totals;
  private transient ValueState<Long> windowEndMs;

  private FlinkProcTimeWindow(
      int keyCount, long sizeMs, Aggregate[] aggregates, boolean endsWithInput) {
    this.keyCount = keyCount;
    this.endsWithInput = endsWithInput;
    this.sizeMs = sizeMs;
    this.aggregates = aggregates;
    this.totalsSchema = Totals.schema(aggregates);
  }

  /**
   * The aggregates of {@code rows} per the columns {@code keys} and tumbling processing-time window of
   * {@code sizeMs}: {@code aggregated[i]} (COUNT, SUM, AVG, MIN, MAX) of the column {@code arguments[i]}
   * (empty for COUNT(*)), named {@code outputs[i]}. The result's columns are the keys, {@code
   * window_start}, {@code window_end} and the outputs; it carries no watermark. {@code endsWithInput}:
   * the run is bounded and ends with the final watermark, at which the windows the wall clock has passed
   * come out and the others are dropped, as in Flink.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows, String[] keys, long sizeMs, String[] aggregated, String[] arguments,
      String[] outputs, boolean endsWithInput) {
    if (sizeMs <= 0) {
      throw new IllegalArgumentException("a processing-time window's size must be positive: " + sizeMs);
    }
    StructType schema = rows.schema();
    List<StructField> fields = new ArrayList<>();
    for (String key : keys) {
      fields.add(schema.fields()[schema.fieldIndex(key)]);
    }
    fields.add(DataTypes.createStructField(START_MS, DataTypes.LongType, false));
    fields.add(DataTypes.createStructField(END_MS, DataTypes.LongType, false));
    Aggregate[] aggregates = new Aggregate[aggregated.length];
    for (int index = 0; index < aggregated.length; index++) {
      int argument = arguments[index].isEmpty() ? -1 : schema.fieldIndex(arguments[index]);
      DataType argumentType = argument < 0 ? DataTypes.LongType : schema.fields()[argument].dataType();
      aggregates[index] = new Aggregate(aggregated[index].toUpperCase(), argument, argumentType);
      fields.add(DataTypes.createStructField(outputs[index], aggregates[index].resultType(), true));
    }
    StructType output = DataTypes.createStructType(fields);
    Dataset<Row> windows =
        FlinkOver.partitioned(rows, keys)
            .transformWithState(
                new FlinkProcTimeWindow(keys.length, sizeMs, aggregates, endsWithInput),
                endsWithInput ? TimeMode.EventTime() : TimeMode.ProcessingTime(),
                OutputMode.Append(),
                Encoders.row(output));
    List<org.apache.spark.sql.Column> columns = new ArrayList<>();
    for (String key : keys) {
      columns.add(windows.col(key));
    }
    columns.add(functions.timestamp_millis(windows.col(START_MS)).as("window_start"));
    columns.add(functions.timestamp_millis(windows.col(END_MS)).as("window_end"));
    for (String name : outputs) {
      columns.add(windows.col(name));
    }
    return windows.select(columns.toArray(new org.apache.spark.sql.Column[0]));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    totals = getHandle().getValueState("totals", Encoders.row(totalsSchema), TTLConfig.NONE());
    windowEndMs = getHandle().getValueState("window_end_ms", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    long nowMs = timerValues.getCurrentProcessingTimeInMs();
    long endMs = Math.floorDiv(nowMs, sizeMs) * sizeMs + sizeMs;
    // A window the clock has passed whose timer has not fired yet (input comes before timers) goes out
    // first: this batch's rows belong to a later one.
    List<Row> out = new ArrayList<>(1);
    Long openEndMs = windowEndMs.get();
    if (openEndMs != null && openEndMs != endMs) {
      getHandle().deleteTimer(timerMs(openEndMs));
      out.add(closed(key, openEndMs));
    }
    Totals sums =
        openEndMs != null && openEndMs == endMs
            ? Totals.of(totals.get(), aggregates)
            : new Totals(aggregates);
    CollectionConverters.asJava(rows).forEachRemaining(sums::add);
    if (openEndMs == null || openEndMs != endMs) {
      getHandle().registerTimer(timerMs(endMs));
      windowEndMs.update(endMs);
    }
    totals.update(sums.toRow());
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    Long openEndMs = windowEndMs.get();
    if (openEndMs == null || timerMs(openEndMs) != expiredTimerInfo.getExpiryTimeInMs()) {
      return CollectionConverters.asScala(Collections.<Row>emptyIterator());
    }
    if (timerValues.getCurrentProcessingTimeInMs() < openEndMs) { // the input ended first: dropped
      totals.clear();
      windowEndMs.clear();
      return CollectionConverters.asScala(Collections.<Row>emptyIterator());
    }
    return CollectionConverters.asScala(List.of(closed(key, openEndMs)).iterator());
  }

  /** When the window ending at {@code endMs} comes out: at its end, or at the end of the input. */
  private long timerMs(long endMs) {
    return endsWithInput ? END_OF_INPUT_MS : endMs;
  }

  /**
   * The row of the key's window ending at {@code endMs}, its state cleared. A query without keys is
   * grouped by one constant key ({@link FlinkOver#partitioned}), which is not written out.
   */
  private Row closed(Row key, long endMs) {
    Totals sums = Totals.of(totals.get(), aggregates);
    totals.clear();
    windowEndMs.clear();
    Object[] values = new Object[keyCount + 2 + aggregates.length];
    for (int index = 0; index < keyCount; index++) {
      values[index] = key.get(index);
    }
    values[keyCount] = endMs - sizeMs;
    values[keyCount + 1] = endMs;
    for (int index = 0; index < aggregates.length; index++) {
      values[keyCount + 2 + index] = sums.result(index);
    }
    return RowFactory.create(values);
  }
}
