package dagger.jobs.processors;

import java.util.Collections;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.KeyValueGroupedDataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.collection.Iterator;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The {@code deduplicate} transformer with {@code clock: processing_time}, on the JVM: per key, the state
 * holds the processing time (the micro-batch's timestamp) at which the key's row passed. A key's rows are
 * dropped while that time plus the TTL is still ahead; otherwise the key's first row passes and the time
 * is written again. Duplicates never write the state, so the TTL counts from the row that passed, as in
 * Dagger's keyed state with an on-create-and-write TTL.
 *
 * <p>The state is cleaned up by event-time timers: Spark's processing-time mode runs a micro-batch after
 * every trigger, data or not. A key's timer fires once the watermark has moved on by the TTL, and removes
 * the key if its TTL is over in processing time, or waits again for the time left.
 */
public final class ProcessingTimeDeduplicate extends StatefulProcessor<String, Row, Row> {

  private final long ttlMs;
  private transient ValueState<Long> passedAtMs;

  private ProcessingTimeDeduplicate(long ttlMs) {
    this.ttlMs = ttlMs;
  }

  /**
   * The rows of {@code rows} that pass, grouped by the string column {@code keyColumn} (its NULLs form one
   * key); the output has the input's columns. With an {@code eventTimeColumn} (empty for none) the output
   * carries the watermark on it for the operators after this one.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows, String keyColumn, long ttlMs, String eventTimeColumn) {
    // Grouped on the column itself: a key function would turn every row into a Java object once more.
    KeyValueGroupedDataset<String, Row> byKey =
        rows.groupBy(rows.col(keyColumn)).as(Encoders.STRING(), Encoders.row(rows.schema()));
    ProcessingTimeDeduplicate processor = new ProcessingTimeDeduplicate(ttlMs);
    if (eventTimeColumn.isEmpty()) {
      return byKey.transformWithState(
          processor, TimeMode.EventTime(), OutputMode.Append(), Encoders.row(rows.schema()));
    }
    return byKey.transformWithState(
        processor, eventTimeColumn, OutputMode.Append(), Encoders.row(rows.schema()));
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    passedAtMs = getHandle().getValueState("passed_at_ms", Encoders.LONG(), TTLConfig.NONE());
  }

  @Override
  public Iterator<Row> handleInputRows(String key, Iterator<Row> rows, TimerValues timerValues) {
    long now = timerValues.getCurrentProcessingTimeInMs();
    Long passedAt = passedAtMs.get(); // null for a key not in the state (one read instead of two)
    if (passedAt != null && now < passedAt + ttlMs) {
      return none(); // a duplicate: the state is not written, so the TTL still counts from the first row
    }
    passedAtMs.update(now);
    if (passedAt == null) { // one cleanup timer per key in the state
      getHandle().registerTimer(watermarkMs(timerValues) + ttlMs);
    }
    return CollectionConverters.asScala(Collections.singletonList(rows.next()).iterator());
  }

  @Override
  public Iterator<Row> handleExpiredTimer(
      String key, TimerValues timerValues, ExpiredTimerInfo expiredTimerInfo) {
    Long passedAt = passedAtMs.get();
    if (passedAt != null) {
      long leftMs = passedAt + ttlMs - timerValues.getCurrentProcessingTimeInMs();
      if (leftMs <= 0) {
        passedAtMs.clear();
      } else {
        getHandle().registerTimer(watermarkMs(timerValues) + leftMs);
      }
    }
    return none();
  }

  private static long watermarkMs(TimerValues timerValues) {
    return Math.max(timerValues.getCurrentWatermarkInMs(), 0);
  }

  private static Iterator<Row> none() {
    return CollectionConverters.asScala(Collections.<Row>emptyIterator());
  }
}
