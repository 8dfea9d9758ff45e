package dagger.jobs.raystack.flink_sql;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.List;
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
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Flink's Top-N and deduplication ({@code ROW_NUMBER() OVER (PARTITION BY k ORDER BY x) AS rn} with
 * {@code WHERE rn <= N}) on a stream: per partition key the state holds the key's N best rows so far,
 * and each micro-batch emits the rows whose place changed, with their row number. The output is an
 * upsert stream keyed by the partition key and the row number, as Flink's: a later row at the same
 * place replaces the earlier one. Ties keep the earlier row first, as Flink's Top-N; with {@code
 * laterWinsTies} (Flink's deduplication keeping the last row by time) the later row wins a tie.
 */
public final class FlinkRank extends StatefulProcessor<Row, Row, Row> {

  private final StructType inputSchema;
  private final int[] orderIndexes;
  private final boolean[] descending;
  private final int limit;
  private final boolean laterWinsTies;
  private final int[] outputIndexes;
  private transient ListState<Row> best;

  private FlinkRank(
      StructType inputSchema,
      int[] orderIndexes,
      boolean[] descending,
      int limit,
      boolean laterWinsTies,
      int[] outputIndexes) {
    this.inputSchema = inputSchema;
    this.orderIndexes = orderIndexes;
    this.descending = descending;
    this.limit = limit;
    this.laterWinsTies = laterWinsTies;
    this.outputIndexes = outputIndexes;
  }

  /**
   * The N ({@code limit}) best rows of {@code rows} per {@code keys}, ordered by the columns {@code
   * orders} ({@code descending[i]} for DESC), as an upsert stream: the input's columns but {@code
   * helpers} (the columns computed for keys and orders), and the row number, a BIGINT named {@code
   * rankColumn}.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      String[] keys,
      String[] orders,
      boolean[] descending,
      int limit,
      boolean laterWinsTies,
      String[] helpers,
      String rankColumn) {
    if (limit < 1) {
      throw new IllegalArgumentException("a Top-N keeps at least one row, not " + limit);
    }
    StructType schema = rows.schema();
    int[] orderIndexes = Arrays.stream(orders).mapToInt(schema::fieldIndex).toArray();
    List<String> hidden = Arrays.asList(helpers);
    List<StructField> kept = new ArrayList<>();
    List<Integer> keptIndexes = new ArrayList<>();
    for (int index = 0; index < schema.length(); index++) {
      if (!hidden.contains(schema.fields()[index].name())) {
        kept.add(schema.fields()[index]);
        keptIndexes.add(index);
      }
    }
    kept.add(DataTypes.createStructField(rankColumn, DataTypes.LongType, false));
    FlinkRank processor =
        new FlinkRank(
            schema,
            orderIndexes,
            descending,
            limit,
            laterWinsTies,
            keptIndexes.stream().mapToInt(Integer::intValue).toArray());
    return FlinkOver.partitioned(rows, keys)
        .transformWithState(
            processor,
            TimeMode.None(),
            OutputMode.Append(),
            Encoders.row(DataTypes.createStructType(kept)));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    best = getHandle().getListState("best", Encoders.row(inputSchema), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(Row key, Iterator<Row> rows, TimerValues timerValues) {
    List<Row> before = new ArrayList<>();
    CollectionConverters.asJava(best.get()).forEachRemaining(before::add);
    List<Row> ranked = new ArrayList<>(before);
    Comparator<Row> order = new RowOrder(orderIndexes, descending);
    // A stable sort: of rows in order, the earlier-arrived comes first (the best ones held are earlier
    // than this batch's). Flink's keep-last deduplication lets the later row win a tie: the batch's rows
    // then go first, the latest of them first.
    if (laterWinsTies) {
      List<Row> arrived = new ArrayList<>();
      rows.foreach(arrived::add);
      Collections.reverse(arrived);
      ranked.addAll(0, arrived);
    } else {
      rows.foreach(ranked::add);
    }
    ranked.sort(order);
    List<Row> kept = ranked.subList(0, Math.min(limit, ranked.size()));
    List<Row> changed = new ArrayList<>();
    for (int place = 0; place < kept.size(); place++) {
      if (place >= before.size() || !Objects.equals(before.get(place), kept.get(place))) {
        changed.add(numbered(kept.get(place), place + 1));
      }
    }
    if (!changed.isEmpty()) {
      best.put(kept.toArray(new Row[0]));
    }
    return CollectionConverters.asScala(changed.iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      Row key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }

  private Row numbered(Row row, long rowNumber) {
    Object[] values = new Object[outputIndexes.length + 1];
    for (int index = 0; index < outputIndexes.length; index++) {
      values[index] = row.get(outputIndexes[index]);
    }
    values[outputIndexes.length] = rowNumber;
    return RowFactory.create(values);
  }

  /** The ORDER BY of the window: its columns in turn, NULLs first ascending and last descending. */
  record RowOrder(int[] indexes, boolean[] descending) implements Comparator<Row>, Serializable {

    @Override
    @SuppressWarnings({"unchecked", "rawtypes"})
    public int compare(Row left, Row right) {
      for (int column = 0; column < indexes.length; column++) {
        Object a = left.get(indexes[column]);
        Object b = right.get(indexes[column]);
        int compared;
        if (a == null || b == null) {
          compared = a == null ? (b == null ? 0 : -1) : 1;
        } else {
          compared = ((Comparable) a).compareTo(b);
        }
        if (compared != 0) {
          return descending[column] ? -compared : compared;
        }
      }
      return 0;
    }
  }
}
