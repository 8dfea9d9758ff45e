package dagger.jobs.raystack.flink_sql;

import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import dagger.jobs.raystack.flink_sql.FlinkOver.Totals;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
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
 * Flink's group aggregation without a window ({@code GROUP BY k} over a stream) on an append-only or an
 * updating input, with a changelog out, as Flink's {@code GroupAggFunction}: a group's first row gives
 * {@code +I}, a change of its results {@code -U} (the results before) and {@code +U} (after), a group
 * whose rows are all retracted {@code -D}. Spark's own aggregation cannot run where its input is another
 * aggregation's changing rows (its global-watermark check refuses them, and its update mode gives no
 * retractions); this operator consumes them: {@code +I} and {@code +U} rows add to their group, {@code -U}
 * and {@code -D} rows take away from it.
 *
 * <p>The state holds every group for as long as the query runs ({@link TimeMode#None()}, as Flink's
 * unbounded aggregation without a state TTL): the row count, and per aggregate its count, sums, and for
 * MIN and MAX the multiset of its values (a retracted extreme gives way to the next). Each micro-batch
 * emits a group's net change once, as Flink's mini-batch aggregation does; a batch that leaves a group's
 * results as they were emits nothing for it. With {@code upserts} (the query's last operator) it emits
 * only the new results, a row replacing the one of its group, for the sinks that write upserts; a group
 * emptied then fails the query, since no sink here deletes a key yet.
 */
public final class FlinkAggregate extends StatefulProcessor<Row, Row, Row> {

  /** The change kinds, as Flink prints them (RowKind's short strings). */
  public static final String INSERT = "+I";

  public static final String UPDATE_BEFORE = "-U";
  public static final String UPDATE_AFTER = "+U";
  public static final String DELETE = "-D";

  /** Whether a change of {@code kind} adds its row (an insert or an update's new row). */
  static boolean adds(String kind) {
    return kind.equals(INSERT) || kind.equals(UPDATE_AFTER);
  }

  private final int keyCount;
  private final Aggregate[] aggregates;
  private final int changeIndex;
  private final boolean upserts;
  private final StructType stateSchema;
  private transient ValueState<Row> group;

  private FlinkAggregate(int keyCount, Aggregate[] aggregates, int changeIndex, boolean upserts) {
    this.keyCount = keyCount;
    this.aggregates = aggregates;
    this.changeIndex = changeIndex;
    this.upserts = upserts;
    this.stateSchema = Group.schema(aggregates);
  }

  /**
   * The groups of {@code rows} by the columns {@code keys}: the keys, then {@code functions[i]} (COUNT,
   * SUM, AVG, MIN, MAX) of the column {@code arguments[i]} (empty for COUNT(*)) named {@code outputs[i]},
   * then, unless {@code upserts}, the change kind in a STRING column named {@code changeColumn}. The
   * input's change kinds are in its column {@code changeColumn}; an input without it is append-only.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      String[] keys,
      String[] functions,
      String[] arguments,
      String[] outputs,
      String changeColumn,
      boolean upserts) {
    StructType schema = rows.schema();
    List<String> names = Arrays.asList(schema.fieldNames());
    int changeIndex = names.indexOf(changeColumn);
    Aggregate[] aggregates = new Aggregate[functions.length];
    StructType output = new StructType();
    for (String key : keys) {
      output = output.add(schema.apply(key));
    }
    for (int index = 0; index < functions.length; index++) {
      int argument = arguments[index].isEmpty() ? -1 : schema.fieldIndex(arguments[index]);
      DataType argumentType = argument < 0 ? DataTypes.LongType : schema.fields()[argument].dataType();
      aggregates[index] = new Aggregate(functions[index].toUpperCase(), argument, argumentType);
      output = output.add(outputs[index], aggregates[index].resultType(), true);
    }
    if (!upserts) {
      output = output.add(changeColumn, DataTypes.StringType, false);
    }
    FlinkAggregate processor = new FlinkAggregate(keys.length, aggregates, changeIndex, upserts);
    return FlinkOver.partitioned(rows, keys)
        .transformWithState(processor, TimeMode.None(), OutputMode.Append(), Encoders.row(output));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    group = getHandle().getValueState("group", Encoders.row(stateSchema), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    Group totals = group.exists() ? Group.of(group.get(), aggregates) : new Group(aggregates);
    Object[] before = totals.emitted();
    while (rows.hasNext()) {
      Row row = rows.next();
      String kind = changeIndex < 0 ? INSERT : row.getString(changeIndex);
      totals.add(row, adds(kind) ? 1 : -1);
    }
    List<Row> out = new ArrayList<>(2);
    if (totals.isEmpty()) {
      group.clear();
      if (before != null) {
        if (upserts) {
          throw new IllegalStateException(
              "the group " + key + " of the query's result lost its last row: no sink here deletes a key");
        }
        out.add(changed(key, before, DELETE));
      }
      return CollectionConverters.asScala(out.iterator());
    }
    Object[] after = totals.results();
    if (before == null) {
      out.add(changed(key, after, INSERT));
    } else if (!Arrays.equals(before, after)) {
      if (!upserts) {
        out.add(changed(key, before, UPDATE_BEFORE));
      }
      out.add(changed(key, after, UPDATE_AFTER));
    }
    totals.remember(after);
    group.update(totals.toRow());
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  private Row changed(Row key, Object[] results, String kind) {
    Object[] values = new Object[keyCount + results.length + (upserts ? 0 : 1)];
    for (int index = 0; index < keyCount; index++) {
      values[index] = key.get(index);
    }
    System.arraycopy(results, 0, values, keyCount, results.length);
    if (!upserts) {
      values[values.length - 1] = kind;
    }
    return RowFactory.create(values);
  }

  /**
   * A group's aggregates so far, which rows add to and take away from: the row count, per aggregate the
   * count of its non-NULL values, their sums, for MIN and MAX the count of each value (in order), and the results
   * last emitted (null before the first).
   */
  static final class Group {
    private final Aggregate[] aggregates;
    private long rows;
    private final long[] counts;
    private final long[] integerSums;
    private final double[] realSums;
    private final List<TreeMap<Object, Long>> values;
    private Object[] emitted;

    Group(Aggregate[] aggregates) {
      this.aggregates = aggregates;
      counts = new long[aggregates.length];
      integerSums = new long[aggregates.length];
      realSums = new double[aggregates.length];
      values = new ArrayList<>();
      for (int index = 0; index < aggregates.length; index++) {
        values.add(new TreeMap<>());
      }
    }

    static StructType schema(Aggregate[] aggregates) {
      List<StructField> fields = new ArrayList<>();
      fields.add(DataTypes.createStructField("rows", DataTypes.LongType, false));
      fields.add(DataTypes.createStructField("emitted", DataTypes.BooleanType, false));
      for (int index = 0; index < aggregates.length; index++) {
        DataType type = aggregates[index].argumentType();
        fields.add(DataTypes.createStructField("count_" + index, DataTypes.LongType, false));
        fields.add(DataTypes.createStructField("integer_sum_" + index, DataTypes.LongType, false));
        fields.add(DataTypes.createStructField("real_sum_" + index, DataTypes.DoubleType, false));
        // (value, count) pairs: the state's encoding (Avro) takes no map keyed by other than strings
        StructType counted =
            DataTypes.createStructType(
                List.of(
                    DataTypes.createStructField("value", type, false),
                    DataTypes.createStructField("count", DataTypes.LongType, false)));
        fields.add(
            DataTypes.createStructField(
                "values_" + index, DataTypes.createArrayType(counted, false), false));
        fields.add(
            DataTypes.createStructField("result_" + index, aggregates[index].resultType(), true));
      }
      return DataTypes.createStructType(fields);
    }

    static Group of(Row row, Aggregate[] aggregates) {
      Group group = new Group(aggregates);
      group.rows = row.getLong(0);
      group.emitted = row.getBoolean(1) ? new Object[aggregates.length] : null;
      for (int index = 0; index < aggregates.length; index++) {
        int at = 2 + 5 * index;
        group.counts[index] = row.getLong(at);
        group.integerSums[index] = row.getLong(at + 1);
        group.realSums[index] = row.getDouble(at + 2);
        for (Row counted : row.<Row>getList(at + 3)) {
          group.values.get(index).put(counted.get(0), counted.getLong(1));
        }
        if (group.emitted != null) {
          group.emitted[index] = row.get(at + 4);
        }
      }
      return group;
    }

    Row toRow() {
      Object[] fields = new Object[2 + 5 * aggregates.length];
      fields[0] = rows;
      fields[1] = emitted != null;
      for (int index = 0; index < aggregates.length; index++) {
        int at = 2 + 5 * index;
        fields[at] = counts[index];
        fields[at + 1] = integerSums[index];
        fields[at + 2] = realSums[index];
        List<Row> counted = new ArrayList<>();
        values.get(index).forEach((value, count) -> counted.add(RowFactory.create(value, count)));
        fields[at + 3] = CollectionConverters.asScala(counted).toSeq();
        fields[at + 4] = emitted == null ? null : emitted[index];
      }
      return RowFactory.create(fields);
    }

    /** Adds the row ({@code sign} 1) or takes it away (-1). */
    void add(Row row, int sign) {
      rows += sign;
      for (int index = 0; index < aggregates.length; index++) {
        int argument = aggregates[index].argument();
        if (argument >= 0 && row.isNullAt(argument)) {
          continue; // NULLs are not counted, as in every SQL aggregate
        }
        counts[index] += sign;
        if (argument < 0) {
          continue;
        }
        Object value = row.get(argument);
        if (value instanceof Number number) {
          integerSums[index] += sign * number.longValue(); // wraps, as Java's (and Flink's) integers
          realSums[index] += sign * number.doubleValue();
        }
        String function = aggregates[index].function();
        if (function.equals("MIN") || function.equals("MAX")) {
          Map<Object, Long> seen = values.get(index);
          long left = seen.getOrDefault(value, 0L) + sign;
          if (left == 0) {
            seen.remove(value);
          } else {
            seen.put(value, left);
          }
        }
      }
    }

    boolean isEmpty() {
      return rows <= 0;
    }

    Object[] emitted() {
      return emitted;
    }

    void remember(Object[] results) {
      emitted = results;
    }

    Object[] results() {
      Object[] results = new Object[aggregates.length];
      for (int index = 0; index < aggregates.length; index++) {
        Aggregate aggregate = aggregates[index];
        long count = counts[index];
        TreeMap<Object, Long> seen = values.get(index);
        results[index] =
            switch (aggregate.function()) {
              case "COUNT" -> count;
              case "MIN" -> seen.isEmpty() ? null : seen.firstKey();
              case "MAX" -> seen.isEmpty() ? null : seen.lastKey();
              case "SUM" ->
                  count == 0
                      ? null
                      : Totals.number(integerSums[index], realSums[index], aggregate);
              default -> // AVG
                  count == 0
                      ? null
                      : Totals.number(integerSums[index] / count, realSums[index] / count, aggregate);
            };
      }
      return results;
    }
  }
}
