package dagger.jobs.raystack.flink_sql;

import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import dagger.jobs.raystack.flink_sql.FlinkOver.Totals;
import java.io.Serializable;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.ListState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.types.TimestampNTZType;
import org.apache.spark.sql.types.TimestampType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An OVER aggregation whose input updates (Nexmark q6: an OVER over a Top-N's winning bids), which Flink
 * refuses (FLINK-19059: its OVER operator takes only appends). Its input is an upsert stream, a row
 * replacing the earlier row of the same {@code rowKeys} (a Top-N's partition key and row number), or a
 * changelog in a change column ({@code +I} and {@code +U} add a row, {@code -U} and {@code -D} take away
 * the row equal to theirs), and its output is a changelog of the OVER rows.
 *
 * <p>The semantics: the output's final table is the OVER computed over the input's final table. Per
 * partition key the rows are ordered by the time attribute, and rows of one time by their columns in
 * turn (NULLs first), so that the result does not depend on the order rows arrived in; each row gets the
 * aggregates of its frame ({@code ROWS BETWEEN n PRECEDING AND CURRENT ROW}, {@code RANGE BETWEEN ...
 * PRECEDING AND CURRENT ROW} with the rows of its time, or UNBOUNDED PRECEDING). A micro-batch emits,
 * per partition it touches, the OVER rows it changed: the rows whose frame an input change reached, each
 * as {@code -U} (the row before) and {@code +U} (after), {@code +I} for a new one, {@code -D} for one
 * gone. Rows are not held back for the watermark, since a later change may update them anyway.
 *
 * <p>The state holds every row of every partition for as long as the query runs (an update may reach any
 * row of its partition); each batch recomputes the partitions it touches.
 */
public final class FlinkUpdatingOver extends StatefulProcessor<Row, Row, Row> {

  private final StructType heldSchema;
  private final int timeIndex;
  private final boolean rowsFrame;
  private final long preceding;
  private final Aggregate[] aggregates;
  private final int[] rowKeyIndexes;
  private final int changeIndex;
  private transient ListState<Row> partition;

  FlinkUpdatingOver(
      StructType heldSchema,
      int timeIndex,
      boolean rowsFrame,
      long preceding,
      Aggregate[] aggregates,
      int[] rowKeyIndexes,
      int changeIndex) {
    this.heldSchema = heldSchema;
    this.timeIndex = timeIndex;
    this.rowsFrame = rowsFrame;
    this.preceding = preceding;
    this.aggregates = aggregates;
    this.rowKeyIndexes = rowKeyIndexes;
    this.changeIndex = changeIndex;
  }

  /**
   * The OVER rows of the updating {@code rows}, as a changelog: the input's columns but the change
   * column, a column per aggregate ({@code aggregated[i]} of {@code arguments[i]}, named {@code
   * outputs[i]}, as in {@link FlinkOver#apply}), then the change kind, a STRING column named {@code
   * changeColumn}. The input's changes are in its column {@code changeColumn} when it has one; a row
   * replaces the earlier one of the same {@code rowKeys} (empty: none does).
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      String[] keys,
      String timeColumn,
      boolean rowsFrame,
      long preceding,
      String[] aggregated,
      String[] arguments,
      String[] outputs,
      String[] rowKeys,
      String changeColumn) {
    int changeIndex = Arrays.asList(rows.schema().fieldNames()).indexOf(changeColumn);
    StructType schema = new StructType(); // the rows held: the input's columns but the change kind
    for (int index = 0; index < rows.schema().length(); index++) {
      if (index != changeIndex) {
        schema = schema.add(rows.schema().fields()[index]);
      }
    }
    int timeIndex = schema.fieldIndex(timeColumn);
    DataType timeType = schema.fields()[timeIndex].dataType();
    if (!(timeType instanceof TimestampType || timeType instanceof TimestampNTZType)) {
      throw new IllegalArgumentException(
          "an OVER window is ordered by a time attribute: " + timeColumn + " is a " + timeType.sql());
    }
    StructType output = schema;
    Aggregate[] aggregates = new Aggregate[aggregated.length];
    for (int index = 0; index < aggregated.length; index++) {
      int argument = arguments[index].isEmpty() ? -1 : schema.fieldIndex(arguments[index]);
      DataType argumentType = argument < 0 ? DataTypes.LongType : schema.fields()[argument].dataType();
      aggregates[index] = new Aggregate(aggregated[index].toUpperCase(), argument, argumentType);
      output = output.add(outputs[index], aggregates[index].resultType(), true);
    }
    output = output.add(changeColumn, DataTypes.StringType, false);
    int[] rowKeyIndexes = Arrays.stream(rowKeys).mapToInt(schema::fieldIndex).toArray();
    FlinkUpdatingOver processor =
        new FlinkUpdatingOver(
            schema, timeIndex, rowsFrame, preceding, aggregates, rowKeyIndexes, changeIndex);
    return FlinkOver.partitioned(rows, keys)
        .transformWithState(processor, TimeMode.None(), OutputMode.Append(), Encoders.row(output));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    partition = getHandle().getListState("partition", Encoders.row(heldSchema), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    List<Row> held = new ArrayList<>();
    CollectionConverters.asJava(partition.get()).forEachRemaining(held::add);
    List<Row> out = batch(held, CollectionConverters.asJava(rows));
    partition.clear();
    if (!held.isEmpty()) {
      partition.put(held.toArray(new Row[0]));
    }
    return CollectionConverters.asScala(out.iterator());
  }

  /** One micro-batch of a partition: its {@code held} rows changed by {@code rows}; the OVER changes. */
  List<Row> batch(List<Row> held, java.util.Iterator<Row> rows) {
    List<Row> before = overRows(held);
    rows.forEachRemaining(row -> change(held, row));
    return changes(before, overRows(held));
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  /**
   * Applies the input row {@code input} to the partition's rows {@code held}: an added row replaces the
   * held one of its key (with {@code rowKeys}); a retracted row takes away the held one of its key, or
   * else the one equal to it.
   */
  void change(List<Row> held, Row input) {
    String kind = changeIndex < 0 ? FlinkAggregate.INSERT : input.getString(changeIndex);
    boolean adds = FlinkAggregate.adds(kind);
    Row row = withoutChange(input);
    int found = -1;
    for (int index = 0; index < held.size() && found < 0; index++) {
      boolean same =
          rowKeyIndexes.length > 0 ? sameKey(held.get(index), row) : !adds && held.get(index).equals(row);
      found = same ? index : -1;
    }
    if (found >= 0) {
      held.remove(found);
    } else if (!adds) {
      throw new IllegalStateException("a retraction of a row the OVER window does not hold: " + input);
    }
    if (adds) {
      held.add(row);
    }
  }

  private Row withoutChange(Row input) {
    if (changeIndex < 0) {
      return input;
    }
    Object[] values = new Object[input.length() - 1];
    for (int index = 0, at = 0; index < input.length(); index++) {
      if (index != changeIndex) {
        values[at++] = input.get(index);
      }
    }
    return RowFactory.create(values);
  }

  private boolean sameKey(Row held, Row row) {
    for (int index : rowKeyIndexes) {
      if (!Objects.equals(held.get(index), row.get(index))) {
        return false;
      }
    }
    return true;
  }

  /** The OVER rows of a partition's {@code held} rows, in its order (time, then the columns). */
  List<Row> overRows(List<Row> held) {
    List<Row> sorted = new ArrayList<>(held);
    sorted.sort(new PartitionOrder(timeIndex));
    List<Row> out = new ArrayList<>(sorted.size());
    int start = 0;
    for (int index = 0; index < sorted.size(); index++) {
      long time = micros(sorted.get(index));
      int end = index; // the frame's last row: the current one, or in a RANGE frame the last of its time
      while (!rowsFrame && end + 1 < sorted.size() && micros(sorted.get(end + 1)) == time) {
        end++;
      }
      if (preceding != FlinkOver.UNBOUNDED) {
        if (rowsFrame) {
          start = (int) Math.max(0, index - preceding);
        } else {
          while (micros(sorted.get(start)) < time - preceding) {
            start++;
          }
        }
      }
      Totals sums = new Totals(aggregates);
      sorted.subList(start, end + 1).forEach(sums::add);
      out.add(sums.appendedTo(sorted.get(index)));
    }
    return out;
  }

  /**
   * The changelog from the OVER rows {@code before} to {@code after} (multisets): an input row whose
   * aggregates changed gives {@code -U} (its OVER row before) and {@code +U} (after), an input row gone
   * {@code -D}, an input row come {@code +I}; OVER rows in both give nothing.
   */
  List<Row> changes(List<Row> before, List<Row> after) {
    Map<Row, Integer> unchanged = new HashMap<>();
    before.forEach(row -> unchanged.merge(row, 1, Integer::sum));
    Map<Row, Deque<Row>> added = new LinkedHashMap<>(); // by input row: their OVER rows
    for (Row row : after) {
      if (unchanged.getOrDefault(row, 0) > 0) {
        unchanged.merge(row, -1, Integer::sum);
      } else {
        added.computeIfAbsent(input(row), input -> new ArrayDeque<>()).addLast(row);
      }
    }
    List<Row> out = new ArrayList<>();
    for (Row row : before) { // in the partition's order
      if (unchanged.getOrDefault(row, 0) > 0) {
        unchanged.merge(row, -1, Integer::sum);
        Deque<Row> partners = added.get(input(row));
        if (partners == null || partners.isEmpty()) {
          out.add(changed(row, FlinkAggregate.DELETE));
        } else {
          out.add(changed(row, FlinkAggregate.UPDATE_BEFORE));
          out.add(changed(partners.removeFirst(), FlinkAggregate.UPDATE_AFTER));
        }
      }
    }
    added.values().forEach(rows -> rows.forEach(row -> out.add(changed(row, FlinkAggregate.INSERT))));
    return out;
  }

  /** The input row of an OVER row: its columns without the aggregates. */
  private Row input(Row over) {
    Object[] values = new Object[over.length() - aggregates.length];
    for (int index = 0; index < values.length; index++) {
      values[index] = over.get(index);
    }
    return RowFactory.create(values);
  }

  private static Row changed(Row row, String kind) {
    Object[] values = new Object[row.length() + 1];
    for (int index = 0; index < row.length(); index++) {
      values[index] = row.get(index);
    }
    values[row.length()] = kind;
    return RowFactory.create(values);
  }

  private long micros(Row row) {
    return PartitionOrder.micros(row.get(timeIndex));
  }

  /**
   * A partition's order: by the time attribute, then by the row's columns in turn (NULLs first, values
   * that do not compare by their text), so that rows of one time have one order whatever their arrival.
   */
  record PartitionOrder(int timeIndex) implements Comparator<Row>, Serializable {

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public int compare(Row left, Row right) {
      int compared = Long.compare(micros(left.get(timeIndex)), micros(right.get(timeIndex)));
      for (int index = 0; compared == 0 && index < left.length(); index++) {
        Object a = left.get(index);
        Object b = right.get(index);
        if (a == null || b == null) {
          compared = a == null ? (b == null ? 0 : -1) : 1;
        } else if (a instanceof Comparable comparable && a.getClass().equals(b.getClass())) {
          compared = comparable.compareTo(b);
        } else {
          compared = a.toString().compareTo(b.toString());
        }
      }
      return compared;
    }

    /** A time value in microseconds; NULL times come first. */
    static long micros(Object time) {
      return time == null ? Long.MIN_VALUE : FlinkOver.timeMicros(time);
    }
  }
}
