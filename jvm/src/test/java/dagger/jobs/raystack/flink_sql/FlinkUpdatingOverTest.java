package dagger.jobs.raystack.flink_sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import java.sql.Timestamp;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.Test;

/**
 * The OVER of an updating input, a partition's micro-batches without Spark running: q6's winning bids,
 * rows of (auction id, time, price), AVG(price) OVER (ORDER BY time ROWS BETWEEN 10 PRECEDING AND CURRENT
 * ROW). Each batch's changelog is checked against the OVER rows of the partition's final table.
 */
class FlinkUpdatingOverTest {
  private static final Aggregate[] AVG_PRICE = {new Aggregate("AVG", 2, DataTypes.LongType)};

  private static Row bid(long auction, int second, long price) {
    return RowFactory.create(auction, new Timestamp(second * 1000L), price);
  }

  private static Row change(Row row, String kind) {
    return RowFactory.create(row.get(0), row.get(1), row.get(2), kind);
  }

  private static Row over(Row row, long average, String kind) {
    return RowFactory.create(row.get(0), row.get(1), row.get(2), average, kind);
  }

  /** An upsert input keyed by the auction id (column 0), ROWS BETWEEN 10 PRECEDING. */
  private static FlinkUpdatingOver upserts() {
    return new FlinkUpdatingOver(null, 1, true, 10, AVG_PRICE, new int[] {0}, -1);
  }

  @Test
  void aNewRowIsAnInsertAndAnUpsertUpdatesTheRowsWhoseFrameItReaches() {
    FlinkUpdatingOver operator = upserts();
    List<Row> held = new ArrayList<>();
    Row first = bid(1, 10, 100);
    Row second = bid(2, 20, 300);
    assertEquals(
        List.of(over(first, 100, "+I"), over(second, 200, "+I")),
        operator.batch(held, List.of(first, second).iterator()));
    Row raised = bid(1, 12, 500); // auction 1's winner is now a higher bid, later
    assertEquals(
        List.of(
            over(first, 100, "-D"), over(second, 200, "-U"), over(second, 400, "+U"),
            over(raised, 500, "+I")),
        operator.batch(held, List.of(raised).iterator()));
    assertEquals(List.of(second, raised), held);
  }

  @Test
  void aBatchThatChangesNoOverRowEmitsNothing() {
    FlinkUpdatingOver operator = upserts();
    List<Row> held = new ArrayList<>();
    operator.batch(held, List.of(bid(1, 10, 100)).iterator());
    assertEquals(List.of(), operator.batch(held, List.of(bid(1, 10, 100)).iterator()));
  }

  @Test
  void aPartitionOfMoreThanElevenRowsAveragesEachRowsLastEleven() {
    FlinkUpdatingOver operator = upserts();
    List<Row> held = new ArrayList<>();
    List<Row> bids = new ArrayList<>();
    for (int auction = 12; auction >= 0; auction--) { // arrivals out of time order
      bids.add(bid(auction, auction, auction * 10L));
    }
    List<Row> out = operator.batch(held, bids.iterator());
    assertEquals(13, out.size());
    // in time order: row i averages rows max(0, i - 10) to i, truncated to the BIGINT
    assertEquals(over(bid(0, 0, 0), 0, "+I"), out.get(0));
    assertEquals(over(bid(10, 10, 100), 50, "+I"), out.get(10));
    assertEquals(over(bid(11, 11, 110), 60, "+I"), out.get(11));
    assertEquals(over(bid(12, 12, 120), 70, "+I"), out.get(12));
    // auction 0's price changes: its own row and the ten after it, not the 11th and 12th
    List<Row> changed = operator.batch(held, List.of(bid(0, 0, 110)).iterator());
    assertEquals(22, changed.size());
    assertEquals(over(bid(0, 0, 0), 0, "-D"), changed.get(0));
    assertEquals(over(bid(1, 1, 10), 5, "-U"), changed.get(1));
    assertEquals(over(bid(1, 1, 10), 60, "+U"), changed.get(2));
    assertEquals(over(bid(10, 10, 100), 60, "+U"), changed.get(20));
    assertEquals(over(bid(0, 0, 110), 110, "+I"), changed.get(21));
  }

  @Test
  void tiesInTimeAreOrderedByTheRowsColumnsWhateverTheirArrival() {
    Row early = bid(1, 5, 10);
    Row late = bid(2, 5, 30);
    List<Row> one = upserts().batch(new ArrayList<>(), List.of(late, early).iterator());
    List<Row> other = upserts().batch(new ArrayList<>(), List.of(early, late).iterator());
    assertEquals(List.of(over(early, 10, "+I"), over(late, 20, "+I")), one);
    assertEquals(one, other);
  }

  @Test
  void aChangelogInputRetractsTheRowEqualToItsRetraction() {
    FlinkUpdatingOver operator = new FlinkUpdatingOver(null, 1, true, 10, AVG_PRICE, new int[0], 3);
    List<Row> held = new ArrayList<>();
    Row first = bid(1, 10, 100);
    Row second = bid(2, 20, 300);
    operator.batch(held, List.of(change(first, "+I"), change(second, "+I")).iterator());
    assertEquals(
        List.of(over(first, 100, "-D"), over(second, 200, "-U"), over(second, 300, "+U")),
        operator.batch(held, List.of(change(first, "-D")).iterator()));
    assertEquals(
        List.of(over(second, 300, "-D")),
        operator.batch(held, List.of(change(second, "-U")).iterator()));
    assertEquals(List.of(), held);
    IllegalStateException error =
        assertThrows(
            IllegalStateException.class,
            () -> operator.batch(held, List.of(change(first, "-D")).iterator()));
    assertEquals(
        "a retraction of a row the OVER window does not hold: " + change(first, "-D"),
        error.getMessage());
  }
}
