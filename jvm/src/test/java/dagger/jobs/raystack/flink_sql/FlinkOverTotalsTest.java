package dagger.jobs.raystack.flink_sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import dagger.jobs.raystack.flink_sql.FlinkOver.Totals;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.Test;

/** The OVER operator's aggregates without Spark running: rows of (an INT, a DOUBLE, a STRING). */
class FlinkOverTotalsTest {
  private static final Aggregate[] AGGREGATES = {
    new Aggregate("COUNT", -1, DataTypes.LongType), // COUNT(*)
    new Aggregate("COUNT", 0, DataTypes.IntegerType),
    new Aggregate("SUM", 0, DataTypes.IntegerType),
    new Aggregate("AVG", 0, DataTypes.IntegerType),
    new Aggregate("AVG", 1, DataTypes.DoubleType),
    new Aggregate("MIN", 2, DataTypes.StringType),
    new Aggregate("MAX", 0, DataTypes.IntegerType),
  };

  private static Object[] results(Totals totals) {
    Object[] results = new Object[AGGREGATES.length];
    for (int index = 0; index < AGGREGATES.length; index++) {
      results[index] = totals.result(index);
    }
    return results;
  }

  @Test
  void aggregatesSkipNullsAndKeepFlinksTypes() {
    Totals totals = new Totals(AGGREGATES);
    totals.add(RowFactory.create(7, 2.5, "b"));
    totals.add(RowFactory.create(null, null, null));
    totals.add(RowFactory.create(-2, 0.5, "a"));

    // SUM and AVG of an INT are INTs, AVG truncated toward zero (5 / 2); COUNT(x) skips the NULL.
    Object[] expected = {3L, 2L, 5, 2, 1.5, "a", 7};
    assertEquals(List.of(expected), List.of(results(totals)));
  }

  @Test
  void anEmptyFrameCountsZeroAndHasNoSum() {
    Totals totals = new Totals(AGGREGATES);
    totals.add(RowFactory.create(null, null, null));

    assertEquals(1L, totals.result(0));
    assertEquals(0L, totals.result(1));
    assertNull(totals.result(2));
    assertNull(totals.result(3));
    assertNull(totals.result(5));
  }

  @Test
  void anIntegerSumWrapsAsJavasIntegersDo() {
    Totals totals = new Totals(AGGREGATES);
    totals.add(RowFactory.create(Integer.MAX_VALUE, 0.0, "x"));
    totals.add(RowFactory.create(1, 0.0, "x"));

    assertEquals(Integer.MIN_VALUE, totals.result(2));
  }

  @Test
  void theStateRowKeepsTheTotals() {
    Totals totals = new Totals(AGGREGATES);
    totals.add(RowFactory.create(4, 1.0, "q"));
    Row state = totals.toRow();

    assertEquals(Totals.schema(AGGREGATES).length(), state.length());
    Totals restored = Totals.of(state, AGGREGATES);
    restored.add(RowFactory.create(6, 2.0, "p"));
    assertEquals(10, restored.result(2));
    assertEquals(5, restored.result(3));
    assertEquals("p", restored.result(5));
  }

  @Test
  void onlyTheAggregatesTheOperatorsRunAreTaken() {
    IllegalArgumentException rank =
        assertThrows(IllegalArgumentException.class, () -> new Aggregate("RANK", 0, DataTypes.IntegerType));
    assertEquals(
        "RANK is not an aggregate the project's operators run: COUNT, SUM, AVG, MIN and MAX are",
        rank.getMessage());
    IllegalArgumentException text =
        assertThrows(IllegalArgumentException.class, () -> new Aggregate("SUM", 2, DataTypes.StringType));
    assertEquals(
        "SUM takes an integer or a floating-point number here, not a STRING", text.getMessage());
  }
}
