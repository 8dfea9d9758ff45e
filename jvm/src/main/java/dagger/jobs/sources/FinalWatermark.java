package dagger.jobs.sources;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.SparkSessionExtensionsProvider;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.EqualNullSafe;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.Or;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import scala.jdk.javaapi.CollectionConverters;
import scala.runtime.BoxedUnit;

/**
 * Lets the row that ends a bounded run's input reach its stream's watermark ({@code
 * jobs.sources.stream_batches}: a row at {@link #FINAL_ROWTIME_MICROS}, all its other columns NULL).
 *
 * <p>Spark's optimizer pushes a query's filters that do not read the event time below the stream's
 * {@code EventTimeWatermark}, where a NULL column fails them: the row would be dropped before the watermark
 * sees it, and the windows it should close would stay open. This rule lets every filter below a watermark
 * pass that row too ({@code condition OR rowtime <=> final}); the stream's table drops it right above the
 * watermark ({@code jobs.running.stream_tables}), so nothing else changes. A filter pushed below the
 * columns a stream computes from its records no longer sees a computed event time: it passes the row by
 * the source's rowtime column of that name, which the computed one keeps for that row. Spark loads the
 * class as a session extension ({@code spark.sql.extensions}, set in {@code jobs/engine/spark.py}).
 */
public final class FinalWatermark implements SparkSessionExtensionsProvider {

  /** 9999-12-31T23:59:59.999999Z: {@code FINAL_ROWTIME} of {@code jobs.sources.stream_batches}. */
  public static final long FINAL_ROWTIME_MICROS = 253_402_300_799_999_999L;

  @Override
  public BoxedUnit apply(SparkSessionExtensions extensions) {
    extensions.injectOptimizerRule(session -> new PassFinalRow());
    return BoxedUnit.UNIT;
  }

  /** The optimizer rule: filters below a watermark pass the final row. */
  public static final class PassFinalRow extends Rule<LogicalPlan> {

    @Override
    public LogicalPlan apply(LogicalPlan plan) {
      return plan.isStreaming() ? rewrite(plan, List.of()) : plan;
    }

    /** {@code plan} with its filters rewritten; {@code eventTimes}: those of the watermarks above it. */
    private LogicalPlan rewrite(LogicalPlan plan, List<Attribute> eventTimes) {
      List<Attribute> below = eventTimes;
      if (plan instanceof EventTimeWatermark watermark) {
        below = new ArrayList<>(eventTimes);
        below.add(watermark.eventTime());
      }
      List<Attribute> times = below;
      LogicalPlan rewritten = plan.mapChildren(child -> rewrite(child, times));
      if (rewritten instanceof Filter filter && !eventTimes.isEmpty()) {
        for (Attribute eventTime : eventTimes) {
          Attribute column = column(filter.child(), eventTime);
          if (column != null) {
            return passing(filter, column);
          }
        }
      }
      return rewritten;
    }

    /**
     * The attribute of {@code plan}'s output that is {@code eventTime}, or else one named as it (a
     * computed event time: the source's rowtime column, which the computed one keeps), or null.
     */
    static Attribute column(LogicalPlan plan, Attribute eventTime) {
      Attribute named = null;
      for (Attribute attribute : CollectionConverters.asJava(plan.output())) {
        if (attribute.exprId().equals(eventTime.exprId())) {
          return attribute;
        }
        if (named == null
            && attribute.name().equalsIgnoreCase(eventTime.name())
            && attribute.dataType().equals(eventTime.dataType())) {
          named = attribute;
        }
      }
      return named;
    }

    /** {@code filter}, passing the final row too (once: the rule runs until nothing changes). */
    static Filter passing(Filter filter, Attribute eventTime) {
      Expression isFinal =
          new EqualNullSafe(eventTime, new Literal(FINAL_ROWTIME_MICROS, eventTime.dataType()));
      Expression condition = filter.condition();
      if (condition instanceof Or or && (or.left().equals(isFinal) || or.right().equals(isFinal))) {
        return filter;
      }
      return new Filter(new Or(condition, isFinal), filter.child());
    }
  }
}
