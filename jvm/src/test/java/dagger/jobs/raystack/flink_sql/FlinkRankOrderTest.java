package dagger.jobs.raystack.flink_sql;

import static org.junit.jupiter.api.Assertions.assertEquals;

import dagger.jobs.raystack.flink_sql.FlinkRank.RowOrder;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.junit.jupiter.api.Test;

/** The Top-N's ORDER BY without Spark running: rows of (an id, an amount, a name). */
class FlinkRankOrderTest {

  private static List<Object> ids(List<Row> rows) {
    List<Object> ids = new ArrayList<>();
    rows.forEach(row -> ids.add(row.get(0)));
    return ids;
  }

  @Test
  void ordersByEachColumnInTurnWithNullsLowestAndTiesInArrivalOrder() {
    List<Row> rows =
        new ArrayList<>(
            List.of(
                RowFactory.create("a", 2.0, "x"),
                RowFactory.create("b", null, "x"),
                RowFactory.create("c", 5.0, "y"),
                RowFactory.create("d", 2.0, "w"),
                RowFactory.create("e", 5.0, "y")));

    rows.sort(new RowOrder(new int[] {1, 2}, new boolean[] {true, false}));

    // amount DESC (NULL last, as Flink's default for DESC), then name ASC; c and e tie: arrival order
    assertEquals(List.of("c", "e", "d", "a", "b"), ids(rows));
    rows.sort(new RowOrder(new int[] {1}, new boolean[] {false}));
    assertEquals(List.of("b", "d", "a", "c", "e"), ids(rows)); // NULL first ascending
  }
}
