package dagger.jobs.sources;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;

import java.util.List;
import java.util.UUID;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.junit.jupiter.api.Test;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/** The optimizer rule on hand-built plans: a stream of (service STRING, rowtime TIMESTAMP). */
class FinalWatermarkTest {
  private static final FinalWatermark.PassFinalRow RULE = new FinalWatermark.PassFinalRow();
  private final AttributeReference service = column("service", DataTypes.StringType);
  private final AttributeReference rowtime = column("rowtime", DataTypes.TimestampType);
  private final Expression isGoRide = new EqualTo(service, Literal.create("GO_RIDE", DataTypes.StringType));

  private static AttributeReference column(String name, DataType type) {
    return new AttributeReference(
        name,
        type,
        true,
        Metadata.empty(),
        NamedExpression.newExprId(),
        CollectionConverters.asScala(List.<String>of()).toList());
  }

  private LogicalPlan stream(boolean streaming) {
    List<Attribute> output = List.of(service, rowtime);
    return new LocalRelation(
        CollectionConverters.asScala(output).toList(),
        CollectionConverters.asScala(List.<org.apache.spark.sql.catalyst.InternalRow>of()).toList(),
        streaming,
        Option.empty());
  }

  /**
   * {@code child} under a watermark of one second, built reflectively: the delay's class (spark-unsafe's
   * CalendarInterval) is on the tests' run-time class path only.
   */
  private EventTimeWatermark watermarked(LogicalPlan child) throws ReflectiveOperationException {
    return watermarked(child, rowtime);
  }

  private EventTimeWatermark watermarked(LogicalPlan child, Attribute eventTime)
      throws ReflectiveOperationException {
    Object second =
        Class.forName("org.apache.spark.unsafe.types.CalendarInterval")
            .getConstructor(int.class, int.class, long.class)
            .newInstance(0, 0, 1_000_000L);
    return (EventTimeWatermark)
        EventTimeWatermark.class.getConstructors()[0].newInstance(UUID.randomUUID(), eventTime, second, child);
  }

  private Expression passingFinal(Expression condition) {
    Literal last = new Literal(FinalWatermark.FINAL_ROWTIME_MICROS, DataTypes.TimestampType);
    return new Or(condition, new EqualNullSafe(rowtime, last));
  }

  @Test
  void aFilterPushedBelowTheWatermarkPassesTheFinalRowOnce() throws ReflectiveOperationException {
    LogicalPlan plan = watermarked(new Filter(isGoRide, stream(true)));

    LogicalPlan once = RULE.apply(plan);
    Filter filter = (Filter) ((EventTimeWatermark) once).child();

    assertEquals(passingFinal(isGoRide), filter.condition());
    assertEquals(once, RULE.apply(once)); // a fixed point: the optimizer runs the rule until nothing changes
  }

  @Test
  void filtersAboveTheWatermarkAndBatchPlansStayAsTheyAre() throws ReflectiveOperationException {
    LogicalPlan above = new Filter(isGoRide, watermarked(stream(true)));
    LogicalPlan batch = watermarked(new Filter(isGoRide, stream(false)));

    assertEquals(above, RULE.apply(above));
    assertSame(batch, RULE.apply(batch));
  }

  @Test
  void aFilterPushedBelowAComputedEventTimePassesTheRowByTheSourcesColumnOfItsName()
      throws ReflectiveOperationException {
    // The watermark's event time is computed above the filter: the source's column of that name carries
    // the final row's time (jobs.running.stream_tables).
    AttributeReference computed = column("rowtime", DataTypes.TimestampType);
    LogicalPlan plan = watermarked(new Filter(isGoRide, stream(true)), computed);

    Filter filter = (Filter) ((EventTimeWatermark) RULE.apply(plan)).child();

    assertEquals(passingFinal(isGoRide), filter.condition());
  }
}
