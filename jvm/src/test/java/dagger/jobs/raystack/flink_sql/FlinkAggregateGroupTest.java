package dagger.jobs.raystack.flink_sql;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dagger.jobs.raystack.flink_sql.FlinkAggregate.Group;
import dagger.jobs.raystack.flink_sql.FlinkOver.Aggregate;
import java.util.Arrays;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.junit.jupiter.api.Test;

/**
 * The group aggregation's accumulators without Spark running: rows of (a BIGINT price, a DOUBLE, a
 * STRING), added (an insert or update-after) and taken away (an update-before or delete).
 */
class FlinkAggregateGroupTest {
  private static final Aggregate[] AGGREGATES = {
    new Aggregate("COUNT", -1, DataTypes.LongType), // COUNT(*)
    new Aggregate("COUNT", 2, DataTypes.StringType),
    new Aggregate("SUM", 0, DataTypes.LongType),
    new Aggregate("AVG", 0, DataTypes.LongType),
    new Aggregate("AVG", 1, DataTypes.DoubleType),
    new Aggregate("MAX", 0, DataTypes.LongType),
    new Aggregate("MIN", 2, DataTypes.StringType),
  };

  private static List<Object> results(Group group) {
    return Arrays.asList(group.results());
  }

  @Test
  void aRetractedExtremeGivesWayToTheNextAndSumsTakeTheRowAway() {
    Group group = new Group(AGGREGATES);
    group.add(RowFactory.create(10L, 1.5, "b"), 1);
    group.add(RowFactory.create(30L, 2.5, "a"), 1);
    group.add(RowFactory.create(30L, 0.5, null), 1);
    assertEquals(List.of(3L, 2L, 70L, 23L, 1.5, 30L, "a"), results(group));

    group.add(RowFactory.create(30L, 2.5, "a"), -1); // one of the two 30s: MAX stays 30
    assertEquals(Arrays.asList(2L, 1L, 40L, 20L, 1.0, 30L, "b"), results(group));
    group.add(RowFactory.create(30L, 0.5, null), -1); // the other: MAX falls back to 10
    assertEquals(Arrays.asList(1L, 1L, 10L, 10L, 1.5, 10L, "b"), results(group));
  }

  @Test
  void aGroupWhoseRowsAreAllTakenAwayIsEmptyAndHasNoSums() {
    Group group = new Group(AGGREGATES);
    group.add(RowFactory.create(5L, 1.0, "x"), 1);
    group.add(RowFactory.create(5L, 1.0, "x"), -1);

    assertTrue(group.isEmpty());
    assertEquals(Arrays.asList(0L, 0L, null, null, null, null, null), results(group));
  }

  @Test
  void theStateRowKeepsTheValuesAndTheResultsLastEmitted() {
    Group group = new Group(AGGREGATES);
    group.add(RowFactory.create(7L, 2.0, "q"), 1);
    group.add(RowFactory.create(9L, 4.0, "r"), 1);
    group.remember(group.results());

    Row state = group.toRow();
    Group read = Group.of(state, AGGREGATES);

    assertEquals(results(group), Arrays.asList(read.emitted()));
    read.add(RowFactory.create(9L, 4.0, "r"), -1);
    assertEquals(List.of(1L, 1L, 7L, 7L, 2.0, 7L, "q"), results(read));
  }
}
